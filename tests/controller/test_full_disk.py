"""A `file://` store on a small file system fills up, then gets space back: the job finishes right.

The store is a real 16 MiB tmpfs, mounted in a mount namespace of the `spotfit run` process
(`unshare --mount --map-root-user`: no root needed where user namespaces are allowed); the test
reaches it through `/proc/<pid>/root`. The script and the test hand the steps back and forth
through marker files, so what happens where is fixed whatever the machine's speed. The job runs
on a hollow attempt (spotfit/hollow/): its scenario's handoffs take the script's turns at the
same steps:

- at step 30 the script asks for the disk to be filled and waits until the test has filled it;
- it trains on while every write to the store fails with ENOSPC (checkpoints, progress, events);
- at step 41 a preemption notice arrives (the script sends itself SIGTERM): the attempt ends;
- the controller cannot write the next attempt's `runtime.json`: `status` reports the full
  disk with what to free, and the job waits;
- the test frees the space; attempt 2 resumes from the last checkpoint written (step 20).

The job must finish with the weights of an uninterrupted run (the hollow reference) and never
`controller: gone`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.support.hollow_jobs import CONTROLLER_SCRIPTS, reference, write_scenario
from tests.support.jobs import spotfit_cmd
from tests.support.store_faults import digits_script, status_or_empty, write_job
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

# The job's script: the digits fit of tests/support/store_faults.py (4 epochs of 47 steps). A hollow
# attempt trains its shape instead (hollow.json, MARKET_SCRIPT's shape) and takes the turns of the test.
SCRIPT = digits_script('import keras\n\n\n'
                       'class Plain(keras.callbacks.Callback):\n    """Nothing: the turns are hollow.json\'s."""\n',
                       "Plain")
MARKET_SCRIPT = CONTROLLER_SCRIPTS / "market_train.py"  # the same shape: 4 epochs of 47 steps


def _full_disk_turns(marks: Path) -> list[dict]:
    """Step 30: the disk fills (the script waits until it has); step 41: a preemption notice (SIGTERM)."""
    return [{"at": 30, "touch": str(marks / "fill-request"), "wait_for": str(marks / "filled")},
            {"at": 41, "touch": str(marks / "preempted"), "sigterm": True}]


MOUNT = 'mount -t tmpfs -o size=16m spotfit-test-disk "$0" && exec "$@"'


def _require_mount_namespace(folder: Path) -> None:
    unshare = shutil.which("unshare")
    probe = None if unshare is None else subprocess.run(
        [unshare, "--mount", "--map-root-user", "sh", "-c", MOUNT, str(folder), "true"], capture_output=True,
        text=True, timeout=60)
    if probe is None or probe.returncode != 0:
        pytest.skip("SKIPPED LOUDLY: cannot mount a small tmpfs in a mount namespace here (util-linux `unshare "
                    f"--mount --map-root-user` and user namespaces are needed): {probe and probe.stderr.strip()}")


def _fill(folder: Path) -> None:
    """Write zeros into `folder` until its file system has no space left."""
    with open(folder / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


@pytest.mark.usefixtures("hollow")
def test_the_job_survives_a_full_store_disk_with_the_uninterrupted_weights(job_spec, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    _require_mount_namespace(disk)
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = write_job(job_spec, tmp_path, SCRIPT, "full", f", store: 'file://{disk}/store'")
    write_scenario(spec.parent, MARKET_SCRIPT, handoffs=_full_disk_turns(marks))
    job = subprocess.Popen(["unshare", "--mount", "--map-root-user", "sh", "-c", MOUNT, str(disk),
                            *spotfit_cmd("run", str(spec), "--json")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=os.environ.copy())
    inside = Path(f"/proc/{job.pid}/root") / disk.relative_to("/")  # the tmpfs, seen from here
    output: dict[str, str] = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), job.communicate(), strict=True)),
                              daemon=True)
    reader.start()
    try:
        wait_for(lambda: (marks / "fill-request").exists() or job.poll() is not None, 300,
                 "the training to reach step 30, where it asks for the disk to fill")
        assert job.poll() is None, output
        _fill(inside)
        (marks / "filled").touch()
        # The controller's write probe sees the full disk while the attempt runs; after the
        # preemption at step 41 the job waits for space to launch attempt 2.
        wait_for(lambda: (status_or_empty("full").get("store_problem")
                          and status_or_empty("full")["state"] == "waiting") or job.poll() is not None, 300,
                 "`status` to report the full disk while waiting after the preemption at step 41")
        assert job.poll() is None, f"spotfit run ended while the disk was full: {output}"
        full = status_or_empty("full")["store_problem"]
        assert "is full" in full and "free space there" in full, full
        during = status_or_empty("full")
        assert during["controller"] == "alive" and during["state"] == "waiting", during
        (inside / "filler").unlink()
        wait_for(lambda: job.poll() is not None, 300, "the job to finish once the disk had space again")
        reader.join(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, output.get("err", "")[-3000:]
    doc = json.loads(output["out"])
    uninterrupted = reference(MARKET_SCRIPT, [], seed=7)  # the run of the same scenario, never interrupted
    assert doc["state"] == "completed" and doc["store_problem"] is None
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "completed"]
    assert doc["attempts"][1]["start_step"] == 20  # the saves of steps 30, 40 and 41 found no space
    assert doc["weights_sha256"] == uninterrupted["weights_sha256"] is not None
    assert doc["step"] == uninterrupted["step"] == 188
