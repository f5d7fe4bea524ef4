"""spotfit: train Keras models on cloud spot GPUs at the lowest cost, without losing work.

The controller side (spec, planner, market, controller, CLI) never imports TensorFlow; the
runtime (`spotfit.runtime`) is the only part that does.
"""

from spotfit.errors import SpotfitError
from spotfit.spec import JobSpec, load_spec
from spotfit.training_loop import loop

__all__ = ["JobSpec", "SpotfitError", "load_spec", "loop"]
__version__ = "0.1.0"
