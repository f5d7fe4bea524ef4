"""The trace clock of a replayed job: it runs while the job waits or trains, and holds otherwise.

A cloud bills what its instance does, not what this machine does: the local process's start-up
(Python, TensorFlow import, restore) and its wind-down after a notice are not a cloud's boot
time, so the clock stands still through them. The modeled restart overhead of a launch is
passed at once when the attempt starts training (`market.overhead_h`, docs/market.md).

It runs in one of two ways:

- on the wall: `time_scale` trace seconds per wall second (waiting; training without `work_h`);
- on the steps: `trace_s_per_step` per training step (training with `work_h`: a step lasts
  work_h / total_steps on the modeled cloud instance whatever this machine's speed), which
  makes the replay deterministic in trace time.

Example:

>>> clock = TraceClock(time_scale=100.0, origin_s=1000.0, wall_s=0.0)
>>> clock.now_s(wall_s=2.0)
1200.0
>>> clock.hold(1200.0); clock.now_s(wall_s=50.0)
1200.0
>>> clock.run_on_steps(1500.0, step=10, trace_s_per_step=30.0); clock.now_s(step=12)
1560.0
"""

from __future__ import annotations

import time


class TraceClock:
    """Absolute trace seconds, anchored at (trace second, wall second or step)."""

    def __init__(self, time_scale: float, origin_s: float, wall_s: float | None = None):
        self.time_scale = time_scale
        self._anchor_s = origin_s
        self._anchor_wall_s = time.time() if wall_s is None else wall_s
        self._running = True
        self._steps: tuple[float, float] | None = None  # (step at the anchor, trace seconds per step)

    @property
    def running(self) -> bool:
        return self._running

    @property
    def on_steps(self) -> bool:
        return self._running and self._steps is not None

    def now_s(self, wall_s: float | None = None, step: float | None = None) -> float:
        """The trace second now: `step` is the latest training step (used on the steps)."""
        if not self._running:
            return self._anchor_s
        if self._steps is not None:
            base, per_step = self._steps
            return self._anchor_s + max(0.0, (step if step is not None else base) - base) * per_step
        wall_s = time.time() if wall_s is None else wall_s
        return self._anchor_s + (wall_s - self._anchor_wall_s) * self.time_scale

    def hold(self, at_s: float) -> None:
        """Stand still at `at_s` until told to run again."""
        self._anchor_s, self._running, self._steps = at_s, False, None

    def run_on_wall(self, from_s: float, wall_s: float | None = None) -> None:
        self._anchor_s, self._running, self._steps = from_s, True, None
        self._anchor_wall_s = time.time() if wall_s is None else wall_s

    def run_on_steps(self, from_s: float, step: float, trace_s_per_step: float) -> None:
        self._anchor_s, self._running, self._steps = from_s, True, (step, trace_s_per_step)
