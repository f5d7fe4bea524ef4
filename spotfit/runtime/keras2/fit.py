"""Keras 2's `Model.fit`, instrumented as Keras 3's is (runtime/fit_call.py, with Keras 2's `Flavor`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tensorflow as tf
import tf_keras

from spotfit.runtime import apply_hook, fit_call
from spotfit.runtime.hooks import SpotfitHooks
from spotfit.runtime.keras2 import resume
from spotfit.runtime.keras2.internals import data_adapter
from spotfit.runtime.keras2.random import legacy_random_layers

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

_original_fit = tf_keras.Model.fit


class SpotfitCallback(SpotfitHooks, tf_keras.callbacks.Callback):
    """The main callback on Keras 2; a resume says once when random layers cannot resume exactly."""

    _said_random = False
    epoch_order_at_begin = False

    def on_train_begin(self, logs=None):
        resumed = self.resume_meta is not None
        super().on_train_begin(logs)
        if resumed and not SpotfitCallback._said_random and (layers := legacy_random_layers(self.model)):
            SpotfitCallback._said_random = True
            self.session.reporter.event(
                "random_not_exact", f"layers {layers} draw from TensorFlow's legacy stateful random ops, whose "
                "position no checkpoint can hold: from this resume their random draws differ from an "
                "uninterrupted run's; call tf.keras.backend.experimental.enable_tf_random_generator() at the "
                "script's top for an exact resume (docs/resume.md#keras-2)", layers=layers)


def advance_shared_data(model, call: dict) -> int:
    """A skipped call's epochs drawn from a `tf.data.Dataset` or `Sequence` that later calls share: batches drawn."""
    x = call.get("x")
    initial = int(call.get("initial_epoch") or 0)
    epochs = int(call.get("epochs") or 1)
    if epochs <= initial or not isinstance(x, (tf_keras.utils.Sequence, tf.data.Dataset)):
        return 0
    resume.arm(resume.Position(epoch=epochs - initial))
    try:
        handler = data_adapter.get_data_handler(
            x=x, y=call.get("y"), sample_weight=call.get("sample_weight"), batch_size=call.get("batch_size"),
            steps_per_epoch=call.get("steps_per_epoch"), initial_epoch=initial, epochs=epochs,
            shuffle=call.get("shuffle", True), class_weight=call.get("class_weight"),
            max_queue_size=call.get("max_queue_size", 10), workers=call.get("workers", 1),
            use_multiprocessing=call.get("use_multiprocessing", False), model=model,
            steps_per_execution=model._steps_per_execution)
        for _ in handler.enumerate_epochs():  # every epoch is before the position: nothing is yielded
            pass
    finally:
        resume.disarm()
    return int(handler.replayed_batches)


FLAVOR = fit_call.Flavor(_original_fit, tf_keras.callbacks.History, SpotfitCallback, resume.arm, resume.disarm,
                         advance_shared_data)


def install(session: Session) -> None:
    """Replace Keras 2's `Model.fit` for the rest of this process; its optimizers' `apply_gradients` count
    an unmodified `GradientTape` loop's steps (apply_hook.py)."""
    resume.install()
    apply_hook.install_keras2(session, tf_keras.Model, SpotfitCallback,
                             (tf_keras.optimizers.Optimizer, tf_keras.optimizers.legacy.Optimizer))
    fit: Any = fit_call.make_fit(session, FLAVOR)
    tf_keras.Model.fit = fit
