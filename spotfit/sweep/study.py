"""The one place that imports Optuna: the sweep's study, its sampler and pruner, ask and tell.

The study lives where the job state lives, through Optuna's RDB storage (`storage_url`): in
`optuna.db` beside a SQLite state DB (default `$SPOTFIT_HOME/optuna.db`), or in the state's
PostgreSQL database (`SPOTFIT_STATE_URL`), one study per sweep, named by the sweep id.
Samplers are not stored by Optuna: each process that opens the study builds the sampler again
from the sweep file (seeded). The median pruner is Optuna's;
ASHA is spotfit's own (`asha.py`), because it pauses trials on a checkpoint.

Optuna is an optional dependency (the `sweep` extra), loaded on first use with an install hint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotfit.errors import UsageError
from spotfit.host.home import state_target
from spotfit.state.dialect import POSTGRES_SCHEMES, is_postgres

if TYPE_CHECKING:
    import optuna

    from spotfit.sweep.spec import SweepSpec

MEDIAN_STARTUP_TRIALS = 4  # the median pruner compares with this many finished trials first
MEDIAN_WARMUP_EPOCHS = 1  # and never prunes on the first epoch's value (epoch 2 on)


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise UsageError("Sweeps need Optuna, which is not installed.",
                         hint="Install the sweep extra: pip install 'spotfit[sweep]'.") from None
    optuna.logging.set_verbosity(logging.WARNING)
    return optuna


def storage_url() -> str:
    """Optuna's storage (a SQLAlchemy URL): the state's PostgreSQL through psycopg 3, the driver the
    state itself uses, else `optuna.db` beside the state DB file.

    >>> import os
    >>> os.environ["SPOTFIT_STATE_URL"] = "postgresql://team@db.internal/spotfit?options=-csearch_path%3Dml"
    >>> storage_url()
    'postgresql+psycopg://team@db.internal/spotfit?options=-csearch_path%3Dml'
    >>> os.environ["SPOTFIT_STATE_URL"] = "sqlite:////var/lib/spotfit/state.db"
    >>> storage_url()
    'sqlite:////var/lib/spotfit/optuna.db'
    >>> del os.environ["SPOTFIT_STATE_URL"]
    """
    state = state_target()
    if is_postgres(state):
        scheme = next(s for s in POSTGRES_SCHEMES if state.startswith(s))
        return "postgresql+psycopg://" + state[len(scheme):]
    return f"sqlite:///{Path(state).parent / 'optuna.db'}"


def distributions(spec: SweepSpec) -> dict[str, Any]:
    """The sweep's parameters as Optuna distributions."""
    d = _optuna().distributions
    out: dict[str, Any] = {}
    for name, p in spec.params.items():
        if p.kind == "choice":
            out[name] = d.CategoricalDistribution(list(p.values))
        elif p.kind == "int_uniform":
            out[name] = d.IntDistribution(p.values[0], p.values[1])
        else:
            out[name] = d.FloatDistribution(float(p.values[0]), float(p.values[1]), log=p.kind == "log_uniform")
    return out


def grid_size(spec: SweepSpec) -> int | None:
    """How many points a grid sweep has (None for the other samplers)."""
    if spec.sampler != "grid":
        return None
    size = 1
    for p in spec.params.values():
        size *= len(p.values)
    return size


def _sampler(spec: SweepSpec, asked: int = 0) -> Any:
    """The sweep's sampler, seeded with the sweep's seed and the number of trials asked so far.

    Samplers keep no state in the study: one built afresh by a resumed sweep controller with
    the sweep's seed alone would hand out the first trials' params again. Seeding by the count
    keeps a sweep reproducible and a resumed one new. The grid sampler keeps the sweep's seed:
    it orders the grid with it, and takes the next point from the study's trials.
    """
    samplers = _optuna().samplers
    if spec.sampler == "grid":  # the seed orders the grid; the study's trials say which points are taken
        return samplers.GridSampler({n: list(p.values) for n, p in spec.params.items()}, seed=spec.seed)
    seed = (spec.seed + asked * 1_000_003) % 2**32
    if spec.sampler == "random":
        return samplers.RandomSampler(seed=seed)
    return samplers.TPESampler(seed=seed)


def _pruner(spec: SweepSpec) -> Any:
    pruners = _optuna().pruners
    if spec.pruner == "median":
        # Epochs are reported from 1: Optuna prunes at a step >= n_warmup_steps.
        return pruners.MedianPruner(n_startup_trials=MEDIAN_STARTUP_TRIALS, n_warmup_steps=MEDIAN_WARMUP_EPOCHS + 1)
    return pruners.NopPruner()  # asha decides in asha.py; "none" never prunes


def create(sweep_id: str, spec: SweepSpec) -> None:
    _optuna().create_study(study_name=sweep_id, storage=storage_url(),
                           direction="maximize" if spec.objective.mode == "max" else "minimize")


def load(sweep_id: str, spec: SweepSpec) -> optuna.Study:
    study: optuna.Study = _optuna().load_study(study_name=sweep_id, storage=storage_url(), sampler=_sampler(spec),
                                               pruner=_pruner(spec))
    return study


def ask(study: optuna.Study, spec: SweepSpec) -> tuple[int, dict[str, Any]]:
    """A new trial: its number and its params (recorded in the study before this returns)."""
    study.sampler = _sampler(spec, len(study.get_trials(deepcopy=False)))
    trial = study.ask(distributions(spec))
    return trial.number, dict(trial.params)


def open_trials(study: optuna.Study) -> dict[int, dict[str, Any]]:
    """Trials still running in the study: number -> params."""
    running = _optuna().trial.TrialState.RUNNING
    return {t.number: dict(t.params) for t in study.get_trials(deepcopy=False, states=(running,))}


def report(study: optuna.Study, number: int, value: float, epoch: int) -> bool:
    """Record an epoch's objective value; True when the study's pruner says to prune the trial."""
    optuna = _optuna()
    trial_id = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
    trial = optuna.trial.Trial(study, trial_id)
    if epoch not in study._storage.get_trial(trial_id).intermediate_values:
        trial.report(value, epoch)
    return bool(trial.should_prune())


def tell(study: optuna.Study, number: int, outcome: str, value: float | None = None) -> None:
    """Close a trial: `complete` with its value, `pruned`, or `fail`; a closed trial stays as it is."""
    states = _optuna().trial.TrialState
    state = {"complete": states.COMPLETE, "pruned": states.PRUNED, "fail": states.FAIL}[outcome]
    trial_id = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
    if study._storage.get_trial(trial_id).state.is_finished():
        return
    study.tell(number, value if outcome == "complete" else None, state=state)


def figures_html(sweep_id: str, spec: SweepSpec) -> list[tuple[str, str]]:
    """(title, HTML div) of the optimization history and the parameter importances; plotly.js inline once."""
    optuna = _optuna()
    study = load(sweep_id, spec)
    out: list[tuple[str, str]] = []
    include: str | bool = "inline"  # plotly.js once, in the first figure: the page needs no network
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    plots = [("Optimization history", optuna.visualization.plot_optimization_history),
             ("Parameter importances", optuna.visualization.plot_param_importances)]
    for title, plot in plots:
        if title == "Parameter importances" and len(complete) < 2:
            out.append((title, f"<p>not available: {len(complete)} completed trial(s), importances need two</p>"))
            continue
        try:
            figure = plot(study)
        except (ValueError, RuntimeError) as exc:  # e.g. importances of a parameter that never varied
            out.append((title, f"<p>not available: {exc}</p>"))
            continue
        out.append((title, figure.to_html(full_html=False, include_plotlyjs=include)))
        include = False
    return out
