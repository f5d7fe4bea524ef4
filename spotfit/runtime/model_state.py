"""A model's training state as arrays: what a checkpoint holds and puts back, and its digest.

Model variables (Dropout seed state included), optimizer variables, the metrics' running sums,
and NumPy/Python RNG state; `weights_sha256` is the digest a run's result carries.

A model that trains with optimizers of its own (a GAN's `d_optimizer` and `g_optimizer`, set in
its `compile` override and applied in its `train_step`) keeps them as attributes: their variables
are saved too, with the positions in `model.variables` of the variables each was built for, so
that a restore before the first step (they build lazily, at their first `apply`) builds them over
the same variables. `model.optimizer` is then often never used and never built: a restore builds
it only when it was built at the save.

The same functions serve a Keras 2 model (`tf_keras`, runtime/keras2/): its variables are
`tf.Variable`s named by `name` (Keras 3's have a `path`), its optimizer lists its variables with
`variables()` (legacy) or `variables`, says it is built with `_built`, and its metrics keep their
variables on each metric. A Keras 2 model's own optimizers are not saved (Keras 3 only).
"""

from __future__ import annotations

import hashlib
import inspect
import random
import sys
from typing import Any

import numpy as np


def weights_sha256(model: Any) -> str:
    """sha256 over the model's weights in their fixed order (names, shapes, dtypes, values)."""
    h = hashlib.sha256()
    for v in model.weights:
        value = np.ascontiguousarray(_numpy(v))
        h.update(f"{getattr(v, 'path', None) or v.name}:{value.dtype}:{value.shape};".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def _backing(variable):
    """The TensorFlow variable behind a Keras 3 variable (its `value`); a Keras 2 variable is one."""
    value = variable.value
    return variable if callable(value) else value  # tf.Variable.value is a method


def _numpy(variable) -> np.ndarray:
    """A variable's value; a distributed variable's is its first local copy (all are equal)."""
    value = _backing(variable)
    components = getattr(value, "values", None)  # tf.distribute's MirroredVariable and kin
    if isinstance(components, tuple) and components:
        value = components[0]
    return np.array(value)


def _components(variable) -> tuple:
    """A distributed variable's local copies (one per replica on this machine); () when not distributed."""
    components = getattr(_backing(variable), "values", None)
    return components if isinstance(components, tuple) and len(components) > 1 else ()


def optimizer_variables(optimizer) -> list:
    """An optimizer's variables in creation order: Keras 3's and Keras 2's `variables`, a legacy one's
    `variables()`; a Keras 2 `LossScaleOptimizer` lists its inner optimizer's, and its loss scale
    and counter are added (Keras 3's lists its own)."""
    found = optimizer.variables
    variables = list(found() if inspect.ismethod(found) else found)
    scale: Any = getattr(optimizer, "_loss_scale", None)  # Keras 2's dynamic loss scale state
    if hasattr(scale, "_current_loss_scale") and hasattr(scale, "_counter"):
        variables += [scale._current_loss_scale, scale._counter]
    return variables


def _unwrapped(optimizer):
    """The optimizer that holds the slots: a Keras 2 `LossScaleOptimizer`'s inner one (Keras 3's builds itself)."""
    inner = getattr(optimizer, "inner_optimizer", None)
    return inner if inner is not None and not hasattr(optimizer, "built") else optimizer


def _legacy(optimizer) -> bool:
    """A Keras 2 legacy optimizer (`tf.keras.optimizers.legacy`, OptimizerV2): it creates its slots itself."""
    return hasattr(_unwrapped(optimizer), "_create_all_weights")


def _built(optimizer) -> bool:
    """Whether the optimizer has its slots (Keras 3: `built`; Keras 2: `_built`; legacy: any variable)."""
    optimizer = _unwrapped(optimizer)
    if _legacy(optimizer):
        return bool(optimizer_variables(optimizer))
    if hasattr(optimizer, "built"):
        return bool(optimizer.built)
    return bool(getattr(optimizer, "_built", False))


def _build(optimizer, variables: list) -> None:
    """Create the optimizer's slots for `variables` (a legacy one: those it lacks, as its first step would)."""
    optimizer = _unwrapped(optimizer)
    if _legacy(optimizer):
        optimizer._create_all_weights(variables)
    else:
        optimizer.build(variables)


def metrics_variables(model) -> list:
    """The metrics' accumulators: Keras 3's `metrics_variables`, or each Keras 2 metric's `variables`."""
    if hasattr(model, "metrics_variables"):
        return list(model.metrics_variables)
    return [v for metric in model.metrics for v in metric.variables]


def _state_variables(model: Any) -> list:
    """Everything that must come back on resume: weights, seed states, optimizer slots."""
    variables = list(model.variables)
    if model.optimizer is not None:
        variables += optimizer_variables(model.optimizer)
    return variables


def _keras3_optimizer() -> type | tuple:
    """Keras 3's `Optimizer` class when Keras 3 is loaded (a Keras 2 attempt does not load it), else ()."""
    keras = sys.modules.get("keras")
    optimizers = getattr(keras, "optimizers", None)
    return getattr(optimizers, "Optimizer", ())


def _own_optimizers(model: Any) -> list:
    """Optimizers the model holds as attributes besides `model.optimizer`, in attribute order."""
    seen, found = {id(model.optimizer)}, []
    for value in vars(model).values():
        if isinstance(value, _keras3_optimizer()) and id(value) not in seen:
            seen.add(id(value))
            found.append(value)
    return found


def _capture_own_optimizers(model: Any, arrays: dict[str, np.ndarray]) -> None:
    """`oKK_for`: positions in `model.variables` of what optimizer KK updates; `oKK_NNNNN`: its variables."""
    position = {id(v): i for i, v in enumerate(model.variables)}
    for k, optimizer in enumerate(_own_optimizers(model)):
        # Keras keeps the list `build` got (keras/src/optimizers/base_optimizer.py, 3.x).
        updated = getattr(optimizer, "_trainable_variables", None)
        if not optimizer.built or updated is None or any(id(v) not in position for v in updated):
            continue  # nothing trained yet, or variables outside the model: nothing it could build again
        arrays[f"o{k:02d}_for"] = np.asarray([position[id(v)] for v in updated], dtype=np.int64)
        for i, v in enumerate(optimizer.variables):
            arrays[f"o{k:02d}_{i:05d}"] = _numpy(v)


def _restore_own_optimizers(model: Any, arrays: dict[str, np.ndarray]) -> None:
    variables = model.variables
    for k, optimizer in enumerate(_own_optimizers(model)):
        prefix = f"o{k:02d}_"
        if prefix + "for" not in arrays:
            continue
        if not optimizer.built:
            optimizer.build([variables[int(i)] for i in arrays[prefix + "for"]])
        saved = sorted(key for key in arrays if key.startswith(prefix) and key != prefix + "for")
        if len(saved) != len(optimizer.variables):
            raise RuntimeError(
                f"checkpoint holds {len(saved)} variables of the model's optimizer attribute number {k + 1} "
                f"({type(optimizer).__name__}) but it has {len(optimizer.variables)}: the script's model "
                "changed since the checkpoint was written"
            )
        for key, var in zip(saved, optimizer.variables, strict=True):
            var.assign(arrays[key])


def _generators(model) -> list:
    """Keras 2 layers' `tf.random.Generator`s (runtime/keras2/random.py): their state is training state.
    Keras 3's seed generators are among `model.variables` already."""
    layers = model._flatten_layers(include_self=False) if hasattr(model, "_flatten_layers") else []
    found = (getattr(getattr(layer, "_random_generator", None), "_generator", None) for layer in layers)
    return [g for g in found if g is not None]


def capture(model: Any) -> dict[str, np.ndarray]:
    """Variables (`v…`), metric accumulators (`m…`, the epoch's running means) and NumPy's RNG;
    the model's own optimizers (`o…`) and whether `model.optimizer` was built."""
    arrays = {f"v{i:05d}": _numpy(v) for i, v in enumerate(_state_variables(model))}
    arrays["optimizer_built"] = np.asarray([model.optimizer is not None and _built(model.optimizer)])
    _capture_own_optimizers(model, arrays)
    for i, v in enumerate(metrics_variables(model)):
        arrays[f"m{i:05d}"] = _numpy(v)
        parts = _components(v)
        if parts:  # under a strategy each replica sums its own share: keep every local share
            arrays[f"p{i:05d}"] = np.stack([np.array(c) for c in parts])
    for i, generator in enumerate(_generators(model)):
        arrays[f"r{i:05d}"] = _numpy(generator.state)
    keys, pos = np.random.get_state()[1:3]  # type: ignore[index]  # the legacy tuple form
    arrays["numpy_rng_keys"] = np.asarray(keys)
    arrays["numpy_rng_pos"] = np.asarray([pos])
    return arrays


def restore_metrics(model: Any, arrays: dict[str, np.ndarray]) -> bool:
    """Add the checkpoint's running metric sums to the metrics' (the resumed batches'); False if
    they do not match. Keras's metric accumulators (totals, counts, confusion counts) are sums."""
    saved = sorted(k for k in arrays if k.startswith("m"))
    variables = metrics_variables(model)
    if len(saved) != len(variables) or any(np.shape(arrays[k]) != tuple(v.shape)
                                           for k, v in zip(saved, variables, strict=True)):
        return False
    for key, var in zip(saved, variables, strict=True):
        parts, shares = _components(var), arrays.get("p" + key[1:])
        if parts and shares is not None and len(shares) == len(parts):
            for part, share in zip(parts, shares, strict=True):
                part.assign(np.array(part) + share)
        else:
            var.assign(_numpy(var) + arrays[key].astype(_numpy(var).dtype))
    return True


def restore(model: Any, arrays: dict[str, np.ndarray], meta: dict) -> None:
    built = arrays.get("optimizer_built")  # absent from checkpoints of earlier versions: it was built
    legacy = model.optimizer is not None and _legacy(model.optimizer)  # idempotent: its slots may be missing
    if model.optimizer is not None and (legacy or not _built(model.optimizer)) and (built is None or bool(built[0])):
        # Keras builds the optimizer lazily at the first step; its slots must exist to restore.
        _build(model.optimizer, model.trainable_variables)
    variables = _state_variables(model)
    saved = sorted(k for k in arrays if k.startswith("v"))
    if len(saved) != len(variables):
        raise RuntimeError(
            f"checkpoint holds {len(saved)} variables but the model and optimizer have "
            f"{len(variables)}: the script's model changed since the checkpoint was written"
        )
    for key, var in zip(saved, variables, strict=True):
        var.assign(arrays[key])
    _restore_own_optimizers(model, arrays)
    generators = _generators(model)
    saved_generators = sorted(k for k in arrays if k.startswith("r"))
    if len(saved_generators) == len(generators):
        for key, generator in zip(saved_generators, generators, strict=True):
            generator.state.assign(arrays[key])
    np.random.set_state(("MT19937", arrays["numpy_rng_keys"], int(arrays["numpy_rng_pos"][0]), 0, 0.0))
    if meta.get("python_rng") is not None:
        _set_python_rng(meta["python_rng"])


def _set_python_rng(saved: list) -> None:
    version, state, gauss = saved
    random.setstate((version, tuple(state), gauss))
