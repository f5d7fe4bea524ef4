"""What the controller asks before and during each attempt: time, market, policy.

`AttemptPlanner` holds the job's clock (wall time mapped onto trace time), its market source
(`market_source`: the replayed trace, a live cloud's prices, or none), the work meter
(`work_meter`), the policy ticker (`ticks`), the policy and the injected preemptions, and turns
them into answers the loop acts on: which market and zone to launch next (or wait), whether
spot is still available, what an attempt cost (`attempt_config` builds the next attempt's
`RuntimeConfig` from them). Without a trace, on a backend that publishes prices (aws), the
live market (`connect_live`) prices attempts and the policy decides each launch on the prices
and the outages seen so far; it does not switch a running attempt.
"""

from __future__ import annotations

import time
from typing import Any

from spotfit.attempt.progress import TRAINED_PHASES, Phase
from spotfit.backends.base import Backend, LaunchRequest, LiveMarketSource, NodePricer
from spotfit.controller.clock import TraceClock
from spotfit.controller.market_source import Live, MarketSource, NoMarket, Replay
from spotfit.controller.ticks import Launch, PolicyTicker, WallTicker
from spotfit.controller.work_meter import WorkMeter
from spotfit.errors import SpotfitError
from spotfit.market.policies.base import DEFAULT_POLICY, NONE, ON_DEMAND, Context, Decision, Kind, make_policy, spot
from spotfit.market.replay import MarketReplay
from spotfit.market.trace import load_trace, resolve_trace
from spotfit.spec.job import JobSpec
from spotfit.spec.sections import Preemption
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord, handle_text, spot_zone, trace_start_s
from spotfit.state.states import AttemptState, Market

AWS_NOTICE_S = 120.0  # a spot interruption notice gives two minutes
MIN_NOTICE_S = 3.0  # wall seconds: enough to finish a step and save on this machine


