"""spotfit: train Keras models on cloud spot GPUs at the lowest cost, without losing work.

The controller side (spec, planner, market, controller, CLI) never imports TensorFlow; the
runtime (`spotfit.runtime`) is the only part that does. The spec models (pydantic) load on
first use of `JobSpec` or `load_spec`, so that `spotfit status` starts without them, and
`spotfit.loop` (`runtime/training_loop.py`) on its first use. The version is `spotfit/version.py`'s.

>>> from spotfit import JobSpec
>>> JobSpec.__name__
'JobSpec'
"""

from typing import TYPE_CHECKING, Any

from spotfit.errors import SpotfitError
from spotfit.version import __version__

if TYPE_CHECKING:
    from spotfit.runtime.training_loop import loop
    from spotfit.spec.job import JobSpec, load_spec

__all__ = ["JobSpec", "SpotfitError", "__version__", "load_spec", "loop"]


def __getattr__(name: str) -> Any:
    if name in ("JobSpec", "load_spec"):
        from spotfit import spec

        return getattr(spec, name)
    if name == "loop":  # for custom training loops, in the runtime's process: loaded on first use
        from spotfit.runtime.training_loop import loop

        return loop
    raise AttributeError(f"module 'spotfit' has no attribute {name!r}")
