"""Choosing the distribution strategy, and MirroredStrategy over 2 logical CPU devices."""

from __future__ import annotations

import json

import pytest

from spotfit.runtime import strategy
from tests.support.jobs import run_inline_job

SCRIPT = '''
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=2, verbose=2)
'''


def test_auto_picks_by_workers_and_devices():
    assert strategy.choose("auto", workers=1, devices=1) == "none"
    assert strategy.choose("auto", workers=1, devices=8) == "mirrored"
    assert strategy.choose("auto", workers=4, devices=8) == "multi_worker"
    assert strategy.choose("mirrored", workers=1, devices=1) == "mirrored"
    with pytest.raises(ValueError, match="training.strategy"):
        strategy.choose("horovod", 1, 1)


def test_cluster_from_tf_config():
    assert strategy.cluster_from_env({}) == strategy.Cluster(1, 0)
    doc = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]}, "task": {"type": "worker", "index": 2}}
    cluster = strategy.cluster_from_env({"TF_CONFIG": json.dumps(doc)})
    assert (cluster.workers, cluster.index, cluster.is_chief, cluster.multi) == (3, 2, False, True)
    doc = {"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "worker", "index": 0}}
    assert strategy.cluster_from_env({"TF_CONFIG": json.dumps(doc)}) == strategy.Cluster(2, 1)


def test_local_stop_stops_at_the_notice_step():
    stop = strategy.LocalStop()
    stop.propose(12, "SIGTERM", 75)
    stop.propose(13, "stop", 76)  # the first notice wins
    assert (stop.target, stop.reason, stop.code) == (12, "SIGTERM", 75)


@pytest.mark.slow
def test_mirrored_strategy_over_two_logical_cpus(tmp_path):
    doc = run_inline_job(tmp_path, 'name: mirrored\nscript: train.py\nmarket: {trace: null}\n'
                         'env: {SPOTFIT_LOGICAL_CPUS: "2"}\ntraining: {strategy: mirrored, seed: 0}\n', SCRIPT)
    assert doc["state"] == "completed" and doc["step"] == 16
    events = [json.loads(p.read_text()) for p in sorted((_path(doc["store"]) / "events").glob("*.json"))]
    chosen = [e["data"] for e in events if e["kind"] == "strategy"]
    assert chosen == [{"strategy": "mirrored", "replicas": 2, "workers": 1, "worker": 0}]


def _path(url: str):
    from pathlib import Path

    return Path(url[len("file://"):])
