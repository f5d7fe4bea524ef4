"""Mixed precision: which Keras dtype policy an attempt trains under, decided from the hardware.

`training.mixed_precision`: `off` (float32), `mixed_float16`, `mixed_bfloat16`, or `auto`:

- a GPU of compute capability >= 8.0 (A100, L4, H100, ...): `mixed_bfloat16` (tensor cores
  run bf16 as fast as fp16, and bf16 needs no loss scaling);
- a GPU of compute capability 7.x (V100, T4): `mixed_float16` (tensor cores; Keras wraps the
  optimizer in a `LossScaleOptimizer`);
- older GPUs: `off`;
- a CPU with bf16 instructions (AVX512-BF16, or AMX-BF16 on Sapphire Rapids and later), where
  oneDNN runs bf16 matmuls and convolutions natively: `mixed_bfloat16` (on this project's
  AVX512-BF16 CPU: a conv net's step x0.5-x0.75, an MLP's x0.8-x0.94, docs/benchmarks.md);
- any other CPU: `off`. `mixed_float16` on a CPU is emulated (a conv net's step x12.6 here,
  up to ~80x elsewhere), so auto never picks it on a CPU.

The policy is set before the user's script builds its model, and the model's output layers
are kept in float32 (`keep_outputs_float32`), as the Keras mixed-precision guide asks, so that
softmax and losses stay numerically safe and predictions come out as float32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

POLICIES = ("auto", "off", "mixed_float16", "mixed_bfloat16")


@dataclass(frozen=True)
class Hardware:
    """What the precision decision depends on."""

    gpu_compute_capabilities: tuple[tuple[int, int], ...] = ()
    cpu_flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def cpu_bf16(self) -> bool:
        return "avx512_bf16" in self.cpu_flags or "amx_bf16" in self.cpu_flags

    @property
    def cpu_amx_bf16(self) -> bool:
        return "amx_bf16" in self.cpu_flags


def choose(requested: str, hw: Hardware) -> tuple[str, str]:
    """(policy, why): `requested` unless `auto`, which decides from `hw` (pure).

    >>> choose("auto", Hardware(cpu_flags=frozenset({"avx512_bf16"})))[0]
    'mixed_bfloat16'
    >>> choose("auto", Hardware(cpu_flags=frozenset({"avx2"})))[0]
    'off'
    >>> choose("auto", Hardware(gpu_compute_capabilities=((8, 0),)))[0]
    'mixed_bfloat16'
    """
    if requested not in POLICIES:
        raise ValueError(f"Invalid `training.mixed_precision`: received {requested!r}, expected one of {POLICIES}.")
    if requested != "auto":
        return requested, "set in the job spec"
    if hw.gpu_compute_capabilities:
        cc = min(hw.gpu_compute_capabilities)
        if cc >= (8, 0):
            return "mixed_bfloat16", f"GPU compute capability {cc[0]}.{cc[1]} >= 8.0: bf16 tensor cores"
        if cc >= (7, 0):
            return "mixed_float16", f"GPU compute capability {cc[0]}.{cc[1]}: fp16 tensor cores, no bf16"
        return "off", f"GPU compute capability {cc[0]}.{cc[1]} < 7.0: no tensor cores"
    if hw.cpu_amx_bf16:
        return "mixed_bfloat16", "CPU with AMX-BF16: native bf16 matmuls (fp16 would be emulated)"
    if hw.cpu_bf16:
        return "mixed_bfloat16", "CPU with AVX512-BF16: native bf16 dot products (fp16 would be emulated)"
    return "off", "CPU without bf16 instructions; fp16 would be emulated (many times slower)"


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of this machine (Linux), empty elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def detect() -> Hardware:
    """This machine's GPUs (compute capability, from TensorFlow) and CPU flags."""
    import tensorflow as tf

    ccs = []
    for gpu in tf.config.list_physical_devices("GPU"):
        cc = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if cc:
            ccs.append(tuple(cc))
    return Hardware(gpu_compute_capabilities=tuple(ccs), cpu_flags=cpu_flags())


def apply(policy: str) -> None:
    """Set Keras's global dtype policy (`off` = float32)."""
    import keras

    keras.mixed_precision.set_global_policy("float32" if policy == "off" else policy)


def keep_outputs_float32(model) -> list[str]:
    """Run the model's output layers in float32; returns the names of the layers changed."""
    import keras

    if keras.mixed_precision.global_policy().compute_dtype == "float32":
        return []
    changed = []
    for layer in _output_layers(model):
        if layer.dtype_policy.compute_dtype != "float32":
            layer.dtype_policy = "float32"
            changed.append(layer.name)
    return changed


def _output_layers(model) -> list:
    outputs = getattr(model, "outputs", None)
    try:
        layers = [t._keras_history.operation for t in (outputs or [])]
    except AttributeError:
        layers = []
    if not layers and getattr(model, "layers", None):
        layers = [model.layers[-1]]
    return [layer for layer in layers if hasattr(layer, "dtype_policy")]
