"""What the controller asks before and during each attempt: time, market, policy.

`AttemptPlanner` holds the job's clock (wall time mapped onto trace time), the replayed
market, the policy and the injected preemptions, and turns them into answers the loop acts on:
which market and zone to launch next (or wait), whether spot is still available, what an
attempt cost (`attempt_config` builds the next attempt's `RuntimeConfig` from them). Without
a trace, on a backend that publishes prices (aws), the live market (`connect_live`) prices
attempts and the policy decides each launch on the prices and the outages seen so far; it does
not switch a running attempt.
"""

from __future__ import annotations

import math
import time

from spotfit.controller.clock import TraceClock
from spotfit.errors import SpotfitError
from spotfit.market.live import LiveMarket
from spotfit.market.policies.base import DEFAULT_POLICY, NONE, ON_DEMAND, Context, Decision, Kind, make_policy, spot
from spotfit.market.replay import MarketReplay
from spotfit.market.trace import load_trace, resolve_trace, zone_stats
from spotfit.market.view import MarketView
from spotfit.spec import JobSpec, Preemption
from spotfit.state import StateDB
from spotfit.states import AttemptState

AWS_NOTICE_S = 120.0  # a spot interruption notice gives two minutes
MIN_NOTICE_S = 3.0  # wall seconds: enough to finish a step and save on this machine
NO_CAPACITY_RETRY_S = 300.0  # without a market: how long a zone that had no capacity is skipped
MAX_BUDGET_SEARCH_S = 1e10  # trace seconds (three centuries): a budget not spent by then never is
TRAINED_PHASES = ("training", "saving", "holding", "preempted", "stopped", "done")  # the runtime's, once in fit


