"""`spotfit run` warns at once when the script has nothing spotfit can checkpoint, and refuses one that
does not compile (`validate` too)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.script.scriptcheck import checkpointable
from tests.support.jobs import spotfit_cmd


def test_fit_loop_and_optimizer_applies_are_found_hand_assigned_updates_are_not():
    assert checkpointable("import keras\nm = keras.Sequential()\nhistory = m.fit(x, y)\n")
    assert checkpointable("import spotfit\nfor step, batch in spotfit.loop(m, data, steps=10):\n    pass\n")
    assert checkpointable("for b in data:\n    with tf.GradientTape() as t:\n        loss = m(b)\n"
                          "    opt.apply_gradients([])\n")
    assert checkpointable("self.d_optimizer.apply(grads, self.discriminator.trainable_weights)\n")
    assert not checkpointable("import tensorflow as tf\nfor b in data:\n    with tf.GradientTape() as t:\n"
                              "        loss = m(b)\n    w.assign_sub(0.1 * t.gradient(loss, w))\n    df.apply(f)\n")


class _Finalized:
    """Garbage whose finalizer runs Python code: a collection during a parse lets another thread in."""

    def __del__(self) -> None:
        sum(range(100))


def test_the_check_survives_another_thread_parsing_at_the_same_time():
    # CPython 3.11 shares the AST builder's recursion counter between threads (python/cpython#106905): this
    # failed a CI run with `SystemError: AST constructor recursion depth mismatch` while a thread of the
    # emulated cloud printed a traceback (3.11's traceback module parses each line it marks). Unfixed, most
    # of the checks below fail.
    source = (Path(__file__).parents[2] / "examples" / "digits" / "train.py").read_text()
    interval = sys.getswitchinterval()
    done = threading.Event()
    parses = []

    def other_thread_parsing() -> None:
        while not done.is_set():
            try:
                ast.parse("x = [1, (2, 3)]\n" * 5)
            except SystemError:  # the other thread's own parse is not ours to protect
                pass
            parses.append(1)

    thread = threading.Thread(target=other_thread_parsing, daemon=True)
    sys.setswitchinterval(1e-5)
    thread.start()
    try:
        for _ in range(200):
            garbage = [_Finalized() for _ in range(50)]
            for item in garbage:
                item.cycle = item  # type: ignore[attr-defined]
            del garbage, item
            assert checkpointable(source)
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert parses  # the other thread did parse meanwhile


def test_submitting_a_script_without_fit_records_the_warning(tmp_path):
    (tmp_path / "train.py").write_text("for batch in range(10):\n    print(batch)\n")
    (tmp_path / "spotfit.yaml").write_text("name: bare\nscript: train.py\nmarket: {trace: null}\n")
    job_id = sdk.submit(str(tmp_path / "spotfit.yaml"))
    warnings = [e for e in sdk.events(job_id) if e["kind"] == "nothing_checkpointed"]
    assert len(warnings) == 1 and "train.py calls neither `model.fit` nor `spotfit.loop` nor" in warnings[0]["message"]


def test_a_script_that_calls_fit_gets_no_warning(job_spec):
    job_id = sdk.submit(str(job_spec("name: digits\nscript: train.py\nmarket: {trace: null}\n")))
    assert not [e for e in sdk.events(job_id) if e["kind"] == "nothing_checkpointed"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


@pytest.mark.parametrize("verb", ["validate", "run"])
def test_a_script_with_a_syntax_error_is_refused_at_once(tmp_path, verb):
    # max_failures 0: on code that launched it anyway, the run ends after one billed attempt, not after back-offs.
    (tmp_path / "train.py").write_text("import keras\n\nmodel = keras.Sequential(\nmodel.fit(x, y)\n")
    (tmp_path / "spotfit.yaml").write_text("name: typo\nscript: train.py\nmax_failures: 0\nmarket: {trace: null}\n")
    out = _cli(verb, str(tmp_path / "spotfit.yaml"))
    assert out.returncode == 2, (out.stdout, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert lines[0] == "error: Invalid `script`: train.py:3:25: '(' was never closed", lines  # FILE:LINE:COL, no text
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
    assert sdk.list_jobs() == []  # nothing recorded, nothing launched or billed


def test_no_error_quotes_the_scripts_content(tmp_path):
    # `script:` may name any readable file (a key, a password file): its content must stay out of errors.
    secret = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"
    (tmp_path / "creds").write_text(secret + "\n")
    (tmp_path / "spotfit.yaml").write_text("name: leak\nscript: creds\nmarket: {trace: null}\n")
    for verb in ("validate", "run"):
        out = _cli(verb, str(tmp_path / "spotfit.yaml"))
        assert out.returncode == 2, (verb, out.stderr[-2000:])
        assert "OPENSSH" not in out.stdout + out.stderr and "b3Bl" not in out.stdout + out.stderr, out.stderr
        assert out.stderr.startswith("error: Invalid `script`: creds:1:"), out.stderr


def test_a_batch_with_a_broken_script_records_none_of_its_jobs(tmp_path):
    for name, body in (("good", "print('ok')\n"), ("bad", "def f(:\n    pass\n")):
        (tmp_path / f"{name}.py").write_text(body)
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nscript: {name}.py\nmarket: {{trace: null}}\n")
    out = _cli("submit", str(tmp_path / "good.yaml"), str(tmp_path / "bad.yaml"))
    assert out.returncode == 2 and "bad.py:1" in out.stderr.splitlines()[0], out.stderr[-2000:]
    assert sdk.list_jobs() == []  # the good one neither: a batch is checked whole before anything is recorded


def test_a_script_broken_after_the_submission_fails_the_job_before_any_launch(tmp_path):
    from spotfit.controller.classify import ConfigError

    (tmp_path / "train.py").write_text("print('ok')\n")
    (tmp_path / "spotfit.yaml").write_text("name: edited\nscript: train.py\nmax_failures: 0\nmarket: {trace: null}\n")
    job_id = sdk.submit(str(tmp_path / "spotfit.yaml"))
    (tmp_path / "train.py").write_text("print('ok'\n")  # edited while the job waited
    with pytest.raises(ConfigError, match=r"train.py:1:6: '\(' was never closed"):
        sdk.run_job(job_id)
    doc = sdk.status(job_id)
    assert doc["state"] == "failed" and doc["message"].startswith("configuration error: Invalid `script`")
    assert doc["attempts"] == [] and doc["cost_usd"] == 0.0
