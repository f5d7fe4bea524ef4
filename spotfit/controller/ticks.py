"""When the policy is asked, and what trace time it is: per tick on the replay, per launch otherwise.

`AttemptPlanner` holds a `PolicyTicker` when the job replays a market trace, else a
`WallTicker`; it asks either one when the clock starts, what time it is, what to launch with
no live attempt, whether the market or the policy ends a live one, and tells it when an
attempt trains and ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spotfit.controller.clock import TraceClock
from spotfit.controller.work_meter import WorkMeter
from spotfit.market.policies.base import Decision
from spotfit.market.replay import MarketReplay
from spotfit.state.records import AttemptRecord, spot_zone, trace_start_s
from spotfit.state.states import Market

Launch = Decision  # the policy's decision to launch (never `Kind.NONE`: waiting is None)
Decide = Callable[[AttemptRecord | None, dict[str, Any], float | None], Launch | None]  # (attempt, progress, at_s)


class WallTicker:
    """Without a trace: trace time is the wall, the policy is asked at each launch and never switches."""

    def __init__(self, wall_now_s: Callable[[], float], decide: Decide):
        self._wall_now_s = wall_now_s
        self._decide = decide

    def start(self, start_s: float, live_attempt: bool) -> None:
        pass

    def now_s(self, step: int) -> float:
        return self._wall_now_s()

    def on_training(self, attempt: AttemptRecord, step: int) -> None:
        pass

    def decide_idle(self) -> Launch | None:
        return self._decide(None, {}, None)

    def resume_now(self) -> None:
        pass

    def market_event(self, attempt: AttemptRecord) -> tuple[str, float] | None:
        return None

    def catch_up(self, attempt: AttemptRecord) -> tuple[str, float] | None:
        return None

    def pending_text(self) -> str:
        return "wait"

    def attempt_ended(self, market_stop: bool) -> None:
        pass

    def no_capacity(self) -> None:
        pass


class PolicyTicker:
    """The replay's ticks: the policy is asked once per tick, at the tick's start, as in the simulator."""

    def __init__(self, replay: MarketReplay, clock: TraceClock, meter: WorkMeter, now_s: Callable[[], float],
                 decide: Decide, origin_s: float):
        self.replay = replay
        self.clock = clock
        self.meter = meter
        self._now_s = now_s  # the planner's reading (a budget's cap included)
        self._decide = decide
        self._next_tick = replay.tick_at(origin_s)  # next tick to ask at
        self._pending: Launch | None = None  # a switch, launched when its attempt ends
        self._stopping: int | None = None  # the attempt held at the tick start its stop is due
        self._idle_since_s = origin_s  # the earliest trace second the next launch may start at

    def start(self, start_s: float, live_attempt: bool) -> None:
        """The clock runs from `start_s`; it holds while the live attempt found has not been seen training."""
        self.clock.run_on_wall(start_s)
        self._idle_since_s = start_s
        self._next_tick = self.replay.tick_at(start_s)
        if live_attempt:
            self.clock.hold(self.clock.now_s())

    def now_s(self, step: int) -> float:
        return self.clock.now_s(step=step)

    def on_training(self, attempt: AttemptRecord, step: int) -> None:
        """An attempt trains: the clock runs from launch + overhead (on the steps, or on the wall)."""
        number = attempt["number"]
        if number == self._stopping:  # held at its stop's tick start until it exits
            return
        train_s = trace_start_s(attempt) + self.meter.model_overhead_s()
        if self.meter.record_training(attempt, step, train_s):
            self._start_training_clock(attempt, train_s)
        elif not self.clock.running:  # adopted by a restarted controller
            self._start_training_clock(attempt, train_s if self.meter.per_step() else self.clock.now_s())

    def _start_training_clock(self, attempt: AttemptRecord, train_s: float) -> None:
        per_step = self.meter.per_step()
        if per_step:
            self.clock.run_on_steps(train_s, self.meter.base_work_s(attempt["number"]) / per_step, per_step)
        else:
            self.clock.run_on_wall(train_s)

    def _tick_start_s(self, tick: int) -> float:
        replay = self.replay
        return max(replay._first_s + tick * replay.gap_s, replay.origin_s)

    def decide_idle(self) -> Launch | None:
        """With no live attempt: what to launch, asking the policy at each tick start passed.

        A launch holds the clock at its tick's start until the attempt trains. A switch decided
        while the last attempt ran is launched at the tick it was decided at, without asking again.
        """
        if self._pending is not None:  # the clock still holds at the switch's tick start
            pending, self._pending = self._pending, None
            self.clock.hold(self.clock.now_s())
            return pending
        if not self.clock.running:
            self.clock.run_on_wall(self.clock.now_s())
        for tick in range(self._next_tick, self.replay.tick_at(self._now_s()) + 1):
            at_s = self._tick_start_s(tick)
            self._next_tick = tick + 1
            decision = self._decide(None, {}, at_s)
            if decision is not None:
                self.clock.hold(max(at_s, self._idle_since_s))
                return decision
        return None

    def resume_now(self) -> None:
        """A paused job goes on: the next decision is asked now, not at the ticks it sat out."""
        self._idle_since_s = self._now_s()
        self._next_tick = self.replay.tick_at(self._idle_since_s)

    def market_event(self, attempt: AttemptRecord) -> tuple[str, float] | None:
        """For a live attempt: ("preempted" | "switch", trace s) at the first tick start passed that ends it.

        The clock holds at that tick's start: the attempt is billed until then, and the next
        launch starts there. Spot that is gone at a tick's start preempts before the policy is
        asked; a switch is remembered for `decide_idle`.
        """
        for tick in range(self._next_tick, self.replay.tick_at(self._now_s()) + 1):
            at_s = self._tick_start_s(tick)
            if at_s <= trace_start_s(attempt):
                self._next_tick = tick + 1
                continue
            if attempt["market"] == Market.SPOT and not self.replay.available(spot_zone(attempt), at_s):
                self._next_tick = tick
                return self._stop_at(attempt, "preempted", at_s)
            self._next_tick = tick + 1
            decision = self._decide(attempt, {}, at_s)
            if decision is None or not same_mode(attempt, decision):
                self._pending = decision
                return self._stop_at(attempt, "switch", at_s)
        return None

    def catch_up(self, attempt: AttemptRecord) -> tuple[str, float] | None:
        """For an attempt adopted after a controller gap: the ticks it trained through unwatched.

        No controller asked the policy at those ticks, so nothing it would have planned happens
        there (as on a cloud, the instance just ran on); the market still reclaims spot
        capacity that was gone: ("preempted", trace s) at the first such tick start, else None.
        """
        for tick in range(self._next_tick, self.replay.tick_at(self._now_s()) + 1):
            at_s = self._tick_start_s(tick)
            if at_s > trace_start_s(attempt) and attempt["market"] == Market.SPOT \
                    and not self.replay.available(spot_zone(attempt), at_s):
                self._next_tick = tick
                return self._stop_at(attempt, "preempted", at_s)
            self._next_tick = tick + 1
        return None

    def _stop_at(self, attempt: AttemptRecord, why: str, at_s: float) -> tuple[str, float]:
        self.clock.hold(at_s)
        self._stopping = attempt["number"]
        return why, at_s

    def pending_text(self) -> str:
        pending = self._pending
        return "wait" if pending is None else " ".join(p for p in (pending.market, pending.zone) if p)

    def attempt_ended(self, market_stop: bool) -> None:
        """An attempt ended: a stop the market or the policy made holds the clock at its tick
        until the next launch; after any other (done, failed, injected, rule) the clock runs on
        from its end, and the next decision is asked in this tick."""
        end_s = self._now_s()  # a budget's cap included
        self._stopping = None
        if not market_stop:
            self._pending = None
            self.clock.run_on_wall(end_s)
            self._next_tick = self.replay.tick_at(self.clock.now_s())
        elif self.clock.now_s() > end_s:
            self.clock.hold(end_s)
        self._idle_since_s = self.clock.now_s()  # a launch never starts before this end (its bill ends there)

    def no_capacity(self) -> None:
        """A launch found no capacity: ask again in this tick, with the zone down."""
        self._next_tick = self.replay.tick_at(self._now_s())


def same_mode(attempt: AttemptRecord, decision: Launch) -> bool:
    market, zone = decision.market, decision.zone
    return attempt["market"] == market and (market != Market.SPOT or attempt["zone"] == zone)
