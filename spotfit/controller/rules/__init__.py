"""Watchdog rules: evaluate the job's observations, fire verdicts, estimate the money saved.

`RuleEngine.check(obs)` returns the verdicts that fire now (each rule fires once until the
engine is told the condition was handled, e.g. after a price-cap pause resumes). Deciding is
pure; the controller loop carries verdicts out (notify, pause, stop).

Example:

>>> from spotfit.spec.rules import Budget
>>> engine = RuleEngine([Budget(rule="budget", usd=1.0)])
>>> [v.action for v in engine.check(Observation(now_s=0, step=50, total_steps=100, cost_usd=1.5))]
['stop']
>>> engine.check(Observation(now_s=1, step=51, total_steps=100, cost_usd=1.6))  # fires once
[]
"""

from __future__ import annotations

from dataclasses import dataclass

from spotfit.controller.rules.checks import CHECKS, Observation
from spotfit.spec.rules import RuleSpec

__all__ = ["Observation", "RuleEngine", "Verdict"]


@dataclass(frozen=True)
class Verdict:
    index: int  # position in the spec's `rules:` list
    rule: str
    action: str  # notify | pause | stop
    message: str
    saved_usd: float | None  # estimated cost of the remaining planned steps


class RuleEngine:
    """The job's rules, with the memory of which ones already fired."""

    def __init__(self, rules: list[RuleSpec], fired: set[int] | None = None):
        self.rules = list(rules)
        self._fired: set[int] = set(fired or ())

    def check(self, obs: Observation) -> list[Verdict]:
        out = []
        for i, rule in enumerate(self.rules):
            if i in self._fired:
                continue
            message = CHECKS[rule.rule](rule, obs)
            if message is None:
                continue
            self._fired.add(i)
            out.append(Verdict(i, rule.rule, rule.action, message, _saved(obs)))
        return out

    def rearm(self, rule_name: str) -> None:
        """Let a rule fire again (a price-cap pause that resumed may pause again)."""
        self._fired -= {i for i, r in enumerate(self.rules) if r.rule == rule_name}

    def price_cap(self) -> float | None:
        """The lowest price cap among the rules, if any (pauses resume below it)."""
        caps = [r.usd_per_h for r in self.rules if r.rule == "price_cap"]
        return min(caps) if caps else None


def _saved(obs: Observation) -> float | None:
    if not obs.total_steps or not obs.step or obs.cost_usd <= 0:
        return None
    per_step = obs.cost_usd / obs.step
    return round(max(0, obs.total_steps - obs.step) * per_step, 6)
