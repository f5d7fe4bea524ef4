"""`spotfit doctor`: versions, devices, what the GPU means for mixed precision, XLA, store access."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import spotfit_cmd

pytestmark = pytest.mark.slow  # imports TensorFlow


def _doctor(*args: str) -> tuple[int, dict]:
    out = subprocess.run(spotfit_cmd("doctor", "--json", *args), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    return out.returncode, json.loads(out.stdout)


def test_doctor_reports_this_machine():
    code, doc = _doctor()
    checks = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and doc["ok"]
    assert "TensorFlow 2." in checks["tensorflow"]["detail"]
    assert checks["xla"]["status"] == "ok"
    assert checks["store"]["status"] == checks["registry"]["status"] == "ok"
    assert "auto picks" in checks["mixed precision"]["detail"]
    assert "mixed_float16" not in checks["mixed precision"]["detail"].split(":")[0]  # never fp16 on a CPU
    if checks["devices"]["status"] == "warn":  # no GPU: the fix says what to do
        assert "tf-gpu" in checks["devices"]["fix"]


def test_an_unreachable_store_fails_with_a_fix():
    code, doc = _doctor("--store", "file:///proc/spotfit-doctor/no")
    store = next(c for c in doc["checks"] if c["name"] == "store")
    assert code == 1 and not doc["ok"]
    assert store["status"] == "fail" and store["fix"]
