"""spotfit: train Keras models on cloud spot GPUs at the lowest cost, without losing work.

The controller side (spec, planner, market, controller, CLI) never imports TensorFlow; the
runtime (`spotfit.runtime`) is the only part that does. The spec models (pydantic) load on
first use of `JobSpec` or `load_spec`, so that `spotfit status` starts without them.

>>> from spotfit import JobSpec
>>> JobSpec.__name__
'JobSpec'
"""

from typing import TYPE_CHECKING, Any

from spotfit.errors import SpotfitError
from spotfit.training_loop import loop

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec, load_spec

__all__ = ["JobSpec", "SpotfitError", "load_spec", "loop"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("JobSpec", "load_spec"):
        from spotfit import spec

        return getattr(spec, name)
    raise AttributeError(f"module 'spotfit' has no attribute {name!r}")
