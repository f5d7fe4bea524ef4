"""The Keras 2 (`tf_keras`) internals the runtime patches, checked against the installed `tf_keras` at import.

As runtime/keras_internals.py does for Keras 3: pyproject.toml pins `tf-keras` to the minor
version tested (`SUPPORTED`), and a missing name fails with one line naming it.
"""

from __future__ import annotations

import importlib
from typing import Any

from spotfit.errors import UsageError
from spotfit.runtime import internal_names

SUPPORTED = "2.21"  # the `tf-keras==2.21.*` pin: the Keras 2 of TensorFlow 2.21

_ADAPTER = "tf_keras.src.engine.data_adapter"
_TRAINING = "tf_keras.src.engine.training"
# (module, attribute path): what resume.py and fit.py touch.
NAMES: tuple[tuple[str, str], ...] = (
    (_ADAPTER, "DataHandler"),  # replaced by resume.ResumingDataHandler (get_data_handler builds it)
    (_ADAPTER, "DataHandler._truncate_execution_to_epoch"),
    (_ADAPTER, "DataHandler._infer_steps"),
    (_ADAPTER, "DistributedDataset"),
    (_ADAPTER, "get_data_handler"),
    (_TRAINING, "Model._maybe_load_initial_counters_from_ckpt"),  # replaced by resume.install
    (_TRAINING, "Model.fit"),  # replaced by fit.install
)


def check() -> None:
    """Raise one `UsageError` line when `tf_keras` is missing or lacks a patched name."""
    hint = f"Install it: pip install --no-deps 'tf-keras=={SUPPORTED}.*' (docs/resume.md#keras-2)."
    try:
        import tf_keras
    except ImportError:
        raise UsageError("Keras 2 is not installed: the job runs on Keras 2 (`training.keras`), which needs the "
                         f"`tf-keras` package ({SUPPORTED}.x, matching TensorFlow 2.21).", hint=hint) from None
    absent = internal_names.missing(NAMES)
    if absent:
        raise UsageError(f"Unsupported tf-keras {tf_keras.__version__}: spotfit's runtime patches `{absent[0]}`, "
                         f"which it does not have; expected tf-keras {SUPPORTED}.x.", hint=hint)


check()

tf_keras: Any = importlib.import_module("tf_keras")
data_adapter: Any = importlib.import_module(_ADAPTER)
training: Any = importlib.import_module(_TRAINING)
