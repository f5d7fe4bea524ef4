"""What `auto` may spend measuring: trial steps cost at most a small share of the job (pure).

`xla: auto` and `mixed_precision: auto` measure the job's own steps under a second setting.
That costs a retrace (or an XLA compilation) and a few steps at a possibly slower setting, so a
trial runs only when its predicted cost stays under `budget_share()` (0.5%) of the job's
remaining training time; otherwise `auto` keeps the setting the plain script would have run,
and a job is never slower than its plain script. The prediction, from what the fit call has
measured so far: a retrace costs about the fit call's first step (tracing included) and the
trial's steps up to twice a measured step. `SPOTFIT_TRIAL_BUDGET` overrides the share
(tests and benchmarks use it to force a trial on a short job).
"""

from __future__ import annotations

from spotfit.core.arguments import env_number

BUDGET_SHARE = 0.005
BUDGET_ENV = "SPOTFIT_TRIAL_BUDGET"


def budget_share() -> float:
    """The share of the remaining training time that a trial may cost."""
    return env_number(BUDGET_ENV, BUDGET_SHARE, low_open=False, what="a share of the remaining training time",
                      unit="")


def predicted_cost_s(first_step_s: float, step_s: float, steps: int, compile_factor: float = 1.0) -> float:
    """Extra seconds a trial phase of `steps` steps costs: one retrace (x `compile_factor`), slower steps.

    >>> round(predicted_cost_s(first_step_s=0.8, step_s=0.005, steps=11), 3)
    0.85
    """
    return compile_factor * max(first_step_s - step_s, 0.0) + steps * step_s


def affordable(cost_s: float, step_s: float, steps_left: int | None, share: float | None = None) -> bool:
    """Whether `cost_s` stays within the budget share of `steps_left` steps of `step_s` (unknown length: no).

    >>> affordable(0.85, 0.005, 10_000), affordable(0.85, 0.060, 10_000), affordable(0.1, 0.005, None)
    (False, True, False)
    """
    if steps_left is None:
        return False
    return cost_s <= (budget_share() if share is None else share) * step_s * steps_left


def could_afford(steps: int, steps_left: int | None, share: float | None = None) -> bool:
    """Whether a trial of `steps` steps can fit the budget at all, before anything is measured.

    Its steps alone cost `steps` step times and a retrace only adds, while the budget is the share
    of `steps_left` step times: below `steps / share` steps left, no step time makes it affordable.

    >>> could_afford(11, 10_000), could_afford(11, 2_000), could_afford(11, None)
    (True, False, False)
    """
    if steps_left is None:
        return False
    return steps <= (budget_share() if share is None else share) * steps_left


def steps_left(params: dict, step_in_fit: int, initial_epoch: int = 0) -> int | None:
    """Steps this `fit` call still has to run, from Keras's callback params (None when unknown)."""
    steps, epochs = params.get("steps"), params.get("epochs")
    if not steps or not epochs:
        return None
    return max(steps * (epochs - initial_epoch) - step_in_fit, 0)
