"""Export: the trained model to a versioned registry, verified before it is published.

At the end of a job whose spec has an `export` section, the chief writes the model in each
asked format (`savedmodel`: `model.export(..., "tf_saved_model")`; `tflite`: converted from
that SavedModel; `keras`: `model.save(".keras")`) to a local folder, **reloads each one and
checks that it predicts what the trained model predicts** on a sample batch (the script's own
training inputs when they were arrays, else inputs drawn from the model's input specs), and
only then uploads it to `<registry>/<job name>/<version>/`, versions numbered 1, 2, 3, ...
A version number is claimed before anything is uploaded under it, by creating
`<version>/claim.json` only if absent (`ObjectStore.create_exclusive`: `O_EXCL` semantics on
files, `If-None-Match: *` on S3): two exports of one name racing for a number get distinct ones.
A model trained in mixed precision is exported in float32 (its variables are float32 already;
TFLite has no bf16 kernels), and compared within the trained policy's rounding. The model
card, `model_card.json`, is written last: a version exists only once its card does
(the checkpoint manifest rule), so a half-uploaded version is never taken for a model, and
the job's next export takes back a version it claimed and never published
(`registry.claim_version`): a crash anywhere leaves a whole version or nothing. The formats
are written in the job's scratch folder (`scratch`), which goes on every path.

Card fields: name, version, job id, spec hash, step, weights sha256, metrics of the last
epoch, cost (previous attempts as billed by the controller plus this attempt at its launch
price), data source (script, its sha256 and args, what `fit` was given), the dtype policy,
strategy and XLA choice, and for each format its path and the largest difference found
against the trained model's predictions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from spotfit.attempt.registry import CARD, claim_version, published_by
from spotfit.core import crashpoints
from spotfit.stores import open_store

TOLERANCE = {"savedmodel": 1e-5, "keras": 1e-6, "tflite": 1e-4}  # max |difference|, relative to max |y|
# Under mixed precision the graph and eager paths round differently: a bf16 result has ~3
# significant digits (eps 2^-8), fp16 ~3.3 (eps 2^-11). The check then catches wrong models,
# not rounding.
LOW_PRECISION_TOLERANCE = {"bfloat16": 2e-2, "float16": 5e-3}
SAMPLE_ROWS = 8


class ExportError(Exception):
    """The exported model does not predict what the trained model predicts."""


def sample_inputs(model, sample=None):
    """A batch to compare predictions on: the script's data when known, else synthetic inputs."""
    if sample is not None:
        return sample
    rng = np.random.default_rng(0)
    arrays = []
    for spec in model.inputs:
        shape = [SAMPLE_ROWS if d is None else d for d in spec.shape]
        dtype = np.dtype(spec.dtype)
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype(dtype))
        else:
            arrays.append(np.zeros(shape, dtype))
    return arrays[0] if len(arrays) == 1 else arrays


def _max_diff(expected, got) -> float:
    expected = [np.asarray(e, dtype=np.float64) for e in _flat(expected)]
    got = [np.asarray(g, dtype=np.float64) for g in _flat(got)]
    if [e.shape for e in expected] != [g.shape for g in got]:
        raise ExportError(f"output shapes differ: {[e.shape for e in expected]} vs {[g.shape for g in got]}")
    scale = max(max(float(np.max(np.abs(e))) for e in expected), 1.0)
    return max(float(np.max(np.abs(e - g))) for e, g in zip(expected, got, strict=True)) / scale


def _flat(value) -> list:
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _flat(item)]
    return [value]


def tolerance(fmt: str, compute_dtype: str = "float32") -> float:
    """The largest relative difference accepted for `fmt` under a compute dtype."""
    return max(TOLERANCE[fmt], LOW_PRECISION_TOLERANCE.get(compute_dtype, 0.0))


def _check(fmt: str, expected, got, compute_dtype: str = "float32") -> float:
    diff = _max_diff(expected, got)
    limit = tolerance(fmt, compute_dtype)
    if not diff <= limit:
        raise ExportError(f"the reloaded {fmt} model differs from the trained model by {diff:.3g} "
                          f"(relative), more than {limit:g}")
    return diff


