"""The emulated clouds' main test, shared: a job preempted once ends with the weights of an uninterrupted run.

The AWS and GCP end-to-end tests (tests/backends/test_aws_emulated.py, test_gcp_emulated.py)
train the digits script with `TRAINING` on their emulated cloud (tests/support/sandbox.py),
through one preemption, while the same training runs uninterrupted on the local backend; each
then asserts what its cloud did.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spotfit import sdk
from spotfit.hollow import HOLLOW_ENV
from tests.support import references
from tests.support.jobs import DIGITS, spotfit_cmd, write_spec
from tests.support.sandbox import Harness

TRAINING = """
script: train.py
args: ["--epochs", "1"]
checkpoint: {{store: "{store}", interval: {{steps: 10}}}}
training: {{seed: 0, deterministic: true}}
"""
LOCAL = "name: baseline\nmarket: {{trace: null}}\n" + TRAINING


def through_preemption(cloud: Harness, spec: str, tmp_path: Path, baseline_env: dict[str, str],
                       submitted: Callable[[str], None] = lambda job_id: None) -> tuple[str, dict, dict]:
    """(job id, its status with its events, the local baseline's result) of the job of `spec` on `cloud`.

    `submitted(job_id)` runs between the submission and the controller's start (to check what the
    submission made). The baseline trains (with `baseline_env`) while the cloud boots the job's first machine.
    """
    job_id = sdk.submit(spec)
    submitted(job_id)
    loop = cloud.start_controller(job_id)
    baseline = local_baseline(tmp_path / "baseline", LOCAL.format(store=f"file://{tmp_path}/baseline-store"),
                              baseline_env)
    cloud.wait_controller(loop, job_id)
    return job_id, {**sdk.status(job_id), "events": sdk.events(job_id)}, baseline


def ran(doc: dict[str, Any]) -> list[tuple]:
    """(state, zone, start step, end step) of each attempt that ran (not those that found no capacity)."""
    return [(a["state"], a["zone"], a["start_step"], a["end_step"]) for a in doc["attempts"]
            if a["state"] != "no_capacity"]


def local_baseline(folder: Path, spec_text: str, env: dict[str, str]) -> dict:
    """`spotfit run --json` of `spec_text` (a local job) in `folder`: its result document.

    One run per pytest run for each spec and script (tests/support/references.py): the emulated
    clouds' tests compare with the same uninterrupted training. The key leaves out the test's
    folder, which only names where the store is.
    """
    def run() -> dict:
        spec = write_spec(folder, spec_text)
        out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=600,
                             stdin=subprocess.DEVNULL, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        doc = json.loads(out.stdout)
        return {k: doc[k] for k in ("state", "step", "weights_sha256")}

    key = ["local baseline", spec_text.replace(str(folder.parent), "<test>"), DIGITS.joinpath("train.py").read_text(),
           env.get(HOLLOW_ENV, "")]
    return references.shared(key, run)
