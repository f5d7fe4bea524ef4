"""Whether a training script compiles, and has anything spotfit can checkpoint: `fit`, `spotfit.loop`,
an optimizer's apply.

A script with a syntax error would fail on every attempt, each one launched and billed:
`spotfit validate` and `spotfit run` compile it first (`check_syntax`, no import, no TensorFlow)
and refuse it with one line naming the file and line (exit 2).

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
>>> print(syntax_error("print(x", "train.py"))
train.py:1:6: '(' was never closed
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

from spotfit.errors import SpecError

HOOKS = frozenset({"fit", "loop", "apply_gradients"})  # `<anything>.fit(...)`, `spotfit.loop(...)` / `loop(...)`


def parse(source: str, filename: str = "<unknown>", tries: int = 3) -> ast.Module:
    """`ast.parse`, safe beside other threads that parse (a traceback printed on Python 3.11 parses too).

    CPython 3.11 keeps the AST builder's recursion counter in one place per interpreter: a thread that switches
    in mid-build (a garbage collection runs Python finalizers, which may let another thread in) and parses resets
    it, and the first parse fails with `SystemError: AST constructor recursion depth mismatch`
    (python/cpython#106905). With the collector paused the build runs no Python code and cannot be interleaved;
    a mismatch left over from another cause is retried.
    """
    for attempt in range(tries):
        collecting = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(source, filename)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == tries - 1:
                raise
        finally:
            if collecting:
                gc.enable()
    raise AssertionError("unreachable")


def checkpointable(source: str) -> bool:
    """True when the source calls `fit`, `loop`, `apply_gradients` or an optimizer's `apply` (or cannot be
    parsed: the runtime reports that)."""
    try:
        tree = parse(source)
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


def syntax_error(source: str | bytes, filename: str) -> str | None:
    """`FILE:LINE: what` of the first syntax error in the source, or None when it compiles."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError and TabError are SyntaxErrors
        # Never the line's text: `script: /etc/shadow` or a key file must not be echoed into a shared log.
        column = f":{exc.offset}" if exc.offset else ""
        return f"{exc.filename or filename}:{exc.lineno or '?'}{column}: {exc.msg}"
    return None


def check_syntax(script: Path, shown: str | None = None) -> None:
    """Raise `SpecError` (exit 2) when the script does not compile; an unreadable script is not this check's.

    `shown`: the script's name in the message (the spec's `script:`, relative to the spec's folder).
    """
    try:
        source = script.read_bytes()
    except OSError:
        return
    problem = syntax_error(source, shown or str(script))
    if problem is not None:
        raise SpecError(f"Invalid `script`: {problem}",
                        hint=f"Fix the syntax error (`python -m py_compile {script.name}` shows it), then run again.")
