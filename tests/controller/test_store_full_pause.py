"""A store whose disk stays full: after `checkpoint.full_wait_s` the job pauses (store full), not a loop.

The store is a real 16 MiB tmpfs in a mount namespace of one shell (`unshare --mount
--map-root-user`, as in test_full_disk.py), which runs `spotfit run` and then, when the test
says so, `spotfit resume`; the test reaches the tmpfs through `/proc/<pid>/root`. Marker
files fix what happens where, whatever the machine's speed. The job runs on a hollow attempt
(spotfit/hollow/): its scenario's handoffs take the script's turns at the same steps:

- at step 30 the script asks for the disk to be filled and waits until the test has filled it;
  it trains on, and every save from step 30 on finds no space;
- at step 41 it waits for the test's go-on; the test gives it once the controller has
  recorded the pause (`full_wait_s: 1`: one wall second of a full store, seen by the
  controller's own write probe), so the attempt is still running when it is asked to stop;
- `spotfit run` ends with exit 3: the job `paused (store full)`, naming the last good
  checkpoint (step 20), the attempt `stopped`, no failure counted, one `store_full` event and
  no `store_back` (it used to flip between the two for minutes and never end);
- the test frees the space; `spotfit resume` goes on from step 20 to the uninterrupted weights
  (the hollow reference).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotfit import sdk
from tests.controller.test_full_disk import MARKET_SCRIPT, SCRIPT, _fill, _require_mount_namespace
from tests.support.hollow_jobs import reference, write_scenario
from tests.support.store_faults import write_job
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def _full_store_turns(marks: Path) -> list[dict]:
    """Step 30: the disk fills (the script waits until it has); step 41: wait for the test's go-on."""
    return [{"at": 30, "touch": str(marks / "fill-request"), "wait_for": str(marks / "filled")},
            {"at": 41, "touch": str(marks / "at-41"), "wait_for": str(marks / "go-on")}]


SHELL = ('mount -t tmpfs -o size=16m spotfit-test-disk "$1" || exit 97; '
         '"$2" -m spotfit run "$3" --json > "$4/run.json" 2> "$4/run.err"; echo $? > "$4/run.rc"; '
         'while [ ! -e "$4/resume" ]; do sleep 0.05; done; '
         '"$2" -m spotfit resume full --json > "$4/resume.json" 2> "$4/resume.err"')


@pytest.mark.usefixtures("hollow")
def test_a_store_that_stays_full_pauses_the_job_and_resume_finishes_it(job_spec, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    _require_mount_namespace(disk)
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = write_job(job_spec, tmp_path, SCRIPT, "full", f", store: 'file://{disk}/store', full_wait_s: 1")
    write_scenario(spec.parent, MARKET_SCRIPT, handoffs=_full_store_turns(marks))
    shell = subprocess.Popen(["unshare", "--mount", "--map-root-user", "sh", "-c", SHELL, "sh", str(disk),
                              sys.executable, str(spec), str(marks)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    inside = Path(f"/proc/{shell.pid}/root") / disk.relative_to("/")
    try:
        wait_for(lambda: (marks / "fill-request").exists() or shell.poll() is not None, 300,
                 "the training to reach step 30, where it asks for the disk to fill")
        assert shell.poll() is None, (marks / "run.err").read_text()[-3000:] if (marks / "run.err").exists() else ""
        _fill(inside)
        (marks / "filled").touch()
        job_id = sdk.status("full")["id"]
        wait_for(lambda: any(e["kind"] == "store_paused" for e in sdk.events(job_id)) or shell.poll() is not None,
                 300, "the controller to pause the job after a full store of checkpoint.full_wait_s")
        assert not (marks / "run.rc").exists()  # the attempt holds before step 42: it is asked to stop, running
        (marks / "go-on").touch()
        wait_for(lambda: (marks / "run.rc").exists() or shell.poll() is not None, 300, "`spotfit run` to end")
        paused = sdk.status(job_id)
        events = sdk.events(job_id)
        (inside / "filler").unlink()
        (marks / "resume").touch()
        shell.wait(timeout=600)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    assert (marks / "run.rc").read_text().strip() == "3", (marks / "run.err").read_text()[-3000:]
    assert paused["state"] == "paused" and paused["paused"]["rule"] == "store full", paused
    assert "last good checkpoint: step 20" in paused["paused"]["reason"], paused
    assert paused["paused"]["resume"] == f"spotfit resume {job_id}"
    [attempt] = paused["attempts"]
    assert attempt["state"] == "stopped" and attempt["failure"] is None
    kinds = [e["kind"] for e in events]
    assert kinds.count("store_full") == 1 and "store_back" not in kinds, kinds
    assert "backoff" not in kinds  # nothing counted toward max_failures
    assert shell.returncode == 0, (marks / "resume.err").read_text()[-3000:]
    done = json.loads((marks / "resume.json").read_text())
    uninterrupted = reference(MARKET_SCRIPT, [], seed=7)  # the run of the same scenario, never interrupted
    assert done["state"] == "completed"
    assert [a["state"] for a in done["attempts"]] == ["stopped", "completed"]
    assert done["attempts"][1]["start_step"] == 20
    assert done["step"] == uninterrupted["step"] == 188
    assert done["weights_sha256"] == uninterrupted["weights_sha256"] is not None
