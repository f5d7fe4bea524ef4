"""The script's own dtype policy and `jit_compile` against the spec's `training` settings.

A script runs as written unless the spec asks otherwise:

- `training.mixed_precision: auto` and `training.xla: auto` (the defaults) apply nothing that
  changes numerics: the script's own `keras.mixed_precision.set_global_policy(...)` (or none,
  float32) and its own `compile(jit_compile=...)` run. `auto` measures the faster settings on
  the side and offers them (offer.py). With `training.auto_apply: true`, `auto` applies what
  the hardware and its measurement pick, where the script has not chosen itself: a policy the
  script sets, or a `jit_compile` it passes, is kept.
- An explicit setting (`off`, `mixed_float16`, `mixed_bfloat16`; `xla: on|off`) wins over the
  script's; where the script chose otherwise, a `spec_overrides` event names both.

`ScriptChoices` watches the script: it wraps Keras's policy setters (the spec's policy stays
when it is explicit) and `Model.compile` (to learn whether the script passed `jit_compile`).
`fallback_allowed` says when a failure before the first training step is the applied policy's
doing, so that the attempt runs the script again in place under the script's own policy
(runtime/main.py) instead of failing and billing a retry.
"""

from __future__ import annotations

import functools
import inspect
import traceback
from collections.abc import Callable

import keras

from spotfit.runtime import precision

_COMPILE_OWNER = next(k for k in keras.Model.__mro__ if "compile" in vars(k))  # keras.src's Trainer
_original_compile = keras.Model.compile
_COMPILE_SIGNATURE = inspect.signature(_original_compile)
_POLICY_SETTERS = ((keras.mixed_precision, "set_global_policy"), (keras.mixed_precision, "set_dtype_policy"),
                   (keras.config, "set_dtype_policy"))
# Words of a failure that a dtype policy caused (mixed dtypes in one op).
_DTYPE_WORDS = ("bfloat16", "float16", "half")


def _policy_name(policy) -> str:
    return policy if isinstance(policy, str) else str(getattr(policy, "name", policy))


def script_jit(model) -> bool | None:
    """The `jit_compile` the script passed to `compile` (None: it did not pass one)."""
    value = getattr(model, "_spotfit_script_jit", None)
    return value if isinstance(value, bool) else None


class ScriptChoices:
    """What the script chose, and the spec's settings that win over it.

    `forced_policy`: the policy an explicit `training.mixed_precision` sets (None: the script's
    own, or auto's). `on_script_policy(name)`: called when the script sets a policy that is
    kept (auto stops measuring then).
    """

    def __init__(self, reporter, forced_policy: str | None, on_script_policy: Callable[[str], None] | None = None):
        self.reporter = reporter
        self.forced_policy = forced_policy
        self.on_script_policy = on_script_policy
        self.script_policy: str | None = None  # the last policy the script set
        self.applied_policy: str | None = None  # the policy spotfit set in place of the script's

    def install(self) -> None:
        for module, name in _POLICY_SETTERS:
            setattr(module, name, self._set_policy)

        @functools.wraps(_original_compile)  # its name, doc and the markers Keras reads on it
        def compile(model, *args, **kwargs):
            bound = _COMPILE_SIGNATURE.bind(model, *args, **kwargs)
            model._spotfit_script_jit = bound.arguments.get("jit_compile", "auto")
            return _original_compile(model, *args, **kwargs)

        # On the class that defines it (Keras's Trainer), not on `keras.Model`: Keras tells a custom
        # `compile` by `model.__class__.compile != Trainer.compile` and then skips compiling a model
        # `load_model` restores; patched on `keras.Model`, every model would look custom.
        _COMPILE_OWNER.compile = compile

    def _set_policy(self, policy) -> None:
        name = _policy_name(policy)
        self.script_policy = name
        forced = {None: None, "off": "float32"}.get(self.forced_policy, self.forced_policy)
        if forced is not None and name != forced:
            self.reporter.event("spec_overrides", f"the script sets dtype policy {name}; training.mixed_precision: "
                                f"{self.forced_policy} wins", setting="mixed_precision", script=name,
                                spec=self.forced_policy)
            return
        self.applied_policy = None  # the script's own from here on
        precision.set_policy(name)
        if self.on_script_policy is not None:
            self.on_script_policy(name)

    def fallback_allowed(self, exc: BaseException, stepped: bool, multi_worker: bool) -> bool:
        """Whether a failure is the applied policy's, early enough to run the script again in place.

        Only before the attempt's first training step (nothing to lose), on one worker, and when
        the error names a reduced-precision dtype.
        """
        if self.applied_policy is None or stepped or multi_worker:
            return False
        text = "".join(traceback.format_exception_only(type(exc), exc))
        return any(word in text for word in _DTYPE_WORDS)

    def fall_back(self) -> str:
        """Drop the applied policy: the script runs again under its own (float32 unless it sets one)."""
        applied, self.applied_policy, self.forced_policy = self.applied_policy, None, None
        keras.backend.clear_session()  # layer names and the dtype policy start afresh, as in a new process
        precision.set_policy("float32")
        return applied or ""


def xla_applies(session, model) -> bool:
    """Whether the XLA setting of the spec replaces the script's `jit_compile` for this model.

    `auto` (with `auto_apply`) keeps a `jit_compile` the script passed; `on`/`off` win over it.
    """
    own = script_jit(model)
    if own is None:
        return True
    mode = session.config.xla
    if mode == "auto":
        if not getattr(model, "_spotfit_jit_said", False):
            model._spotfit_jit_said = True
            session.reporter.event("xla", f"XLA {'on' if own else 'off'}: set by the script (compile(jit_compile="
                                   f"{own})), kept", choice="on" if own else "off", reason="script")
        return False
    if own != (mode == "on") and not getattr(model, "_spotfit_jit_said", False):
        model._spotfit_jit_said = True
        session.reporter.event("spec_overrides", f"the script compiles with jit_compile={own}; training.xla: "
                               f"{mode} wins", setting="xla", script=own, spec=mode)
    return True
