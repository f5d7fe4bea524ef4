"""`spotfit doctor`: what this machine can train with, and each problem with its fix.

Checks: TensorFlow and Keras versions and the CUDA/cuDNN versions TensorFlow was built with;
whether Keras 2 (`tf-keras`, for `training.keras: 2`) is installed, and with `--spec`, which
Keras the spec's script runs on and why (spotfit/script/keras2.py);
visible devices; each GPU's compute capability and what it means for mixed precision (the
choice `training.mixed_precision: auto` makes here); whether XLA compiles a function; the
TensorBoard package; and whether the object store and the model registry can be written,
read and deleted. TensorFlow is imported inside `run()` only, so the rest of the controller
stays TensorFlow-free.

Each check is `ok`, `warn` (training works, but slower or with less), or `fail` (something a
job needs is missing); the CLI exits 1 when any check fails.
"""

from __future__ import annotations

import os
import platform
import secrets
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spotfit.script.keras2 import KerasChoice

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


def run(store_url: str | None = None, registry_url: str | None = None,
        keras_choice: tuple[str, KerasChoice] | None = None) -> dict:
    """All checks; returns {"checks": [...], "ok": bool} (the `--json` document).

    `keras_choice`: a spec's script name and the Keras it runs on (`--spec`)."""
    from spotfit.host.home import default_registry_url, default_store_url

    checks: list[Check] = [Check("python", OK, f"Python {platform.python_version()} on {platform.system()}")]
    tf = _tensorflow(checks)
    keras_2 = _keras2(checks)
    if keras_choice is not None:
        checks.append(_script_keras(*keras_choice, keras_2))
    if tf is not None:
        _devices(tf, checks)
        _xla(tf, checks)
    _tensorboard(checks)
    checks.append(_store("store", store_url or default_store_url()))
    checks.append(_store("registry", registry_url or default_registry_url()))
    return {"checks": [asdict(c) for c in checks], "ok": all(c.status != FAIL for c in checks)}


def _tensorflow(checks: list[Check]):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import keras
        import tensorflow as tf
    except ImportError as exc:
        checks.append(Check("tensorflow", FAIL, f"TensorFlow does not import: {exc}",
                            "pip install 'spotfit[tf-cpu]' (CPU) or 'spotfit[tf-gpu]' (NVIDIA GPUs)"))
        return None
    info = tf.sysconfig.get_build_info()
    cuda = info.get("cuda_version")
    build = f"CUDA {cuda}, cuDNN {info.get('cudnn_version')}" if info.get("is_cuda_build") else "CPU-only build"
    checks.append(Check("tensorflow", OK, f"TensorFlow {tf.__version__}, Keras {keras.__version__} ({build})"))
    return tf


def _keras2(checks: list[Check]) -> bool:
    """Whether Keras 2 (`tf-keras`, of the supported version) is installed; read from its metadata, not imported."""
    from importlib import metadata

    supported = "2.21"  # runtime/keras2/internals.py's SUPPORTED (importing it would import tf_keras)
    fix = f"pip install --no-deps 'tf-keras=={supported}.*' (beside tensorflow-cpu; spotfit[tf-gpu] has it)"
    try:
        version = metadata.version("tf-keras")
    except metadata.PackageNotFoundError:
        checks.append(Check("keras 2", WARN, "tf-keras is not installed: a script of tf.keras 2 code "
                            "(`training.keras: 2`) cannot run here", fix))
        return False
    if not version.startswith(supported + "."):
        checks.append(Check("keras 2", WARN, f"tf-keras {version}: spotfit's Keras 2 runtime expects {supported}.x",
                            fix))
        return False
    checks.append(Check("keras 2", OK, f"tf-keras {version}: scripts of tf.keras 2 code run here "
                        "(`training.keras: 2`, TF_USE_LEGACY_KERAS=1)"))
    return True


def _script_keras(script: str, choice: KerasChoice, keras_2: bool) -> Check:
    """Which Keras the spec's script runs on, why, and whether this machine has it."""
    from spotfit.script.keras2 import choice_line

    if choice.version == "2" and not keras_2:
        return Check(f"keras ({script})", FAIL, choice_line(choice, script) + "; tf-keras is not installed here",
                     "pip install --no-deps 'tf-keras==2.21.*'")
    return Check(f"keras ({script})", OK, choice_line(choice, script))


