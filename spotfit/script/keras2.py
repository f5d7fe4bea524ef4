"""Which Keras a script runs on: `training.keras: 3 | 2 | auto`, and the Keras 2 lines that decide `auto`.

spotfit runs scripts under Keras 3 (`keras==3.15.*`) or, for `tf.keras` 2 code, under Keras 2:
`tf-keras` with `TF_USE_LEGACY_KERAS=1`, so that the script's `tf.keras` is the Keras 2 code base
(runtime/keras2/). With `auto` (the default) spotfit reads the script (its syntax tree: no import,
no TensorFlow) before anything is launched, and picks Keras 2 when it has a line only `tf.keras`
2 runs:

- `ModelCheckpoint(..., period=N)`: Keras 3 has no `period` (`save_freq` in steps or "epoch");
- `fit_generator`, `evaluate_generator`, `predict_generator`: `fit`, `evaluate`, `predict` take
  generators in Keras 3;
- `keras.optimizers.legacy`: gone in Keras 3;
- `lr=` to a Keras optimizer: `learning_rate=` in Keras 3;
- `save_weights` / `ModelCheckpoint(save_weights_only=True)` to a path that does not end in
  `.weights.h5`: Keras 3 refuses it;
- `import tf_keras`, or `TF_USE_LEGACY_KERAS` set in the script: it asks for Keras 2 itself.

`spotfit validate` and `spotfit run` say the choice and why in one line (`choice_line`); a
script that keeps such lines under `training.keras: 3` gets a warning naming them with their
Keras 3 spelling (`warning_for`). On Keras 2 spotfit applies no dtype policy, XLA or export of
its own: a spec that asks for one is refused before the launch (`keras2_conflict`); strategies
(`tf.distribute`) are the attempt's on both.

Example:

>>> [r.line for r in reasons("cb = tf.keras.callbacks.ModelCheckpoint('m-{epoch:02d}.h5', save_weights_only=True, "
...                          "period=1)")]
[1, 1]
>>> reasons("model.save_weights('w.weights.h5'); opt = keras.optimizers.Adam(learning_rate=1e-3)")
[]
>>> decide("auto", "model.fit_generator(gen, epochs=2)").version, decide("auto", "model.fit(x, y)").version
('2', '3')
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotfit.errors import SpecError

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
    from spotfit.script.scriptcheck import parse

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


@dataclass(frozen=True)
class KerasChoice:
    """The Keras a script runs on ("2" or "3"), why, and the Keras-2-only lines found."""

    version: str
    why: str
    found: tuple[Reason, ...] = ()


def decide(setting: str, source: str) -> KerasChoice:
    """`training.keras` (`auto`, `2` or `3`) applied to a script's source."""
    found = tuple(reasons(source))
    if setting in ("2", "3"):
        return KerasChoice(setting, f"`training.keras: {setting}` in the spec", found)
    if found:
        return KerasChoice("2", f"`training.keras: auto` found Keras-2-only code: {_listed(found)}", found)
    return KerasChoice("3", "`training.keras: auto` found no Keras-2-only code", found)


def choose(setting: str, script: Path) -> KerasChoice:
    """`decide` on the script's file; an unreadable script gets Keras 3 by `auto` (its own check reports it)."""
    try:
        source = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        source = ""
    return decide(setting, source)


def choice_line(choice: KerasChoice, script_name: str) -> str:
    """The one line `validate` and `run` say: which Keras, and why."""
    if choice.version == "2":
        return (f"{script_name} runs on Keras 2 (tf.keras from tf-keras, TF_USE_LEGACY_KERAS=1): {choice.why}; "
                "`training.keras: 3` once it is ported")
    return f"{script_name} runs on Keras 3: {choice.why}"


def warning_for(choice: KerasChoice, script_name: str) -> str | None:
    """The warning for Keras 2 code that will run under Keras 3 (`training.keras: 3`), or None."""
    if choice.version != "3" or not choice.found:
        return None
    return (f"{script_name} has tf.keras 2 code, which fails under Keras 3 when the line runs: "
            f"{_listed(choice.found)}. Port those lines as each says, or set `training.keras: 2` "
            "(or `auto`) to run it on Keras 2.")


def keras2_conflict(spec: Any) -> SpecError | None:
    """A setting of the job spec that spotfit cannot honour on Keras 2 (its speed-ups, strategies and
    exports are Keras 3's), or None."""
    training = spec.training
    asked = [(f"training.{name}", getattr(training, name)) for name in ("mixed_precision", "xla")
             if getattr(training, name) != "auto"]
    asked += [("export", "a section")] if spec.export is not None else []
    if not asked:
        return None
    setting, value = asked[0]
    return SpecError(
        f"Invalid `{setting}` for Keras 2: received {value!r}, expected it left out or at its default; "
        f"{spec.script_path.name} runs on Keras 2, where spotfit applies no dtype policy, XLA or export of its own "
        "(docs/resume.md#keras-2).",
        hint="Set it in the script (tf.keras.mixed_precision.set_global_policy, jit_compile=, model.save), or "
             "port the script and set `training.keras: 3`.")


def _listed(found: tuple[Reason, ...]) -> str:
    return "; ".join(str(r) for r in found[:4]) + (f"; and {len(found) - 4} more" if len(found) > 4 else "")
