"""An attempt that fails while its store's disk is full is a `store` failure, never a `script` one.

The store is a real 1 MiB tmpfs (mounted by the test: root only, else skipped loudly). A
stand-in attempt fills it and exits 1, as a runtime does when its last writes find no space;
the controller, whose own write then fails too, records the attempt's failure as `store`, and
nothing counts toward `max_failures` (no `backoff` event, no count after a restart either).
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from spotfit import sdk
from spotfit.backends.base import AttemptStatus
from spotfit.controller.failures import FailureTracker
from spotfit.controller.loop import Controller
from spotfit.spec.job import JobSpec


class _Handle(str):
    def to_json(self) -> str:
        return str(self)


class _FillsTheDiskAndFails:
    """A stand-in attempt that fills the disk at `folder`, then has exited 1."""

    name = "stand-in"
    runs_here = False

    def __init__(self, folder):
        self.folder = folder
        self.launches = 0

    def launch(self, request):
        self.launches += 1
        with open(self.folder / "filler", "wb", buffering=0) as f:  # unbuffered: closing it writes nothing
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
        return _Handle(f"h{request.attempt}")

    def load_handle(self, text: str) -> _Handle:
        return _Handle(text)

    def status(self, handle) -> AttemptStatus:
        return AttemptStatus(running=False, exit_code=1)

    def stop(self, handle, grace_s: float = 10.0) -> None:
        pass

    def preempt(self, handle, notice_s: float) -> None:
        raise AssertionError("a failed attempt is not asked to stop")


class _Failed(Exception):
    """Ends the controller's loop once the attempt's end is recorded."""


@pytest.fixture
def tiny_disk(tmp_path):
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: mounting a 1 MiB tmpfs needs root (test_store_full_pause.py covers a full "
                    "store without it)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "spotfit-test-disk", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_an_attempt_that_fails_on_a_full_store_is_a_store_failure_not_counted(tiny_disk):
    spec = JobSpec.model_validate({"name": "fills", "script": "train.py", "max_failures": 0,
                                   "market": {"trace": None}})
    sdk.db().create_job("fills-1", "fills", spec.model_dump_json(), f"file://{tiny_disk}/store/jobs/fills-1")
    backend = _FillsTheDiskAndFails(tiny_disk)

    def stop_once_ended() -> None:
        if any(a["state"] == "failed" for a in sdk.db().attempts("fills-1")):
            raise _Failed

    with pytest.raises(_Failed):
        Controller(sdk.db(), "fills-1", backend=backend, poll_s=0.0, on_update=stop_once_ended).run()
    [attempt] = sdk.db().attempts("fills-1")
    assert attempt["state"] == "failed" and attempt["exit_code"] == 1
    assert attempt["info"]["failure"] == "store"
    kinds = [e["kind"] for e in sdk.events("fills-1")]
    assert "store_full" in kinds and "backoff" not in kinds, kinds
    assert sdk.db().get_job("fills-1")["state"] != "failed"  # max_failures: 0, and still not failed
    assert FailureTracker(sdk.db(), "fills-1", spec).count == 0  # read back after a restart: not counted
    assert sdk.status("fills-1")["attempts"][0]["failure"] == "store"


class _StoreFailsTheAttempt(_FillsTheDiskAndFails):
    """A stand-in attempt whose runtime exits `EXIT_STORE` at once: its store refuses it, the controller's does not."""

    def launch(self, request):
        self.launches += 1
        return _Handle(f"h{request.attempt}")

    def status(self, handle) -> AttemptStatus:
        return AttemptStatus(running=False, exit_code=74)


def test_store_failures_that_train_nothing_are_bounded_though_never_counted(tmp_path):
    """The store answers the controller but fails every attempt: not counted toward `max_failures`
    (no backoff), yet not relaunched without end either: past `max_failures` store failures in a
    row that trained nothing (`max_failures` or 3, the larger), the job fails with a line that names the store."""
    spec = JobSpec.model_validate({"name": "refused", "script": "train.py", "max_failures": 0,
                                   "market": {"trace": None}})
    sdk.db().create_job("refused-1", "refused", spec.model_dump_json(), f"file://{tmp_path}/store/jobs/refused-1")
    backend = _StoreFailsTheAttempt(tmp_path)
    Controller(sdk.db(), "refused-1", backend=backend, poll_s=0.0).run()
    job = sdk.db().get_job("refused-1")
    assert job["state"] == "failed"
    assert "4 attempts in a row failed on the store without training a step" in job["message"], job["message"]
    attempts = sdk.db().attempts("refused-1")
    assert backend.launches == 4 and [a["info"]["failure"] for a in attempts] == ["store"] * 4
    assert {a["exit_code"] for a in attempts} == {74}
    kinds = [e["kind"] for e in sdk.events("refused-1")]
    assert "backoff" not in kinds and kinds.count("store_failures") == 1, kinds
    assert FailureTracker(sdk.db(), "refused-1", spec).count == 0
