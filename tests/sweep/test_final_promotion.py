"""The sweep's last decision: a paused trial whose controller exits between two looks is promoted, not pruned.

A fresh CI run failed this way (test_sweep_run.py): trial 4 paused at epoch 3 as its rung's best,
its controller still exiting when `_promotable` looked (skipped), gone when the finish check looked;
the sweep pruned every trial and completed with no best trial and no published model. The race
is replayed here deterministically: the controller reads alive on the first look only.
"""

from __future__ import annotations

from types import SimpleNamespace

from spotfit import sdk
from spotfit.sweep.runner import SweepRunner


class _Trials:
    def __init__(self, rows: list[dict]):
        self.rows = rows

    def trials(self, sweep_id: str) -> list[dict]:
        return [dict(r) for r in self.rows]


def test_the_rungs_best_is_promoted_when_its_controller_exits_between_the_two_looks(monkeypatch):
    rows = [{"number": n, "state": "paused", "job_id": f"job-{n}", "rung": 3, "promotions": 0} for n in (1, 4)]
    runner = SweepRunner.__new__(SweepRunner)
    runner.sweep_id, runner.total = "s", 2
    runner.db = _Trials(rows)
    runner.jobs = SimpleNamespace(get_job=lambda job_id: {"id": job_id})
    runner.spec = SimpleNamespace(parallel=2, objective=SimpleNamespace(mode="max"))
    monkeypatch.setattr(runner, "_rung_values", lambda rung: {1: 0.675, 4: 0.8125})
    looks: dict[str, int] = {}

    def alive(job: dict) -> bool:  # trial 4's controller is still exiting at the first look only
        looks[job["id"]] = looks.get(job["id"], 0) + 1
        return job["id"] == "job-4" and looks[job["id"]] == 1

    monkeypatch.setattr(sdk, "controller_alive", alive)
    promoted, finished = [], []

    def promote(trial: dict) -> None:
        promoted.append(trial["number"])
        rows[[r["number"] for r in rows].index(trial["number"])]["state"] = "running"

    monkeypatch.setattr(runner, "_promote", promote)
    monkeypatch.setattr(runner, "_finish", lambda trials: finished.append(len(trials)))
    runner._fill_slots()
    assert promoted == [4] and finished == []
