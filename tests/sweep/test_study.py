"""The Optuna adaptor: the median pruner's warm-up, as the docs state it (docs/sweeps.md, "Pruning")."""

from __future__ import annotations

from spotfit.sweep import study
from spotfit.sweep.spec import SweepSpec


def test_median_prunes_from_the_second_epoch_after_four_finished_trials(spotfit_home):
    spec = SweepSpec.model_validate({"job": "x.yaml", "params": {"lr": {"uniform": [0, 1]}}, "pruner": "median",
                                     "objective": {"metric": "val_accuracy"}})
    study.create("median", spec)
    s = study.load("median", spec)
    for _ in range(study.MEDIAN_STARTUP_TRIALS):
        number, _params = study.ask(s, spec)
        assert not study.report(s, number, 0.9, 1) and not study.report(s, number, 0.9, 2)
        study.tell(s, number, "complete", 0.9)
    number, _params = study.ask(s, spec)
    assert study.report(s, number, 0.1, 1) is False  # the first epoch never prunes
    assert study.report(s, number, 0.1, 2) is True


def test_a_tpe_sweep_past_its_random_start_up_trials_resumes_with_the_params_it_would_have_asked(spotfit_home):
    """Past Optuna's 10 random start-up trials TPE samples from the study's history: a study
    reloaded mid-way, as `spotfit sweep resume` does, asks the same params as one never left, and
    no trial asks an earlier trial's params (the end-to-end sweep test runs 6 trials, all random)."""
    spec = SweepSpec.model_validate({"job": "x.yaml", "objective": {"metric": "val_accuracy"}, "sampler": "tpe",
                                     "params": {"lr": {"log_uniform": [0.003, 0.5]}, "units": {"choice": [8, 16, 32]}}})

    def run(name: str, reload_at: int | None) -> list[dict]:
        study.create(name, spec)
        s = study.load(name, spec)
        asked = []
        for n in range(12):
            if n == reload_at:
                s = study.load(name, spec)
            number, params = study.ask(s, spec)
            assert number == n
            asked.append(params)
            # A value the params decide: TPE's later trials depend on every earlier one.
            value = 1.0 - abs(params["lr"] - 0.1) - params["units"] / 100
            study.tell(s, number, "pruned" if n % 3 == 1 else "complete", value)
        return asked

    straight, resumed = run("straight", None), run("resumed", 10)
    assert resumed == straight
    assert len({(p["lr"], p["units"]) for p in straight}) == 12
