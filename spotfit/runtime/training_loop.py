"""`spotfit.loop`: exact resume for custom training loops (`tf.GradientTape`), in a few lines.

`model.fit` is instrumented without any change to the script; a custom loop has no hooks, so
it asks for the steps instead of counting them itself:

    for step, (x, y) in spotfit.loop(model, train_ds, steps=1000, optimizer=optimizer):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))

Under `spotfit run`, the first iteration restores the model's and the optimizer's variables,
NumPy's and Python's RNG state and the data position (the batches before the checkpoint are
drawn again and discarded, so a reshuffling `tf.data` pipeline is at the same place in the same
order); each step is reported, saved periodically, and on a preemption notice the loop saves
the step just finished and ends the process with the "preempted" exit code. `step` counts the
steps of this loop from 0 (the job's global step adds the steps of earlier loops and `fit`
calls). Run as a plain script, `loop` only yields the steps.

`data` is any iterable of batches; it is iterated again from the start whenever it runs out
(an epoch). A Python generator cannot start again: pass a function that returns a new one.
What this does not restore: the state of other Python objects the loop body changes (keep it
in the model, the optimizer or `keras.Variable`s), and TensorFlow's global random ops
(`tf.random.*` without a seed generator): use Keras layers' or `keras.random.SeedGenerator`
randomness, which lives in the model's variables.

Example (a plain run: no checkpoints, the steps and the data in order):

>>> [(step, batch) for step, batch in loop(None, [10, 20, 30], steps=4)]
[(0, 10), (1, 20), (2, 30), (3, 10)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from spotfit.runtime.loop_data import batches


def loop(model: Any, data: Iterable | Callable[[], Iterable], steps: int,
         optimizer: Any = None) -> Iterator[tuple[int, Any]]:
    """Yield `(step, batch)` for `steps` steps; under `spotfit run`, restore and checkpoint.

    `optimizer`: the optimizer the loop applies gradients with (default: `model.optimizer`).
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"Invalid value for argument `steps`. Received: steps={steps!r}. "
                         "Expected a non-negative integer (the number of training steps).")
    from spotfit.runtime import custom_loop

    session = custom_loop.active_session()
    if session is None:
        return batches(data, steps, start=0)
    return custom_loop.run(session, model, data, steps, optimizer)
