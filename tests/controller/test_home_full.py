"""The disk under `$SPOTFIT_HOME` (the state DB) fills up mid-training: the controller supervises on.

`$SPOTFIT_HOME` is a real 8 MiB tmpfs (mounted by the test: root only, else skipped loudly);
the job's store is elsewhere. The job runs on a hollow attempt (spotfit/hollow/), whose scenario
takes the script's turn: at step 30 the script asks for the disk to be filled and waits
until the test has filled it; it trains on. The controller's next write of the state DB gets
`database or disk is full`: it must say so on stderr and go on supervising from memory
(`spotfit/state/memory.py`), never end or block (either left the runtime training
unsupervised). So the preemption injected at step 60 is delivered, the next attempt launched
and resumed from that step, and the job trains to its end, all while the disk is full. The
controller then waits for space to write what it recorded; the test frees it, and the job
ends with both attempts, every step, the event of the injection and a `state_wait` event
(reason `full`) in the state DB.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from spotfit import sdk
from tests.controller.test_full_disk import MARKET_SCRIPT, SCRIPT
from tests.support.hollow_jobs import reference, write_scenario
from tests.support.jobs import spotfit_cmd
from tests.support.store_faults import write_job
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def _fill_turn(marks: Path) -> list[dict]:
    """Step 30: the home's disk fills (the script waits until it has)."""
    return [{"at": 30, "touch": str(marks / "fill-request"), "wait_for": str(marks / "filled")}]


@pytest.fixture
def home_on_tmpfs(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: mounting a small tmpfs as SPOTFIT_HOME needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "spotfit-test-home", str(home)], check=True)
    monkeypatch.setenv("SPOTFIT_HOME", str(home))
    try:
        yield home
    finally:
        subprocess.run(["umount", "--lazy", str(home)], check=True)


def _fill(folder) -> None:
    with open(folder / "filler", "wb", buffering=0) as f:  # unbuffered: closing it writes nothing
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


@pytest.mark.usefixtures("hollow")
def test_the_controller_supervises_from_memory_while_the_home_disk_is_full(job_spec, tmp_path, home_on_tmpfs):
    marks = tmp_path / "marks"
    marks.mkdir()
    store = tmp_path / "store"
    spec = write_job(job_spec, tmp_path, SCRIPT, "homefull", f", store: 'file://{store}'")
    write_scenario(spec.parent, MARKET_SCRIPT, handoffs=_fill_turn(marks))
    env = {**os.environ, "SPOTFIT_STATE_BUSY_TIMEOUT_S": "0.2"}
    job = subprocess.Popen(spotfit_cmd("run", str(spec), "--preempt-at", "60:5", "--json"), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=env)
    err: list[str] = []
    out: list[str] = []
    readers = [threading.Thread(target=lambda: err.extend(job.stderr), daemon=True),  # type: ignore[arg-type]
               threading.Thread(target=lambda: out.append(job.stdout.read()), daemon=True)]  # type: ignore[union-attr]
    for reader in readers:
        reader.start()
    try:
        wait_for(lambda: (marks / "fill-request").exists() or job.poll() is not None, 300,
                 "the training to reach step 30, where it asks for the disk to fill")
        assert job.poll() is None, "".join(err)[-3000:]
        _fill(home_on_tmpfs)
        (marks / "filled").touch()
        # The result is written by the attempt that trains the last step: the job has trained to its end.
        wait_for(lambda: list(store.glob("jobs/*/result.json")) or job.poll() is not None, 300,
                 "the job to train to its end while the disk is full")
        assert job.poll() is None, f"spotfit run ended while the disk was full: {''.join(err)[-3000:]}"
        assert any("supervising from memory" in line for line in err), "".join(err)[-3000:]
        [job_dir] = store.glob("jobs/*")
        assert sorted(p.name for p in (job_dir / "attempts").iterdir()) == ["0001", "0002"], \
            "the injected preemption was not delivered while the disk was full"
        (home_on_tmpfs / "filler").unlink()
        wait_for(lambda: job.poll() is not None, 300, "the controller to write its state once the disk had space")
        for reader in readers:
            reader.join(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, "".join(err)[-3000:]
    doc = json.loads(out[0])
    assert doc["state"] == "completed" and [a["state"] for a in doc["attempts"]] == ["preempted", "completed"], doc
    assert [(a["start_step"], a["end_step"]) for a in doc["attempts"]] == [(0, 60), (60, 188)], doc["attempts"]
    assert doc["step"] == 188 and doc["weights_sha256"] == reference(MARKET_SCRIPT, [], seed=7)["weights_sha256"]
    events = sdk.events(doc["id"])
    assert [e["data"]["at_step"] for e in events if e["kind"] == "injected_preemption"] == [60]
    waits = [e for e in events if e["kind"] == "state_wait"]
    assert any(w["data"]["reason"] == "full" and "from memory" in w["message"] for w in waits), waits
