"""A script that builds its own `MirroredStrategy` or `MultiWorkerMirroredStrategy` gets the attempt's.

The runtime runs the script inside its strategy's scope (strategy.py), so that an unmodified
script trains distributed. A script that creates a strategy itself, as the TensorFlow and
Keras guides show (`strategy = tf.distribute.MirroredStrategy()` then `with strategy.scope():`),
would then enter a second strategy inside the first, which TensorFlow refuses ("Mixing
different tf.distribute.Strategy objects"); and a second `MultiWorkerMirroredStrategy` cannot
be created in one process at all. So while the script runs, constructing either class returns
the attempt's strategy, with a `strategy_adopted` event: the script's `strategy.scope()` is
then the scope it already runs in, `num_replicas_in_sync` is the attempt's, and checkpoints,
resume and stopping work as for any script. `isinstance` checks against the classes still hold.

Where the attempt has no strategy (`training.strategy: none`, or `auto` on one device) the
script's own is left alone: nothing of spotfit's is in scope to mix with.
"""

from __future__ import annotations

NAMES = ("MirroredStrategy", "MultiWorkerMirroredStrategy")


def adopt(ours, reporter) -> None:
    """Make `tf.distribute.MirroredStrategy(...)` and kin return `ours` from now on."""
    import tensorflow as tf

    modules = (tf.distribute, tf.distribute.experimental)
    for module in modules:
        for name in NAMES:
            original = getattr(module, name, None)
            if original is not None and not getattr(original, "_spotfit_adopting", False):
                setattr(module, name, _adopting(original, ours, reporter, name))


def _adopting(original: type, ours, reporter, name: str) -> type:
    class Meta(type(original)):  # type: ignore[misc]
        def __instancecheck__(cls, obj) -> bool:
            return isinstance(obj, original)

        def __subclasscheck__(cls, sub) -> bool:
            return issubclass(sub, original)

    def __new__(cls, *args, **kwargs):
        devices = kwargs.get("devices", args[0] if args else None)
        reporter.event("strategy_adopted", f"the script creates {name}({_show(args, kwargs)}): it gets the "
                       f"attempt's {type(ours).__name__} ({ours.num_replicas_in_sync} replica(s) in sync)",
                       script_class=name, script_devices=None if devices is None else [str(d) for d in devices],
                       strategy=type(ours).__name__, replicas=ours.num_replicas_in_sync)
        return ours

    return Meta(name, (original,), {"__new__": __new__, "_spotfit_adopting": True, "__module__": original.__module__,
                                    "__doc__": original.__doc__})


def _show(args: tuple, kwargs: dict) -> str:
    return ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])
