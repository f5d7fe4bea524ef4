"""How the controller asks an attempt to stop for a rule: a request it reads, or SIGTERM."""

from __future__ import annotations

import json

import pytest

from spotfit.controller.loop import Controller
from spotfit.errors import NotFoundError
from tests.support.stop_requests import recording_controller


@pytest.fixture
def controller(tmp_path) -> Controller:
    return recording_controller(tmp_path, "stop")


@pytest.mark.parametrize("phase", ["training", "saving"])
def test_an_attempt_in_training_or_saving_gets_a_stop_request_it_honours_after_the_step(controller, phase):
    controller.rules.request_stop({"number": 1, "handle": "h1"}, {"phase": phase, "step": 240}, "target", export=True)
    assert controller.backend.preempted == []
    assert json.loads(controller.store.read_bytes("control/stop")) == {"attempt": 1, "reason": "target",
                                                                     "export": True}


@pytest.mark.parametrize("phase", ["starting", "syncing data", "running script"])
def test_an_attempt_before_training_is_stopped_by_sigterm(controller, phase):
    controller.rules.request_stop({"number": 1, "handle": "h1"}, {"phase": phase}, "target", export=True)
    assert [h for h, _ in controller.backend.preempted] == ["h1"]
    with pytest.raises(NotFoundError):
        controller.store.read_bytes("control/stop")
