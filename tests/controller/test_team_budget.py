"""Budgets over many jobs (config.yaml): the pure decision, and the controller's check before a launch.

The spend comes from jobs recorded in the state DB as a controller leaves them (nothing trains);
the job under test runs on a stand-in backend that counts launches.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from spotfit import sdk
from spotfit.controller.loop import Controller
from spotfit.controller.team_budget import crossings, period_start
from spotfit.host.settings import TeamBudget
from spotfit.spec.job import JobSpec
from spotfit.state.states import JobState
from tests.support.stand_in import START, ZONE, RunsUntilSignalled, first_minute_usd
from tests.support.webhook import webhook_receiver

NOW = datetime(2026, 12, 2, 8, 30, tzinfo=UTC).timestamp()  # a Wednesday


def _ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def test_periods_are_utc_calendar_day_week_and_month():
    assert period_start("day", NOW) == _ts(2026, 12, 2)
    assert period_start("week", NOW) == _ts(2026, 11, 30)  # Monday
    assert period_start("month", NOW) == _ts(2026, 12, 1)


@pytest.mark.parametrize(("spent", "expected"), [(79.9, []), (80.0, [(80, "notify")]), (99.0, [(80, "notify")]),
                                                 (100.0, [(100, "pause")]), (250.0, [(100, "pause")])])
def test_the_highest_level_crossed_acts(spent, expected):
    budget = TeamBudget(name="nlp", labels={"project": "nlp"}, usd=100.0)
    billed = [({"project": "nlp", "owner": "ada"}, spent), ({"project": "cv"}, 1000.0)]  # cv is not nlp's
    found = crossings([budget], {"project": "nlp"}, lambda since_s: billed, NOW)
    assert [(c.percent, c.action) for c in found] == expected


def test_none_skips_a_level_and_budgets_cover_only_their_jobs():
    quiet = TeamBudget(name="q", usd=100.0, at_80_percent="none", at_100_percent="notify")  # every job
    asked = []

    def billed(since_s):
        asked.append(since_s)
        return [({}, 90.0)]

    assert crossings([quiet], {"project": "nlp"}, billed, NOW) == []
    other = TeamBudget(name="cv", labels={"project": "cv"}, usd=1.0)
    assert crossings([other], {"project": "nlp"}, billed, NOW) == []
    assert asked == [period_start("month", NOW)]  # a budget that does not cover the job reads nothing


def _previous_spend(usd: float, labels: dict) -> None:
    """A finished job of `labels` whose one attempt, launched now, was billed `usd`."""
    db = sdk.db()
    spec = JobSpec.model_validate({"name": "before", "script": "t.py", "labels": labels, "market": {"trace": None}})
    job_id = f"before-{len(db.list_jobs(100))}"
    db.create_job(job_id, "before", spec.model_dump_json(), "memory://before")
    number = db.add_attempt(job_id, backend="local", zone=None, market="on_demand", state="completed")
    db.update_attempt(job_id, number, billed_s=3600.0, cost_usd=usd)
    db.move_job(job_id, JobState.COMPLETED, "set by the test")


class _CountsLaunches:
    """A stand-in backend: any launch is counted (and fails the tests that expect none)."""

    name = "stand-in"
    runs_here = False

    def __init__(self):
        self.launches = 0

    def launch(self, request):
        self.launches += 1
        raise AssertionError("launched past a team budget")


def _job(tmp_path, labels: dict) -> Controller:
    spec = JobSpec.model_validate({"name": "next", "script": "train.py", "labels": labels,
                                   "market": {"trace": None}})
    sdk.db().create_job("next-1", "next", spec.model_dump_json(), f"file://{tmp_path}/store")
    return Controller(sdk.db(), "next-1", backend=_CountsLaunches(), poll_s=0.0)  # type: ignore[arg-type]


def _settings(spotfit_home, *budgets: dict, webhook: str | None = None) -> None:
    doc = {"budgets": list(budgets), **({"notify": {"webhook": webhook}} if webhook else {})}
    (spotfit_home / "config.yaml").write_text(json.dumps(doc))


def test_a_spent_team_budget_pauses_the_job_before_it_launches(tmp_path, spotfit_home):
    _previous_spend(6.0, {"project": "nlp", "owner": "ada"})
    _previous_spend(4.5, {"project": "nlp"})
    _previous_spend(50.0, {"project": "cv"})
    _settings(spotfit_home, {"name": "nlp-month", "labels": {"project": "nlp"}, "usd": 10})
    controller = _job(tmp_path, {"project": "nlp"})
    controller.run()
    assert controller.backend.launches == 0
    status = sdk.status("next-1")
    assert status["state"] == "paused"
    assert status["paused"]["rule"] == "team_budget"
    assert status["paused"]["reason"] == "nlp-month spent $10.5000 of $10 this month (105%, project=nlp)"
    [event] = [e for e in sdk.events("next-1") if e["kind"] == "team_budget"]
    assert event["data"]["action"] == "pause" and event["data"]["spent_usd"] == 10.5


def test_eighty_percent_notifies_once_and_lets_the_launch_go(tmp_path, spotfit_home):
    _previous_spend(8.5, {"project": "nlp"})
    with webhook_receiver() as (url, received):
        _settings(spotfit_home, {"name": "nlp-month", "labels": {"project": "nlp"}, "usd": 10}, webhook=url)
        controller = _job(tmp_path, {"project": "nlp", "owner": "ada"})
        assert controller.rules.halt_before_launch() is None
        assert controller.rules.halt_before_launch() is None  # told already: this period, this level
    assert [p["budget"] for p in received] == ["nlp-month"]
    assert received[0]["percent"] == 80 and received[0]["action"] == "notify" and received[0]["spent_usd"] == 8.5
    assert "spotfit job next-1: team_budget: nlp-month spent $8.5000 of $10" in received[0]["text"]
    assert [e["data"]["percent"] for e in sdk.events("next-1") if e["kind"] == "team_budget"] == [80]


def test_a_job_the_budget_does_not_cover_launches(tmp_path, spotfit_home):
    _previous_spend(20.0, {"project": "nlp"})
    _settings(spotfit_home, {"name": "nlp-month", "labels": {"project": "nlp"}, "usd": 10})
    controller = _job(tmp_path, {"project": "cv"})
    assert controller.rules.halt_before_launch() is None
    assert [e for e in sdk.events("next-1") if e["kind"] == "team_budget"] == []


def test_a_settings_file_broken_while_the_job_waits_pauses_it(tmp_path, spotfit_home):
    controller = _job(tmp_path, {"project": "nlp"})
    (spotfit_home / "config.yaml").write_text("budgets: [{name: x, usd: 10, perod: day}]\n")
    controller.run()
    assert controller.backend.launches == 0
    job = sdk.db().get_job("next-1")
    assert job["state"] == "paused"
    assert "Unknown field `budgets[0].perod`" in job["message"] and "spotfit resume next-1" in job["message"]


def test_a_running_attempt_that_spends_the_team_budget_is_stopped_and_the_job_paused(tmp_path, spotfit_home,
                                                                                      monkeypatch):
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    minimum = first_minute_usd()  # the attempt's bill at the controller's first look: at least this
    _previous_spend(10.0 - minimum / 2, {"project": "nlp"})  # 80 % spent before the launch, not 100 %
    _settings(spotfit_home, {"name": "nlp-month", "labels": {"project": "nlp"}, "usd": 10})
    spec = JobSpec.model_validate({"name": "next", "script": "train.py", "labels": {"project": "nlp"},
                                   "market": {"trace": "aws-v100", "zones": [ZONE], "start": START}})
    sdk.db().create_job("next-1", "next", spec.model_dump_json(), f"file://{tmp_path}/store")
    backend = RunsUntilSignalled()
    assert Controller(sdk.db(), "next-1", backend=backend, poll_s=0.0).run() == "paused"  # type: ignore[arg-type]
    assert backend.launches == 1 and backend.signalled == {"h1"}
    assert [a["state"] for a in sdk.db().attempts("next-1")] == ["stopped"]
    events = [e for e in sdk.events("next-1") if e["kind"] == "team_budget"]
    assert [(e["data"]["percent"], e["data"]["action"], e["attempt"]) for e in events] == [(80, "notify", None),
                                                                                         (100, "pause", 1)]
    job = sdk.db().get_job("next-1")
    assert "(attempt 1 running)" in job["message"] and "spotfit resume next-1" in job["message"]
