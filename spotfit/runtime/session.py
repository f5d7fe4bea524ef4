"""One attempt's runtime state: config, store, checkpoints, reporter and notice watcher."""

from __future__ import annotations

import json
import math
import threading
import time
from typing import TYPE_CHECKING, Any

from spotfit.attempt import layout
from spotfit.attempt.config import RuntimeConfig
from spotfit.attempt.result import Result, encode_result, parse_result
from spotfit.errors import NotFoundError, StoreError
from spotfit.runtime.checkpoint import Checkpoint, CheckpointStore
from spotfit.runtime.fit_calls import FitCalls
from spotfit.runtime.preemption import NoticeWatcher
from spotfit.runtime.reporter import Reporter
from spotfit.runtime.strategy import LocalStop, cluster_from_env
from spotfit.stores import child, open_store

if TYPE_CHECKING:  # the runtime modules below import Keras
    from spotfit.runtime.choices import ScriptChoices
    from spotfit.runtime.offer import OfferTrial
    from spotfit.runtime.precision import PrecisionTuner
    from spotfit.runtime.strategy import StopAgreement
    from spotfit.runtime.tensorboard import TensorBoardLog
    from spotfit.runtime.xla import XlaTuner

# Checkpoint interval floor, in multiples of the save cost: keeps saving under 2% of time.
MIN_INTERVAL_SAVES = 50
DEFAULT_MTBF_S = 3600.0


class Session:
    """Shared by the runtime entry point and the instrumented `fit`."""

    def __init__(self, config: RuntimeConfig):
        self.config = config
        self.t_started = time.time()
        self.store = open_store(config.job_url)
        # With several workers the chief reports for the attempt and alone writes checkpoints,
        # progress and results; the others report under `workers/<index>/` (for debugging).
        self.cluster = cluster_from_env()
        self.report_store = self.store if self.cluster.is_chief else open_store(
            child(config.job_url, layout.worker_reports(self.cluster.index)))
        self.reporter = Reporter(self.report_store, config.attempt, config.heartbeat_s)
        self.stop: LocalStop | StopAgreement = LocalStop()  # a StopAgreement once a multi-worker strategy exists
        self.strategy_name = "none"
        self.tensorboard: TensorBoardLog | None = None  # on the chief only
        self.xla: XlaTuner | None = None
        self.precision: PrecisionTuner | None = None  # while `mixed_precision: auto` has yet to measure
        self.choices: ScriptChoices | None = None  # the script's own policy and jit_compile (choices.py)
        self.offer: OfferTrial | None = None  # auto's side measurement, when it only reports (offer.py)
        self.stepped = False  # a training step has run in this attempt (no fallback after it)
        self.offers: list[dict] = []  # what an earlier attempt's side measurement offered
        self.fit_inputs: list[str] = []  # what each fit call trained on, for the model card
        self.sample_x: Any = None  # a few rows of the training inputs, to verify exports
        self.checkpoints = CheckpointStore(self.store, keep=config.keep, on_event=self.reporter.event)
        self.watcher = NoticeWatcher(config.metadata_url, config.metadata_poll_s)
        self.model = None
        self.resume_checkpoint: Checkpoint | None = None
        self.calls = FitCalls(self.store, None)  # the script's fit calls; knows the resume point once loaded
        self.load_s = 0.0
        self.last_metrics: dict = {}
        self.epoch_ends: list = []  # (step, metrics, weights) of the last two epoch ends, with an export
        self.target_ends: list = []  # the same, of the last epoch ends that met a stopping target
        self.save_costs: list[float] = []
        self._interval_s: float | None = config.interval_s  # None: auto, until a save measured the cost
        self.stop_request: dict | None = None
        self.stop_asked = threading.Event()  # set by `start_stop_polling`'s thread; read after each step

    def load_checkpoint(self, tries: int = 3, pause_s: float = 5.0) -> None:
        """The newest valid checkpoint; an unreachable store is waited for, then an error."""
        t0 = time.perf_counter()
        for attempt in range(1, tries + 1):
            try:
                self.resume_checkpoint = self.checkpoints.load_latest()
                self.calls = FitCalls(self.store, self.resume_checkpoint)
                break
            except StoreError as exc:
                if attempt == tries:
                    raise
                self.reporter.event("store_unreachable", f"reading checkpoints failed ({exc}); retrying")
                time.sleep(pause_s)
        self.load_s = time.perf_counter() - t0

    def record_save(self, seconds: float) -> None:
        self.save_costs.append(seconds)
        if not self.config.interval_s:
            cost = sorted(self.save_costs)[len(self.save_costs) // 2]
            mtbf = self.config.mtbf_s or DEFAULT_MTBF_S
            self._interval_s = max(math.sqrt(2.0 * cost * mtbf), MIN_INTERVAL_SAVES * cost)

    def interval_s(self) -> float | None:
        """Seconds between periodic saves; None until a save has measured the cost (auto)."""
        return self._interval_s

    def start_stop_polling(self) -> threading.Event:
        """Read `control/stop` once per heartbeat from a daemon thread (`stop_asked` rises); set the event to end.

        A thread, so that the store read (a network call on S3) never lands inside a training step.
        """
        done = threading.Event()

        def loop():
            while not done.wait(self.config.heartbeat_s):
                if self.stop_requested():
                    self.stop_asked.set()
                    return

        threading.Thread(target=loop, name="spotfit-stop-poll", daemon=True).start()
        return done

    def stop_requested(self) -> bool:
        """`control/stop` under the job prefix, naming this attempt, asks it to save and stop.

        The controller writes it for rules (pause, stop) and cancel. `self.stop_request` keeps
        the document (reason, export).
        """
        try:
            doc = json.loads(self.store.read_bytes(layout.STOP))
        except (NotFoundError, StoreError, ValueError):  # unreachable store: ask at the next heartbeat
            return False
        if doc.get("attempt") != self.config.attempt:
            return False
        self.stop_request = doc
        return True

    def wait_for_stop(self, timeout_s: float, poll_s: float = 0.1) -> bool:
        """Wait for the controller to ask this attempt to stop: True; False on a notice or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not self.watcher.notice.is_set():
            if self.stop_asked.is_set() or self.stop_requested():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        return False

    @property
    def is_chief(self) -> bool:
        return self.cluster.is_chief

    def finished_result(self) -> Result | None:
        """The job's `result.json` when an earlier attempt finished training (None otherwise).

        A result is written once, by the attempt that trained the last step; an unreadable
        store counts as no result (the script then runs and restores its newest checkpoint).
        """
        try:
            doc = parse_result(self.store.read_bytes(layout.RESULT))
        except (NotFoundError, StoreError):
            return None
        return doc if doc is not None and doc.get("attempt") != self.config.attempt else None

    def write_result(self, result: Result) -> None:
        if not self.is_chief:
            self.report_store.write_bytes(layout.RESULT, encode_result(result))
            return
        self.store.write_bytes(layout.attempt_result(self.config.attempt), encode_result(result))
        self.store.write_bytes(layout.RESULT, encode_result(result))
