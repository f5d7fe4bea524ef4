"""The job's budget: which rules hold it, and when a launch or a running attempt must stop.

Pure decisions on the spec's rules and the money spent; the controller loop (loop.py) records
the events and carries them out.

>>> from spotfit.spec.rules import Budget
>>> rules = holding_rules([Budget(rule="budget", usd=1.0, action="stop")])
>>> crossed_before_launch(rules, 0.5) is None, crossed_before_launch(rules, 1.0)[0]
(True, 0)
>>> over_limit(rules, cost_usd=1.03, minimum_usd=0.05)[0], over_limit(rules, cost_usd=1.02, minimum_usd=0.05)
(0, None)
"""

from __future__ import annotations

from spotfit.spec.job import JobSpec
from spotfit.spec.rules import Budget, IdleNotebook, RuleSpec

EPSILON_USD = 1e-9  # a bill capped at a budget ends this far past it: sums of floats then still reach it


def rules_of(spec: JobSpec) -> list[RuleSpec]:
    """The spec's rules; a top-level `budget_usd` is a `budget` rule that stops the job.

    A notebook without an `idle_notebook` rule gets one with its defaults (1 h idle, below 10%).
    """
    rules = list(spec.rules)
    if spec.kind == "notebook" and not any(r.rule == "idle_notebook" for r in rules):
        rules.append(IdleNotebook(rule="idle_notebook"))
    if spec.budget_usd is not None and not any(r.rule == "budget" for r in rules):
        rules.append(Budget(rule="budget", usd=spec.budget_usd, action="stop"))
    return rules


def holding_rules(rules: list[RuleSpec]) -> list[tuple[int, Budget]]:
    """(index, rule) of the budget rules that pause or stop the job."""
    return [(i, r) for i, r in enumerate(rules) if r.rule == "budget" and r.action in ("pause", "stop")]


def crossed_before_launch(rules: list[tuple[int, Budget]], spent_usd: float) -> tuple[int, Budget, str] | None:
    """(index, rule, message) of the first budget already spent, which holds the next launch."""
    for index, rule in rules:
        if spent_usd >= rule.usd:
            return index, rule, (f"budget: cost ${spent_usd:.4f} reached the budget ${rule.usd:g} -> {rule.action} "
                                 "(checked before launching)")
    return None


def over_limit(rules: list[tuple[int, Budget]], cost_usd: float, minimum_usd: float) -> tuple[int, Budget] | None:
    """(index, rule) when the cost passed the smallest budget plus half a billing minimum.

    A budget stop asks the attempt to save and stop; one that takes longer than the money
    allows (TF start-up ignoring the signal, a slow save) is ended at once, so that a job
    never spends more than its budget plus one billing minimum.
    """
    if not rules:
        return None
    index, rule = min(rules, key=lambda ir: ir[1].usd)
    return (index, rule) if cost_usd >= rule.usd + minimum_usd / 2 else None
