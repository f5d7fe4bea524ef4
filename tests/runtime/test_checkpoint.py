"""Checkpoint protocol: manifest last, verified restore, fallback, pruning, Young–Daly interval."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.runtime.session import MIN_INTERVAL_SAVES, Session
from spotfit.stores import open_store
from tests.support.wait import wait_for


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path):
    url = f"file://{tmp_path}/store" if request.param == "file" else f"memory://ckpt-{tmp_path.name}"
    return open_store(url)


def _arrays(value: float) -> dict:
    return {"w": np.full((4, 4), value, dtype="float32"), "b": np.arange(3)}


def test_save_and_load_round_trip(store):
    ckpts = CheckpointStore(store, keep=2)
    ckpts.save(10, _arrays(1.0), {"epoch": 0, "batch": 10})
    loaded = ckpts.load_latest()
    assert loaded.step == 10 and loaded.meta == {"epoch": 0, "batch": 10}
    np.testing.assert_array_equal(loaded.arrays["w"], _arrays(1.0)["w"])


def test_keeps_only_the_newest_good_ones(store):
    ckpts = CheckpointStore(store, keep=2)
    for step in (10, 20, 30, 40):
        ckpts.save(step, _arrays(step), {})
    assert ckpts.steps() == [30, 40]
    assert not [k for k in store.list("checkpoints") if "/000000000010/" in k or "/000000000020/" in k]


def test_truncated_newest_falls_back_to_previous_with_an_event(store):
    events = []
    ckpts = CheckpointStore(store, keep=2, on_event=lambda kind, msg, **d: events.append((kind, d)))
    ckpts.save(10, _arrays(1.0), {})
    ckpts.save(20, _arrays(2.0), {})
    key = "checkpoints/000000000020/state.npz"
    store.write_bytes(key, store.read_bytes(key)[:100])  # truncated, as by a crash mid-upload
    loaded = ckpts.load_latest()
    assert loaded.step == 10
    assert loaded.arrays["w"][0, 0] == 1.0
    assert events == [("checkpoint_corrupt", {"step": 20})]


def test_data_without_manifest_is_not_a_checkpoint(store):
    ckpts = CheckpointStore(store, keep=2)
    ckpts.save(10, _arrays(1.0), {})
    store.write_bytes("checkpoints/000000000020/state.npz", b"half written")  # no manifest
    assert ckpts.steps() == [10]
    assert ckpts.load_latest().step == 10


def test_no_checkpoint_gives_none(store):
    assert CheckpointStore(store).load_latest() is None


def _session(**config) -> Session:
    cfg = RuntimeConfig(job_id="j", job_url="memory://session-test", script="s.py", workdir=".", **config)
    return Session(cfg)


def test_auto_interval_is_young_daly_with_a_floor():
    session = _session(mtbf_s=3600.0)
    assert session.interval_s() is None  # nothing measured yet: the first save measures
    session.record_save(0.05)
    assert session.interval_s() == pytest.approx(math.sqrt(2 * 0.05 * 3600.0))
    short = _session(mtbf_s=1.0)
    short.record_save(0.05)
    assert short.interval_s() == pytest.approx(MIN_INTERVAL_SAVES * 0.05)  # save cost stays <= 2%


def test_explicit_seconds_interval_wins():
    session = _session(interval_s=7.5, mtbf_s=3600.0)
    session.record_save(1.0)
    assert session.interval_s() == 7.5


def test_an_unreachable_store_is_not_taken_for_a_corrupt_checkpoint(store, monkeypatch):
    from spotfit.errors import StoreError

    ckpts = CheckpointStore(store, keep=2)
    ckpts.save(10, _arrays(1.0), {})

    def unreachable(key):
        raise StoreError("connection refused")

    monkeypatch.setattr(store, "read_bytes", unreachable)
    with pytest.raises(StoreError):
        ckpts.load_latest()  # not None: training from scratch would throw the checkpoint's work away


def test_newest_is_by_fit_call_then_step(store):
    # A second fit call's checkpoint wins over a first call's with a higher step number.
    ckpts = CheckpointStore(store, keep=3)
    ckpts.save(180, _arrays(1.0), {"fit_index": 1, "step": 180})
    ckpts.save(104, _arrays(2.0), {"fit_index": 2, "step": 104})
    assert ckpts.load_latest().meta["fit_index"] == 2


@pytest.mark.parametrize("manifest", [b"not json", b'{"step": 20, "fi', b"[]", b"null", b"{}", b"\xff\xfe"],
                         ids=["text", "truncated", "list", "null", "empty", "binary"])
def test_a_corrupt_manifest_is_reported_and_passed_over(tmp_path, manifest):
    # The runtime's own path: Session.load_checkpoint, its events in the job's store. Fit calls
    # count from 1: an unreadable manifest once sorted as call 0, below every readable one, and
    # was passed over without an event (or, as a list or null, crashed the restore).
    session = Session(RuntimeConfig(job_id="j", job_url=f"file://{tmp_path}/job", script="s.py", workdir="."))
    session.checkpoints.save(10, _arrays(1.0), {"fit_index": 1, "step": 10})
    session.checkpoints.save(20, _arrays(2.0), {"fit_index": 1, "step": 20})
    session.store.write_bytes("checkpoints/000000000020/manifest.json", manifest)
    session.load_checkpoint()
    assert session.resume_checkpoint.step == 10 and session.resume_checkpoint.arrays["w"][0, 0] == 1.0
    events = [json.loads(session.store.read_bytes(k)) for k in sorted(session.store.list("events"))]
    assert [(e["kind"], e["data"]) for e in events] == [("checkpoint_corrupt", {"step": 20})]
    assert "step 20 is corrupt" in events[0]["message"]


def test_a_readable_manifest_without_a_fit_call_still_sorts_by_step(store):
    ckpts = CheckpointStore(store, keep=3)
    ckpts.save(10, _arrays(1.0), {})
    ckpts.save(20, _arrays(2.0), {})
    assert ckpts.load_latest().step == 20


def test_a_prefix_keeps_its_own_checkpoints(store):
    main, record = CheckpointStore(store, keep=1), CheckpointStore(store, keep=1, prefix="fit_calls/0001")
    record.save(48, _arrays(1.0), {"fit_index": 1})
    for step in (50, 60):
        main.save(step, _arrays(2.0), {"fit_index": 2})
    assert main.steps() == [60] and record.load_latest().step == 48  # pruning one leaves the other


def test_a_stop_request_is_read_by_a_thread_not_by_the_training_step():
    cfg = RuntimeConfig(job_id="j", job_url="memory://session-stop-poll/jobs/j1", script="s.py", workdir=".",
                        heartbeat_s=0.05, attempt=2)
    session = Session(cfg)
    session.store.write_bytes("control/stop", json.dumps({"attempt": 1, "reason": "old"}).encode())
    done = session.start_stop_polling()
    try:
        session.store.write_bytes("control/stop", json.dumps({"attempt": 2, "reason": "budget"}).encode())
        wait_for(session.stop_asked.is_set, 30, "the polling thread to see the stop request for attempt 2")
    finally:
        done.set()
    assert session.stop_request == {"attempt": 2, "reason": "budget"}
