"""Turning what the controller reads (progress, costs, prices) into rule observations.

`Watchdog` keeps the little history rules need across polls — utilization samples, the step
the attempt started training from, and when the step last moved (start-up, before the first
step after restore, is not a stall; a stall that ends lets `stalled` fire again) — and asks
the `RuleEngine` for verdicts. It decides nothing itself and has no side effects; the controller
loop carries the verdicts out.
"""

from __future__ import annotations

import time
from typing import Any

from spotfit.attempt.progress import Phase
from spotfit.controller.rules import Observation, RuleEngine, Verdict
from spotfit.spec.rules import RuleSpec

MAX_SAMPLES = 20000


class Watchdog:
    def __init__(self, rules: list[RuleSpec], fired: set[int] | None = None):
        self.engine = RuleEngine(rules, fired)
        self._samples: list[tuple[float, float]] = []
        self._last_heartbeat = None
        self._step: int | None = None
        self._training = False
        self._step_at: float | None = None
        self._first_step: int | None = None  # the step of the attempt's first training observation

    @property
    def active(self) -> bool:
        return bool(self.engine.rules)

    def check(self, progress: dict[str, Any], cost_usd: float, spot_usd_per_h: float | None) -> list[Verdict]:
        now = time.time()
        step = progress.get("step") or 0
        training = progress.get("phase") == Phase.TRAINING
        if training and self._first_step is None:
            self._first_step = step  # where this attempt starts (restored), not a step it made
        if step != self._step:
            self._step_at = now
            self.engine.rearm("stalled")  # training recovered: a later stall is news again
        self._step, self._training = step, training
        # Start-up (TF import, restore, tracing the first step) is not a stall: the clock runs
        # from the first step this attempt makes.
        stepping = training and self._first_step is not None and step > self._first_step
        beat = progress.get("heartbeat_at")
        if beat != self._last_heartbeat and progress.get("utilization_pct") is not None:
            self._last_heartbeat = beat
            if progress.get("phase") in (Phase.TRAINING, Phase.SERVING):  # serving: a notebook (idle_notebook)
                self._samples.append((beat or now, float(progress["utilization_pct"])))
                del self._samples[:-MAX_SAMPLES]
        obs = Observation(
            now_s=now,
            step=step,
            total_steps=progress.get("total_steps"),
            training=training,
            losses=[tuple(p) for p in progress.get("losses") or []],
            metrics=progress.get("metrics") or {},
            nan_loss=bool(progress.get("nan_loss")),
            nan_step=progress.get("nan_step"),
            utilization=list(self._samples),
            last_step_at=self._step_at if stepping else None,
            cost_usd=cost_usd,
            spot_usd_per_h=spot_usd_per_h,
            last_activity_at=progress.get("last_activity_at"),
        )
        return self.engine.check(obs)

    def new_attempt(self) -> None:
        """A relaunch starts the utilization and stall clocks afresh (start-up is not idle).

        A notebook's idle rule watches each attempt anew: a resumed notebook stops again when idle.
        """
        self.engine.rearm("idle_notebook")
        self._samples.clear()
        self._step = None
        self._training = False
        self._step_at = None
        self._first_step = None
