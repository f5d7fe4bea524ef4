"""Several `fit` calls are one job: global steps across calls, and which call a resume continues.

Scripts often call `fit` more than once (fit the head with the base frozen, then unfreeze,
recompile and fit again). spotfit counts steps globally over the calls, so progress, the
checkpoint's step and `--preempt-at` all mean the job's step. Each checkpoint records its call
(`fit_index`) and whether that call had finished (`call_done`); the newest is picked by
(call, step). At the end of each call its state is also kept under `fit_calls/<n>/` (one
checkpoint per call, never pruned by the periodic ones), so that on resume each earlier call
returns at once *ending with its recorded state*: the model's and optimizer's variables, the
RNG state, its callbacks' state and its `History`, exactly as when it returned the first time.
Whatever the script does between calls then sees what it saw uninterrupted.

The job's total is the sum of the calls' planned steps. A call's plan is known when it
begins; a later call is not known until the script reaches it, so while the script runs the
total is an estimate (`total_steps_estimated: true` in progress) that grows at each new call,
and it becomes exact when the script ends.

Example:

>>> calls = FitCalls(store=None, resume=None)
>>> calls.begin().role, calls.index, calls.base_step
('fresh', 1, 0)
>>> calls.finish(180)
>>> calls.begin().role, calls.base_step
('fresh', 180)
"""

from __future__ import annotations

from dataclasses import dataclass

from spotfit.attempt import layout
from spotfit.runtime.checkpoint import Checkpoint, CheckpointStore
from spotfit.stores.base import ObjectStore


@dataclass
class CallStart:
    """What a `fit` call does: `skip` (ended before the checkpoint), `resume` or `fresh`.

    `checkpoint`: the state to restore (the call's end record for `skip`, the resume checkpoint
    for `resume`), or None.
    """

    role: str
    checkpoint: Checkpoint | None = None


class FitCalls:
    """The job's `fit` calls in this attempt: their index, global steps and end records."""

    def __init__(self, store: ObjectStore | None, resume: Checkpoint | None):
        self.store = store
        self.index = 0  # the current (or last) call, counted from 1
        self.base_step = 0  # the job's global step where the current call began
        self.resume = resume
        self.trained_here = False  # a call trained in this process (the first one says where it began)
        # Steps trained by each finished call, as the resume checkpoint recorded them.
        self.finished: dict[int, int] = {} if resume is None else {
            int(k): int(v) for k, v in (resume.meta.get("calls") or {}).items()}

    def begin(self) -> CallStart:
        """A `fit` call begins: what it must do."""
        self.index += 1
        self.base_step = sum(steps for i, steps in self.finished.items() if i < self.index)
        ckpt = self.resume
        if ckpt is None:
            return CallStart("fresh")
        at = int(ckpt.meta.get("fit_index", 1))
        done = bool(ckpt.meta.get("call_done"))
        if self.index < at or (self.index == at and done):
            record = ckpt if self.index == at else self.record(self.index)
            if self.index == at:
                self.resume = None
            return CallStart("skip", record)
        self.resume = None
        if self.index == at:
            return CallStart("resume", ckpt)
        return CallStart("fresh")

    def finish(self, steps: int) -> None:
        """The current call ended after training `steps` steps."""
        self.finished[self.index] = steps

    def planned_total(self, call_steps: int | None) -> int | None:
        """The job's total: finished earlier calls plus this call's plan (None while unknown)."""
        if call_steps is None:
            return None
        return self.base_step + call_steps

    def records(self) -> CheckpointStore | None:
        if self.store is None:
            return None
        return CheckpointStore(self.store, keep=1, prefix=layout.fit_call(self.index))

    def record(self, index: int) -> Checkpoint | None:
        """The end state of call `index`, or None when no record exists (reported by the caller)."""
        if self.store is None:
            return None
        return CheckpointStore(self.store, keep=1, prefix=layout.fit_call(index)).load_latest()
