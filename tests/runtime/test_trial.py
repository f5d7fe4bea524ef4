"""What `auto` may spend on a trial: under 0.5% of the job, never on a job of unknown length."""

from __future__ import annotations

from spotfit.runtime import trial


def test_a_trial_runs_only_when_it_costs_under_half_a_percent_of_the_job():
    cost_s = trial.predicted_cost_s(first_step_s=0.8, step_s=0.005, steps=11)
    assert not trial.affordable(cost_s, step_s=0.005, steps_left=10_000)  # 0.85 s > 0.5% of 50 s
    assert trial.affordable(cost_s, step_s=0.005, steps_left=40_000)  # 0.85 s <= 0.5% of 200 s
    assert not trial.affordable(0.001, step_s=0.005, steps_left=None)  # unknown length: plain setting


def test_an_xla_compilation_counts_as_several_retraces():
    assert trial.predicted_cost_s(1.0, 0.01, 11, compile_factor=6.0) > 5 * trial.predicted_cost_s(1.0, 0.01, 11)


def test_steps_left_counts_the_epochs_still_to_run():
    assert trial.steps_left({"steps": 100, "epochs": 5}, step_in_fit=30) == 470
    assert trial.steps_left({"steps": 100, "epochs": 5}, step_in_fit=30, initial_epoch=2) == 270
    assert trial.steps_left({"steps": None, "epochs": 5}, step_in_fit=30) is None


def test_the_budget_can_be_raised_for_tests_and_benchmarks(monkeypatch):
    monkeypatch.setenv(trial.BUDGET_ENV, "1")
    assert trial.affordable(0.85, step_s=0.005, steps_left=10_000)
