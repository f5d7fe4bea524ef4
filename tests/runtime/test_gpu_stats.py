"""GPU utilization and memory: sampled by the runtime, shown in TensorBoard, `status` and the job page.

The CPU path runs for real (no GPU here): the runtime says "no GPU" once and writes no GPU
figures. The GPU path needs NVML, which needs a GPU and its driver; none is reachable here, so
those tests inject a fake NVML module with pynvml's API (tests/support/fake_nvml.py) — the one
stand-in in these tests. Everything around it (the sampler, the runtime, TensorBoard's files,
the controller, the state DB, the CLI and the dashboard) is the real code.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from spotfit import sdk
from spotfit.runtime import utilization
from spotfit.ui import jobpage
from spotfit.ui.app import create_app
from spotfit.ui.scalars import scalars
from tests.support import fake_nvml
from tests.support.jobs import run_inline_job, spotfit_cmd
from tests.support.wait import wait_for

SCRIPT = '''
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.standard_normal((320, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=2, validation_split=0.2, verbose=2)
'''
SPEC = "name: gpu\nscript: train.py\nmarket: {trace: null}\n"
GPU_TAGS = ("train/system/gpu_util", "train/system/gpu_mem")


@pytest.fixture
def fake_pynvml(tmp_path, monkeypatch):
    """The fake NVML imported as `pynvml` in this process (restored after the test)."""
    path = fake_nvml.install(tmp_path / "fake-nvml") / "pynvml.py"
    spec = importlib.util.spec_from_file_location("pynvml", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def _no_real_gpu() -> None:
    if utilization.open_nvml()[0] is not None:
        pytest.skip("this machine has a GPU: the CPU path is tested where there is none")


def test_without_a_gpu_the_sampler_says_so_once_and_writes_no_gpu_figures():
    _no_real_gpu()
    said: list[str] = []
    state: dict = {}
    stop = utilization.start_sampling(state, interval_s=0.05, no_gpu=said.append)  # type: ignore[arg-type]
    try:
        wait_for(lambda: state.get("utilization_pct") is not None, timeout_s=60, what="a CPU sample")
    finally:
        stop.set()
    assert len(said) == 1 and said[0], said  # one reason, said once
    assert "gpu" not in state and state["utilization_source"] == "cpu"


def test_with_nvml_the_sampler_reads_utilization_and_memory_of_every_gpu(fake_pynvml):
    said: list[str] = []
    state: dict = {}
    stop = utilization.start_sampling(state, interval_s=0.05, no_gpu=said.append)  # type: ignore[arg-type]
    try:
        assert state["gpu"]["util_pct"] == fake_nvml.MEAN_UTIL_PCT  # read at once, before any training
        wait_for(lambda: state.get("utilization_pct") is not None, timeout_s=60, what="a GPU sample")
    finally:
        stop.set()
    assert said == [] and state["utilization_source"] == "nvml"
    assert state["utilization_pct"] == fake_nvml.MEAN_UTIL_PCT  # the idle rule watches the GPUs
    gpu = state["gpu"]
    assert (gpu["count"], gpu["mem_pct"], gpu["mem_used_gib"], gpu["mem_total_gib"]) == (
        2, fake_nvml.MEM_PCT, 12.0, 32.0)


@pytest.mark.slow
def test_a_cpu_job_says_no_gpu_once_and_logs_no_gpu_scalars(tmp_path):
    _no_real_gpu()
    doc = run_inline_job(tmp_path, SPEC, SCRIPT)
    assert doc["state"] == "completed", doc
    said = [e for e in sdk.events(doc["id"]) if e["kind"] == "no_gpu"]
    assert len(said) == 1 and said[0]["message"].startswith("no GPU"), said
    log = sdk.logs(doc["id"])["log"]
    assert log.count("spotfit: no GPU") == 1, log[-2000:]
    series = scalars(doc["store"])
    assert "train/batch_loss" in series and not set(GPU_TAGS) & set(series)  # no zeros written
    status = sdk.status(doc["id"])
    assert status["gpu"] == {"attempt": 1, "count": 0, "note": said[0]["message"]}
    out = subprocess.run(spotfit_cmd("status", doc["id"]), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 0 and "gpu: none on attempt 1 (no GPU" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_a_gpu_jobs_readings_reach_tensorboard_status_and_the_job_page(tmp_path, monkeypatch, spotfit_home):
    folder = fake_nvml.install(tmp_path / "fake-nvml")  # the runtime imports it as `pynvml`
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))
    doc = run_inline_job(tmp_path, SPEC, SCRIPT)
    assert doc["state"] == "completed", doc
    assert not [e for e in sdk.events(doc["id"]) if e["kind"] == "no_gpu"]

    series = scalars(doc["store"])
    util, mem = (series.get(tag, []) for tag in GPU_TAGS)
    assert len(util) >= 2 and [s for s, _ in util] == [s for s, _ in mem], series.keys()  # first step and end
    assert {v for _, v in util} == {fake_nvml.MEAN_UTIL_PCT} and {v for _, v in mem} == {fake_nvml.MEM_PCT}
    assert util[0][0] == 1 and util[-1][0] == doc["step"]  # by global step, to the last

    gpu = sdk.status(doc["id"])["gpu"]
    assert (gpu["attempt"], gpu["count"], gpu["util_pct"], gpu["mem_pct"]) == (
        1, 2, fake_nvml.MEAN_UTIL_PCT, fake_nvml.MEM_PCT)
    out = subprocess.run(spotfit_cmd("status", doc["id"]), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert "gpu: 80% busy, memory 12.0 of 32.0 GiB (38%), 2 GPUs (attempt 1)" in out.stdout, out.stdout + out.stderr

    figure = jobpage.job_page(doc["id"], jobpage.CostCache())["figures"]["progress"]
    trace = {t["name"]: t for t in figure["data"]}["train/system/gpu_util"]
    assert trace["y"] == [v for _, v in util] and trace["yaxis"] == "y3"
    client = TestClient(create_app(spotfit_home / "state.db", "t"), headers={"Authorization": "token t"})
    page = client.get(f"/jobs/{doc['id']}").text
    assert '<dd id="gpu">80% busy' in page
