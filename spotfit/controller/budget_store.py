"""Team budgets kept in the shared state DB, and the launches' reservations against them.

A team whose controllers share one state DB (`SPOTFIT_STATE_URL`, PostgreSQL: docs/team-state.md)
keeps its budgets in the table `team_budgets` (one row per budget, its fields as JSON), where
every controller reads them; `spotfit budget set --shared` writes it. A budget of the same name
in `$SPOTFIT_HOME/config.yaml` is overridden by the table's.

Every job's controller uses these tables, on the default SQLite state as on a shared one: jobs
under one budget count each other's running attempts either way (on SQLite the budgets come from
config.yaml alone; the table's are read only where the state is shared).

Several controllers must not spend past a budget together. Each change happens in one
transaction that holds the lock `spotfit-budgets` (`pg_advisory_xact_lock`; SQLite's write
transaction excludes every other writer anyway), which adds up what the budget's jobs were billed
and what the other jobs have *reserved*, decides, and records the job's own reservation
(`budget_reservations`, one row per job). A reservation counts while its job has a live attempt
(its bill is not in the ledger until it ends) or for `HOLD_S` after it was made (the launch in
flight) until an attempt launched since has been billed: once the attempt has ended, its bill
counts instead.

- Before a launch (`reserve`): a budget the others have spent pauses the job; else it reserves
  the launch's expected spend, or the room its pausing budgets have left if that is less. So the
  second of two launches sees the first's reservation.
- While the attempt runs (`running_check`): its reservation is its *allowance*, what it may spend
  in all before its controller asks again. The controller asks when the attempt's cost reaches
  it (the replay holds the modeled instance's clock at that trace second, as a job's own budget
  caps it), when its cost reaches a level it would pass (80 %), and every `TEAM_CHECK_S`. Each ask
  raises the allowance to what the attempt wants, within the room the others' bills and
  reservations leave, and never lowers it. An attempt that has spent its allowance with no room
  left pauses its job at 100 %. The reservations never add up to more than a pausing budget, so
  the budget is exceeded by no more than the billing minimums of the attempts launched into its
  last dollars (and, on a cloud's wall clock, what is spent between a look and the stop).

Example (SQLite; the lock is the write transaction):

>>> import os, tempfile
>>> from spotfit.host.settings import TeamBudget
>>> from spotfit.state import StateDB
>>> path = os.path.join(tempfile.mkdtemp(), "state.db")
>>> for job in ("j1", "j2"):
...     StateDB(path).create_job(job, job, spec_json='{"labels": {"project": "nlp"}}', store_url="memory://x")
>>> store = BudgetStore(path)
>>> store.set_budget(TeamBudget(name="nlp", labels={"project": "nlp"}, usd=10.0))
>>> [b.name for b in store.budgets()]
['nlp']
>>> store.reserve("j1", {"project": "nlp"}, store.budgets(), 9.0, 1_800_000_000.0)
Grant(crossings=[], allowance_usd=9.0, next_level_usd=None)
>>> grant = store.reserve("j2", {"project": "nlp"}, store.budgets(), 5.0, 1_800_000_000.0)
>>> [c.message for c in grant.crossings], grant.allowance_usd  # j1 holds $9 of $10: $1 is left
(['team_budget: nlp spent $9.0000 of $10 this month (90%, project=nlp) -> notify'], 1.0)
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotfit.controller.team_budget import LEVELS, SPENT_USD, Crossing, crossings, period_start
from spotfit.host.settings import TeamBudget
from spotfit.spec.labels import matches
from spotfit.state.db import StateDB
from spotfit.state.dialect import Postgres, Sqlite, connect, display_target, execute, execute_schema
from spotfit.state.records import raw_spec_of
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
_ON_CONNECTION: weakref.WeakKeyDictionary[StateDB, BudgetStore] = weakref.WeakKeyDictionary()


class BudgetStore:
    """The `team_budgets` and `budget_reservations` tables of a state DB (one per process or thread)."""

    def __init__(self, target: str | Path, connection: Sqlite | Postgres | None = None):
        """On its own connection to `target`, or on `connection` (a state DB's, in the same thread)."""
        self.path = display_target(target)
        self._db: Sqlite | Postgres = connection if connection is not None else connect(target)
        with self._db.transaction():
            self._db.lock_schema()  # PostgreSQL: two processes creating the tables at once take turns
            execute_schema(self._db, _SCHEMA)

    @classmethod
    def of(cls, db: StateDB) -> BudgetStore:
        """The budget tables over `db`'s own connection, one per connection: a controller driving many jobs on a
        worker's connection (`controller/pool.py`) opens no connection per job."""
        store = _ON_CONNECTION.get(db)
        if store is None:
            store = _ON_CONNECTION[db] = cls(db.target, connection=db.connection)
        return store

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
        return [(raw_spec_of(r).get("labels") or {}, float(r["usd"])) for r in [*billed, *reserved]]

    def _allowed(self, budgets: list[TeamBudget], labels: dict[str, str],
                 others: Callable[[float], list[tuple[dict[str, str], float]]], now_s: float
                 ) -> tuple[float, TeamBudget, float, float] | None:
        """(room, budget, its spend by the others, its period's start) of the pausing budget covering
        `labels` with the least room left by the others' bills and reservations; None without one."""
        found = None
        for budget in budgets:
            if budget.at_100_percent != "pause" or not matches(labels, budget.labels):
                continue
            start = period_start(budget.period, now_s)
            spent = sum(usd for their_labels, usd in others(start) if matches(their_labels, budget.labels))
            if found is None or budget.usd - spent < found[0]:
                found = (budget.usd - spent, budget, spent, start)
        return found

    def _hold(self, job_id: str, usd: float, created_s: float) -> None:
        self._q("DELETE FROM budget_reservations WHERE job_id = ?", (job_id,))
        self._q("INSERT INTO budget_reservations (job_id, usd, created_at) VALUES (?, ?, ?)", (job_id, usd, created_s))

    def reserve(self, job_id: str, labels: dict[str, str], budgets: list[TeamBudget], expected_usd: float,
                now_s: float | None = None) -> Grant:
        """The budgets a launch of `job_id` crosses (billed + others' reservations); when none pauses it,
        its reservation, `expected_usd` or the room its pausing budgets have left if less, is recorded
        in the same transaction."""
        now_s = time.time() if now_s is None else now_s
        with self._db.transaction():
            self._db.lock_key(LOCK)
            others = self._others(job_id, now_s)
            found = crossings(budgets, labels, others, now_s)
            if any(c.action == "pause" for c in found):
                return Grant(found, 0.0, 0.0)
            allowed = self._allowed(budgets, labels, others, now_s)
            usd = max(expected_usd, 0.0) if allowed is None else max(0.0, min(expected_usd, allowed[0]))
            self._hold(job_id, usd, now_s)
        return Grant(found, None if allowed is None else usd, None)

    def running_check(self, job_id: str, labels: dict[str, str], budgets: list[TeamBudget], live_usd: float,
                      launched_s: float, want_usd: float | None = None, now_s: float | None = None) -> Grant:
        """The budgets a running attempt of `job_id` (launched at epoch `launched_s`, `live_usd` spent so
        far) has passed, counting what was billed and the other jobs' reservations, and its allowance.

        The allowance is what the attempt may spend before its controller asks again: its reservation,
        raised (in the same transaction) to `want_usd` (default: `live_usd`) where the pausing budgets'
        room allows, and never lowered while the attempt runs. When the attempt has spent it and no
        room is left, a 100 % crossing pauses the job. A reservation made here dates from the launch,
        as the attempt's bill will.
        """
        now_s = time.time() if now_s is None else now_s
        want_usd = live_usd if want_usd is None else max(want_usd, live_usd)
        with self._db.transaction():
            self._db.lock_key(LOCK)
            row = self._q("SELECT usd, created_at FROM budget_reservations WHERE job_id = ?", (job_id,)).fetchone()
            held, created_s = (0.0, launched_s) if row is None else (float(row["usd"]), float(row["created_at"]))
            others = self._others(job_id, now_s)
            found = crossings(budgets, labels, lambda start_s: [*others(start_s), (labels, live_usd)], now_s)
            allowed = self._allowed(budgets, labels, others, now_s)
            allowance = max(held, live_usd, want_usd if allowed is None else min(want_usd, allowed[0]))
            if allowance > held:
                self._hold(job_id, allowance, created_s)
            spent_all = allowed is not None and max(allowance, allowed[0]) - live_usd <= SPENT_USD
            if spent_all and allowed is not None and not any(c.action == "pause" for c in found):
                room, budget, spent, start = allowed
                found = [c for c in found if c.budget.name != budget.name]
                found.append(Crossing(budget, 100, "pause", spent + live_usd, start))
            return Grant(found, None if allowed is None else allowance,
                         _next_level_usd(budgets, labels, others, now_s, live_usd))

    def _others(self, job_id: str, now_s: float) -> Callable[[float], list[tuple[dict[str, str], float]]]:
        """`start_s` -> what the other jobs were billed and hold reserved since then (read once per start)."""
        seen: dict[float, list[tuple[dict[str, str], float]]] = {}

        def spent(start_s: float) -> list[tuple[dict[str, str], float]]:
            if start_s not in seen:
                seen[start_s] = self.spent_since(start_s, job_id, now_s)
            return seen[start_s]

        return spent


@dataclass(frozen=True)
class Grant:
    """What a launch's or a running attempt's look at the team budgets found.

    `crossings`: the levels passed (a `pause` among them pauses the job); `allowance_usd`: what the
    attempt may spend in all before its controller asks again (None: no budget covering it pauses);
    `next_level_usd`: the attempt's spend at which it would pass a level not yet passed, given the
    others' spend now (None: none left), when its controller looks again.
    """

    crossings: list[Crossing]
    allowance_usd: float | None
    next_level_usd: float | None


def _next_level_usd(budgets: list[TeamBudget], labels: dict[str, str],
                    others: Callable[[float], list[tuple[dict[str, str], float]]], now_s: float,
                    live_usd: float) -> float | None:
    """The least spend of this attempt, above `live_usd`, at which a budget covering it passes a level that acts."""
    found = None
    for budget in budgets:
        if not matches(labels, budget.labels):
            continue
        spent = sum(usd for their_labels, usd in others(period_start(budget.period, now_s))
                    if matches(their_labels, budget.labels))
        for percent, field in LEVELS:
            at = budget.usd * percent / 100.0 - spent
            if getattr(budget, field) != "none" and at > live_usd and (found is None or at < found):
                found = at
    return found
