"""TensorBoard: the runtime writes scalars under the job's prefix; `spotfit tensorboard` serves them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from spotfit.attempt import tensorboard_server as tb
from spotfit.stores import open_store
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


def test_fetch_copies_a_remote_jobs_logs(tmp_path):
    store = open_store("memory://tb-fetch/jobs/j1")
    store.write_bytes("tensorboard/train/events.out.tfevents.1", b"abc")
    store.write_bytes("tensorboard/validation/events.out.tfevents.2", b"de")
    store.write_bytes("progress.json", b"{}")
    assert tb.fetch("memory://tb-fetch/jobs/j1", tmp_path) == 2
    assert (tmp_path / "train" / "events.out.tfevents.1").read_bytes() == b"abc"
    assert tb.fetch("memory://tb-fetch/jobs/j1", tmp_path) == 0  # unchanged files are not fetched again
    assert tb.local_folder("memory://x") is None and tb.local_folder("file:///s/j").as_posix() == "/s/j/tensorboard"


def test_serving_the_logs_imports_no_tensorflow():
    code = ("import sys, spotfit.attempt.tensorboard_server; "
            "print(sorted({'tensorflow', 'keras'} & {m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"`spotfit tensorboard` would import {out.stdout.strip()}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_spotfit_tensorboard_serves_the_scalars(tmp_path):
    job_id = run_inline_job(tmp_path, "name: tb\nscript: train.py\nmarket: {trace: null}\n", SCRIPT)["id"]
    port = _free_port()
    server = subprocess.Popen(spotfit_cmd("tensorboard", job_id, "--port", str(port)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=os.environ.copy())

    def tags() -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as resp:
                return json.loads(resp.read())
        except OSError:  # not listening yet
            return {}

    def validation_served() -> dict | bool:
        if server.poll() is not None:
            return True  # it died: stop waiting
        found = tags()
        return found if {"epoch_loss", "epoch_accuracy"} <= set(found.get("validation", {})) else {}

    try:
        found = wait_for(validation_served, 300, "TensorBoard to serve the validation scalars", poll_s=0.5)
        assert server.poll() is None, f"spotfit tensorboard exited with {server.returncode}"
        assert {"epoch_loss", "epoch_accuracy", "batch_loss"} <= set(found.get("train", {})), found
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert server.returncode == 0
    with pytest.raises(OSError):  # stopped: nothing listens any more
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)


def _tags_by_step(folder, run: str = "train") -> dict[str, list[int]]:
    import tensorflow as tf

    tags: dict[str, list[int]] = {}
    for path in sorted(folder.glob(f"{run}/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return {tag: sorted(steps) for tag, steps in tags.items()}


@pytest.mark.slow
@pytest.mark.parametrize("update_freq", [1, 4, "epoch", "auto"])
def test_batch_scalars_follow_the_update_frequency(tmp_path, update_freq):
    import keras
    import numpy as np

    from spotfit.runtime.tensorboard import TensorBoardLog, TensorBoardLogger

    log = TensorBoardLog(open_store(f"file://{tmp_path}"), histogram_freq=1 if update_freq == 1 else 0,
                         update_freq=update_freq)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((96, 4)).astype("float32"), rng.integers(0, 2, 96)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    model.compile("sgd", "sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=8, epochs=2, callbacks=[TensorBoardLogger(log)], verbose=0)  # 24 steps
    tags = _tags_by_step(tmp_path / "tensorboard")  # on_train_end waited for the writer thread
    steps = tags.get("batch_loss", [])
    assert tags["epoch_loss"] == [1, 2]
    if update_freq == 1:  # histograms (asked for) go through tf.summary into the same run
        assert any(tag.endswith("kernel") and found == [1, 2] for tag, found in tags.items()), tags
    if update_freq == "epoch":
        assert steps == []
    elif update_freq == "auto":
        assert steps[0] == 1 and len(steps) <= 24  # the first step measures the write cost
    else:
        assert steps == list(range(update_freq, 25, update_freq))


def test_a_bad_update_frequency_is_refused_with_what_is_expected(tmp_path):
    from spotfit.runtime.tensorboard import TensorBoardLog

    with pytest.raises(ValueError, match="tensorboard_update_freq.*received 0.*`auto`, `epoch`"):
        TensorBoardLog(open_store(f"file://{tmp_path}"), update_freq=0)
