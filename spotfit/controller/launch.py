"""Launching an attempt: its configuration in the store, its row in the state DB, the backend's launch.

`Controller` (loop.py) holds one `Launcher`; once the loop has decided what to run (market,
zone), `launch` carries it out in the order a crash can survive: the configuration is written
before the attempt is recorded, and the attempt is recorded before the backend launches it.
"""

from __future__ import annotations

import time
from typing import Any

from spotfit.attempt import layout
from spotfit.backends.base import Backend, LaunchRequest, backend_class, backend_options
from spotfit.controller import attempt_config
from spotfit.controller.attempts import AttemptPlanner
from spotfit.controller.failures import FailureTracker
from spotfit.controller.job_files import JobFiles
from spotfit.controller.state_change import StateChange
from spotfit.controller.watchdog import Watchdog
from spotfit.core import crashpoints
from spotfit.errors import NoCapacityError
from spotfit.market.policies.base import Decision
from spotfit.spec.job import JobSpec
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord
from spotfit.state.states import AttemptState, JobState, Market


class Launcher:
    """Launches one job's attempts, and ends those that found no capacity."""

    def __init__(self, *, db: StateDB, job_id: str, job_url: str, spec: JobSpec, files: JobFiles,
                 backend: Backend[Any], plan: AttemptPlanner, failures: FailureTracker, watchdog: Watchdog):
        self.db = db
        self.job_id = job_id
        self.job_url = job_url
        self.spec = spec
        self.files = files
        self.backend = backend
        self.plan = plan
        self.failures = failures
        self.watchdog = watchdog

    def launch(self, decision: Decision) -> StateChange | None:
        """Launch the next attempt as the policy decided: its market, in its zone (or leave the job waiting
        for the store). The decision is recorded with the attempt (`info.decision`, the ledger's column), and
        what it runs on (`info.runs_on`: a moved job's attempts differ). Returns the job's state change
        (running, waiting for the store, failed), which the loop applies; none when no capacity was found."""
        market, zone = decision.market, decision.zone
        assert market is not None, "a decision to wait launches nothing"
        # The attempt's configuration is in the store before the attempt is recorded: with the
        # store away (or full) nothing is launched, and the next pass tries again.
        number = max((a["number"] for a in self.db.attempts(self.job_id)), default=0) + 1
        config = attempt_config.runtime_config(self.plan, self.job_url, number, zone).to_json().encode()
        guard = self.files.guard
        if not guard.call(lambda: self._write_launch_files(number, config), fallback=False, writes=True):
            return StateChange(JobState.WAITING, f"waiting for the store to launch attempt {number}: {guard.problem}")
        self.watchdog.new_attempt()
        added = self.db.add_attempt(self.job_id, backend=self.backend.name, zone=zone, market=market,
                                    state=AttemptState.LAUNCHING, trace_start_s=self.plan.now_s(),
                                    start_step=self.db.get_job(self.job_id)["step"],
                                    info={"decision": str(decision), "runs_on": self.spec.runs_on()})
        assert added == number, f"attempt {added} recorded, {number} configured"
        crashpoints.hold("launching")
        try:
            if market == Market.SPOT and not self.plan.spot_available(zone):
                raise NoCapacityError(f"no spot capacity in {zone} at trace second {self.plan.now_s():.0f}")
            handle = self.backend.launch(self.request(number, market, zone, decision))
        except NoCapacityError as exc:
            self.no_capacity(number, zone, str(exc))
            return None
        except Exception as exc:  # noqa: BLE001 - credentials, quotas, SDK errors, bugs: a failed attempt, not a crash
            return self.failures.launch_failed(number, exc, self.plan.now_s(), time.time())
        crashpoints.hold("launched")
        self.db.update_attempt(self.job_id, number, handle=handle.to_json(), state=AttemptState.RUNNING)
        return StateChange(JobState.RUNNING, f"attempt {number} on {market} {zone or ''}".strip(),
                           event=("launch", f"attempt {number}: {market} in {zone or 'local'}",
                                  {"attempt": number, "trace_s": self.plan.now_s()}))

    def no_capacity(self, number: int, zone: str | None, why: str) -> None:
        """Attempt `number` found no capacity (a launch refused, pods no node took): nothing ran, nothing billed."""
        self.plan.mark_no_capacity(zone)  # the next decision tries another zone or offer
        self.db.update_attempt(self.job_id, number, state=AttemptState.NO_CAPACITY, ended_at=time.time(),
                               trace_end_s=self.plan.now_s(), billed_s=0.0, cost_usd=0.0)
        self.db.add_event(self.job_id, "no_capacity", f"attempt {number}: {why}", attempt=number)

    def pending_timeout_s(self) -> float | None:
        """The backend's wait for a machine (`kubernetes.pending_timeout_s`); None where it has none."""
        return backend_class(self.spec.backend).pending_timeout_s(self.spec)

    def pending_overdue(self, attempt: AttemptRecord) -> bool:
        """Whether the attempt's pods have waited for a node longer than `kubernetes.pending_timeout_s`.

        Wall seconds since the launch, as for the boot timeout: a replayed market's clock holds
        from the launch until the attempt trains, so it would never see the wait.
        """
        timeout_s = self.pending_timeout_s()
        return timeout_s is not None and time.time() - attempt["started_at"] > timeout_s

    def _write_launch_files(self, number: int, config: bytes) -> bool:
        self.files.store.delete(layout.STOP)
        return self.files.write(layout.runtime_config(number), config)

    def request(self, number: int, market: Market, zone: str | None, decision: Decision | None = None) -> LaunchRequest:
        """What the backend is asked to launch for attempt `number` (and to find, after a crash)."""
        return LaunchRequest(job_id=self.job_id, attempt=number, job_url=self.job_url, zone=zone, market=market,
                             decision=decision,
                             workers=self.spec.resources.workers, env=dict(self.spec.env),
                             accelerator=self.spec.resources.accelerator,
                             accelerator_count=self.spec.resources.count,
                             options=backend_options(self.spec))
