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
