"""Unmodified `GradientTape` loops under spotfit: the keras-io guide "Writing a training loop from
scratch" (tests/runtime/scripts/keras_io_training_loop.py), instrumented at `optimizer.apply`.

Its loops: model 1 trains 2 epochs eagerly (steps 1-30); model 2 trains 2 epochs eagerly and
2 more through a `tf.function` step with the same optimizer (one loop, steps 31-90)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "keras_io_training_loop.py"
# float32 as the plain script (issue 38: `mixed_precision: auto` is not yet the script's own choice).
SPEC = """name: keras-io-loop
script: train.py
market: {trace: null}
checkpoint: {interval: {steps: 10}, keep: 2}
training: {seed: 0, deterministic: true, mixed_precision: "off"}
"""


def _run(tmp_path: Path, *flags: str) -> tuple[dict, Path]:
    doc = run_inline_job(tmp_path, SPEC, SCRIPT.read_text(), *flags)
    assert doc["state"] == "completed", doc
    return doc, tmp_path / "job"


def _events(doc: dict, kind: str) -> list[dict]:
    return [e for e in sdk.events(doc["id"]) if e["kind"] == kind]


def test_an_unmodified_gradient_tape_loop_is_counted_checkpointed_and_resumed(tmp_path):
    base, base_dir = _run(tmp_path / "base")
    assert base["step"] == 90 and base["total_steps"] == 90
    saves = [e["data"]["step"] for e in _events(base, "checkpoint")]
    assert saves[:3] == [10, 20, 30] and 90 in saves  # interval saves, and each loop's end
    summary = json.loads((base_dir / "summary.json").read_text())
    assert summary["iterations"] == 60

    # A notice in loop 1 (20), a SIGKILL in loop 2's eager part (50), a notice inside its
    # tf.function part (80).
    doc, job_dir = _run(tmp_path / "preempted", "--preempt-at", "20:5,50:0,80:5")
    attempts = doc["attempts"]
    assert [a["state"] for a in attempts] == ["preempted", "killed", "preempted", "completed"]
    assert [a["end_step"] for a in attempts[:3]] == [20, 50, 80]
    assert [a["start_step"] for a in attempts] == [0, 20, 40, 80]  # the SIGKILL at 50 came before its save: back to 40
    assert [e["data"]["step"] for e in _events(doc, "restored")] == [20, 40, 80]
    assert [e["data"]["steps"] for e in _events(doc, "replaying")] == [20, 40 - 30, 80 - 30]
    # steps_redone: the 10 lost to the SIGKILL (50 -> 40), and every step the script ran again to reach
    # a checkpoint: attempt 2 replays 20 of loop 1; attempts 3 and 4 run loop 1 again (30) and replay loop 2.
    ledger = sdk.cost(doc["id"])
    assert [r["steps_replayed"] for r in ledger["rows"]] == [0, 20, 30 + 10, 30 + 50]
    assert ledger["totals"]["steps_redone"] == 10 + 20 + 40 + 80
    # The data position is re-driven by the script's own epoch loop, so the run is exact.
    assert (doc["step"], doc["weights_sha256"]) == (base["step"], base["weights_sha256"])
    assert json.loads((job_dir / "summary.json").read_text()) == summary
