"""Whether a training script has anything spotfit can checkpoint: `fit`, `spotfit.loop`, an optimizer's apply.

spotfit checkpoints inside `keras.Model.fit`, `spotfit.loop` and a Keras optimizer's `apply` /
`apply_gradients` (runtime/apply_hook.py); a script that trains any other way (variables
assigned by hand, another framework) runs, but a preemption loses all of its work. `spotfit run`
reads the script's syntax tree (no import, no TensorFlow) and warns at once. An `apply` counts
only on something named like an optimizer (`optimizer.apply`, `self.d_optimizer.apply`), not
pandas' `df.apply`.
A call made from another module is not seen: the warning says so.

Example:

>>> checkpointable("model.fit(x, y, epochs=3)"), checkpointable("for s, b in spotfit.loop(m, d, 10): pass")
(True, True)
>>> checkpointable("optimizer.apply(grads, model.trainable_weights)"), checkpointable("df.apply(f)")
(True, False)
"""

from __future__ import annotations

import ast
from pathlib import Path

HOOKS = frozenset({"fit", "loop", "apply_gradients"})  # `<anything>.fit(...)`, `spotfit.loop(...)` / `loop(...)`


def checkpointable(source: str) -> bool:
    """True when the source calls `fit`, `loop`, `apply_gradients` or an optimizer's `apply` (or cannot be
    parsed: the runtime reports that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in HOOKS or (isinstance(func, ast.Attribute) and name == "apply"
                                 and "optim" in ast.unparse(func.value).lower()):
                return True
    return False


def warning_for(script: Path) -> str | None:
    """The warning `spotfit run` gives for this script, or None."""
    try:
        source = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # a missing script is the spec validation's error, not this check's
    if checkpointable(source):
        return None
    return (f"{script.name} calls neither `model.fit` nor `spotfit.loop` nor an optimizer's `apply`: nothing would "
            "be checkpointed, and a preemption would lose all of its work. Wrap a custom loop in `spotfit.loop(...)` "
            "(docs/resume.md); ignore this if another module makes the call.")
