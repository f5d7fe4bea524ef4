"""Budgets over many jobs (`budgets:` in `$SPOTFIT_HOME/config.yaml`): which one a launch crosses.

Pure decisions over the settings and what the state DB says was billed; the controller
(`rule_actions.py`) checks them before each launch, and while an attempt runs (with its cost so
far, as its allowance is spent: budget_store.py), and records, notifies or pauses (a running
attempt saves and stops).

A budget covers every job whose labels include its `labels`, and counts what their attempts
launched in the current UTC calendar period (day, week from Monday, month) were billed (an
attempt is billed when it ends). At 80 % and at 100 % of `usd` its `at_80_percent` and
`at_100_percent` say what happens to a job it covers that is about to launch: `notify` (once per
job, budget, level and period), `pause` (the job pauses instead of launching, or its running
attempt saves and stops; `spotfit resume` after the period turns or the budget is raised) or `none`.

Example:

>>> from spotfit.host.settings import TeamBudget
>>> b = TeamBudget(name="nlp", labels={"project": "nlp"}, usd=100.0)
>>> start = period_start("month", 1_700_000_000.0)  # 2023-11-14 22:13 UTC
>>> start == 1_698_796_800.0  # 2023-11-01 00:00 UTC
True
>>> billed = lambda since_s: [({"project": "nlp"}, 85.0), ({"project": "cv"}, 50.0)]
>>> [c.message for c in crossings([b], {"project": "nlp", "owner": "ada"}, billed, 1_700_000_000.0)]
['team_budget: nlp spent $85.0000 of $100 this month (85%, project=nlp) -> notify']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from spotfit.host.settings import TeamBudget
from spotfit.spec.labels import matches

LEVELS = ((100, "at_100_percent"), (80, "at_80_percent"))  # highest first: the highest level crossed acts
SPENT_USD = 1e-6  # an allowance with less than this left is spent (budget_store.py)


@dataclass(frozen=True)
class Crossing:
    """A budget that covers the job and passed one of its levels, with what to do."""

    budget: TeamBudget
    percent: int  # the level crossed: 80 or 100
    action: str  # notify or pause
    spent_usd: float
    period_start_s: float

    @property
    def message(self) -> str:
        b = self.budget
        share = round(100.0 * self.spent_usd / b.usd)
        scope = ", ".join(f"{k}={v}" for k, v in b.labels.items()) or "every job"
        return (f"team_budget: {b.name} spent ${self.spent_usd:.4f} of ${b.usd:g} this {b.period} ({share}%, "
                f"{scope}) -> {self.action}")


def period_start(period: str, now_s: float) -> float:
    """Epoch seconds of the start of the UTC calendar day, week (Monday) or month holding `now_s`."""
    now = datetime.fromtimestamp(now_s, UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        day -= timedelta(days=day.weekday())
    elif period == "month":
        day = day.replace(day=1)
    return day.timestamp()


def crossings(budgets: list[TeamBudget], job_labels: dict[str, str],
              billed_since: Callable[[float], list[tuple[dict[str, str], float]]], now_s: float) -> list[Crossing]:
    """The budgets covering a job with `job_labels` that passed a level whose action is not `none`.

    `billed_since(start_s)` gives (labels, usd) of each job's attempts launched since `start_s`.
    """
    found, seen = [], {}
    for budget in budgets:
        if not matches(job_labels, budget.labels):
            continue
        start = period_start(budget.period, now_s)
        if start not in seen:
            seen[start] = billed_since(start)
        spent = sum(usd for labels, usd in seen[start] if matches(labels, budget.labels))
        for percent, field in LEVELS:
            action = getattr(budget, field)
            if spent >= budget.usd * percent / 100.0 and action != "none":
                found.append(Crossing(budget, percent, action, spent, start))
                break
    return found
