"""`SPOTFIT_WAIT_SCALE`: the controller's back-offs scaled, the defaults kept, a bad value one error line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spotfit import sdk
from spotfit.cli.app import app
from spotfit.controller import store_guard, waits
from spotfit.controller.failures import MAX_BACKOFF_S, FailureTracker
from spotfit.spec.job import JobSpec


def _tracker() -> FailureTracker:
    spec = JobSpec.model_validate({"name": "w", "script": "train.py", "market": {"trace": None, "zones": []}})
    sdk.db().create_job("w-1", "w", spec.model_dump_json(), "memory://w")
    return FailureTracker(sdk.db(), "w-1", spec)


def test_unset_the_back_offs_are_the_specs(monkeypatch):
    monkeypatch.delenv(waits.WAIT_SCALE_ENV, raising=False)
    tracker = _tracker()
    assert (tracker.base_s, tracker.max_s) == (30.0, MAX_BACKOFF_S)


def test_the_scale_multiplies_the_back_off_and_its_cap(monkeypatch):
    monkeypatch.setenv(waits.WAIT_SCALE_ENV, "0.01")
    tracker = _tracker()
    assert (tracker.base_s, tracker.max_s) == pytest.approx((0.3, MAX_BACKOFF_S / 100))


def test_the_store_guards_back_offs_are_scaled_alike(monkeypatch):
    monkeypatch.setenv(waits.WAIT_SCALE_ENV, "0.5")
    guard = store_guard.StoreGuard("memory://w", lambda kind, message: None)
    assert (guard.first_backoff_s, guard.max_backoff_s) == (0.5, 4.0)
    monkeypatch.delenv(waits.WAIT_SCALE_ENV)
    guard = store_guard.StoreGuard("memory://w", lambda kind, message: None)
    assert (guard.first_backoff_s, guard.max_backoff_s) == (store_guard.FIRST_BACKOFF_S, store_guard.MAX_BACKOFF_S)


@pytest.mark.parametrize("text", ["-1", "fast", "nan", "inf"])
def test_a_bad_scale_is_one_error_line_and_exit_2(monkeypatch, job_spec, text):
    spec = job_spec("name: w\nscript: train.py\n")
    monkeypatch.setenv(waits.WAIT_SCALE_ENV, text)
    out = CliRunner().invoke(app, ["run", str(spec)])
    assert sdk.list_jobs() == []  # refused before the job is recorded
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert lines[0] == f"error: Invalid SPOTFIT_WAIT_SCALE: received {text!r}, expected a number ≥ 0 " \
                       "(1 keeps the controller's waits as they are).", lines
    assert lines[1].startswith("hint: Unset SPOTFIT_WAIT_SCALE") and len(lines) == 2, lines
