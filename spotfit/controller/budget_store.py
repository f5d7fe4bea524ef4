"""Team budgets kept in the shared state DB, and the launches' reservations against them.

A team whose controllers share one state DB (`SPOTFIT_STATE_URL`, PostgreSQL: docs/team-state.md)
keeps its budgets in the table `team_budgets` (one row per budget, its fields as JSON), where
every controller reads them; `spotfit budget set --shared` writes it. A budget of the same name
in `$SPOTFIT_HOME/config.yaml` is overridden by the table's.

Several controllers must not launch past a budget together. Before a launch each one, in one
transaction that holds the lock `spotfit-budgets` (`pg_advisory_xact_lock`; SQLite's write
transaction excludes every other writer anyway), adds up what the budget's jobs were billed and
what the other jobs have *reserved*, decides, and, when nothing pauses the launch, records its
own reservation: the launch's expected spend (`budget_reservations`, one row per job). A
reservation counts while its job has a live attempt (its bill is not in the ledger until it
ends) or for `HOLD_S` after it was made (the launch in flight) until an attempt launched since
has been billed: once the attempt has ended, its bill counts instead. So two controllers cannot
both launch past the budget: the second sees the first's reservation.

While an attempt runs, its controller's check (`running_check`, every `TEAM_CHECK_S`) adds its
cost so far to what was billed and what the *other* jobs reserved, under the same lock, and
grows its own reservation to that cost so far when the attempt has spent more than it reserved:
the other controllers' checks then count at least what it has spent.

Example (SQLite; the lock is the write transaction):

>>> import os, tempfile
>>> from spotfit.settings import TeamBudget
>>> from spotfit.state import StateDB
>>> path = os.path.join(tempfile.mkdtemp(), "state.db")
>>> for job in ("j1", "j2"):
...     StateDB(path).create_job(job, job, spec_json='{"labels": {"project": "nlp"}}', store_url="memory://x")
>>> store = BudgetStore(path)
>>> store.set_budget(TeamBudget(name="nlp", labels={"project": "nlp"}, usd=10.0))
>>> [b.name for b in store.budgets()]
['nlp']
>>> [c.action for c in store.reserve("j1", {"project": "nlp"}, store.budgets(), 9.0, 1_800_000_000.0)]
[]
>>> [c.message for c in store.reserve("j2", {"project": "nlp"}, store.budgets(), 1.0, 1_800_000_000.0)]
['team_budget: nlp spent $9.0000 of $10 this month (90%, project=nlp) -> notify']
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from spotfit.controller.team_budget import Crossing, crossings
from spotfit.settings import TeamBudget
from spotfit.state.dialect import Postgres, Sqlite, connect, display_target, execute, execute_schema
from spotfit.state.states import AttemptState

HOLD_S = 600.0  # a reservation without a live attempt counts this long (the launch in flight)
LOCK = "spotfit-budgets"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS team_budgets (
    name TEXT PRIMARY KEY,
    budget_json TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS budget_reservations (
    job_id TEXT PRIMARY KEY,
    usd REAL NOT NULL,
    created_at REAL NOT NULL
)
"""
_LIVE = tuple(str(s) for s in AttemptState if s.is_live())


