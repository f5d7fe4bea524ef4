"""Cold start of an AWS attempt on the emulated instance: boot to the first training step.

Runs the digits example (1 epoch) as `backend: aws` on the emulated cloud of the tests
(tests/support/emulated_instance.py: moto server, SeaweedFS, IMDS, the real user-data in a
sandbox), first on an empty store (the boot script makes the venv and pip-installs the shipped
wheel and the job's environment, then caches the venv), then again on the same store (the boot
script unpacks the cached venv). "Boot" is the moment the harness starts the user-data; "first
step" is the first progress document with step >= 1 that the runtime writes to the store (it
writes at most every 0.5 s, so the figure is late by up to that much).

Not measured here, and only a real account can show: VM boot, the AWS CLI's S3 transfer of a
venv holding TensorFlow and CUDA (here the framework comes from the sandbox's "system" Python
and the archive holds spotfit and the job's packages only), and pip downloading from an index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _doc import machine, write_section  # noqa: E402

HEADING = "## AWS cold start on the emulated instance (issue 15)"
SPEC = """
name: coldstart
script: train.py
args: ["--epochs", "1"]
backend: aws
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-west-2a]}}
checkpoint: {{store: "{store}", interval: {{steps: 10}}}}
training: {{seed: 0, deterministic: true}}
aws: {{ami: ami-12c6146b, region: us-west-2, runtime_extras: [s3]}}
environment: {{pip: ["{probe}==1.0"]}}
"""


def one_job(cloud, work: Path, store: str) -> dict:
    from spotfit import sdk
    from spotfit.controller.loop import Controller
    from spotfit.stores import open_store
    from tests.support.sandbox import PROBE

    folder = work / f"job-{len(cloud.instances)}"
    folder.mkdir()
    shutil.copy(REPO / "examples" / "digits" / "train.py", folder / "train.py")
    (folder / "spotfit.yaml").write_text(SPEC.format(store=store, probe=PROBE))
    job = sdk.submit(str(folder / "spotfit.yaml"))
    before = set(cloud.instances)
    first_step: list[float] = []
    done = threading.Event()

    def watch() -> None:
        progress = open_store(sdk.status(job)["store"])
        while not done.wait(0.05) and not first_step:
            try:
                doc = json.loads(progress.read_bytes("progress.json"))
            except Exception:  # noqa: BLE001 - not written yet
                continue
            if (doc.get("step") or 0) >= 1:
                first_step.append(time.time())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    Controller(sdk.db(), job, backend=cloud.backend(), poll_s=0.1).run()
    done.set()
    watcher.join()
    assert sdk.status(job)["state"] == "completed" and first_step, sdk.status(job)
    [inst] = [cloud.instances[i] for i in cloud.instances if i not in before]
    env_ready = float(re.search(r"environment \w+ (?:installed|unpacked from the cache) at ([\d.]+)",
                                inst.boot_log).group(1))
    return {"environment ready": env_ready - inst.booted_at, "agent, TF import, first step": first_step[0] - env_ready,
            "boot to first step": first_step[0] - inst.booted_at}


def main() -> None:
    from tests.support.emulated_instance import EmulatedCloud
    from tests.support.seaweed import BUCKET, SeaweedServer, require_weed

    work = Path(tempfile.mkdtemp(prefix="spotfit-coldstart-"))
    os.environ["SPOTFIT_HOME"] = str(work / "home")
    seaweed = SeaweedServer(work / "seaweed", require_weed())
    seaweed.start()
    cloud = None
    try:
        seaweed.make_bucket(BUCKET)
        cloud = EmulatedCloud(work / "cloud", seaweed).start()
        os.environ.update(cloud.controller_env())
        store = f"s3://{BUCKET}/coldstart-{int(time.time())}"
        load = os.getloadavg()[0]
        rows = {"without the cache (first boot)": one_job(cloud, work, store),
                "with the cache (a relaunch)": one_job(cloud, work, store)}
        load = max(load, os.getloadavg()[0])
    finally:
        if cloud is not None:
            cloud.stop()
        seaweed.stop()
    shutil.rmtree(work, ignore_errors=True)
    phases = list(next(iter(rows.values())))
    lines = [HEADING, "",
             f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; `python bench/bench_coldstart.py`;",
             f"load average up to {load:.1f} while it ran (other work shared the machine). One run each, wall seconds,",
             "from the moment the emulated instance starts its user-data:", "",
             "| phase | " + " | ".join(rows) + " |", "|---|" + "---:|" * len(rows)]
    lines += [f"| {p} | " + " | ".join(f"{r[p]:.1f}" for r in rows.values()) + " |" for p in phases]
    lines += ["",
              "Without the cache the boot script makes the venv (`python3 -m venv`, with pip), installs the shipped",
              "spotfit wheel and the job's `environment` from the local wheel folder and uploads the venv; with it,",
              "the boot script downloads and unpacks that archive. TensorFlow is not installed in either case here:",
              "the sandbox's Python already has it, as a Deep Learning AMI's does. On a real instance whose image",
              "lacks it, the first boot also pip-installs TensorFlow with CUDA, which the cache then spares every",
              "relaunch; that transfer only a real account can measure."]
    write_section(HEADING, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
