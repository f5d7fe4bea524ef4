"""Progress and events written by the runtime: throttling, the trailing heartbeat, the NaN flag."""

from __future__ import annotations

import json
import threading
import time

from spotfit.runtime.reporter import Reporter
from spotfit.stores import open_store
from tests.support.wait import wait_for


def _progress(store) -> dict:
    return json.loads(store.read_bytes("progress.json"))


def test_an_update_the_throttle_skipped_is_written_one_heartbeat_later():
    store = open_store("memory://reporter-heartbeat/jobs/j1")
    rep = Reporter(store, attempt=1, heartbeat_s=0.2)
    rep.progress(force=True, phase="training", step=1)
    rep.progress(step=8)  # within the heartbeat: not written now
    assert _progress(store)["step"] == 1
    stop = rep.start_heartbeat()
    try:
        deadline = time.monotonic() + 30
        while _progress(store)["step"] != 8:  # the step a hung training loop made last
            assert time.monotonic() < deadline, "the heartbeat thread never wrote step 8"
            time.sleep(0.05)
    finally:
        stop.set()


def test_the_first_nan_loss_raises_the_flag_once_with_its_step():
    rep = Reporter(open_store("memory://reporter-nan/jobs/j1"), attempt=1)
    assert rep.record_loss(1, 0.5) is False and rep.record_loss(2, None) is False  # no loss: nothing
    assert rep.record_loss(3, float("nan")) is True
    assert rep.record_loss(4, float("inf")) is False  # already raised
    assert rep.state["nan_loss"] is True and rep.state["nan_step"] == 3
    rep.progress(force=True)
    assert _progress(rep.store)["losses"] == [[1, 0.5], [3, None], [4, None]]


class _CountingStore:
    """A store that counts progress writes (which thread makes them is what the hot path is about)."""

    def __init__(self, store):
        self.store, self.url, self.writes = store, store.url, 0

    def write_bytes(self, key, data):
        self.writes += key == "progress.json"
        self.store.write_bytes(key, data)

    def read_bytes(self, key):
        return self.store.read_bytes(key)


def test_a_training_step_writes_nothing_and_the_heartbeat_thread_writes_its_news():
    store = _CountingStore(open_store("memory://reporter-step/jobs/j1"))
    rep = Reporter(store, attempt=1, heartbeat_s=0.2)  # type: ignore[arg-type]
    rep.progress(force=True, phase="training", step=0)
    for step in range(1, 501):
        assert rep.step_done(step, 1.0 / step, epoch=0) is False
    assert store.writes == 1, "a training step wrote progress.json itself"
    stop = rep.start_heartbeat()
    try:
        doc = wait_for(lambda: (d := _progress(store.store))["step"] == 500 and d, 30,
                       "the heartbeat thread to write step 500")
    finally:
        stop.set()
    assert doc["loss"] == 1.0 / 500 and doc["losses"][-1] == [500, 1.0 / 500]
    assert rep.step_done(501, float("nan"), epoch=0) is True  # the first NaN still shows at its step
    assert rep.state["nan_step"] == 501


def test_an_attempt_that_makes_no_step_still_writes_each_utilization_sample():
    """A starved input pipeline makes no step: the heartbeat still carries fresh utilization samples
    (each with its own `heartbeat_at`), or `idle_accelerator` never sees the idle accelerator."""
    from spotfit.runtime.utilization import start_sampling

    store = open_store("memory://reporter-idle/jobs/j1")
    rep = Reporter(store, attempt=1, heartbeat_s=0.05)
    rep.progress(force=True, phase="training", step=100)
    sampling = start_sampling(rep.state, interval_s=0.05, sampled=rep.news)
    beating = rep.start_heartbeat()
    try:
        beats: set[float] = set()

        def three_sampled_beats() -> bool:
            doc = _progress(store)
            if doc.get("utilization_pct") is not None:
                beats.add(doc["heartbeat_at"])
            return len(beats) >= 3

        wait_for(three_sampled_beats, 60, "three heartbeats with a utilization sample while no step came")
    finally:
        sampling.set()
        beating.set()
    assert _progress(store)["step"] == 100


class _ThreadStore:
    """A store that records which thread wrote each key."""

    def __init__(self, store):
        self.store, self.url, self.writers = store, store.url, []

    def write_bytes(self, key, data):
        self.store.write_bytes(key, data)
        self.writers.append((key, threading.current_thread().name))

    def read_bytes(self, key):
        return self.store.read_bytes(key)


def _events(store: _ThreadStore) -> list[str]:
    return [key for key, _ in store.writers if key.startswith("events/")]


def test_an_epoch_end_s_writes_are_the_heartbeat_thread_s_in_order():
    store = _ThreadStore(open_store("memory://reporter-soon/jobs/j1"))
    rep = Reporter(store, attempt=1, heartbeat_s=3600)  # no beat falls inside the test: only `soon` wakes it
    rep.event_soon("epoch_end", "before any heartbeat thread")  # none runs: written at once, by the caller
    assert store.writers == [("events/0001-000001.json", "MainThread")]
    stop = rep.start_heartbeat()
    try:
        rep.progress(soon=True, epoch=1, metrics={"loss": 0.5})
        rep.event_soon("epoch_end", "epoch 1 ended", epoch=1)
        rep.event("checkpoint", "a save's event, written by its caller after the waiting one")
        wait_for(lambda: len(_events(store)) == 3 and any(key == "progress.json" for key, _ in store.writers)
                 and _progress(store).get("epoch") == 1, timeout_s=60,
                 what="the heartbeat thread's writes of the epoch's end")
    finally:
        stop.set()
    assert _events(store) == ["events/0001-000001.json", "events/0001-000002.json", "events/0001-000003.json"]
    assert ("events/0001-000003.json", "MainThread") in store.writers  # `event` waits for its own write
    assert ("progress.json", "spotfit-heartbeat") in store.writers  # the epoch's progress is the thread's
    assert _progress(store)["metrics"] == {"loss": 0.5}
