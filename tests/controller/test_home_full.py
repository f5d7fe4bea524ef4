"""The disk under `$SPOTFIT_HOME` (the state DB) fills up mid-training: the controller waits it out.

`$SPOTFIT_HOME` is a real 8 MiB tmpfs (mounted by the test: root only, else skipped loudly);
the job's store is elsewhere. At step 30 the script asks for the disk to be filled and waits
until the test has filled it; it trains on. The controller's next write of the state DB gets
`database or disk is full`: it must say so on stderr and retry, never end (which left the
runtime training unsupervised), while `spotfit status` still answers. The test frees the space
once the controller has retried twice; the job must finish with every step and a `state_wait`
event (reason `full`).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading

import pytest

from spotfit import sdk
from tests.support.jobs import spotfit_cmd
from tests.support.store_faults import digits_script, write_job
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SCRIPT = digits_script('''
import os, time
from pathlib import Path
import keras
from sklearn.datasets import load_digits


class Fill(keras.callbacks.Callback):
    """Step 30: the home's disk fills (no-op without FILL_MARKS)."""
    step = 0
    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        marks = os.environ.get("FILL_MARKS")
        if marks and self.step == 30:
            (Path(marks) / "fill-request").touch()
            deadline = time.monotonic() + 600
            while not (Path(marks) / "filled").exists():
                if time.monotonic() > deadline:
                    raise SystemExit("timed out waiting for the test to fill the disk")
                time.sleep(0.02)
''', "Fill")


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


def test_the_controller_waits_out_a_full_home_disk(job_spec, tmp_path, home_on_tmpfs):
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = write_job(job_spec, tmp_path, SCRIPT, "homefull", f", store: 'file://{tmp_path}/store'",
                     {"FILL_MARKS": str(marks)})
    env = {**os.environ, "SPOTFIT_STATE_BUSY_TIMEOUT_S": "0.2"}
    job = subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, stdin=subprocess.DEVNULL, env=env)
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
        wait_for(lambda: sum("is full" in line for line in err) >= 2 or job.poll() is not None, 300,
                 "the controller to find the state DB's disk full and retry twice")
        assert job.poll() is None, f"spotfit run ended while the disk was full: {''.join(err)[-3000:]}"
        during = sdk.status("homefull")
        assert during["controller"] == "alive" and during["state"] == "running", during
        (home_on_tmpfs / "filler").unlink()
        wait_for(lambda: job.poll() is not None, 300, "the job to finish once the disk had space again")
        for reader in readers:
            reader.join(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, "".join(err)[-3000:]
    doc = json.loads(out[0])
    assert doc["state"] == "completed" and [a["state"] for a in doc["attempts"]] == ["completed"]
    assert doc["step"] == 188 and doc["weights_sha256"] is not None
    waits = [e for e in sdk.events(doc["id"]) if e["kind"] == "state_wait"]
    assert any(w["data"]["reason"] == "full" for w in waits), waits
