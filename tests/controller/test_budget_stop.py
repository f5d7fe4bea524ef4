"""A stop is a stop: a budget crossed during start-up ends the job stopped, within budget + one minimum.

The budget is set below the first billing minimum, so it is crossed at the controller's first
look at the attempt, whatever the machine's speed: the SIGTERM lands while Python or TensorFlow
is still starting. An import interrupted there can fail the attempt (pybind11 turns the
exception into an ImportError); such a failure used to be retried past the budget. Where the
signal lands in a real process is up to the machine, so a stand-in attempt that fails on the
signal pins that case down. The ten runs are hollow attempts (spotfit/hollow/): the real
runtime's start and signal handling, with the script's 300 s of start-up as the scenario's.
"""

from __future__ import annotations

import json

import pytest

from spotfit import sdk
from spotfit.backends.base import AttemptStatus
from spotfit.controller.loop import Controller
from spotfit.hollow import SCENARIO_FILE
from spotfit.market.policies.base import spot
from spotfit.spec.job import JobSpec
from tests.support.stand_in import START, ZONE, RunsUntilSignalled, first_minute_usd

SCRIPT = "import time\ntime.sleep(300)  # never reached in time: the budget ends the job first\n"


@pytest.mark.slow
@pytest.mark.usefixtures("hollow")
def test_a_budget_crossed_during_start_up_stops_the_job_10_times_out_of_10(tmp_path):
    minimum_usd = first_minute_usd()
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / SCENARIO_FILE).write_text(json.dumps({"start_s": 300}))  # the script's sleep: never trains
    outcomes = []
    for run in range(10):
        budget = round(minimum_usd * (0.55 + 0.04 * run), 6)  # under the first minute's bill
        spec = tmp_path / f"run{run}.yaml"
        spec.write_text(f"name: budget{run}\nscript: train.py\nmax_failures: 3\nbudget_usd: {budget}\n"
                        f"market: {{trace: aws-v100, zones: [{ZONE}], start: '{START}', time_scale: 60}}\n")
        doc = sdk.run_job(sdk.submit(str(spec)))
        events = sdk.events(doc["id"])
        outcomes.append((run, doc["state"], [a["state"] for a in doc["attempts"]], doc["cost_usd"], budget))
        assert doc["state"] == "stopped", outcomes
        assert [a["state"] for a in doc["attempts"]] == ["stopped"], outcomes
        assert doc["cost_usd"] <= budget + minimum_usd + 1e-6, outcomes
        assert [e["data"]["rule"] for e in events if e["kind"] == "rule"] == ["budget"], outcomes


def test_an_attempt_that_fails_on_the_budget_stop_ends_the_job_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    budget = round(first_minute_usd() * 0.75, 6)
    spec = JobSpec.model_validate({"name": "fails", "script": "train.py", "budget_usd": budget, "max_failures": 3,
                                   "market": {"trace": "aws-v100", "zones": [ZONE], "start": START}})
    sdk.db().create_job("fails-1", "fails", spec.model_dump_json(), f"file://{tmp_path}/store")
    backend = RunsUntilSignalled(max_launches=1)
    assert Controller(sdk.db(), "fails-1", backend=backend, poll_s=0.0).run() == "stopped"
    assert backend.launches == 1
    assert [a["state"] for a in sdk.db().attempts("fails-1")] == ["stopped"]


class _Never:
    """A stand-in backend that must not be asked to launch."""

    name = "stand-in"
    runs_here = False

    def launch(self, request):
        raise AssertionError("launched although the budget was spent")


def test_the_budget_is_checked_before_a_relaunch(tmp_path):
    spec = JobSpec.model_validate({"name": "spent", "script": "train.py", "budget_usd": 1.0,
                                   "market": {"trace": "aws-v100", "zones": [ZONE], "start": START}})
    sdk.db().create_job("spent-1", "spent", spec.model_dump_json(), f"file://{tmp_path}/store")
    sdk.db().add_attempt("spent-1", backend="stand-in", zone=ZONE, market="spot", state="preempted",
                         trace_start_s=0.0, trace_end_s=3600.0, billed_s=3600.0, cost_usd=1.25)
    controller = Controller(sdk.db(), "spent-1", backend=_Never(), poll_s=0.0)
    controller.backend.status = lambda handle: AttemptStatus(running=False)  # type: ignore[attr-defined]
    assert controller.run() == "stopped"
    job = sdk.db().get_job("spent-1")
    assert "reached the budget $1" in job["message"] and "before launching" in job["message"]
    assert [a["number"] for a in sdk.db().attempts("spent-1")] == [1]


def test_the_policys_decision_reaches_the_launch_request_the_attempt_and_the_ledger(tmp_path, monkeypatch):
    """One `Decision` object from the policy to the backend's request; its text in the attempt's record and the
    ledger row, after the attempt ended (its end adds to the launch's record, never replaces it)."""
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    budget = round(first_minute_usd() * 0.75, 6)  # stopped at the first look: one attempt, billed
    spec = JobSpec.model_validate({"name": "why", "script": "train.py", "budget_usd": budget,
                                   "market": {"trace": "aws-v100", "zones": [ZONE], "start": START}})
    sdk.db().create_job("why-1", "why", spec.model_dump_json(), f"file://{tmp_path}/store")
    backend = RunsUntilSignalled(max_launches=1)
    assert Controller(sdk.db(), "why-1", backend=backend, poll_s=0.0).run() == "stopped"
    [request] = backend.requests
    assert request.decision == spot(ZONE) and (request.market, request.zone) == ("spot", ZONE)
    [attempt] = sdk.db().attempts("why-1")
    assert attempt["info"]["decision"] == f"spot:{ZONE}" and "timings" in attempt["info"]
    [row] = sdk.cost("why-1")["rows"]
    assert row["decision"] == f"spot:{ZONE}" and row["market"] == "spot"
