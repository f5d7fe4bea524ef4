"""A controller over a backend that only records the preemptions it sends (no attempt runs).

For the tests of how a controller asks an attempt to stop (a rule's stop, a sweep's prune).
"""

from __future__ import annotations

from pathlib import Path

from spotfit import sdk
from spotfit.controller.loop import Controller
from spotfit.spec.job import JobSpec


class RecordingBackend:
    """Records the preemptions the controller sends."""

    name = "local"
    runs_here = True

    def __init__(self):
        self.preempted: list[tuple[str, float]] = []

    def load_handle(self, text: str) -> str:
        return text

    def preempt(self, handle: str, notice_s: float) -> None:
        self.preempted.append((handle, notice_s))


def recording_controller(tmp_path: Path, name: str) -> Controller:
    """The controller of a new job `name`-1 (no market trace) over a `RecordingBackend`."""
    spec = JobSpec.model_validate({"name": name, "script": "train.py", "market": {"trace": None}})
    sdk.db().create_job(f"{name}-1", name, spec.model_dump_json(), f"file://{tmp_path}/store")
    return Controller(sdk.db(), f"{name}-1", backend=RecordingBackend())
