"""An attempt's process ends as `python train.py` ends.

After the script's last line Python waits for the script's non-daemon threads, then runs the
`atexit` handlers: the script's own, and TensorFlow's (autograph deletes the source files it
generated in the temporary folder there). The runtime does the same before it leaves with
`os._exit`. After a preemption notice it runs the handlers but does not wait for the threads: the
cloud would have ended the process, and a thread that never ends must not keep the attempt alive.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job

# A non-daemon thread that waits for the main thread to end (released only by the interpreter's
# shutdown, never by a timer), and an atexit handler; each appends its line, with the number of
# the process that ran the script (1, 2, ...), to a file.
SCRIPT = '''
import atexit
import os
import tempfile
import threading
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

marks = Path(os.environ["END_MARKS"])
ends = marks / "ends.txt"
run = 1 + (ends.read_text().count("start ") if ends.exists() else 0)


def append(line):
    with open(ends, "a") as f:
        f.write(f"{line} {run}\\n")


append("start")


def after_the_main_thread():
    threading.main_thread().join()
    append("thread")


threading.Thread(target=after_the_main_thread, name="script-thread").start()
atexit.register(append, "atexit")


rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")


@tf.function
def halved_if_positive(v):
    if tf.reduce_sum(v) > 0:  # autograph converts this `if` in a source file it writes to the temporary folder
        v = v * 0.5
    return v


halved_if_positive(tf.constant(x[:4]))
generated = list(Path(tempfile.gettempdir()).glob("__autograph_generated_file*"))
append(f"autograph-files-during-the-run={len(generated) > 0}")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=2, verbose=0)
'''
SPEC = "name: ends\nscript: train.py\nmarket: {trace: null}\ncheckpoint: {interval: {steps: 2}}\n"


def _generated(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("__autograph_generated_file*"))


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """A temporary folder of this test's own (TMPDIR) for every process it starts."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


@pytest.mark.slow
def test_plain_python_joins_the_thread_then_runs_atexit_and_leaves_no_autograph_files(tmp_path, own_tmp):
    """The reference the runtime is held to: what `python train.py` does with this script."""
    marks = tmp_path / "plain"
    marks.mkdir()
    (marks / "train.py").write_text(SCRIPT)
    run = subprocess.run([sys.executable, "train.py"], cwd=marks, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL, env={**os.environ, "END_MARKS": str(marks)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert (marks / "ends.txt").read_text().splitlines() == [
        "start 1", "autograph-files-during-the-run=True 1", "thread 1", "atexit 1"]
    assert _generated(own_tmp) == []


@pytest.mark.slow
def test_an_attempt_ends_as_python_does_and_a_noticed_one_runs_its_handlers_without_waiting(
        tmp_path, own_tmp, monkeypatch):
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("END_MARKS", str(marks))
    doc = run_inline_job(tmp_path, SPEC, SCRIPT, "--preempt-at", "5:60")  # mid-way through epoch 1 (8 steps);
    # a 60 s notice, so that no busy machine's slowness lets the SIGKILL come before the handlers ran
    assert doc["state"] == "completed", doc
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "completed"], doc["attempts"]
    # The noticed attempt: its handler ran; its thread was not waited for, nor did it outlive the process.
    # The attempt that finished: as plain python, the thread joined, then the handlers ran.
    assert (marks / "ends.txt").read_text().splitlines() == [
        "start 1", "autograph-files-during-the-run=True 1", "atexit 1",
        "start 2", "autograph-files-during-the-run=True 2", "thread 2", "atexit 2"]
    assert _generated(own_tmp) == []  # autograph's handler ran in both attempts' processes


NEVER_ENDS = '''
import threading

import keras
import numpy as np

threading.Thread(target=threading.Event().wait, name="never-ends").start()  # non-daemon, never set
x = np.zeros((32, 4), "float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(x, x[:, :1], epochs=1, verbose=0)
'''


@pytest.mark.slow
def test_a_thread_that_never_ends_cannot_keep_a_finished_attempt_running(tmp_path, monkeypatch):
    """`python train.py` would wait forever; the attempt ends after its grace (shortened here), says
    why in its log, and keeps its code."""
    monkeypatch.setenv("SPOTFIT_END_GRACE_S", "1")
    doc = run_inline_job(tmp_path, SPEC.replace("name: ends", "name: never-ends"), NEVER_ENDS)
    assert doc["state"] == "completed" and [a["state"] for a in doc["attempts"]] == ["completed"], doc
    log = sdk.logs(doc["id"])["log"]
    assert "were still running 1 s after its end; the attempt ends now with exit 0" in log, log[-2000:]
