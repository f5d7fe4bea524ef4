"""One attempt's runtime state: config, store, checkpoints, reporter and notice watcher."""

from __future__ import annotations

import json
import math
import time

from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.runtime.config import RuntimeConfig
from spotfit.runtime.preemption import NoticeWatcher
from spotfit.runtime.reporter import Reporter
from spotfit.stores import open_store

# Checkpoint interval floor, in multiples of the save cost: keeps saving under 2% of time.
MIN_INTERVAL_SAVES = 50
DEFAULT_MTBF_S = 3600.0


class Session:
    """Shared by the runtime entry point and the instrumented `fit`."""

    def __init__(self, config: RuntimeConfig):
        self.config = config
        self.t_started = time.time()
        self.store = open_store(config.job_url)
        self.reporter = Reporter(self.store, config.attempt, config.heartbeat_s)
        self.checkpoints = CheckpointStore(self.store, keep=config.keep, on_event=self.reporter.event)
        self.watcher = NoticeWatcher(config.metadata_url, config.metadata_poll_s)
        self.fit_index = 0
        self.model = None
        self.resume_checkpoint = None
        self.load_s = 0.0
        self.last_metrics: dict = {}
        self.save_costs: list[float] = []

    def load_checkpoint(self) -> None:
        t0 = time.perf_counter()
        self.resume_checkpoint = self.checkpoints.load_latest()
        self.load_s = time.perf_counter() - t0

    def record_save(self, seconds: float) -> None:
        self.save_costs.append(seconds)

    def interval_s(self) -> float | None:
        """Seconds between periodic saves; None until a save has measured the cost (auto)."""
        if self.config.interval_s:
            return self.config.interval_s
        if not self.save_costs:
            return None
        cost = sorted(self.save_costs)[len(self.save_costs) // 2]
        mtbf = self.config.mtbf_s or DEFAULT_MTBF_S
        return max(math.sqrt(2.0 * cost * mtbf), MIN_INTERVAL_SAVES * cost)

    def stop_requested(self) -> bool:
        """A `stop` file under the job prefix asks the attempt to save and stop (rules, cancel)."""
        if not hasattr(self, "_stop_checked"):
            self._stop_checked = 0.0
        now = time.time()
        if now - self._stop_checked < self.config.heartbeat_s:
            return False
        self._stop_checked = now
        return self.store.exists("control/stop")

    def write_result(self, result: dict) -> None:
        self.store.write_bytes(f"attempts/{self.config.attempt:04d}/result.json", json.dumps(result).encode())
        self.store.write_bytes("result.json", json.dumps(result).encode())
