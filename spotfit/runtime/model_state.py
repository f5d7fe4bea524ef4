"""A model's training state as arrays: what a checkpoint holds and puts back, and its digest.

Model variables (Dropout seed state included), optimizer variables, the metrics' running sums,
and NumPy/Python RNG state; `weights_sha256` is the digest a run's result carries.

A model that trains with optimizers of its own (a GAN's `d_optimizer` and `g_optimizer`, set in
its `compile` override and applied in its `train_step`) keeps them as attributes: their variables
are saved too, with the positions in `model.variables` of the variables each was built for, so
that a restore before the first step (they build lazily, at their first `apply`) builds them over
the same variables. `model.optimizer` is then often never used and never built: a restore builds
it only when it was built at the save.
"""

from __future__ import annotations

import hashlib
import random

import keras
import numpy as np


def weights_sha256(model: keras.Model) -> str:
    """sha256 over the model's weights in their fixed order (names, shapes, dtypes, values)."""
    h = hashlib.sha256()
    for v in model.weights:
        value = np.ascontiguousarray(_numpy(v))
        h.update(f"{v.path}:{value.dtype}:{value.shape};".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def _numpy(variable) -> np.ndarray:
    """A variable's value; a distributed variable's is its first local copy (all are equal)."""
    value = variable.value
    components = getattr(value, "values", None)  # tf.distribute's MirroredVariable and kin
    if isinstance(components, tuple) and components:
        value = components[0]
    return keras.ops.convert_to_numpy(value)


def _components(variable) -> tuple:
    """A distributed variable's local copies (one per replica on this machine); () when not distributed."""
    components = getattr(variable.value, "values", None)
    return components if isinstance(components, tuple) and len(components) > 1 else ()


def _state_variables(model: keras.Model) -> list:
    """Everything that must come back on resume: weights, seed states, optimizer slots."""
    variables = list(model.variables)
    if model.optimizer is not None:
        variables += list(model.optimizer.variables)
    return variables


def _own_optimizers(model: keras.Model) -> list:
    """Optimizers the model holds as attributes besides `model.optimizer`, in attribute order."""
    seen, found = {id(model.optimizer)}, []
    for value in vars(model).values():
        if isinstance(value, keras.optimizers.Optimizer) and id(value) not in seen:
            seen.add(id(value))
            found.append(value)
    return found


def _capture_own_optimizers(model: keras.Model, arrays: dict[str, np.ndarray]) -> None:
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


def _restore_own_optimizers(model: keras.Model, arrays: dict[str, np.ndarray]) -> None:
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


def capture(model: keras.Model) -> dict[str, np.ndarray]:
    """Variables (`v…`), metric accumulators (`m…`, the epoch's running means) and NumPy's RNG;
    the model's own optimizers (`o…`) and whether `model.optimizer` was built."""
    arrays = {f"v{i:05d}": _numpy(v) for i, v in enumerate(_state_variables(model))}
    arrays["optimizer_built"] = np.asarray([model.optimizer is not None and model.optimizer.built])
    _capture_own_optimizers(model, arrays)
    for i, v in enumerate(model.metrics_variables):
        arrays[f"m{i:05d}"] = _numpy(v)
        parts = _components(v)
        if parts:  # under a strategy each replica sums its own share: keep every local share
            arrays[f"p{i:05d}"] = np.stack([keras.ops.convert_to_numpy(c) for c in parts])
    keys, pos = np.random.get_state()[1:3]  # type: ignore[index]  # the legacy tuple form
    arrays["numpy_rng_keys"] = np.asarray(keys)
    arrays["numpy_rng_pos"] = np.asarray([pos])
    return arrays


def restore_metrics(model: keras.Model, arrays: dict[str, np.ndarray]) -> bool:
    """Add the checkpoint's running metric sums to the metrics' (the resumed batches'); False if
    they do not match. Keras's metric accumulators (totals, counts, confusion counts) are sums."""
    saved = sorted(k for k in arrays if k.startswith("m"))
    variables = list(model.metrics_variables)
    if len(saved) != len(variables) or any(np.shape(arrays[k]) != tuple(v.shape)
                                           for k, v in zip(saved, variables, strict=True)):
        return False
    for key, var in zip(saved, variables, strict=True):
        parts, shares = _components(var), arrays.get("p" + key[1:])
        if parts and shares is not None and len(shares) == len(parts):
            for part, share in zip(parts, shares, strict=True):
                part.assign(keras.ops.convert_to_numpy(part) + share)
        else:
            var.assign(_numpy(var) + arrays[key].astype(_numpy(var).dtype))
    return True


def restore(model: keras.Model, arrays: dict[str, np.ndarray], meta: dict) -> None:
    built = arrays.get("optimizer_built")  # absent from checkpoints of earlier versions: it was built
    if model.optimizer is not None and not model.optimizer.built and (built is None or bool(built[0])):
        # Keras builds the optimizer lazily at the first step; its slots must exist to restore.
        model.optimizer.build(model.trainable_variables)
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
    np.random.set_state(("MT19937", arrays["numpy_rng_keys"], int(arrays["numpy_rng_pos"][0]), 0, 0.0))
    if meta.get("python_rng") is not None:
        _set_python_rng(meta["python_rng"])


def _set_python_rng(saved: list) -> None:
    version, state, gauss = saved
    random.setstate((version, tuple(state), gauss))
