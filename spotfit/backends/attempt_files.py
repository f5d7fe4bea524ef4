"""What a cloud worker reads before it starts the runtime: the attempt's launch file and the job's code.

The controller writes `attempts/<n>/launch.json` (the working folder, the environment, the key
of the shipped code) to the job's store; the AWS agent and the Kubernetes pod both unpack the
attempt from it the same way before they start `python -m spotfit.runtime`; a worker of several
builds its `TF_CONFIG` from the attempt's `cluster.json` with `tf_config`.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from spotfit.attempt import layout
from spotfit.stores.base import ObjectStore


def unpack_attempt(store: ObjectStore, attempt: int) -> tuple[dict[str, Any], Path]:
    """Attempt `attempt`'s launch document and its working folder, made, with the shipped code unpacked in it."""
    launch = json.loads(store.read_bytes(layout.launch_file(attempt)))
    workdir = Path(launch["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    if launch.get("code_key"):
        with tarfile.open(fileobj=io.BytesIO(store.read_bytes(launch["code_key"])), mode="r:gz") as tar:
            tar.extractall(workdir, filter="data")
    return launch, workdir


def tf_config(cluster: list[str], index: int) -> dict[str, Any]:
    """The `TF_CONFIG` of worker `index` of `cluster` (worker 0 is the chief).

    >>> tf_config(["10.0.0.5:2222", "10.0.0.9:2222"], 1)["task"]
    {'type': 'worker', 'index': 1}
    """
    return {"cluster": {"worker": list(cluster)}, "task": {"type": "worker", "index": index}}
