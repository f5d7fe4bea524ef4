"""Budgets over many jobs: list them with what they have spent this period, set one, remove one.

They live in `$SPOTFIT_HOME/config.yaml` (`spotfit/settings.py`, loaded on use: `spotfit status`
imports neither pydantic's models nor YAML); the controller enforces them
before each launch (`spotfit/controller/team_budget.py`). `set` and `rm` rewrite the file
(comments in it are not kept).
"""

from __future__ import annotations

import json
import time

from spotfit.errors import NotFoundError, UsageError
from spotfit.labels import matches
from spotfit.sdk.context import db


def budget_list() -> dict:
    """`path` and `budgets`: each budget's fields, its period's start, what its jobs spent since and the share."""
    from spotfit.controller.team_budget import period_start
    from spotfit.settings import load_settings, settings_path

    budgets = load_settings().budgets
    now_s, billed = time.time(), {}
    rows = []
    for b in budgets:
        start = period_start(b.period, now_s)
        if start not in billed:
            billed[start] = [(json.loads(spec).get("labels") or {}, usd) for spec, usd in db().billed_since(start)]
        spent = sum(usd for labels, usd in billed[start] if matches(labels, b.labels))
        rows.append({**b.model_dump(mode="json"), "period_start_s": start, "spent_usd": round(spent, 6),
                     "percent": round(100.0 * spent / b.usd, 1)})
    return {"path": str(settings_path()), "budgets": rows}


def budget_set(name: str, usd: float, labels: list[str] | None = None, period: str = "month",
               at_80_percent: str = "notify", at_100_percent: str = "pause") -> dict:
    """Add budget `name`, or replace the one of that name; `labels`: `KEY=VALUE` items. Returns `budget_list()`."""
    from pydantic import ValidationError

    from spotfit.settings import TeamBudget, load_settings, save_settings

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
    settings = load_settings()
    settings.budgets = [b for b in settings.budgets if b.name != name] + [budget]
    save_settings(settings)
    return budget_list()


def budget_rm(name: str) -> dict:
    """Remove budget `name`; returns `budget_list()`."""
    from spotfit.settings import load_settings, save_settings, settings_path

    settings = load_settings()
    kept = [b for b in settings.budgets if b.name != name]
    if len(kept) == len(settings.budgets):
        known = ", ".join(b.name for b in settings.budgets) or "none"
        raise NotFoundError(f"No budget {name[:80]!r} in {settings_path()}: the budgets are {known}.",
                            hint="`spotfit budget list` shows them.")
    settings.budgets = kept
    save_settings(settings)
    return budget_list()
