"""The job spec: `job` (JobSpec, load_spec), `sections` (its sections), `base` (the strict section base), `file`
(reading the untrusted YAML), `problems` (a validation error as one line) and `rules` (`rules:` and `notify:`).

The package's names load on first use (PEP 562), so that importing one of its light modules
(`spotfit.spec.base`) does not load the rest: `from spotfit.spec import JobSpec, load_spec`
works as it did when this was one module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotfit.core.lazy import lazy_names

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec as JobSpec
    from spotfit.spec.job import load_spec as load_spec
    from spotfit.spec.job import parse_spec as parse_spec

__getattr__ = lazy_names(__name__, "spotfit.spec.job")
