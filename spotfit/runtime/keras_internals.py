"""The Keras internals the runtime patches or reads, checked against the installed Keras at import.

Exact resume, multi-worker `fit` and the custom-loop hook replace or call names under
`keras.src`, which Keras does not promise to keep. pyproject.toml pins Keras to the minor
version tested (`SUPPORTED`); this module checks, when the runtime's Keras-touching modules
are imported, that every such name exists, and fails with one line that names the supported
versions when one does not, instead of an `AttributeError` deep inside `fit`.

Attributes that Keras sets on instances (`TFEpochIterator._epoch_iterator`,
`TensorFlowTrainer._distribute_strategy`) cannot be checked on the class; the runtime's tests
reach them.

>>> missing([("keras.src.backend.tensorflow.trainer", "TFEpochIterator.reset")])
[]
>>> missing([("keras.src.backend.tensorflow.trainer", "NoSuchName")])
['keras.src.backend.tensorflow.trainer.NoSuchName']
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from spotfit.errors import UsageError
from spotfit.runtime import internal_names

SUPPORTED = "3.15"  # the `keras==3.15.*` pin of pyproject.toml's tf-cpu and tf-gpu extras

_TRAINER = "keras.src.backend.tensorflow.trainer"
# (module, attribute path): what runtime/resume.py, strategy.py, apply_hook.py and offer.py touch.
NAMES: tuple[tuple[str, str], ...] = (
    (_TRAINER, "TFEpochIterator"),  # replaced by resume.ResumingEpochIterator
    (_TRAINER, "TFEpochIterator.reset"),
    (_TRAINER, "TFEpochIterator.catch_stop_iteration"),
    (_TRAINER, "reduce_per_replica"),  # replaced by strategy.patch_keras
    (_TRAINER, "TensorFlowTrainer._maybe_symbolic_build"),  # replaced by strategy.patch_keras
    (_TRAINER, "TensorFlowTrainer._symbolic_build"),
    (_TRAINER, "_collective_all_reduce_multi_worker"),
    ("keras.src.tree", "map_structure"),
    ("keras.src.optimizers.base_optimizer", "BaseOptimizer.apply"),  # wrapped by apply_hook
    ("keras.src.backend.common.global_state", "get_global_attribute"),  # offer.py's trial on a copy
    ("keras.src.backend.common.global_state", "set_global_attribute"),
    ("keras.src.random.seed_generator", "GLOBAL_SEED_GENERATOR"),
)


class UnsupportedKeras(UsageError):
    """The installed Keras lacks a `keras.src` name the runtime patches: another version than tested."""


def missing(names: Iterable[tuple[str, str]] = NAMES) -> list[str]:
    """The dotted names among `names` that the installed Keras does not have."""
    return internal_names.missing(names)


def check(names: Iterable[tuple[str, str]] = NAMES) -> None:
    """Raise `UnsupportedKeras` (one line) when the installed Keras lacks any of `names`."""
    absent = missing(names)
    if absent:
        import keras

        raise UnsupportedKeras(
            f"Unsupported Keras {keras.__version__}: spotfit's runtime patches `{absent[0]}`"
            f"{f' (and {len(absent) - 1} more)' if len(absent) > 1 else ''}, which it does not have; "
            f"expected Keras {SUPPORTED}.x (the version spotfit is tested with, TensorFlow 2.21).",
            hint=f"Install the runtime's pinned versions: pip install 'keras=={SUPPORTED}.*' (or spotfit[tf-cpu]).")


check()

# The checked modules, imported here only: the runtime's other modules take them from this one
# (typed `Any`: the runtime assigns to their names).
trainer: Any = importlib.import_module(_TRAINER)
tree: Any = importlib.import_module("keras.src.tree")
base_optimizer: Any = importlib.import_module("keras.src.optimizers.base_optimizer")
global_state: Any = importlib.import_module("keras.src.backend.common.global_state")
seed_generator: Any = importlib.import_module("keras.src.random.seed_generator")
