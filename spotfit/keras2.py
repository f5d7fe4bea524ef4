"""Keras 2 code in a training script: the lines that only `tf.keras` 2 runs, read from the syntax tree.

spotfit runs scripts under Keras 3 (`keras==3.15.*`, the `tf-cpu` / `tf-gpu` extras). Much
TensorFlow 2.x code was written for `tf.keras` 2 and uses what Keras 3 removed; such a script
fails on its first launch, billed. `spotfit validate` and `spotfit run` read the script (no
import, no TensorFlow) and name each such line before anything is launched:

- `ModelCheckpoint(..., period=N)`: Keras 3 has no `period` (`save_freq` in steps or "epoch");
- `fit_generator`, `evaluate_generator`, `predict_generator`: `fit`, `evaluate`, `predict` take
  generators in Keras 3;
- `keras.optimizers.legacy`: gone in Keras 3;
- `lr=` to a Keras optimizer: `learning_rate=` in Keras 3;
- `save_weights` / `ModelCheckpoint(save_weights_only=True)` to a path that does not end in
  `.weights.h5`: Keras 3 refuses it;
- `import tf_keras`, or `TF_USE_LEGACY_KERAS` set in the script: it asks for Keras 2 itself.

Keras 2 is not a runtime spotfit offers yet (issue 48: `training.keras: 2`, with `tf-keras`); until
then the script is refused with these lines and the Keras 3 spelling of each.

Example:

>>> [r.line for r in reasons("cb = tf.keras.callbacks.ModelCheckpoint('m-{epoch:02d}.h5', save_weights_only=True, "
...                          "period=1)")]
[1, 1]
>>> reasons("model.save_weights('w.weights.h5'); opt = keras.optimizers.Adam(learning_rate=1e-3)")
[]
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl"})
GENERATOR_METHODS = {"fit_generator": "fit", "evaluate_generator": "evaluate", "predict_generator": "predict"}


@dataclass(frozen=True)
class Reason:
    """One Keras-2-only line: where, what, and how Keras 3 spells it."""

    line: int
    what: str
    instead: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what} ({self.instead})"


def reasons(source: str) -> list[Reason]:
    """The Keras-2-only uses in `source`, in line order (none when it does not parse: that is another check's)."""
    from spotfit.scriptcheck import parse

    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[Reason] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += _call(node)
        elif isinstance(node, ast.Attribute) and node.attr == "legacy" and ast.unparse(node.value).endswith(
                "optimizers"):
            found.append(Reason(node.lineno, "`keras.optimizers.legacy`", "Keras 3 has one set of optimizers: "
                                "`keras.optimizers.Adam`"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "tf_keras" or n.startswith("tf_keras.") for n in names):
                found.append(Reason(node.lineno, "`import tf_keras`", "the Keras 2 package: use `keras` 3"))
        elif isinstance(node, ast.Constant) and node.value == "TF_USE_LEGACY_KERAS":
            found.append(Reason(node.lineno, "`TF_USE_LEGACY_KERAS`", "asks TensorFlow for Keras 2: leave it unset"))
    return sorted(set(found), key=lambda r: (r.line, r.what))


def _call(node: ast.Call) -> list[Reason]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    out: list[Reason] = []
    if name in GENERATOR_METHODS:
        out.append(Reason(node.lineno, f"`{name}`", f"`{GENERATOR_METHODS[name]}` takes the generator in Keras 3"))
    if name == "ModelCheckpoint":
        if "period" in keywords:
            out.append(Reason(node.lineno, "`ModelCheckpoint(period=...)`",
                              "Keras 3 has `save_freq='epoch'` (the default) or a number of steps"))
        path = keywords.get("filepath", node.args[0] if node.args else None)
        weights_only = keywords.get("save_weights_only")
        if isinstance(weights_only, ast.Constant) and weights_only.value is True and _not_weights_h5(path):
            out.append(Reason(node.lineno, "a weights file not ending in `.weights.h5`",
                              "Keras 3 refuses it: name it `....weights.h5`"))
    if name == "save_weights" and _not_weights_h5(node.args[0] if node.args else keywords.get("filepath")):
        out.append(Reason(node.lineno, "`save_weights` to a path not ending in `.weights.h5`",
                          "Keras 3 refuses it: name it `....weights.h5`"))
    if name in OPTIMIZERS and "lr" in keywords:
        out.append(Reason(node.lineno, f"`{name}(lr=...)`", "Keras 3 spells it `learning_rate=`"))
    return out


def _not_weights_h5(path: ast.expr | None) -> bool:
    """A literal path (or f-string) that does not end in `.weights.h5`; False when it cannot be read."""
    if isinstance(path, ast.Constant) and isinstance(path.value, str):
        return not path.value.endswith(".weights.h5")
    if isinstance(path, ast.JoinedStr) and path.values and isinstance(path.values[-1], ast.Constant):
        return not str(path.values[-1].value).endswith(".weights.h5")
    return False


def warning_for(script: Path) -> str | None:
    """The warning `spotfit validate` and `spotfit run` give for Keras 2 code in the script, or None."""
    try:
        source = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found = reasons(source)
    if not found:
        return None
    listed = "; ".join(str(r) for r in found[:4]) + (f"; and {len(found) - 4} more" if len(found) > 4 else "")
    return (f"{script.name} has tf.keras 2 code, which fails under the Keras 3 spotfit runs when the line runs: "
            f"{listed}. Port those lines as each says (spotfit does not run Keras 2, `tf-keras`, yet).")
