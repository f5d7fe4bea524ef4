"""Mixed precision: auto decides from the hardware, never fp16 on a CPU; outputs stay float32."""

from __future__ import annotations

import pytest

from spotfit.runtime import precision
from spotfit.runtime.precision import Hardware


def test_auto_from_gpu_compute_capability():
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((9, 0),)))[0] == "mixed_bfloat16"
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((7, 0),)))[0] == "mixed_float16"
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((6, 1),)))[0] == "off"
    # The weakest GPU decides: every replica must run the same policy.
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((8, 0), (7, 5))))[0] == "mixed_float16"


def test_auto_on_cpus_never_picks_float16():
    for flags in (set(), {"avx512f"}, {"avx512_bf16"}, {"avx512_bf16", "amx_bf16", "amx_tile"}):
        policy, why = precision.choose("auto", Hardware(cpu_flags=frozenset(flags)))
        assert policy in ("off", "mixed_bfloat16") and why
    assert precision.choose("auto", Hardware(cpu_flags=frozenset({"amx_bf16"})))[0] == "mixed_bfloat16"
    assert precision.choose("auto", Hardware(cpu_flags=frozenset({"avx512_bf16"})))[0] == "mixed_bfloat16"
    assert precision.choose("auto", Hardware(cpu_flags=frozenset({"avx2"})))[0] == "off"


def test_auto_on_this_machine_picks_float32_or_bf16():
    policy, _ = precision.choose("auto", Hardware(cpu_flags=precision.cpu_flags()))
    assert policy in ("off", "mixed_bfloat16")


def test_explicit_choice_is_kept_and_bad_values_rejected():
    assert precision.choose("mixed_float16", Hardware())[0] == "mixed_float16"
    with pytest.raises(ValueError, match="mixed_precision"):
        precision.choose("fp8", Hardware())


@pytest.mark.slow
def test_outputs_stay_float32_under_mixed_bfloat16():
    import keras
    import numpy as np

    precision.apply("mixed_bfloat16")
    try:
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        assert model.layers[-1].compute_dtype == "bfloat16"
        assert precision.keep_outputs_float32(model) == [model.layers[-1].name]
        out = model(np.ones((2, 4), "float32"))
        assert str(out.dtype) in ("float32", "<dtype: 'float32'>")
        assert model.layers[0].compute_dtype == "bfloat16"  # the rest still runs in bf16
        assert model.layers[0].kernel.dtype == "float32"  # variables stay float32
    finally:
        precision.apply("off")
    assert precision.keep_outputs_float32(model) == []  # float32 policy: nothing to do
