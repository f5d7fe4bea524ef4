"""What the controller asks before and during each attempt: time, market, policy, config.

`AttemptPlanner` holds the job's clock (wall time mapped onto trace time), the replayed
market, the policy and the injected preemptions, and turns them into answers the loop acts on:
which market and zone to launch next (or wait), whether spot is still available, what an
attempt cost, and the `RuntimeConfig` of the next attempt.
"""

from __future__ import annotations

import math
import time

from spotfit.market.policies.base import DEFAULT_POLICY, NONE, ON_DEMAND, Context, Decision, Kind, make_policy, spot
from spotfit.market.replay import MarketReplay
from spotfit.market.trace import load_trace, resolve_trace, zone_stats
from spotfit.market.view import MarketView
from spotfit.runtime.config import RuntimeConfig
from spotfit.spec import JobSpec, Preemption
from spotfit.state import StateDB
from spotfit.states import AttemptState

AWS_NOTICE_S = 120.0  # a spot interruption notice gives two minutes
MIN_NOTICE_S = 3.0  # wall seconds: enough to finish a step and save on this machine
NO_CAPACITY_RETRY_S = 300.0  # without a market: how long a zone that had no capacity is skipped


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
        self._last_tick: int | None = None
        self._rate: tuple[float, int] | None = None  # (wall time, step) of the first observation
        self._trace_s_per_step: float | None = None
        self._total_steps: int | None = None
        self._step = 0
        self._no_capacity: dict[str | None, float] = {}  # zone -> trace second of a failed launch

    # -- clock ----------------------------------------------------------------------------------

    def start_clock(self) -> None:
        """Trace time starts when the job first starts and survives controller restarts."""
        job = self.db.get_job(self.job_id)
        if job["clock_origin"] is None:
            self.db.update_job(self.job_id, clock_origin=self._clock_origin, trace_origin_s=self._trace_origin)
        else:
            self._clock_origin, self._trace_origin = job["clock_origin"], job["trace_origin_s"]
        self._step = job["step"] or 0

    def now_s(self) -> float:
        """Absolute trace seconds now (wall seconds since the start without a market)."""
        scale = self.spec.market.time_scale if self.replay else 1.0
        return self._trace_origin + (time.time() - self._clock_origin) * scale

    def new_tick(self) -> bool:
        if self.replay is None:
            return False
        tick = self.replay.tick_at(self.now_s())
        changed, self._last_tick = tick != self._last_tick, tick
        return changed

    def time_scale(self) -> float:
        return self.spec.market.time_scale if self.replay else 1.0

    def on_demand_usd_per_h(self) -> float | None:
        return self.replay.on_demand_usd_per_h() if self.replay else None

    def notice_s(self) -> float:
        """Wall seconds between SIGTERM and SIGKILL for a market preemption."""
        scale = self.spec.market.time_scale if self.replay else 1.0
        return max(AWS_NOTICE_S / scale, MIN_NOTICE_S)

    # -- market -----------------------------------------------------------------------------------

    def spot_available(self, zone: str | None) -> bool:
        return self.replay is None or zone is None or self.replay.available(zone, self.now_s())

    def spot_price(self, zone: str | None) -> float | None:
        """The zone's spot price now ($/h), or None without a market."""
        if self.replay is None or zone is None:
            return None
        z = self.replay.trace.zone_index(zone)
        return float(self.replay.trace.spot_usd_per_h[z, self.replay.tick_at(self.now_s())])

    def zones(self) -> list[str]:
        return list(self.replay.zones) if self.replay else []

    def bill(self, attempt: dict, end_s: float | None = None) -> tuple[float, float]:
        """(billed trace seconds, USD) of an attempt from its start until `end_s` (default: now).

        An attempt that ends records the same `end_s` it is billed to: two readings of the clock
        differ by the time between them × `time_scale`, and the ledger would then bill a span
        other than the one it shows.
        """
        end_s = self.now_s() if end_s is None else end_s
        if self.replay is None:
            return max(end_s - (attempt["trace_start_s"] or 0.0), 0.0), 0.0
        return self.replay.cost_usd(attempt["market"], attempt["zone"], attempt["trace_start_s"], end_s)

    def mtbf_wall_s(self, zone: str | None) -> float | None:
        """Mean time between preemptions of the zone, in wall seconds (for `interval: auto`)."""
        if self.replay is None or zone is None:
            return None
        stats = {s.zone: s for s in zone_stats(self.replay.trace)}
        mtbf_h = getattr(stats.get(zone), "mtbf_h", None)
        if not mtbf_h or not math.isfinite(mtbf_h):
            return None
        return mtbf_h * 3600.0 / self.spec.market.time_scale

    # -- progress and policy ------------------------------------------------------------------------

    def observe(self, progress: dict) -> None:
        step = progress.get("step") or 0
        self._step = max(self._step, step)
        self._total_steps = progress.get("total_steps") or self._total_steps
        if progress.get("phase") != "training" or not step:
            return
        now = time.time()
        if self._rate is None or step < self._rate[1]:
            self._rate = (now, step)
        elif step - self._rate[1] >= 20 and now > self._rate[0]:
            steps_per_wall_s = (step - self._rate[1]) / (now - self._rate[0])
            self._trace_s_per_step = self.spec.market.time_scale / steps_per_wall_s

    def _work_s(self) -> float:
        if self.spec.work_h:
            return self.spec.work_h * 3600.0
        if self._trace_s_per_step and self._total_steps:
            return self._trace_s_per_step * self._total_steps
        return (self.spec.deadline_h * 3600.0 / 2) if self.spec.deadline_h else 3600.0

    def context(self, attempt: dict | None) -> Context:
        work_s = self._work_s()
        done = work_s * self._step / self._total_steps if self._total_steps else 0.0
        overhead_s = self.spec.market.overhead_h * 3600.0
        now_rel = self.now_s() - self._trace_origin
        deadline_s = self.spec.deadline_h * 3600.0 if self.spec.deadline_h else 2 * work_s + 86400.0
        mode, left = NONE, 0.0
        if attempt is not None:
            mode = spot(attempt["zone"]) if attempt["market"] == "spot" else ON_DEMAND
            left = max(0.0, overhead_s - (self.now_s() - attempt["trace_start_s"]))
        attempts = self.db.attempts(self.job_id)
        preempted = (attempt is None and bool(attempts)
                     and attempts[-1]["state"] in (AttemptState.PREEMPTED, AttemptState.KILLED))
        replay = self._replay()
        return Context(now_s=now_rel, gap_s=replay.gap_s, work_s=work_s, work_done_s=min(done, work_s),
                       deadline_s=deadline_s, overhead_s=overhead_s, mode=mode, overhead_left_s=left,
                       market=self._view(), zones=tuple(replay.zones),
                       preempted=preempted)

    def decide(self, attempt: dict | None, progress: dict) -> tuple[str, str | None] | None:
        """(market, zone) to run on now, or None to wait."""
        if self.replay is None:
            if not self.spec.resources.spot:
                return "on_demand", None
            blocked = self._blocked()
            wanted: list[str | None] = list(self.spec.market.zones) or [None]
            zones = [z for z in wanted if z not in blocked]
            return ("spot", zones[0]) if zones else None
        if not self.spec.resources.spot:
            return "on_demand", None
        decision: Decision = self.policy.decide(self.context(attempt))
        if decision.kind is Kind.NONE:
            return None
        if decision.kind is Kind.ON_DEMAND:
            return "on_demand", None
        return "spot", decision.zone

    def mark_no_capacity(self, zone: str | None) -> None:
        """A launch in `zone` found no capacity: the next decisions skip it for a while.

        With a market the zone counts as unavailable until the next tick (the policy then picks
        another zone, on-demand or waiting); without one it is skipped for NO_CAPACITY_RETRY_S.
        """
        self._no_capacity[zone] = self.now_s()

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

    def _view(self) -> MarketView:
        """The market as the policy sees it now: zones that just had no capacity are down."""
        replay = self._replay()
        view = replay.view(self.now_s())
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
        zones = ", ".join(self.replay.zones) if self.replay else "local"
        return f"waiting for spot capacity in {zones} (policy {self.policy.name})"

    # -- injected preemptions --------------------------------------------------------------------

    def pending_injections(self) -> list[Preemption]:
        done = {e["data"].get("at_step") for e in self.db.events(self.job_id) if e["kind"] == "injected_preemption"}
        return [p for p in self.spec.market.preemptions if p.at_step not in done]

    def mark_injected(self, injection: Preemption, attempt: int) -> None:
        self.db.add_event(self.job_id, "injected_preemption",
                          f"injected preemption at step {injection.at_step} (notice {injection.notice_s:g}s)",
                          attempt=attempt, at_step=injection.at_step, notice_s=injection.notice_s)

    # -- the next attempt's configuration ------------------------------------------------------

    def runtime_config(self, job_url: str, attempt: int, zone: str | None = None) -> RuntimeConfig:
        spec = self.spec
        interval = spec.checkpoint.interval
        return RuntimeConfig(
            job_id=self.job_id,
            job_url=job_url,
            script=str(spec.script_path),
            workdir=str(spec.script_path.parent),
            args=list(spec.args),
            attempt=attempt,
            seed=spec.training.seed,
            deterministic=spec.training.deterministic,
            keep=spec.checkpoint.keep,
            interval_steps=getattr(interval, "steps", None),
            interval_s=getattr(interval, "seconds", None),
            mtbf_s=self.mtbf_wall_s(zone),
            hold_at_steps=sorted(p.at_step for p in self.pending_injections()),
            hold_on_nan=self._nan_rule_armed(),
            heartbeat_s=0.5,
            strategy=spec.training.strategy,
            mixed_precision=spec.training.mixed_precision,
            xla=spec.training.xla,
            workers=spec.resources.workers,
            tensorboard=spec.training.tensorboard,
            histogram_freq=spec.training.histogram_freq,
            tensorboard_update_freq=spec.training.tensorboard_update_freq,
            export=self._export_options(attempt, zone),
            data_source=spec.data.source if spec.data else None,
            data_cache_dir=spec.data.cache_dir if spec.data else None,
            data_cache_limit_gib=spec.data.cache_limit_gib if spec.data else None,
            data_workers=spec.data.workers if spec.data else 16,
            data_verify=spec.data.verify if spec.data else "etag",
        )

    def _nan_rule_armed(self) -> bool:
        """A `nan_loss` rule will pause or stop the job (it has not fired yet): the runtime waits for it."""
        fired = {e["data"].get("index") for e in self.db.events(self.job_id) if e["kind"] == "rule"}
        return any(r.rule == "nan_loss" and r.action in ("pause", "stop") and i not in fired
                   for i, r in enumerate(self.spec.rules))

    def _export_options(self, attempt: int, zone: str | None) -> dict | None:
        """What the runtime needs to export and to fill the model card (runtime/export.py)."""
        if self.spec.export is None:
            return None
        from spotfit.home import default_registry_url

        before = sum(a["cost_usd"] or 0.0 for a in self.db.attempts(self.job_id) if a["number"] < attempt)
        price = self.spot_price(zone) if zone is not None else self.on_demand_usd_per_h()
        return {"registry": self.spec.export.registry or default_registry_url(),
                "formats": list(self.spec.export.formats), "name": self.spec.name,
                "spec_hash": self.spec.spec_hash(), "cost_usd_before": round(before, 6),
                "price_usd_per_h": price, "time_scale": self.time_scale(),
                # The runtime keeps the weights of the epoch ends that meet a stopping target, so
                # that a target_metric stop exports the epoch it fired on (runtime/main.py).
                "targets": [{"metric": r.metric, "mode": r.mode, "value": r.value} for r in self.spec.rules
                            if r.rule == "target_metric" and r.action == "stop"]}
