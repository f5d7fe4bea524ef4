"""Keras 2 (`tf.keras` from `tf-keras`, under `TF_USE_LEGACY_KERAS=1`): exact resume for `fit`.

A job whose script is `tf.keras` 2 code (`training.keras: 2`, or `auto` on such a script:
spotfit/script/keras2.py) runs with `TF_USE_LEGACY_KERAS=1`, so the script's `tf.keras` is the Keras 2
code base of the `tf_keras` package. The runtime then instruments `tf_keras`'s `Model.fit` as it
does Keras 3's (runtime/fit_wrapper.py, with this package's `Flavor`): the same main callback
(instrument.SpotfitHooks on Keras 2's `Callback`), checkpoints, fit-call bookkeeping and callback
state, and a data position put back by drawing the batches of the interrupted call again
(resume.py). What Keras 2 internals it touches is checked at import (internals.py).

Unmodified `GradientTape` loops are counted at Keras 2's `apply_gradients` (apply_hook.py), and
the attempt's strategy is created as on Keras 3 (`tf.distribute`). Not on Keras 2 (said before the
launch, spotfit/script/keras2.py, or in events): spotfit's own dtype policy, XLA and offers, its
TensorBoard log, exports, `spotfit.loop`, the replay of a reshuffling validation set, and the
state of the legacy stateful random ops that Keras 2 layers use by default (random.py).
"""
