"""The main callback on Keras 3: `SpotfitHooks` (hooks.py) on `keras.callbacks.Callback`.

`SpotfitCallback` is added to every Keras 3 fit call by the fit wrapper (fit_wrapper.py) and
driven by `spotfit.loop` (custom_loop.py) and the `GradientTape` hook (apply_hook.py) too.
"""

from __future__ import annotations

import keras

from spotfit.runtime.hooks import SpotfitHooks
from spotfit.runtime.hooks import restore_callbacks as restore_callbacks  # the fit wrapper's, beside the callback


class SpotfitCallback(SpotfitHooks, keras.callbacks.Callback):
    """The main callback on Keras 3 (`SpotfitHooks`)."""