class AttemptPlanner:
    """The controller's view of time, market and policy for one job."""

    def __init__(self, spec: JobSpec, db: StateDB, job_id: str):
        self.spec = spec
        self.db = db
        self.job_id = job_id
        self.replay: MarketReplay | None = None
        if spec.market.trace:
            trace = load_trace(resolve_trace(spec.market.trace), gap_s=spec.market.gap_s)
            self.replay = MarketReplay(trace, spec.market.zones, spec.market.time_scale, spec.market.start)
        name = DEFAULT_POLICY if spec.market.policy == "default" else spec.market.policy
        self.policy = make_policy(name)
        self.policy.reset()
        self._clock_origin = time.time()
        self._trace_origin = self.replay.origin_s if self.replay else 0.0
        self.clock = TraceClock(spec.market.time_scale, self._trace_origin, self._clock_origin)
        self._next_tick = self.replay.tick_at(self._trace_origin) if self.replay else 0  # next tick to ask at
        self._pending: tuple[str, str | None] | None = None  # a switch, launched when its attempt ends
        self._stopping: int | None = None  # the attempt held at the tick start its stop is due
        self._trained: dict[int, dict] = {}  # attempt -> its "training" event (trace_s, overhead_s)
        self._idle_since_s = self._trace_origin  # the earliest trace second the next launch may start at
        self._rate: tuple[float, int] | None = None  # (wall time, step) of the first observation
        self._trace_s_per_step: float | None = None
        self._total_steps: int | None = None
        self._step = 0
        self._no_capacity: dict[str | None, float] = {}  # zone -> trace second of a failed launch
        self.live: LiveMarket | None = None  # published prices and seen outages, without a trace
        self._cap: tuple[int, float] | None = None  # (attempt, trace s): where its budget is spent

    def connect_live(self, backend, request) -> str | None:
        """Without a trace, use the backend's live prices (if it has them); returns what happened."""
        if self.replay is not None or not hasattr(backend, "live_market"):
            return None
        try:
            self.live = backend.live_market(request, list(self.spec.market.zones))
        except SpotfitError as exc:
            return f"no live prices: {exc.message}"
        if self.live is None:
            return "no live prices: none published for the job's instance type and zones"
        return (f"live prices for {', '.join(self.live.zones)}: spot from the price history, on-demand "
                f"${self.live.on_demand_usd_per_h:g}/h from the catalog")

    def _epoch(self, trace_s: float) -> float:
        """Epoch seconds of a trace second of a job without a trace (its clock is the wall)."""
        return self._clock_origin + trace_s - self._trace_origin

    # -- clock ----------------------------------------------------------------------------------

    def start_clock(self) -> None:
        """Trace time starts when the job first starts; a restarted controller goes on from its last reading.

        The clock stands still while no controller runs, and while the live attempt it finds has
        not been seen training yet.
        """
        job = self.db.get_job(self.job_id)
        if job["clock_origin"] is None:
            self.db.update_job(self.job_id, clock_origin=self._clock_origin, trace_origin_s=self._trace_origin)
            start_s = self._trace_origin
        else:
            self._clock_origin, self._trace_origin = job["clock_origin"], job["trace_origin_s"]
            start_s = max(job["trace_now_s"] or 0.0, self._trace_origin)
        self._step = job["step"] or 0
        self._total_steps = job["total_steps"] or None
        self._trained = {e["attempt"]: e["data"] for e in self.db.events(self.job_id) if e["kind"] == "training"}
        if self.replay is not None:
            self.clock.run_on_wall(start_s)
            self._idle_since_s = start_s
            self._next_tick = self.replay.tick_at(start_s)
            if any(AttemptState(a["state"]).is_live() for a in self.db.attempts(self.job_id)):
                self.clock.hold(self.clock.now_s())

    def now_s(self) -> float:
        """Absolute trace seconds now (wall seconds since the start without a market)."""
        if self.replay is None:
            return self._trace_origin + (time.time() - self._clock_origin)
        now = self.clock.now_s(step=self._step)
        return now if self._cap is None else min(now, self._cap[1])

    def time_scale(self) -> float:
        return self.spec.market.time_scale if self.replay else 1.0

    def on_demand_usd_per_h(self) -> float | None:
        if self.replay is not None:
            return self.replay.on_demand_usd_per_h()
        return self.live.on_demand_usd_per_h if self.live else None

    def notice_s(self) -> float:
        """Wall seconds between SIGTERM and SIGKILL: the cloud's notice, scaled to wall time."""
        scale = self.spec.market.time_scale if self.replay else 1.0
        return max(AWS_NOTICE_S / scale, MIN_NOTICE_S)

    def market_notice_s(self) -> float:
        """Wall seconds between SIGTERM and SIGKILL when the market or the policy ends an attempt.

        The trace clock holds while the process saves and exits, so the notice is AWS's two
        minutes of wall time: however loaded this machine, the attempt keeps its work, as the
        modeled cloud instance (and the simulator) does.
        """
        return AWS_NOTICE_S if self.replay else self.notice_s()

    # -- market -----------------------------------------------------------------------------------

    def spot_available(self, zone: str | None) -> bool:
        return self.replay is None or zone is None or self.replay.available(zone, self.now_s())

    def spot_price(self, zone: str | None) -> float | None:
        """The zone's spot price now ($/h), or None without a market."""
        if zone is None:
            return None
        if self.replay is None:
            return self.live.spot_usd_per_h(zone, self._epoch(self.now_s())) if self.live else None
        z = self.replay.trace.zone_index(zone)
        return float(self.replay.trace.spot_usd_per_h[z, self.replay.tick_at(self.now_s())])

    def zones(self) -> list[str]:
        if self.replay is not None:
            return list(self.replay.zones)
        return self.live.zones if self.live else []

    def bill(self, attempt: dict, end_s: float | None = None) -> tuple[float, float]:
        """(billed trace seconds, USD) of an attempt from its start until `end_s` (default: now).

        An attempt that ends records the same `end_s` it is billed to: two readings of the clock
        differ by the time between them × `time_scale`, and the ledger would then bill a span
        other than the one it shows.
        """
        end_s = self.now_s() if end_s is None else end_s
        if self.replay is None and self.live is not None:
            start_s = attempt["trace_start_s"] or 0.0
            return self.live.cost_usd(attempt["market"], attempt["zone"], self._epoch(start_s), self._epoch(end_s))
        if self.replay is None:
            return max(end_s - (attempt["trace_start_s"] or 0.0), 0.0), 0.0
        return self.replay.cost_usd(attempt["market"], attempt["zone"], attempt["trace_start_s"], end_s)

    def budget_reached_s(self, attempt: dict, left_usd: float) -> float | None:
        """The trace second at which `attempt`'s bill reaches `left_usd` (None without a replay).

        The bill only grows with its end, so a bisection finds the first trace second whose bill
        is at least `left_usd` (to a millisecond): the clock held there bills no less than the
        budget (the rule fires) and no more than a millisecond past it.
        """
        if self.replay is None:
            return None
        low = high = attempt["trace_start_s"]
        if self.bill(attempt, low)[1] >= left_usd:
            return low
        step = 60.0
        while self.bill(attempt, high)[1] < left_usd:
            if step > MAX_BUDGET_SEARCH_S:  # a free market never spends it
                return None
            low, high, step = high, high + step, step * 2
        while high - low > 1e-3:
            mid = (low + high) / 2
            low, high = (low, mid) if self.bill(attempt, mid)[1] >= left_usd else (mid, high)
        return high

    def cap_at(self, number: int, at_s: float) -> None:
        """Attempt `number`'s modeled instance stops at trace second `at_s` (its budget is spent there).

        The clock reads no later than `at_s` until the attempt ends, however far the local process
        runs ahead of the controller's look: the bill, the market's ticks and the next launch
        all stop there, as the simulator's instance would.
        """
        self._cap = (number, at_s)

    def capped(self, number: int) -> bool:
        return self._cap is not None and self._cap[0] == number

    def billed_overhead_s(self, attempt: dict, end_s: float) -> float | None:
        """The modeled restart overhead inside an attempt's billed span (trace s); None without a market."""
        if self.replay is None:
            return None
        return max(0.0, min(self._model_overhead_s(), end_s - attempt["trace_start_s"]))

    def mtbf_wall_s(self, zone: str | None) -> float | None:
        """Mean time between preemptions of the zone, in wall seconds (for `interval: auto`)."""
        if self.replay is None or zone is None:
            return None
        stats = {s.zone: s for s in zone_stats(self.replay.trace)}
        mtbf_h = getattr(stats.get(zone), "mtbf_h", None)
        if not mtbf_h or not math.isfinite(mtbf_h):
            return None
        return mtbf_h * 3600.0 / self.spec.market.time_scale

    # -- progress, the modeled cloud and the policy ----------------------------------------------

    def observe(self, progress: dict, attempt: dict | None = None) -> None:
        """Take the attempt's progress; its first training report starts the clock past the overhead."""
        step = progress.get("step") or 0
        self._step = max(self._step, step)
        self._total_steps = progress.get("total_steps") or self._total_steps
        if progress.get("phase") != "training":
            return
        if attempt is not None and self.replay is not None:
            self._clock_on_training(attempt, step)
        if not step:
            return
        now = time.time()
        if self._rate is None or step < self._rate[1]:
            self._rate = (now, step)
        elif step - self._rate[1] >= 20 and now > self._rate[0]:
            steps_per_wall_s = (step - self._rate[1]) / (now - self._rate[0])
            self._trace_s_per_step = self.spec.market.time_scale / steps_per_wall_s

    def observe_end(self, attempt: dict, progress: dict) -> None:
        """The attempt's process ended: if it trained (perhaps between two polls), its clock ran."""
        if progress.get("phase") in TRAINED_PHASES:
            self.observe({**progress, "phase": "training"}, attempt)

    def _clock_on_training(self, attempt: dict, step: int) -> None:
        """An attempt trains: the clock runs from launch + overhead (on the steps, or on the wall)."""
        number = attempt["number"]
        if number == self._stopping:  # held at its stop's tick start until it exits
            return
        train_s = attempt["trace_start_s"] + self._model_overhead_s()
        if number not in self._trained:
            self._trained[number] = {"trace_s": train_s, "overhead_s": self._model_overhead_s()}
            self.db.add_event(self.job_id, "training",
                              f"attempt {number} trains from step {step}, "
                              f"{self._model_overhead_s():.0f} trace s after its launch (restart overhead)",
                              attempt=number, **self._trained[number])
            self._start_training_clock(attempt, train_s)
        elif not self.clock.running:  # adopted by a restarted controller
            self._start_training_clock(attempt, train_s if self._per_step() else self.clock.now_s())

    def _start_training_clock(self, attempt: dict, train_s: float) -> None:
        per_step = self._per_step()
        if per_step:
            self.clock.run_on_steps(train_s, self._base_work_s(attempt) / per_step, per_step)
        else:
            self.clock.run_on_wall(train_s)

    def _per_step(self) -> float | None:
        """Trace seconds per step on the modeled instance, when the spec gives the work (else None)."""
        if self.spec.work_h and self._total_steps:
            return self.spec.work_h * 3600.0 / self._total_steps
        return None

    def _model_overhead_s(self) -> float:
        return self.spec.market.overhead_h * 3600.0

    def overhead_s(self) -> float:
        """The restart overhead the policy plans with: the job's measured mean once it has one.

        Measured = trace seconds from a launch to its first training step after restore. On the
        replay the clock holds through the local start-up, so it equals `market.overhead_h`; on a
        backend whose clock is real time it is the real start-up.
        """
        measured = [d["overhead_s"] for d in self._trained.values() if d.get("overhead_s") is not None]
        return sum(measured) / len(measured) if measured else self._model_overhead_s()

    def _base_work_s(self, attempt: dict) -> float:
        """Modeled work done when `attempt` starts training: the previous attempts' (trace s).

        Work is kept at a stop (the runtime saves at the notice); a restore from an older
        checkpoint loses the steps after it. Steps that an attempt made after its stop was due
        count in the next attempt's span, so the modeled finish does not depend on wall timing.
        """
        per_step = self._per_step() or 0.0
        work = 0.0
        for a in self.db.attempts(self.job_id):
            if a["state"] == AttemptState.NO_CAPACITY:
                continue
            work = min(work, (a["start_step"] or 0) * per_step)
            if a["number"] == attempt["number"]:
                return work
            if a["trace_end_s"] is not None:
                work += max(0.0, a["trace_end_s"] - a["trace_start_s"] - self._model_overhead_s())
        return work  # after every attempt (`attempt` is the next one)

    def _work_s(self) -> float:
        if self.spec.work_h:
            return self.spec.work_h * 3600.0
        if self._trace_s_per_step and self._total_steps:
            return self._trace_s_per_step * self._total_steps
        return (self.spec.deadline_h * 3600.0 / 2) if self.spec.deadline_h else 3600.0

    def _work_done_s(self, attempt: dict | None, at_s: float, work_s: float) -> float:
        if not self._per_step():
            return work_s * self._step / self._total_steps if self._total_steps else 0.0
        if attempt is None:
            return self._base_work_s({"number": -1})
        base = self._base_work_s(attempt)
        if attempt["number"] not in self._trained:
            return base
        return base + max(0.0, at_s - attempt["trace_start_s"] - self._model_overhead_s())

    def context(self, attempt: dict | None, at_s: float | None = None) -> Context:
        """What the policy sees at trace second `at_s` (default: now)."""
        at_s = self.now_s() if at_s is None else at_s
        work_s = self._work_s()
        done = self._work_done_s(attempt, at_s, work_s)
        deadline_s = self.spec.deadline_h * 3600.0 if self.spec.deadline_h else 2 * work_s + 86400.0
        mode, left = NONE, 0.0
        if attempt is not None:
            mode = spot(attempt["zone"]) if attempt["market"] == "spot" else ON_DEMAND
            left = max(0.0, self._model_overhead_s() - (at_s - attempt["trace_start_s"]))
        attempts = self.db.attempts(self.job_id)
        preempted = (attempt is None and bool(attempts)
                     and attempts[-1]["state"] in (AttemptState.PREEMPTED, AttemptState.KILLED))
        if self.replay is None and self.live is not None:
            gap_s, zones, view = self.live.gap_s, tuple(self.live.zones), self.live.view(self._epoch(at_s))
        else:
            replay = self._replay()
            gap_s, zones, view = replay.gap_s, tuple(replay.zones), self._view(at_s)
        return Context(now_s=at_s - self._trace_origin, gap_s=gap_s, work_s=work_s,
                       work_done_s=min(done, work_s), deadline_s=deadline_s, overhead_s=self.overhead_s(),
                       mode=mode, overhead_left_s=left, market=view, zones=zones, preempted=preempted)

    def decide(self, attempt: dict | None, progress: dict, at_s: float | None = None) -> tuple[str, str | None] | None:
        """(market, zone) to run on now (or at trace second `at_s`), or None to wait."""
        if self.replay is None and not (self.live and self.live.zones):
            if not self.spec.resources.spot:
                return "on_demand", None
            blocked = self._blocked()
            wanted: list[str | None] = list(self.spec.market.zones) or [None]
            zones = [z for z in wanted if z not in blocked]
            return ("spot", zones[0]) if zones else None
        if not self.spec.resources.spot:
            return "on_demand", None
        decision: Decision = self.policy.decide(self.context(attempt, at_s))
        if decision.kind is Kind.NONE:
            return None
        if decision.kind is Kind.ON_DEMAND:
            return "on_demand", None
        return "spot", decision.zone

    # -- ticks: the policy is asked once per tick, at the tick's start, as in the simulator -------

    def _tick_start_s(self, tick: int) -> float:
        replay = self._replay()
        return max(replay._first_s + tick * replay.gap_s, replay.origin_s)

    def decide_idle(self) -> tuple[str, str | None] | None:
        """With no live attempt: what to launch, asking the policy at each tick start passed.

        A launch holds the clock at its tick's start until the attempt trains. A switch decided
        while the last attempt ran is launched at the tick it was decided at, without asking again.
        """
        if self.replay is None:
            return self.decide(None, {})
        if self._pending is not None:  # the clock still holds at the switch's tick start
            pending, self._pending = self._pending, None
            self.clock.hold(self.clock.now_s())
            return pending
        if not self.clock.running:
            self.clock.run_on_wall(self.clock.now_s())
        for tick in range(self._next_tick, self.replay.tick_at(self.now_s()) + 1):
            at_s = self._tick_start_s(tick)
            self._next_tick = tick + 1
            decision = self.decide(None, {}, at_s)
            if decision is not None:
                self.clock.hold(max(at_s, self._idle_since_s))
                return decision
        return None

    def resume_now(self) -> None:
        """A paused job goes on: the next decision is asked now, not at the ticks it sat out."""
        if self.replay is not None:
            self._idle_since_s = self.now_s()
            self._next_tick = self.replay.tick_at(self._idle_since_s)

    def market_event(self, attempt: dict) -> tuple[str, float] | None:
        """For a live attempt: ("preempted" | "switch", trace s) at the first tick start passed that ends it.

        The clock holds at that tick's start: the attempt is billed until then, and the next
        launch starts there. Spot that is gone at a tick's start preempts before the policy is
        asked; a switch is remembered for `decide_idle`.
        """
        if self.replay is None:
            return None
        for tick in range(self._next_tick, self.replay.tick_at(self.now_s()) + 1):
            at_s = self._tick_start_s(tick)
            if at_s <= attempt["trace_start_s"]:
                self._next_tick = tick + 1
                continue
            if attempt["market"] == "spot" and not self.replay.available(attempt["zone"], at_s):
                self._next_tick = tick
                return self._stop_at(attempt, "preempted", at_s)
            self._next_tick = tick + 1
            decision = self.decide(attempt, {}, at_s)
            if decision is None or not self.same_mode(attempt, decision):
                self._pending = decision
                return self._stop_at(attempt, "switch", at_s)
        return None

    def catch_up(self, attempt: dict) -> tuple[str, float] | None:
        """For an attempt adopted after a controller gap: the ticks it trained through unwatched.

        No controller asked the policy at those ticks, so nothing it would have planned happens
        there (as on a cloud, the instance just ran on); the market still reclaims spot
        capacity that was gone: ("preempted", trace s) at the first such tick start, else None.
        """
        if self.replay is None:
            return None
        for tick in range(self._next_tick, self.replay.tick_at(self.now_s()) + 1):
            at_s = self._tick_start_s(tick)
            if at_s > attempt["trace_start_s"] and attempt["market"] == "spot" \
                    and not self.replay.available(attempt["zone"], at_s):
                self._next_tick = tick
                return self._stop_at(attempt, "preempted", at_s)
            self._next_tick = tick + 1
        return None

    def work_left_s(self, attempt: dict | None = None) -> float:
        """Modeled work still to do (trace s) after the ended attempts, or with `attempt` (live,
        its clock held at its stop) until now; 0 once it is all done."""
        work_s = self._work_s()
        return max(0.0, work_s - self._work_done_s(attempt, self.now_s(), work_s))

    def _stop_at(self, attempt: dict, why: str, at_s: float) -> tuple[str, float]:
        self.clock.hold(at_s)
        self._stopping = attempt["number"]
        return why, at_s

    def pending_text(self) -> str:
        return "wait" if self._pending is None else " ".join(p for p in self._pending if p)

    def attempt_ended(self, market_stop: bool, preempted_in: str | None = None) -> None:
        """An attempt ended: a stop the market or the policy made holds the clock at its tick
        until the next launch; after any other (done, failed, injected, rule) the clock runs on
        from its end, and the next decision is asked in this tick."""
        if self.replay is None:
            if self.live is not None and preempted_in is not None:  # seen: the policy counts it
                self.live.observe(preempted_in, "preempted", time.time())
            return
        end_s = self.now_s()  # a budget's cap included
        self._stopping, self._cap = None, None
        if not market_stop:
            self._pending = None
            self.clock.run_on_wall(end_s)
            self._next_tick = self.replay.tick_at(self.clock.now_s())
        elif self.clock.now_s() > end_s:
            self.clock.hold(end_s)
        self._idle_since_s = self.clock.now_s()  # a launch never starts before this end (its bill ends there)

    def mark_no_capacity(self, zone: str | None) -> None:
        """A launch in `zone` found no capacity: the next decisions skip it for a while.

        With a market the zone counts as unavailable until the next tick (the policy then picks
        another zone, on-demand or waiting); without one it is skipped for NO_CAPACITY_RETRY_S.
        """
        self._no_capacity[zone] = self.now_s()
        if self.live is not None:
            self.live.observe(zone, "no_capacity", time.time())
        if self.replay is not None:  # ask again in this tick, with the zone down
            self._next_tick = self.replay.tick_at(self.now_s())

    def _blocked(self) -> set[str | None]:
        now = self.now_s()
        if self.replay is not None:
            tick = self.replay.tick_at(now)
            return {z for z, t in self._no_capacity.items() if self.replay.tick_at(t) == tick}
        return {z for z, t in self._no_capacity.items() if now - t < NO_CAPACITY_RETRY_S}

    def _replay(self) -> MarketReplay:
        if self.replay is None:
            raise RuntimeError("the policy is asked only when the job has a market trace")
        return self.replay

    def _view(self, at_s: float) -> MarketView:
        """The market as the policy sees it at `at_s`: zones that just had no capacity are down."""
        replay = self._replay()
        view = replay.view(at_s)
        blocked = [z for z in self._blocked() if z is not None and z in replay.zones]
        if not blocked:
            return view
        trace = replay.trace
        available = trace.available.copy()
        for zone in blocked:
            available[trace.zone_index(zone), view.tick] = False
        return MarketView(trace.zones, trace.gap_s, available, trace.spot_usd_per_h,
                          trace.on_demand_usd_per_h, view.tick)

    @staticmethod
    def same_mode(attempt: dict, decision: tuple[str, str | None]) -> bool:
        market, zone = decision
        return attempt["market"] == market and (market != "spot" or attempt["zone"] == zone)

    def waiting_reason(self) -> str:
        zones = ", ".join(self.zones()) or "local"
        return f"waiting for spot capacity in {zones} (policy {self.policy.name})"

    # -- injected preemptions --------------------------------------------------------------------

    def pending_injections(self) -> list[Preemption]:
        done = {e["data"].get("at_step") for e in self.db.events(self.job_id) if e["kind"] == "injected_preemption"}
        return [p for p in self.spec.market.preemptions if p.at_step not in done]

    def mark_injected(self, injection: Preemption, attempt: int) -> None:
        self.db.add_event(self.job_id, "injected_preemption",
                          f"injected preemption at step {injection.at_step} (notice {injection.notice_s:g}s)",
                          attempt=attempt, at_step=injection.at_step, notice_s=injection.notice_s)