def _devices(tf, checks: list[Check]) -> None:
    from spotfit.runtime import precision

    gpus = tf.config.list_physical_devices("GPU")
    cpus = tf.config.list_physical_devices("CPU")
    hw = precision.detect()
    checks.append(Check("devices", OK if gpus else WARN,
                        f"{len(cpus)} CPU device(s), {len(gpus)} GPU(s)",
                        "" if gpus else "no GPU is visible: training runs on the CPU. On a GPU machine install "
                        "'spotfit[tf-gpu]' and check `nvidia-smi` and CUDA_VISIBLE_DEVICES"))
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        cc = details.get("compute_capability")
        meaning = _precision_meaning(tuple(cc) if cc else None)
        checks.append(Check(f"gpu {gpu.name}", OK if cc and tuple(cc) >= (7, 0) else WARN,
                            f"{details.get('device_name', '?')}, compute capability "
                            f"{'.'.join(map(str, cc)) if cc else 'unknown'}: {meaning}",
                            "" if cc and tuple(cc) >= (7, 0) else "a GPU of compute capability >= 7.0 "
                            "(V100, T4, A100, L4, H100) trains in mixed precision"))
    policy, why = precision.choose("auto", hw)
    bf16 = "AMX-BF16" if hw.cpu_amx_bf16 else ("AVX512-BF16" if hw.cpu_bf16 else "no bf16 instructions")
    checks.append(Check("mixed precision", OK, f"auto picks {'float32' if policy == 'off' else policy}: {why} "
                        f"(CPU: {bf16}); offered, applied with training.auto_apply: true"))


def _precision_meaning(cc: tuple[int, int] | None) -> str:
    if cc is None:
        return "unknown: mixed precision stays off"
    if cc >= (8, 0):
        return "bf16 and fp16 tensor cores (mixed_bfloat16)"
    if cc >= (7, 0):
        return "fp16 tensor cores (mixed_float16, with loss scaling)"
    return "no tensor cores: mixed precision does not help"


def _xla(tf, checks: list[Check]) -> None:
    try:
        t0 = time.perf_counter()
        fn = tf.function(lambda x: tf.reduce_sum(x * 2.0 + 1.0), jit_compile=True)
        value = float(fn(tf.ones([4])))
        ok = value == 12.0
        detail = f"jit_compile works ({(time.perf_counter() - t0) * 1000:.0f} ms to compile and run)"
        checks.append(Check("xla", OK if ok else FAIL, detail if ok else f"XLA computed {value}, expected 12.0",
                            "" if ok else "set `training.xla: \"off\"`"))
    except Exception as exc:  # noqa: BLE001 — doctor reports any failure as a check
        checks.append(Check("xla", WARN, f"jit_compile fails: {type(exc).__name__}: {str(exc)[:200]}",
                            "set `training.xla: \"off\"` (auto falls back to off on its own)"))


def _tensorboard(checks: list[Check]) -> None:
    try:
        import tensorboard

        checks.append(Check("tensorboard", OK, f"tensorboard {tensorboard.__version__}"))
    except ImportError:
        checks.append(Check("tensorboard", WARN, "the tensorboard package is not installed: "
                            "`spotfit tensorboard` cannot serve logs", "pip install 'spotfit[tf-cpu]'"))


def _store(name: str, url: str) -> Check:
    """Write, read back and delete a probe object."""
    from spotfit.stores import open_store

    key = f"doctor/probe-{secrets.token_hex(4)}"
    try:
        store = open_store(url)
        t0 = time.perf_counter()
        store.write_bytes(key, b"spotfit doctor")
        back = store.read_bytes(key)
        store.delete(key)
        if back != b"spotfit doctor":
            return Check(name, FAIL, f"{url}: read back {back[:20]!r}", "check the store's consistency settings")
        return Check(name, OK, f"{url}: write, read, delete in {(time.perf_counter() - t0) * 1000:.0f} ms")
    except Exception as exc:  # noqa: BLE001 — doctor reports any failure as a check
        hint = getattr(exc, "hint", "") or "check the URL, credentials and network (s3:// needs 'spotfit[s3]')"
        return Check(name, FAIL, f"{url}: {type(exc).__name__}: {getattr(exc, 'message', str(exc))[:200]}", hint)
