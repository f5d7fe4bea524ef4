"""What the controller asks before and during each attempt: time, market, policy, config.

`AttemptPlanner` holds the job's clock (wall time mapped onto trace time), the replayed
market, the policy and the injected preemptions, and turns them into answers the loop acts on:
which market and zone to launch next (or wait), whether spot is still available, what an
attempt cost, and the `RuntimeConfig` of the next attempt.
"""

from __future__ import annotations

import math
import time

from spotfit.controller.replay import MarketReplay
from spotfit.market.policies.base import DEFAULT_POLICY, Context, Decision, Kind, NONE, ON_DEMAND, make_policy, spot
from spotfit.market.trace import load_trace, resolve_trace, zone_stats
from spotfit.runtime.config import RuntimeConfig
from spotfit.spec import JobSpec, Preemption
from spotfit.state import StateDB

AWS_NOTICE_S = 120.0  # a spot interruption notice gives two minutes
MIN_NOTICE_S = 3.0  # wall seconds: enough to finish a step and save on this machine


class AttemptPlanner:
    """The controller's view of time, market and policy for one job."""

    def __init__(self, spec: JobSpec, db: StateDB, job_id: str):
        self.spec = spec
        self.db = db
        self.job_id = job_id
        self.replay = None
        if spec.market.trace:
            trace = load_trace(resolve_trace(spec.market.trace), gap_s=spec.market.gap_s)
            self.replay = MarketReplay(trace, spec.market.zones, spec.market.time_scale, spec.market.start)
        name = DEFAULT_POLICY if spec.market.policy == "default" else spec.market.policy
        self.policy = make_policy(name)
        self.policy.reset()
        self._clock_origin = time.time()
        self._trace_origin = self.replay.origin_s if self.replay else 0.0
        self._last_tick = None
        self._rate: tuple[float, int] | None = None  # (wall time, step) of the first observation
        self._trace_s_per_step: float | None = None
        self._total_steps: int | None = None
        self._step = 0

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

    def bill(self, attempt: dict) -> tuple[float, float]:
        """(billed trace seconds, USD) of an attempt from its start until now."""
        if self.replay is None:
            return max(self.now_s() - (attempt["trace_start_s"] or 0.0), 0.0), 0.0
        return self.replay.cost_usd(attempt["market"], attempt["zone"], attempt["trace_start_s"], self.now_s())

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
        preempted = attempt is None and bool(attempts) and attempts[-1]["state"] in ("preempted", "killed")
        return Context(now_s=now_rel, gap_s=self.replay.gap_s, work_s=work_s, work_done_s=min(done, work_s),
                       deadline_s=deadline_s, overhead_s=overhead_s, mode=mode, overhead_left_s=left,
                       market=self.replay.view(self.now_s()), zones=tuple(self.replay.zones),
                       preempted=preempted)

    def decide(self, attempt: dict | None, progress: dict) -> tuple[str, str | None] | None:
        """(market, zone) to run on now, or None to wait."""
        if self.replay is None:
            return ("spot" if self.spec.resources.spot else "on_demand"), None
        if not self.spec.resources.spot:
            return "on_demand", None
        decision: Decision = self.policy.decide(self.context(attempt))
        if decision.kind is Kind.NONE:
            return None
        if decision.kind is Kind.ON_DEMAND:
            return "on_demand", None
        return "spot", decision.zone

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
            heartbeat_s=0.5,
        )
