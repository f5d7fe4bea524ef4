"""Budgets over many jobs: list them with what they have spent this period, set one, remove one.

They live in `$SPOTFIT_HOME/config.yaml` (`spotfit/host/settings.py`, loaded on use: `spotfit status`
imports neither pydantic's models nor YAML), or, with `shared`, in the shared state DB's
`team_budgets` table (`spotfit/controller/budget_store.py`; `SPOTFIT_STATE_URL` must be set), which every
controller of the team reads and which wins over a file budget of the same name; the
controller enforces them before each launch (`spotfit/controller/team_budget.py`). `set` and
`rm` rewrite the file (comments in it are not kept) or the table row.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from spotfit.errors import NotFoundError, UsageError
from spotfit.host.home import state_is_shared, state_target
from spotfit.sdk.context import db
from spotfit.spec.labels import matches

if TYPE_CHECKING:
    from spotfit.controller.budget_store import BudgetStore


def _store() -> BudgetStore | None:
    """The shared state DB's budget tables, or None without a shared state DB."""
    if not state_is_shared():
        return None
    from spotfit.controller.budget_store import BudgetStore

    return BudgetStore(state_target())


def _shared_store() -> BudgetStore:
    store = _store()
    if store is None:
        raise UsageError("Invalid `--shared`: no shared state DB (SPOTFIT_STATE_URL is not set), expected one "
                         "whose controllers read the team's budgets.",
                         hint="Set SPOTFIT_STATE_URL to the team's PostgreSQL (docs/team-state.md), or leave "
                              "--shared out to keep the budget in $SPOTFIT_HOME/config.yaml.")
    return store


def budget_list() -> dict[str, Any]:
    """`path`, `shared` and `budgets`: each budget's fields, `where` it is kept (`file` or `shared`), its
    period's start, what its jobs spent since and the share."""
    from spotfit.controller.team_budget import period_start
    from spotfit.host.settings import load_settings, settings_path

    store = _store()
    shared = store.budgets() if store is not None else []
    names = {b.name for b in shared}
    budgets = [(b, "file") for b in load_settings().budgets if b.name not in names] + [(b, "shared") for b in shared]
    now_s, billed = time.time(), {}
    rows = []
    for b, where in budgets:
        start = period_start(b.period, now_s)
        if start not in billed:
            billed[start] = [(spec.get("labels") or {}, usd) for spec, usd in db().billed_since(start)]
        spent = sum(usd for labels, usd in billed[start] if matches(labels, b.labels))
        rows.append({**b.model_dump(mode="json"), "where": where, "period_start_s": start, "spent_usd": round(spent, 6),
                     "percent": round(100.0 * spent / b.usd, 1)})
    return {"path": str(settings_path()), "shared": store.path if store is not None else None, "budgets": rows}


def budget_set(name: str, usd: float, labels: list[str] | None = None, period: str = "month",
               at_80_percent: str = "notify", at_100_percent: str = "pause", shared: bool = False) -> dict[str, Any]:
    """Add budget `name`, or replace the one of that name; `labels`: `KEY=VALUE` items; `shared`: in the
    shared state DB's table. Returns `budget_list()`."""
    from pydantic import ValidationError

    from spotfit.host.settings import TeamBudget, load_settings, save_settings

    selector = {}
    for item in labels or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"Invalid `--label`: received {item[:80]!r}, expected KEY=VALUE.",
                             hint="Pass --label project=nlp (repeat the flag for more labels).")
        selector[key] = value
    fields = {"name": name, "labels": selector, "usd": usd, "period": period, "at_80_percent": at_80_percent,
              "at_100_percent": at_100_percent}
    try:
        budget = TeamBudget.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "budget"
        flag = {"name": "NAME", "usd": "--usd", "labels": "--label"}.get(field, f"--{field.replace('_', '-')}")
        raise UsageError(f"Invalid `{flag}`: received {repr(fields.get(field))[:80]}, "
                         f"{first['msg'].removeprefix('Value error, ').replace('Input should be', 'expected')}.",
                         hint="See `spotfit budget set --help` and docs/costs.md.") from None
    if shared:
        _shared_store().set_budget(budget)
        return budget_list()
    settings = load_settings()
    settings.budgets = [b for b in settings.budgets if b.name != name] + [budget]
    save_settings(settings)
    return budget_list()


def budget_rm(name: str, shared: bool = False) -> dict[str, Any]:
    """Remove budget `name` (`shared`: from the shared state DB's table); returns `budget_list()`."""
    from spotfit.host.settings import load_settings, save_settings, settings_path

    if shared:
        store = _shared_store()
        if not store.remove_budget(name):
            known = ", ".join(b.name for b in store.budgets()) or "none"
            raise NotFoundError(f"No shared budget {name[:80]!r} in {store.path}: the shared budgets are {known}.",
                                hint="`spotfit budget list` shows them.")
        return budget_list()
    settings = load_settings()
    kept = [b for b in settings.budgets if b.name != name]
    if len(kept) == len(settings.budgets):
        known = ", ".join(b.name for b in settings.budgets) or "none"
        raise NotFoundError(f"No budget {name[:80]!r} in {settings_path()}: the budgets are {known}.",
                            hint="`spotfit budget list` shows them.")
    settings.budgets = kept
    save_settings(settings)
    return budget_list()
