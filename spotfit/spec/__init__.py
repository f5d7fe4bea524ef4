"""The job spec: `job` (JobSpec, load_spec), `base` (the strict section base), `file` (reading the untrusted YAML)
and `rules` (the `rules:` and `notify:` sections).

The package's names load on first use (PEP 562), so that importing one of its light modules
(`spotfit.spec.base`) does not load the rest: `from spotfit.spec import JobSpec, load_spec`
works as it did when this was one module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec as JobSpec
    from spotfit.spec.job import load_spec as load_spec
    from spotfit.spec.job import parse_spec as parse_spec

_MAIN = "spotfit.spec.job"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        return getattr(importlib.import_module(_MAIN), name)
    return module
