"""The Policy protocol: one decision per tick from the past and the present.

A policy is asked at the start of every tick what the job should run on now::

    policy = make_policy("spotfit")
    policy.reset()                                 # a new job
    decision = policy.decide(ctx)                  # once per tick, online

`ctx` is a `Context` (all times in seconds since the job started):

- `now_s`, `gap_s`: the start of this tick and the tick length;
- `work_s`, `work_done_s`, `deadline_s`, `overhead_s`: the job and its progress;
- `mode`: what runs now, after this tick's preemption check (`NONE` right after a preemption,
  with `preempted=True`); `overhead_left_s`: start-up still to pay in the current launch;
- `market`: a `MarketView` of every zone up to now (`is_available`, `spot_usd_per_h`,
  `on_demand_usd_per_h`, `run_ticks`, `mean_up_ticks`, `mean_down_ticks`, `history`);
- `zones`: the zones the job may use (one for a single-zone job);
- `spent_usd`: what the job has been billed so far, and `max_overpay`: the share above
  all-on-demand the job may pay at most (`market.max_overpay`); None where not known (then no
  policy holds a floor).

The answer is a `Decision`: `NONE` (wait, nothing billed), `spot(zone)` (the zone's spot must be
available now) or `ON_DEMAND`. Returning the current mode continues it; anything else is a fresh
launch that pays `overhead_s` again. The offline simulator drives exactly this API; the
controller calls it the same way on live observations. `optimum` is the one offline policy: it
sees the whole trace and is solved, not asked (`offline = True`, `solve(...)`).

Policies are registered by name (`POLICIES`); `make_policy` imports them lazily.

Example:

>>> p = make_policy("on_demand")
>>> p.name, sorted(POLICIES)[:2]
('on_demand', ['greedy', 'greedy_first'])
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Protocol, cast, runtime_checkable

from spotfit.errors import UsageError
from spotfit.market.job import DEFAULT_MAX_OVERPAY as DEFAULT_MAX_OVERPAY  # re-exported
from spotfit.market.policies.registry import ALIASES as ALIASES  # re-exported
from spotfit.market.policies.registry import DEFAULT_POLICY as DEFAULT_POLICY  # re-exported
from spotfit.market.policies.registry import POLICIES as POLICIES  # re-exported
from spotfit.market.view import MarketView
from spotfit.state.states import Market


class Kind(StrEnum):
    NONE = "none"
    SPOT = "spot"
    ON_DEMAND = "on_demand"


@dataclass(frozen=True, slots=True)
class Decision:
    """What to run this tick: NONE, SPOT in `zone`, or ON_DEMAND."""

    kind: Kind
    zone: str | None = None

    def __str__(self) -> str:
        return f"spot:{self.zone}" if self.kind is Kind.SPOT else self.kind.value

    @property
    def market(self) -> Market | None:
        """The `Market` this decision launches on (None: wait), as the attempt row, the `LaunchRequest`
        and the ledger carry it: `Kind` is the policy's word for the same two markets, plus waiting."""
        return None if self.kind is Kind.NONE else Market(self.kind.value)


NONE = Decision(Kind.NONE)
ON_DEMAND = Decision(Kind.ON_DEMAND)