def write_formats(model, formats: list[str], folder: Path, sample) -> dict:
    """Write and verify each format in `folder`; returns {format: {path, max_rel_diff}}."""
    import keras
    import tensorflow as tf

    expected = keras.ops.convert_to_numpy(model(sample, training=False))
    dtype = keras.mixed_precision.global_policy().compute_dtype
    model = float32_copy(model)
    done = {}
    saved = folder / "savedmodel"
    if "savedmodel" in formats or "tflite" in formats:
        model.export(str(saved), format="tf_saved_model", verbose=False)
        reloaded = tf.saved_model.load(str(saved))
        got = reloaded.serve(sample)
        diff = _check("savedmodel", expected, got, dtype)
        if "savedmodel" in formats:
            done["savedmodel"] = {"path": "savedmodel", "max_rel_diff": diff}
    if "tflite" in formats:
        data = tf.lite.TFLiteConverter.from_saved_model(str(saved)).convert()
        (folder / "model.tflite").write_bytes(data)
        diff = _check("tflite", expected, _run_tflite(data, sample), dtype)
        done["tflite"] = {"path": "model.tflite", "max_rel_diff": diff}
        if "savedmodel" not in formats:
            shutil.rmtree(saved)
    if "keras" in formats:
        model.save(str(folder / "model.keras"))
        reloaded = keras.models.load_model(str(folder / "model.keras"), compile=False)
        got = keras.ops.convert_to_numpy(reloaded(sample, training=False))
        done["keras"] = {"path": "model.keras", "max_rel_diff": _check("keras", expected, got, dtype)}
    return done


def float32_copy(model):
    """The model with every layer in float32, for export (TFLite has no bf16 kernels).

    Mixed-precision variables are float32 already, so the weights copy over unchanged. Models
    that cannot be cloned from their config (subclassed ones) are exported as they are.
    """
    import keras

    if keras.mixed_precision.global_policy().compute_dtype == "float32":
        return model

    def clone(layer):
        return layer.__class__.from_config({**layer.get_config(), "dtype": "float32"})

    try:
        copy = keras.models.clone_model(model, clone_function=clone)
        copy.set_weights(model.get_weights())
    except Exception:  # noqa: BLE001 — a subclassed model: export it in its own dtype policy
        return model
    return copy


def _run_tflite(data: bytes, sample):
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=data)
    inputs = sample if isinstance(sample, list) else [sample]
    details = interpreter.get_input_details()
    for detail, array in zip(details, inputs, strict=True):
        interpreter.resize_tensor_input(detail["index"], array.shape)
    interpreter.allocate_tensors()
    for detail, array in zip(details, inputs, strict=True):
        interpreter.set_tensor(detail["index"], array.astype(detail["dtype"]))
    interpreter.invoke()
    outputs = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
    return outputs[0] if len(outputs) == 1 else outputs


def publish(registry_url: str, name: str, folder: Path, card: dict) -> dict:
    """Upload `folder` as the next version of `name`, claimed first, card last; returns the card.

    All or nothing: a version is published once its card is written, and an export that died
    before (a claim, some files, no card) is taken back by the job's next one (`claim_version`).
    A version the job already published with these weights is returned as it is.
    """
    registry = open_store(registry_url)
    job_id = card.get("job_id")
    if job_id and (done := published_by(registry, name, job_id, card.get("weights_sha256"))) is not None:
        return done
    version = claim_version(registry, name, job_id)
    crashpoints.hold("export_claimed")
    card = {**card, "name": name, "version": version, "published_at": time.time(),
            "url": f"{registry_url.rstrip('/')}/{name}/{version}"}
    for i, path in enumerate(sorted(p for p in folder.rglob("*") if p.is_file())):
        registry.put_file(str(path), f"{name}/{version}/{path.relative_to(folder).as_posix()}")
        if i == 0:
            crashpoints.hold("export_uploading")
    crashpoints.hold("export_uploaded")
    registry.write_bytes(f"{name}/{version}/{CARD}", json.dumps(card, indent=2, default=str).encode())
    return card


@contextmanager
def scratch(job_id: str) -> Iterator[Path]:
    """A temporary folder for one export, in the job's own `$SPOTFIT_HOME/exports/<job id>/`.

    What an export that died there left (a SavedModel copy) is removed first; the folder goes
    when the export ends, however it ends, and the controller removes the job's when the job ends.
    """
    from spotfit.host.home import export_scratch

    root = export_scratch(job_id)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    try:
        yield Path(tempfile.mkdtemp(prefix="export-", dir=root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def export(model, options: dict, card: dict, sample=None) -> dict:
    """Write, verify and publish `model` as `options` (the runtime config's `export`) say."""
    formats = list(options.get("formats") or ["savedmodel"])
    with scratch(card.get("job_id") or "job") as folder:
        crashpoints.hold("export_writing")
        card = {**card, "formats": write_formats(model, formats, folder, sample_inputs(model, sample))}
        return publish(options["registry"], options["name"], folder, card)


def script_source(script: str, args: list[str]) -> dict:
    """What the card says about the code and its arguments."""
    data = Path(script).read_bytes()
    return {"script": Path(script).name, "script_sha256": hashlib.sha256(data).hexdigest(), "args": list(args)}


def describe_inputs(x) -> str:
    """A short description of what `fit` was given (`ndarray float32 (1500, 8, 8, 1)`, ...)."""
    if isinstance(x, np.ndarray):
        return f"ndarray {x.dtype} {tuple(x.shape)}"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {describe_inputs(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(describe_inputs(v) for v in x) + "]"
    spec = getattr(x, "element_spec", None)
    return f"{type(x).__name__}" + (f" {spec}" if spec is not None else "")
