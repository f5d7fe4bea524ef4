"""SeaweedFS goes away while a checkpoint is being written: training goes on, saves resume.

An attempt (`python -m spotfit.runtime`, hollow: spotfit/hollow/) trains with its checkpoints on
SeaweedFS. The script (the scenario's handoffs) and the test hand the outage back and forth
through marker files, so that its place in the training is fixed, whatever the machine's speed:

- at step 30, just before spotfit saves that step, the script asks for the outage and waits
  until the test has stopped the server (by PID);
- steps 31-40 train on with the server down: the saves of steps 30 and 40 fail;
- at step 41 the script waits until the test has started the server again on the same ports;
- the saves from step 50 on succeed, and every checkpoint that can be restored is complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import open_store
from tests.support.hollow_jobs import CONTROLLER_SCRIPTS, write_scenario
from tests.support.seaweed import BUCKET
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
DOWN_AT, UP_AT, TOTAL = 30, 41, 188  # steps; 1500 samples / 32 = 47 steps x 4 epochs

SCRIPT = "# a seeded digits fit, 4 epochs of 47 steps: hollow.json beside it plays it\n"
MARKET_SCRIPT = CONTROLLER_SCRIPTS / "market_train.py"  # the same shape: 4 epochs of 47 steps


def _outage_turns(marks: Path) -> list[dict]:
    """Before spotfit saves step DOWN_AT the server goes down; at step UP_AT (after the save of step 40) it is back."""
    return [{"at": DOWN_AT, "touch": str(marks / "stop-request"), "wait_for": str(marks / "stopped")},
            {"at": UP_AT, "touch": str(marks / "start-request"), "wait_for": str(marks / "started")}]


@pytest.mark.usefixtures("hollow")
def test_server_outage_during_a_checkpoint_write(tmp_path, own_seaweed):
    server = own_seaweed
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    write_scenario(tmp_path, MARKET_SCRIPT, handoffs=_outage_turns(marks))
    url = f"s3://{BUCKET}/outage-{uuid.uuid4().hex[:6]}"
    store = open_store(url)
    config = RuntimeConfig(job_id="outage", job_url=url, script=str(script), workdir=str(tmp_path),
                           interval_steps=10, keep=2, heartbeat_s=1.0)
    store.write_bytes("attempts/0001/runtime.json", config.to_json().encode())
    proc = subprocess.Popen([sys.executable, "-m", "spotfit.runtime", url, "1"],
                            env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    output: dict[str, str] = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), proc.communicate(), strict=True)),
                              daemon=True)
    reader.start()
    try:
        for request, done, action in (("stop-request", "stopped", server.stop),
                                      ("start-request", "started", server.start)):
            wait_for(lambda request=request: (marks / request).exists() or proc.poll() is not None, 300,
                     f"the training to reach the step that asks for {request}")
            assert proc.poll() is None, f"the runtime exited early: {output}"
            action()
            (marks / done).touch()
        wait_for(lambda: proc.poll() is not None, 300, "the training to finish")
        reader.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output.get("err", "")[-3000:]

    events = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    kinds = [(e["kind"], e["data"].get("step")) for e in events if e["kind"].startswith("checkpoint")]
    failed = [step for kind, step in kinds if kind == "checkpoint_failed"]
    saved = [step for kind, step in kinds if kind == "checkpoint"]
    assert failed == [30, 40], kinds  # every save while the server was down, and only those
    assert saved == [10, 20, *range(50, TOTAL, 10), TOTAL], kinds  # every save once it was back
    assert "store unreachable" in output["err"]

    ckpts = CheckpointStore(store, keep=2)
    for step in ckpts.steps():  # everything that looks like a checkpoint is complete
        assert ckpts._load(step).step == step
    latest = ckpts.load_latest()
    assert latest.step == TOTAL and latest.skipped == []
    assert json.loads(store.read_bytes("result.json"))["step"] == TOTAL
