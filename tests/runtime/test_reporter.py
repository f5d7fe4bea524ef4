"""Progress and events written by the runtime: throttling, the trailing heartbeat, the NaN flag."""

from __future__ import annotations

import json
import time

from spotfit.runtime.reporter import Reporter
from spotfit.stores import open_store


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
