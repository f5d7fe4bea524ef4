"""Progress heartbeats and events, written by the runtime under the job's store prefix.

- `progress.json`: the latest step, loss, phase and timings of the running attempt, rewritten
  at most every `heartbeat_s` (and at once on phase changes, held steps and the first NaN
  loss). A training step only records its step and loss in memory (`step_done`, no I/O);
  `start_heartbeat`'s thread writes what changed once per heartbeat, so the training loop never
  waits for the store, and a step that hangs (the `stalled` rule) still shows the last step made.
- `events/<attempt>-<seq>.json`: one object per event (restored, checkpoint saved, corrupt
  checkpoint skipped, preemption notice, ...); the controller copies them into the state DB.

While the store is unreachable, training goes on: a progress write that fails is skipped (the
next heartbeat carries the news) and events wait in order until a write succeeds again.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections import deque
from typing import Any, Unpack

from spotfit.attempt import layout
from spotfit.attempt.events import encode_event
from spotfit.attempt.progress import Phase, Progress
from spotfit.errors import StoreError
from spotfit.stores.base import ObjectStore


class Reporter:
    """Writes progress and events for one attempt."""

    def __init__(self, store: ObjectStore, attempt: int, heartbeat_s: float = 1.0):
        self.store = store
        self.attempt = attempt
        self.heartbeat_s = heartbeat_s
        self._seq = 0
        self._last_write = 0.0
        self._unsent: deque = deque()  # events not yet written: (key, body)
        self._pending = False  # a progress update that the heartbeat throttle left unwritten
        self._soon = False  # a progress update for the heartbeat thread to write at once (`progress(soon=True)`)
        self._wake = threading.Event()  # wakes the heartbeat thread before its next beat
        self._beating = False  # a heartbeat thread runs: `soon` writes are its to make
        self._lock = threading.Lock()  # guards `state` and the queues: held for microseconds, never over I/O
        self._write_lock = threading.Lock()  # orders the writes of the training and heartbeat threads
        self.state: Progress = {
            "attempt": attempt,
            "pid": os.getpid(),
            "phase": Phase.STARTING,
            "step": 0,
            "total_steps": None,
            "epoch": 0,
            "loss": None,
            "metrics": {},
            "timings": {},
            "nan_loss": False,
            "nan_step": None,  # the first step whose loss was NaN or infinite
        }
        # The last steps' losses, for rules that look at windows of steps (loss_plateau).
        self._losses: deque = deque(maxlen=256)

    def event(self, kind: str, message: str, **data: Any) -> None:
        """Record an event and write it (with any still waiting) before returning."""
        with self._write_lock:
            self._queue_event(kind, message, data)
            self._flush_events()

    def event_soon(self, kind: str, message: str, **data: Any) -> None:
        """Record an event for the heartbeat thread to write at once, in order: the caller (a training step's
        epoch end) does not wait for the store. Written before returning where no heartbeat thread runs."""
        if not self._beating:
            self.event(kind, message, **data)
            return
        self._queue_event(kind, message, data)
        self._wake.set()

    def _queue_event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        with self._lock:
            self._seq += 1
            key = layout.event(self.attempt, self._seq)
            self._unsent.append((key, encode_event(self.attempt, kind, message, ts=time.time(), **data)))

    def _flush_events(self) -> bool:
        """Write waiting events in order; False if the store failed (they wait for the next try).

        The write lock is held, so events are written by one thread at a time, in order.
        """
        while self._unsent:
            key, body = self._unsent[0]
            try:
                self.store.write_bytes(key, body)
            except StoreError as exc:
                self._store_failed(exc)
                return False
            self._unsent.popleft()
        return True

    def _store_failed(self, exc: StoreError) -> None:
        with self._lock:
            if not self.state.get("store_error"):
                sys.stderr.write(f"spotfit: store unreachable, training goes on: {exc}\n")
            self.state["store_error"] = str(exc)

    def record_loss(self, step: int, loss: Any) -> bool:
        """Remember one step's loss; True when it is the first NaN or infinite one (`nan_loss` rises)."""
        with self._lock:
            return self._record_loss(step, loss)

    def step_done(self, step: int, loss: Any, epoch: int) -> bool:
        """One training step: remember its step, loss and epoch, no I/O; True on the first NaN loss.

        The heartbeat thread writes the news within a heartbeat.
        """
        with self._lock:
            self.state["step"], self.state["epoch"] = step, epoch
            first_nan = self._record_loss(step, loss)
            self._pending = True
            return first_nan

    def _record_loss(self, step: int, loss: Any) -> bool:
        try:
            value = float(loss)
        except (TypeError, ValueError):
            return False
        if math.isfinite(value):
            self._losses.append((step, value))
            self.state["loss"] = value
            return False
        self._losses.append((step, None))
        self.state["loss"] = None
        first = not self.state["nan_loss"]
        if first:
            self.state["nan_loss"], self.state["nan_step"] = True, step
        return first

    def news(self) -> None:
        """Something changed in `state` outside `progress` (a utilization sample): the next heartbeat writes it."""
        with self._lock:
            self._pending = True

    def progress(self, force: bool = False, soon: bool = False, **fields: Unpack[Progress]) -> None:
        """Update the progress; written now with `force` (or when a heartbeat has passed since the last write),
        by the heartbeat thread at once with `soon` (as `force` where no heartbeat thread runs), else within a
        heartbeat."""
        with self._lock:
            self.state.update(fields)
            if soon and self._beating:
                self._soon = self._pending = True
                due = False
            else:
                due = force or soon or time.time() - self._last_write >= self.heartbeat_s
                self._pending = self._pending or not due
        if soon and not due:
            self._wake.set()
        if due:
            self._write_progress()

    def start_heartbeat(self) -> threading.Event:
        """Write left-over progress updates and `soon` writes from a daemon thread; set the returned event to
        stop it (what it had not written yet is the next forced write's: events first, then progress)."""
        stop = _Stop(self._wake)

        def loop():
            while not stop.is_set():
                self._wake.wait(self.heartbeat_s)
                self._wake.clear()
                if stop.is_set():
                    break
                with self._lock:
                    due = self._soon or (self._pending and time.time() - self._last_write >= self.heartbeat_s)
                    events = bool(self._unsent)
                if due:
                    self._write_progress()
                elif events:
                    with self._write_lock:
                        self._flush_events()
            self._beating = False

        self._beating = True
        threading.Thread(target=loop, name="spotfit-heartbeat", daemon=True).start()
        return stop

    def _write_progress(self) -> None:
        """Write `progress.json` now (events first, so they never lag behind it).

        The state is copied under the short lock and written outside it, so a training step
        never waits for the store.
        """
        with self._write_lock:
            with self._lock:
                now = time.time()
                self.state["heartbeat_at"] = now
                self.state["losses"] = list(self._losses)
                self._last_write = now
                self._pending = self._soon = False
                body = json.dumps(self.state, default=float).encode()
            if self._unsent and not self._flush_events():
                return
            try:
                self.store.write_bytes(layout.PROGRESS, body)
            except StoreError as exc:
                self._store_failed(exc)
                return
            with self._lock:
                self.state.pop("store_error", None)

    def timing(self, name: str, seconds: float) -> None:
        with self._lock:
            self.state["timings"][name] = round(seconds, 4)


class _Stop(threading.Event):
    """The heartbeat's stop event: setting it also wakes the heartbeat thread, which ends at once."""

    def __init__(self, wake: threading.Event):
        super().__init__()
        self._also = wake

    def set(self) -> None:
        super().set()
        self._also.set()