def spot(zone: str) -> Decision:
    """Run on spot in `zone` (it must be available now)."""
    return Decision(Kind.SPOT, zone)


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a policy may know at the start of a tick (seconds since job start)."""

    now_s: float
    gap_s: int
    work_s: float
    work_done_s: float
    deadline_s: float
    overhead_s: float
    mode: Decision
    overhead_left_s: float
    market: MarketView
    zones: tuple[str, ...]
    preempted: bool = False
    spent_usd: float | None = None
    max_overpay: float | None = None

    @property
    def work_left_s(self) -> float:
        return self.work_s - self.work_done_s

    @property
    def time_left_s(self) -> float:
        return self.deadline_s - self.now_s

    @property
    def slack_s(self) -> float:
        """Time to spare if the job went on-demand now (a launch unless already on it)."""
        start_up = self.overhead_left_s if self.mode.kind is Kind.ON_DEMAND else self.overhead_s
        return self.time_left_s - self.work_left_s - start_up


@runtime_checkable
class Policy(Protocol):
    """Decides per tick; `reset` starts a new job (policies may keep state between ticks)."""

    name: ClassVar[str]
    multi_zone: ClassVar[bool]  # True: uses every zone of ctx.zones together

    def reset(self) -> None: ...

    def decide(self, ctx: Context) -> Decision: ...


class InvalidDecision(RuntimeError):
    """A policy chose something the market does not allow (a bug in the policy)."""


class BasePolicy:
    """Stateless default: `reset` does nothing. Subclasses implement `decide`."""

    name: ClassVar[str] = ""
    multi_zone: ClassVar[bool] = False
    offline: ClassVar[bool] = False

    def reset(self) -> None:
        return None

    def decide(self, ctx: Context) -> Decision:  # pragma: no cover - abstract
        raise NotImplementedError


def safe_off_on_demand(ctx: Context, gain_s: float) -> bool:
    """True when doing something else than on-demand this tick still leaves a way to finish.

    The job gains `gain_s` of progress this tick at best (0 when waiting, or when the spot
    instance is still starting); the latest on-demand launch is then at the next tick, and it
    must finish by the deadline. Keeping this true at every tick is what guarantees the
    deadline whenever on-demand from the start would make it.
    """
    left_s = ctx.work_left_s - gain_s
    if left_s <= 0:
        return True
    return ctx.now_s + ctx.gap_s + ctx.overhead_s + left_s <= ctx.deadline_s + 1e-6


def on_demand_usd(ctx: Context, work_s: float) -> float:
    """What a fresh on-demand launch that does `work_s` of work costs at today's on-demand price:
    the restart overhead and the work, billed in whole ticks as the simulator bills them."""
    if work_s <= 1e-9:
        return 0.0
    ticks = math.ceil((work_s + ctx.overhead_s) / ctx.gap_s - 1e-9)
    return ctx.market.on_demand_usd_per_h(ctx.zones) * ticks * ctx.gap_s / 3600.0


def within_floor(ctx: Context, price_usd_per_h: float, overhead_left_s: float) -> bool:
    """True when running at `price_usd_per_h` now, with `overhead_left_s` of start-up left, keeps the
    job within (1 + max_overpay) × all-on-demand from the start however it ends: preempted after
    any tick of the start-up (billed, no progress) or after the first tick that makes progress,
    then on-demand to the end. True where `ctx` gives no spend or no bound.

    This is a hedge against on-demand, not a forecast: whatever the market does next, on-demand
    from the next tick finishes within the bound, so keeping this true at every tick keeps the
    whole job within it; what the job may lose on spot launches is the bound's allowance plus
    what spot has saved so far. Prices are those of now (on-demand stays put in every bundled
    trace; a spot price is billed at the tick it is read).
    """
    if ctx.spent_usd is None or ctx.max_overpay is None:
        return True
    tick_usd = price_usd_per_h * ctx.gap_s / 3600.0
    ticks = max(1, math.ceil(overhead_left_s / ctx.gap_s - 1e-9))
    gain_s = ticks * ctx.gap_s - overhead_left_s
    worst = ctx.spent_usd + max((ticks - 1) * tick_usd + on_demand_usd(ctx, ctx.work_left_s),
                                ticks * tick_usd + on_demand_usd(ctx, ctx.work_left_s - gain_s))
    return worst <= (1.0 + ctx.max_overpay) * on_demand_usd(ctx, ctx.work_s) + 1e-9


def start_up_safe(ctx: Context) -> bool:
    """True when a fresh spot launch now can finish its start-up before `safe_off_on_demand`
    would stop it: a launch stopped in its start-up is billed and makes no progress.

    A start-up of more than one tick is asked again at each of its ticks; the tightest check is
    at its last tick, which needs now + 2 × overhead + the work left to fit by the deadline.
    """
    if ctx.overhead_s <= ctx.gap_s:
        return True
    return ctx.now_s + 2 * ctx.overhead_s + ctx.work_left_s <= ctx.deadline_s + 1e-6


def near_deadline(ctx: Context, extra_s: float) -> bool:
    """True when the work left plus `extra_s` no longer fits the time left, counted in whole
    ticks as the published Can't Be Late simulator counts them (work rounded up, time down)."""
    need_ticks = math.ceil((ctx.work_left_s + extra_s) / ctx.gap_s - 1e-9)
    left_ticks = math.floor(ctx.time_left_s / ctx.gap_s + 1e-9)
    return need_ticks >= left_ticks


def deadline_safety(ctx: Context, choice: Decision, spot_choice: Decision | None) -> Decision:
    """The published baselines' safety rules on top of `choice` (`spot_choice`: spot now, if up).

    Off spot, go on-demand once the work left plus two restarts no longer fits; with one restart,
    keep riding a running spot launch, else on-demand (spot again when restarts are free).
    """
    d, mode = ctx.overhead_s, ctx.mode.kind
    if mode is not Kind.SPOT and near_deadline(ctx, 2 * d):
        choice = ON_DEMAND
    if near_deadline(ctx, d):
        riding = mode is Kind.SPOT and ctx.overhead_left_s < 1e-3
        choice = ctx.mode if riding else ON_DEMAND
        if d == 0 and spot_choice is not None:
            choice = spot_choice
    return choice


def first_spot(ctx: Context) -> Decision | None:
    """Spot as the published baselines take it over several zones: the running spot launch while
    its zone is up, else the first up zone in the job's order of `ctx.zones` (the ADRS
    multi-region starting program tries regions in order), else None. One zone: that zone if up."""
    if ctx.mode.kind is Kind.SPOT and ctx.market.is_available(str(ctx.mode.zone)):
        return ctx.mode
    return next((spot(z) for z in ctx.zones if ctx.market.is_available(z)), None)


def cheapest_spot(ctx: Context) -> Decision | None:
    """Spot as a multi-region baseline a reader trusts takes it: the running spot launch while
    its zone is up, else the up zone with the lowest spot price now (ties: the job's order),
    else None. Where prices differ across zones, the first up zone in order can cost several
    times the cheapest; one zone: that zone if up."""
    if ctx.mode.kind is Kind.SPOT and ctx.market.is_available(str(ctx.mode.zone)):
        return ctx.mode
    up = [z for z in ctx.zones if ctx.market.is_available(z)]
    return spot(min(up, key=ctx.market.spot_usd_per_h)) if up else None


def gain_if_continued(ctx: Context) -> float:
    """Progress this tick if the current launch keeps running."""
    if ctx.mode.kind is Kind.NONE:
        return 0.0
    return max(0.0, ctx.gap_s - ctx.overhead_left_s)


def gain_if_launched(ctx: Context) -> float:
    """Progress this tick of a fresh launch."""
    return max(0.0, ctx.gap_s - ctx.overhead_s)




def make_policy(name: str) -> Policy:
    """A fresh policy by registry name; unknown names raise a UsageError listing valid ones."""
    target = POLICIES.get(ALIASES.get(name, name))
    if target is None:
        raise UsageError(
            f"Unknown policy {name!r}: expected one of {', '.join(sorted([*POLICIES, *ALIASES]))}.",
            hint=f"Use --policy {DEFAULT_POLICY} (the default) or --policy all.",
        )
    module, cls = target.split(":")
    return cast(Policy, getattr(importlib.import_module(module), cls)())
