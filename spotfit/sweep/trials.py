"""A trial's job: the sweep's base job spec with the trial's parameters, as an ordinary job spec.

`pass_as: args` appends `--NAME VALUE` for each parameter to the job's `args`; `pass_as: env`
sets `SPOTFIT_PARAM_<NAME>` (upper case, `-` as `_`). The job is named after the sweep and the
trial number, so that a sweep controller that died between recording a trial and its job finds
the job again by name instead of starting a second one.

Example:

>>> from spotfit.spec.job import JobSpec
>>> base = JobSpec.model_validate({"name": "digits", "script": "train.py", "args": ["--epochs", "4"]})
>>> spec = trial_spec(base, "digits-sweep-ab12cd", 3, {"lr": 0.01, "units": 32}, "args", None, None)
>>> spec.name, spec.args
('digits-sweep-ab12cd-t003', ['--epochs', '4', '--lr', '0.01', '--units', '32'])
>>> trial_spec(base, "s", 0, {"batch-size": 64}, "env", None, None).env
{'SPOTFIT_PARAM_BATCH_SIZE': '64'}
"""

from __future__ import annotations

from typing import Any

from spotfit.spec.job import JobSpec


def job_name(sweep_id: str, number: int) -> str:
    return f"{sweep_id}-t{number:03d}"


def param_text(value: Any) -> str:
    """A parameter as the script reads it: `0.01`, `32`, `relu`, `true`."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def trial_spec(base: JobSpec, sweep_id: str, number: int, params: dict[str, Any], pass_as: str,
               deadline_h: float | None, budget_usd: float | None) -> JobSpec:
    """The job spec of trial `number`: the base spec, renamed, with the params.

    A trial that completes exports itself when the base has `export` (`publish.py` then
    publishes the best one under the base's name). `deadline_h` applies when the base has
    none; `budget_usd` (what is left of the sweep's budget) caps the trial's own.
    """
    spec = base.model_copy(deep=True)
    spec.name = job_name(sweep_id, number)
    if pass_as == "args":
        spec.args = [*spec.args, *(x for n, v in params.items() for x in (f"--{n}", param_text(v)))]
    else:
        spec.env = {**spec.env, **{f"SPOTFIT_PARAM_{n.upper().replace('-', '_')}": param_text(v)
                                   for n, v in params.items()}}
    if spec.deadline_h is None and deadline_h is not None:
        spec.deadline_h = deadline_h
    if budget_usd is not None:
        spec.budget_usd = min(budget_usd, spec.budget_usd or budget_usd)
    return spec
