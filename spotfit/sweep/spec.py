"""The sweep file: which job to search over, the parameter space, the objective and the limits.

`load_sweep(path)` reads the YAML with the job spec's bounds (`spec.file.read_spec_file`),
rejects unknown keys with a did-you-mean and reports every problem as one `SpecError` line,
like the job spec (`spec.problems.spec_error`). docs/sweeps.md documents each field.

A parameter is a mapping of one distribution name to its arguments:
`{log_uniform: [lo, hi]}`, `{uniform: [lo, hi]}`, `{int_uniform: [lo, hi]}` or
`{choice: [a, b, ...]}`.

Example:

>>> s = SweepSpec.model_validate({"job": "spotfit.yaml", "params": {"lr": {"log_uniform": [1e-4, 0.1]}},
...                               "objective": {"metric": "val_accuracy"}})
>>> s.params["lr"].kind, s.sampler, s.pruner, s.trials, s.objective.mode
('log_uniform', 'tpe', 'none', 10, 'max')
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from spotfit.errors import SpecError
from spotfit.spec.base import _Section, quoted_path
from spotfit.spec.file import read_spec_file
from spotfit.spec.problems import spec_error
from spotfit.spec.sections import MAX_HOURS

DOCS = "docs/sweeps.md"
DISTRIBUTIONS = ("log_uniform", "uniform", "int_uniform", "choice")
MAX_TRIALS = 10_000
MAX_CHOICES = 1_000


class Param(BaseModel):
    """One searched parameter: a distribution and its arguments (bounds, or the choices)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["log_uniform", "uniform", "int_uniform", "choice"]
    values: tuple[Any, ...]

    @model_validator(mode="before")
    @classmethod
    def _one_distribution(cls, raw: Any) -> Any:
        if isinstance(raw, Param) or (isinstance(raw, dict) and set(raw) == {"kind", "values"}):
            return raw
        if not isinstance(raw, dict) or len(raw) != 1:
            raise ValueError("expected one distribution, e.g. {log_uniform: [0.0001, 0.1]} or {choice: [16, 32]}")
        [(kind, values)] = raw.items()
        if kind not in DISTRIBUTIONS:
            close = difflib.get_close_matches(str(kind), DISTRIBUTIONS, n=1, cutoff=0.6)
            guess = f" (did you mean `{close[0]}`?)" if close else ""
            raise ValueError(f"unknown distribution `{kind}`{guess}: expected one of {', '.join(DISTRIBUTIONS)}")
        if not isinstance(values, list):
            raise ValueError(f"expected a list after `{kind}:`, e.g. {{{kind}: [1, 2]}}")
        if kind == "choice":
            if not values:
                raise ValueError("expected at least one value in `choice`, received an empty list")
            if len(values) > MAX_CHOICES or not all(isinstance(v, (str, int, float, bool)) for v in values):
                raise ValueError(f"expected up to {MAX_CHOICES} numbers or strings in `choice`")
            return {"kind": kind, "values": tuple(values)}
        return {"kind": kind, "values": _bounds(kind, values)}


def _bounds(kind: str, values: list[Any]) -> tuple[Any, ...]:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if len(values) != 2 or not numbers or not all(abs(v) < float("inf") for v in values):
        raise ValueError(f"expected `{kind}: [low, high]`, two finite numbers")
    low, high = values
    if not low < high:
        raise ValueError(f"expected low < high in `{kind}: [low, high]`")
    if kind == "log_uniform" and low <= 0:
        raise ValueError("expected low > 0 in `log_uniform: [low, high]` (a logarithm needs positive bounds)")
    if kind == "int_uniform" and not all(isinstance(v, int) for v in values):
        raise ValueError("expected two integers in `int_uniform: [low, high]`")
    return (low, high)


class Objective(_Section):
    """The metric to optimize: a name the script's `fit` reports each epoch (`val_accuracy`)."""

    metric: str
    mode: Literal["max", "min"] = "max"


class SweepSpec(_Section):
    """A sweep: the base job, its parameter space, the objective, and the limits."""

    job: str = Field(description="the base job spec, relative to the sweep file")
    params: dict[str, Param] = Field(min_length=1)
    pass_as: Literal["args", "env"] = "args"
    objective: Objective
    trials: int = Field(10, ge=1, le=MAX_TRIALS)
    parallel: int = Field(1, ge=1, le=256)
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    pruner: Literal["none", "median", "asha"] = "none"
    budget_usd: float | None = Field(None, gt=0)
    deadline_h: float | None = Field(None, gt=0, le=MAX_HOURS)
    seed: int = Field(0, ge=0, lt=2**32)
    base_dir: str = Field(".", exclude=True)

    @field_validator("params", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name in value:
                if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
                    raise ValueError(f"expected parameter names of letters, digits, `_` and `-`, received {name!r}")
        return value

    @field_validator("sampler")
    @classmethod
    def _grid_is_finite(cls, value: str, info: ValidationInfo) -> str:
        ranged = [n for n, p in (info.data.get("params") or {}).items() if p.kind != "choice"]
        if value == "grid" and ranged:
            raise ValueError(f"expected only `choice` parameters with `sampler: grid`; `{ranged[0]}` is a range")
        return value

    @property
    def job_path(self) -> Path:
        return Path(self.base_dir) / self.job


def load_sweep(path: str | os.PathLike[str]) -> SweepSpec:
    """Read and validate a sweep file; raise `SpecError` with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"Sweep file not found: received {quoted_path(path)}, expected a YAML file.",
                        hint=f"Pass the sweep's YAML, e.g. `spotfit sweep sweep.yaml` (see {DOCS}).")
    raw = read_spec_file(path, "Sweep file")
    if not isinstance(raw, dict):
        kind = "an empty document" if raw is None else type(raw).__name__
        raise SpecError(f"Sweep file {path} must be a mapping of fields, received {kind}.",
                        hint=f"Start from the example in {DOCS}.")
    if "base_dir" in raw:
        raise SpecError(f"Unknown field `base_dir` in {path}: it is set by spotfit, not by the sweep file.",
                        hint="Remove `base_dir:`; `job:` is relative to the sweep file.")
    try:
        sweep = SweepSpec.model_validate({**raw, "base_dir": str(path.parent.resolve())})
    except ValidationError as exc:
        raise spec_error(exc, raw, str(path), root=SweepSpec, docs=DOCS) from None
    if not sweep.job_path.is_file():
        raise SpecError(f"Invalid `job` in {path}: received {quoted_path(sweep.job)}, expected a job spec relative to "
                        f"the sweep file (looked for {quoted_path(sweep.job_path)}).",
                        hint="Fix the path in `job:`.")
    return sweep
