"""A sweep's prune request, as the job's controller carries it out (no training: a fake backend)."""

from __future__ import annotations

import json

import pytest

from spotfit import sdk
from spotfit.controller.loop import Controller
from spotfit.state.states import JobState, StopRequest
from tests.support.stop_requests import recording_controller


@pytest.fixture
def controller(tmp_path) -> Controller:
    return recording_controller(tmp_path, "trial")


def test_a_training_attempt_is_asked_to_stop_after_its_step_and_the_event_says_pruned(controller, monkeypatch):
    monkeypatch.setattr(controller, "_watch", lambda attempt: None)
    controller.store.write_bytes("progress.json", json.dumps({"attempt": 1, "phase": "training", "step": 12}).encode())
    controller._cancel({"number": 1, "handle": "h1"}, StopRequest.PRUNE)
    assert controller.backend.preempted == []  # no signal: the runtime reads the request after its step
    assert json.loads(controller.store.read_bytes("control/stop"))["reason"] == "pruned by its sweep"
    [event] = [e for e in sdk.events("trial-1") if e["kind"] == "pruned"]
    assert event["data"]["action"] == "pruned"


def test_a_prune_without_a_running_attempt_stops_the_job_and_resume_clears_it(controller, monkeypatch):
    sdk.db().update_job("trial-1", cancel_requested=StopRequest.PRUNE)
    controller._cancel(None, StopRequest.PRUNE)
    job = sdk.db().get_job("trial-1")
    assert (job["state"], job["message"]) == (JobState.STOPPED, "pruned by its sweep")
    started: list[str] = []
    monkeypatch.setattr(sdk, "start_detached", started.append)  # a promotion: `resume`, no process here
    sdk.resume("trial-1", detach=True)
    job = sdk.db().get_job("trial-1")
    assert started == ["trial-1"] and job["state"] == JobState.PAUSED and job["cancel_requested"] == 0