class BudgetStore:
    """The `team_budgets` and `budget_reservations` tables of a state DB (one per process or thread)."""

    def __init__(self, target: str | Path):
        self.path = display_target(target)
        self._db: Sqlite | Postgres = connect(target)
        with self._db.transaction():
            self._db.lock_schema()  # PostgreSQL: two processes creating the tables at once take turns
            execute_schema(self._db, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def _q(self, text: str, params: tuple[Any, ...] = ()) -> Any:
        return execute(self._db, text, params)

    def budgets(self) -> list[TeamBudget]:
        rows = self._q("SELECT budget_json FROM team_budgets ORDER BY name").fetchall()
        return [TeamBudget.model_validate(json.loads(r["budget_json"])) for r in rows]

    def set_budget(self, budget: TeamBudget) -> None:
        with self._db.transaction():
            self._q("DELETE FROM team_budgets WHERE name = ?", (budget.name,))
            self._q("INSERT INTO team_budgets (name, budget_json, updated_at) VALUES (?, ?, ?)",
                    (budget.name, budget.model_dump_json(), time.time()))

    def remove_budget(self, name: str) -> bool:
        with self._db.transaction():
            return bool(self._q("DELETE FROM team_budgets WHERE name = ?", (name,)).rowcount > 0)

    def spent_since(self, start_s: float, but_job: str | None = None, now_s: float | None = None
                    ) -> list[tuple[dict[str, str], float]]:
        """(labels, USD) per job: billed for attempts launched since `start_s`, and the live reservations
        made since then (except `but_job`'s)."""
        now_s = time.time() if now_s is None else now_s
        billed = self._q("SELECT j.spec_json AS spec_json, SUM(a.cost_usd) AS usd FROM attempts a JOIN jobs j "
                         "ON a.job_id = j.id WHERE a.started_at >= ? AND a.cost_usd IS NOT NULL "
                         "GROUP BY j.id, j.spec_json", (start_s,)).fetchall()
        live = ", ".join("?" * len(_LIVE))
        reserved = self._q(
            "SELECT j.spec_json AS spec_json, r.usd AS usd FROM budget_reservations r JOIN jobs j ON r.job_id = j.id "
            "WHERE r.created_at >= ? AND r.job_id != ? AND ((r.created_at > ? AND NOT EXISTS (SELECT 1 FROM attempts a "
            "WHERE a.job_id = r.job_id AND a.started_at >= r.created_at AND a.cost_usd IS NOT NULL)) OR EXISTS "
            f"(SELECT 1 FROM attempts a WHERE a.job_id = r.job_id AND a.state IN ({live})))",
            (start_s, but_job or "", now_s - HOLD_S, *_LIVE)).fetchall()
        return [(json.loads(r["spec_json"]).get("labels") or {}, float(r["usd"])) for r in [*billed, *reserved]]

    def reserve(self, job_id: str, labels: dict[str, str], budgets: list[TeamBudget], expected_usd: float,
                now_s: float | None = None) -> list[Crossing]:
        """The budgets a launch of `job_id` crosses (billed + others' reservations); when none pauses it,
        its reservation of `expected_usd` is recorded in the same transaction."""
        now_s = time.time() if now_s is None else now_s
        with self._db.transaction():
            self._db.lock_key(LOCK)
            found = crossings(budgets, labels, lambda start_s: self.spent_since(start_s, job_id, now_s), now_s)
            if not any(c.action == "pause" for c in found):
                self._q("DELETE FROM budget_reservations WHERE job_id = ?", (job_id,))
                self._q("INSERT INTO budget_reservations (job_id, usd, created_at) VALUES (?, ?, ?)",
                        (job_id, max(expected_usd, 0.0), now_s))
        return found

    def running_check(self, job_id: str, labels: dict[str, str], budgets: list[TeamBudget], live_usd: float,
                      launched_s: float, now_s: float | None = None) -> list[Crossing]:
        """The budgets a running attempt of `job_id` (launched at epoch `launched_s`) has passed: billed, the
        other jobs' reservations and its `live_usd` so far; its own reservation grows to `live_usd` when that
        is more (in the same transaction; one made here dates from the launch, as the attempt's bill will)."""
        now_s = time.time() if now_s is None else now_s
        with self._db.transaction():
            self._db.lock_key(LOCK)
            row = self._q("SELECT usd FROM budget_reservations WHERE job_id = ?", (job_id,)).fetchone()
            if row is None:
                self._q("INSERT INTO budget_reservations (job_id, usd, created_at) VALUES (?, ?, ?)",
                        (job_id, max(live_usd, 0.0), launched_s))
            elif float(row["usd"]) < live_usd:
                self._q("UPDATE budget_reservations SET usd = ? WHERE job_id = ?", (live_usd, job_id))
            return crossings(budgets, labels,
                             lambda start_s: [*self.spent_since(start_s, job_id, now_s), (labels, live_usd)], now_s)
