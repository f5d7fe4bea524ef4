"""`spotfit doctor`: versions, devices, what the GPU means for mixed precision, XLA, store access."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support.jobs import spotfit_cmd

pytestmark = pytest.mark.slow  # imports TensorFlow

# What TensorFlow sees here, asked apart from spotfit: compute capability of each visible GPU.
_VISIBLE_GPUS = """
import json, tensorflow as tf
print(json.dumps([tf.config.experimental.get_device_details(g).get("compute_capability")
                  for g in tf.config.list_physical_devices("GPU")]))
"""


def _doctor(*args: str) -> tuple[int, dict]:
    out = subprocess.run(spotfit_cmd("doctor", "--json", *args), capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    return out.returncode, json.loads(out.stdout)


def _visible_gpus() -> list[tuple[int, int] | None]:
    out = subprocess.run([sys.executable, "-c", _VISIBLE_GPUS], capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return [tuple(cc) if cc else None for cc in json.loads(out.stdout.strip().splitlines()[-1])]


def test_doctor_reports_this_machine():
    code, doc = _doctor()
    checks = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and doc["ok"]
    assert "TensorFlow 2." in checks["tensorflow"]["detail"]
    assert checks["xla"]["status"] == "ok"
    assert checks["store"]["status"] == checks["registry"]["status"] == "ok"
    picked = re.match(r"auto picks (\S+):", checks["mixed precision"]["detail"])
    assert picked, checks["mixed precision"]
    gpus = _visible_gpus()
    assert len([name for name in checks if name.startswith("gpu ")]) == len(gpus)
    tensor_cores = [cc for cc in gpus if cc is not None and cc >= (7, 0)]
    if len(tensor_cores) == len(gpus) > 0:  # every GPU has tensor cores: mixed precision pays
        expected = "mixed_bfloat16" if min(tensor_cores) >= (8, 0) else "mixed_float16"
        assert picked[1] == expected, checks["mixed precision"]
    else:  # a CPU (or an old GPU): fp16 would be emulated, many times slower
        assert picked[1] in ("float32", "mixed_bfloat16"), checks["mixed precision"]
    if gpus:
        assert checks["devices"]["status"] == "ok"
    else:  # no GPU: the fix says what to do
        assert checks["devices"]["status"] == "warn" and "tf-gpu" in checks["devices"]["fix"]


def test_an_unreachable_store_fails_with_a_fix():
    code, doc = _doctor("--store", "file:///proc/spotfit-doctor/no")
    store = next(c for c in doc["checks"] if c["name"] == "store")
    assert code == 1 and not doc["ok"]
    assert store["status"] == "fail" and store["fix"]


def test_doctor_says_which_keras_a_spec_needs_and_whether_it_is_here(tmp_path):
    (tmp_path / "train.py").write_text("import tensorflow as tf\nm = tf.keras.models.Sequential()\n"
                                       "m.fit_generator(gen, steps_per_epoch=2)\n")
    (tmp_path / "spotfit.yaml").write_text("name: old\nscript: train.py\n")
    code, doc = _doctor("--spec", str(tmp_path / "spotfit.yaml"))
    checks = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and checks["keras 2"]["status"] == "ok" and "tf-keras 2.21." in checks["keras 2"]["detail"]
    assert checks["keras (train.py)"]["status"] == "ok"
    assert checks["keras (train.py)"]["detail"].startswith("train.py runs on Keras 2"), checks["keras (train.py)"]
    assert "line 3: `fit_generator`" in checks["keras (train.py)"]["detail"]