class AttemptPlanner:
    """The controller's view of time, market and policy for one job."""

    def __init__(self, spec: JobSpec, db: StateDB, job_id: str):
        self.spec = spec
        self.db = db
        self.job_id = job_id
        replay: MarketReplay | None = None
        if spec.market.trace:
            trace = load_trace(resolve_trace(spec.market.trace), gap_s=spec.market.gap_s)
            replay = MarketReplay(trace, spec.market.zones, spec.market.time_scale, spec.market.start)
        self.market: MarketSource = Replay(replay, spec.market.time_scale) if replay else NoMarket()
        name = DEFAULT_POLICY if spec.market.policy == "default" else spec.market.policy
        self.policy = make_policy(name)
        self.policy.reset()
        self._clock_origin = time.time()
        self._trace_origin = replay.origin_s if replay else 0.0
        self.clock = TraceClock(spec.market.time_scale, self._trace_origin, self._clock_origin)
        self.meter = WorkMeter(spec, db, job_id)
        self.ticker: PolicyTicker | WallTicker = (
            PolicyTicker(replay, self.clock, self.meter, lambda: self.now_s(), self._decide_at, self._trace_origin)
            if replay else WallTicker(self._wall_now_s, self._decide_at))
        self._no_capacity: dict[str | None, float] = {}  # zone -> trace second of a failed launch
        self._cap: tuple[int, float] | None = None  # (attempt, trace s): where its budget is spent
        self._hold: tuple[int, float] | None = None  # (attempt, trace s): where its team budgets' allowance is spent

    def connect_live(self, backend: Backend[Any], request: LaunchRequest) -> str | None:
        """Without a trace, use the backend's live prices (if it has them); returns what happened."""
        if not self.market.replayed and isinstance(backend, NodePricer):
            return self._price_nodes(backend)
        if self.market.replayed or not isinstance(backend, LiveMarketSource):
            return None
        try:
            live = backend.live_market(request, list(self.spec.market.zones))
        except SpotfitError as exc:
            return f"no live prices: {exc.message}"
        if live is None:
            return "no live prices: none published for the job's instance type and zones"
        self.market = Live(live, self._epoch)
        source = live.source or "spot from the price history, on-demand from the catalog"
        return f"live prices for {', '.join(live.zones)}: {source}; on-demand ${live.on_demand_usd_per_h:g}/h"

    def _price_nodes(self, backend: NodePricer[Any]) -> str:
        """Bill each attempt at its nodes' prices (`node_market.py`; Kubernetes)."""
        from spotfit.controller.node_market import NodePriced

        def lookup(attempt: AttemptRecord) -> list[Any]:
            return backend.node_prices(backend.load_handle(handle_text(attempt)),  # type: ignore[attr-defined]
                                       attempt["market"], self.spec)

        def priced(attempt: AttemptRecord, prices: list[Any]) -> None:
            self.db.add_event(self.job_id, "node_price", "; ".join(p.describe() for p in prices),
                              attempt=attempt["number"], nodes=[p.node for p in prices],
                              usd_per_h=[p.usd_per_h for p in prices], source=[p.source for p in prices])

        self.market = NodePriced(lookup, priced, lambda prices: backend.reprice(prices, self.spec))
        return "prices from each attempt's nodes: their instance type and capacity type, read live or in the catalog"

    def _epoch(self, trace_s: float) -> float:
        """Epoch seconds of a trace second of a job without a trace (its clock is the wall)."""
        return self._clock_origin + trace_s - self._trace_origin

    def _wall_now_s(self) -> float:
        return self._trace_origin + (time.time() - self._clock_origin)

    # -- clock ----------------------------------------------------------------------------------

    def start_clock(self) -> None:
        """Trace time starts when the job first starts; a restarted controller goes on from its last reading.

        The clock stands still while no controller runs, and while the live attempt it finds has
        not been seen training yet.
        """
        job = self.db.get_job(self.job_id)
        if job["clock_origin"] is None:
            self.db.set_clock(self.job_id, self._clock_origin, self._trace_origin)
            start_s = self._trace_origin
        else:
            self._clock_origin = job["clock_origin"]
            if job["trace_origin_s"] is not None:  # recorded with the clock origin
                self._trace_origin = job["trace_origin_s"]
            start_s = max(job["trace_now_s"] or 0.0, self._trace_origin)
        self.meter.load(job)
        self.ticker.start(start_s, live_attempt=any(AttemptState(a["state"]).is_live()
                                                    for a in self.db.attempts(self.job_id)))

    def now_s(self) -> float:
        """Absolute trace seconds now (wall seconds since the start without a market)."""
        now = self.ticker.now_s(self.meter.step)
        for cap in (self._cap, self._hold):
            if cap is not None:
                now = min(now, cap[1])
        return now

    def time_scale(self) -> float:
        return self.market.time_scale()

    def on_demand_usd_per_h(self) -> float | None:
        return self.market.on_demand_usd_per_h()

    def notice_s(self) -> float:
        """Wall seconds between SIGTERM and SIGKILL: the cloud's notice, scaled to wall time."""
        return max(AWS_NOTICE_S / self.market.time_scale(), MIN_NOTICE_S)

    def market_notice_s(self) -> float:
        """Wall seconds between SIGTERM and SIGKILL when the market or the policy ends an attempt.

        The trace clock holds while the process saves and exits, so the notice is AWS's two
        minutes of wall time: however loaded this machine, the attempt keeps its work, as the
        modeled cloud instance (and the simulator) does.
        """
        return AWS_NOTICE_S if self.market.replayed else self.notice_s()

    # -- market -----------------------------------------------------------------------------------

    def spot_available(self, zone: str | None) -> bool:
        return zone is None or self.market.spot_available(zone, self.now_s())

    def spot_price(self, zone: str | None) -> float | None:
        """The zone's spot price now ($/h), or None without a market (Kubernetes: the live attempt's node's)."""
        return self.market.spot_price(zone, self.now_s())

    def zones(self) -> list[str]:
        return self.market.zones()

    def price_moves(self) -> bool:
        """Whether the spot price can fall back under a `price_cap` (not a fixed catalog price)."""
        return self.market.price_moves()

    def price_source(self, attempt: AttemptRecord) -> str | None:
        return self.market.price_source(attempt)

    def bill(self, attempt: AttemptRecord, end_s: float | None = None) -> tuple[float, float]:
        """(billed trace seconds, USD) of an attempt from its start until `end_s` (default: now).

        An attempt that ends records the same `end_s` it is billed to: two readings of the clock
        differ by the time between them × `time_scale`, and the ledger would then bill a span
        other than the one it shows.
        """
        return self.market.bill(attempt, self.now_s() if end_s is None else end_s)

    def budget_reached_s(self, attempt: AttemptRecord, left_usd: float) -> float | None:
        """The trace second at which `attempt`'s bill reaches `left_usd` (None without a replay)."""
        return self.market.budget_reached_s(attempt, left_usd)

    def cap_at(self, number: int, at_s: float) -> None:
        """Attempt `number`'s modeled instance stops at trace second `at_s` (its budget is spent there).

        The clock reads no later than `at_s` until the attempt ends, however far the local process
        runs ahead of the controller's look: the bill, the market's ticks and the next launch
        all stop there, as the simulator's instance would.
        """
        self._cap = (number, at_s)

    def capped(self, number: int) -> bool:
        return self._cap is not None and self._cap[0] == number

    def hold_at(self, number: int, at_s: float | None) -> None:
        """Attempt `number`'s modeled instance runs no later than trace second `at_s` until told otherwise
        (None: no hold): where the allowance its team budgets gave it is spent (rule_actions.py).

        As `cap_at`, but moved on each grant: the clock waits there until the controller has
        asked the budgets for more (and goes on) or paused the job.
        """
        self._hold = None if at_s is None else (number, at_s)

    def held(self, number: int) -> bool:
        """Whether attempt `number`'s clock stands at its hold (its team budgets' allowance is spent)."""
        return (self._hold is not None and self._hold[0] == number
                and self.ticker.now_s(self.meter.step) >= self._hold[1])

    def billed_overhead_s(self, attempt: AttemptRecord, end_s: float) -> float | None:
        """The modeled restart overhead inside an attempt's billed span (trace s); None without a market."""
        return self.market.billed_overhead_s(attempt, end_s, self.meter.model_overhead_s())

    def mtbf_wall_s(self, zone: str | None) -> float | None:
        """Mean time between preemptions of the zone, in wall seconds (for `interval: auto`)."""
        return None if zone is None else self.market.mtbf_wall_s(zone)

    # -- progress, the modeled cloud and the policy ----------------------------------------------

    def observe(self, progress: dict[str, Any], attempt: AttemptRecord | None = None) -> None:
        """Take the attempt's progress; its first training report starts the clock past the overhead."""
        if self.meter.observe(progress) and attempt is not None:
            self.ticker.on_training(attempt, progress.get("step") or 0)

    def observe_end(self, attempt: AttemptRecord, progress: dict[str, Any]) -> None:
        """The attempt's process ended: if it trained (perhaps between two polls), its clock ran."""
        if progress.get("phase") in TRAINED_PHASES:
            self.observe({**progress, "phase": Phase.TRAINING}, attempt)

    def overhead_s(self) -> float:
        """The restart overhead the policy plans with (`WorkMeter.overhead_s`)."""
        return self.meter.overhead_s()

    def context(self, attempt: AttemptRecord | None, at_s: float | None = None) -> Context:
        """What the policy sees at trace second `at_s` (default: now)."""
        at_s = self.now_s() if at_s is None else at_s
        work_s = self.meter.work_s()
        done = self.meter.work_done_s(attempt, at_s, work_s)
        deadline_s = self.spec.deadline_h * 3600.0 if self.spec.deadline_h else 2 * work_s + 86400.0
        mode, left = NONE, 0.0
        if attempt is not None:
            mode = spot(spot_zone(attempt)) if attempt["market"] == Market.SPOT else ON_DEMAND
            left = max(0.0, self.meter.model_overhead_s() - (at_s - trace_start_s(attempt)))
        attempts = self.db.attempts(self.job_id)
        preempted = (attempt is None and bool(attempts)
                     and attempts[-1]["state"] in (AttemptState.PREEMPTED, AttemptState.KILLED))
        # What the job has been billed: the ended attempts' bills and the live one's so far. The
        # default policy's floor (`market.max_overpay`) bounds it by all-on-demand for the work,
        # so it holds only where the work is known in advance (`work_h`): an estimate that grows
        # as steps are timed would move the bound under the job.
        floor = self.spec.market.max_overpay if self.spec.work_h else None
        spent = sum(a["cost_usd"] or 0.0 for a in attempts if attempt is None or a["number"] != attempt["number"])
        if attempt is not None:
            spent += self.bill(attempt, at_s)[1]
        gap_s, zones, view = self.market.policy_market(at_s, self._blocked())
        return Context(now_s=at_s - self._trace_origin, gap_s=gap_s, work_s=work_s,
                       work_done_s=min(done, work_s), deadline_s=deadline_s, overhead_s=self.overhead_s(),
                       mode=mode, overhead_left_s=left, market=view, zones=zones, preempted=preempted,
                       spent_usd=spent, max_overpay=floor)

    def decide(self, attempt: AttemptRecord | None, progress: dict[str, Any],
               at_s: float | None = None) -> Launch | None:
        """The `Decision` to run on now (or at trace second `at_s`), or None to wait: the policy's own,
        carried unchanged to the launch, its request and the attempt's record (the ledger's `decision`)."""
        if not self.market.asks_policy():
            if not self.spec.resources.spot:
                return ON_DEMAND
            blocked = self._blocked()
            wanted: list[str | None] = list(self.spec.market.zones) or [None]
            zones = [z for z in wanted if z not in blocked]
            return Decision(Kind.SPOT, zones[0]) if zones else None  # a zone-less spot launch (local)
        if not self.spec.resources.spot:
            return ON_DEMAND
        decision: Decision = self.policy.decide(self.context(attempt, at_s))
        if decision.kind is Kind.NONE:
            return None
        if decision.kind is Kind.ON_DEMAND:
            return ON_DEMAND
        return decision

    def _decide_at(self, attempt: AttemptRecord | None, progress: dict[str, Any], at_s: float | None) -> Launch | None:
        return self.decide(attempt, progress, at_s)

    # -- ticks: the policy ticker (`ticks.py`) ----------------------------------------------------

    def decide_idle(self) -> Launch | None:
        """With no live attempt: what to launch (`PolicyTicker.decide_idle` on the replay)."""
        return self.ticker.decide_idle()

    def resume_now(self) -> None:
        """A paused job goes on: the next decision is asked now, not at the ticks it sat out."""
        self.ticker.resume_now()

    def market_event(self, attempt: AttemptRecord) -> tuple[str, float] | None:
        """For a live attempt: ("preempted" | "switch", trace s) at the first tick start passed that ends it."""
        return self.ticker.market_event(attempt)

    def catch_up(self, attempt: AttemptRecord) -> tuple[str, float] | None:
        """For an attempt adopted after a controller gap: a reclaim in the ticks it trained through unwatched."""
        return self.ticker.catch_up(attempt)

    def work_left_s(self, attempt: AttemptRecord | None = None) -> float:
        """Modeled work still to do (trace s) after the ended attempts, or with `attempt` (live,
        its clock held at its stop) until now; 0 once it is all done."""
        work_s = self.meter.work_s()
        return max(0.0, work_s - self.meter.work_done_s(attempt, self.now_s(), work_s))

    def pending_text(self) -> str:
        return self.ticker.pending_text()

    def attempt_ended(self, market_stop: bool, preempted_in: str | None = None) -> None:
        """An attempt ended (`PolicyTicker.attempt_ended`); a live market counts a preemption it saw."""
        if preempted_in is not None:  # seen: the policy counts it
            self.market.observe(preempted_in, "preempted")
        self.ticker.attempt_ended(market_stop)
        self._cap = self._hold = None

    def mark_no_capacity(self, zone: str | None) -> None:
        """A launch in `zone` found no capacity: the next decisions skip it for a while.

        With a market the zone counts as unavailable until the next tick (the policy then picks
        another zone, on-demand or waiting); without one it is skipped for `market_source.NO_CAPACITY_RETRY_S`.
        """
        self._no_capacity[zone] = self.now_s()
        self.market.observe(zone, "no_capacity")
        self.ticker.no_capacity()  # on the replay: ask again in this tick, with the zone down

    def _blocked(self) -> set[str | None]:
        return self.market.blocked(self._no_capacity, self.now_s())

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
