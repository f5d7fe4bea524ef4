"""The sweep's best model in the registry: the best trial's export, published under the base job's name.

Each completed trial whose base job has an `export` section exports itself at its end, as any
job does (`<registry>/<trial job name>/1/`). When the sweep is complete, the best trial's
version is copied to the next version of the base job's name, claimed first and with its model
card written last (the registry's rule, `attempt/registry.py`), and that card gains a `sweep`
section: the sweep id, the trial number, its params, the objective and its value. No
TensorFlow here: the files are copied as they are.
"""

from __future__ import annotations

import json
import time
from typing import Any

from spotfit.attempt.registry import CARD, CLAIM, claim_version
from spotfit.attempt.result import job_result
from spotfit.state.records import JobRecord
from spotfit.stores import open_store


def publish_best(name: str, job: JobRecord, sweep: dict[str, Any]) -> dict[str, Any] | None:
    """Publish the best trial's exported model as the next version of `name`; its card (None: no export).

    `job` is the best trial's job row; `sweep` is {id, trial, params, objective: {metric, mode, value}}.
    """
    exported = job_result(job["result_json"]).get("export") or {}
    if not exported.get("url") or not exported.get("version"):  # no export section, or it failed
        return None
    source = f"{job['name']}/{exported['version']}"  # a job exports under its own name
    registry_url = exported["url"][: -len(source)].rstrip("/")
    registry = open_store(registry_url)
    card = json.loads(registry.read_bytes(f"{source}/{CARD}"))
    version = claim_version(registry, name, job["id"])
    for key in registry.list(source + "/"):
        relative = key[len(source) + 1:]
        if relative not in (CARD, CLAIM):
            registry.write_bytes(f"{name}/{version}/{relative}", registry.read_bytes(key))
    published = {**card, "name": name, "version": version, "published_at": time.time(),
                 "url": f"{registry_url}/{name}/{version}", "sweep": {**sweep, "trial_model": exported["url"]}}
    registry.write_bytes(f"{name}/{version}/{CARD}", json.dumps(published, indent=2, default=str).encode())
    return published
