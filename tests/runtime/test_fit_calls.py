"""Which fit call a resume continues, and the global steps of each call (runtime/fit_calls.py)."""

from __future__ import annotations

import numpy as np

from spotfit.runtime.checkpoint import Checkpoint, CheckpointStore
from spotfit.runtime.fit_calls import FitCalls
from spotfit.stores import open_store


def _ckpt(step: int, fit_index: int, done: bool, calls: dict) -> Checkpoint:
    return Checkpoint(step=step, arrays={}, meta={"step": step, "fit_index": fit_index, "call_done": done,
                                                  "calls": calls})


def test_earlier_calls_are_skipped_with_their_record_and_the_checkpoints_call_resumes(tmp_path):
    store = open_store(f"file://{tmp_path}/job")
    CheckpointStore(store, keep=1, prefix="fit_calls/0001").save(180, {"w": np.ones(2)}, {"fit_index": 1})
    calls = FitCalls(store, _ckpt(284, fit_index=2, done=False, calls={"1": 180}))
    first = calls.begin()
    assert first.role == "skip" and first.checkpoint.step == 180 and calls.base_step == 0
    second = calls.begin()
    assert second.role == "resume" and second.checkpoint.step == 284 and calls.base_step == 180
    calls.finish(180)
    assert calls.begin().role == "fresh" and calls.base_step == 360


def test_a_finished_calls_checkpoint_skips_that_call_and_starts_the_next(tmp_path):
    calls = FitCalls(open_store(f"file://{tmp_path}/job"), _ckpt(180, fit_index=1, done=True, calls={"1": 180}))
    first = calls.begin()
    assert first.role == "skip" and first.checkpoint.step == 180
    assert calls.begin().role == "fresh" and calls.base_step == 180


def test_total_steps_add_the_finished_calls():
    calls = FitCalls(store=None, resume=None)
    calls.begin()
    assert calls.planned_total(180) == 180
    calls.finish(180)
    calls.begin()
    assert calls.planned_total(180) == 360 and calls.planned_total(None) is None
