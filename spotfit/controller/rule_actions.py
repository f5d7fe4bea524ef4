"""What the controller does when a rule fires: budgets, pauses, stops and the price cap's resume.

`Controller` (loop.py) holds one `RuleActions` (`controller.rules`); it acts through the parts
it is given (the DB, the job's files, the backend, the planner and the watchdog) and the
bookkeeping below, which the loop reads too: `halt` is the pause or stop decided for the next
pass, `watches` each attempt's record (`switching`: already asked to end, `cut_off`: ended at a
budget's hard limit, `stop_sent`: when its stop request was written), `price_paused` whether a
price cap (and nothing else) paused the job.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, cast

from spotfit.attempt import layout
from spotfit.attempt.progress import Phase
from spotfit.backends.base import Backend, Handle
from spotfit.controller import budget, notify
from spotfit.controller.attempt_watch import AttemptWatches
from spotfit.controller.attempts import AttemptPlanner
from spotfit.controller.job_files import JobFiles
from spotfit.controller.state_change import StateChange
from spotfit.controller.team_budget import SPENT_USD, Crossing
from spotfit.controller.watchdog import Watchdog
from spotfit.errors import SpotfitError
from spotfit.host.home import state_is_shared
from spotfit.host.settings import TeamBudget, load_settings
from spotfit.spec.job import JobSpec
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord, handle_text
from spotfit.state.states import AttemptState, JobState, Market

if TYPE_CHECKING:
    from spotfit.controller.budget_store import BudgetStore


STORE_PROBE_S = 10.0  # how often the controller checks, by a small write, that the store has room
STORE_PROBE_PROBLEM_S = 2.0  # the same while a store problem is open
TEAM_CHECK_S = 10.0  # wall seconds between a running attempt's looks at its team budgets (others spend too)
ASK_AHEAD_S = 600.0  # an allowance asked for covers at least this long at the launch's price (a replay's tick)


class RuleActions:
    """The rules' effects on one job, held by its `Controller`."""

    def __init__(self, *, db: StateDB, job_id: str, spec: JobSpec, files: JobFiles, backend: Backend[Any],
                 plan: AttemptPlanner, watchdog: Watchdog, webhook: str | None, watches: AttemptWatches):
        self.db = db
        self.job_id = job_id
        self.spec = spec
        self.files = files
        self.guard = files.guard
        self.backend = backend
        self.plan = plan
        self.watchdog = watchdog
        self.webhook = webhook
        self.watches = watches
        self.halt: tuple[JobState, str] | None = None  # (state, message) once a rule paused or stopped
        self.price_paused = False
        self._next_probe = 0.0  # monotonic time of the next write that checks the store has room
        self._next_team_check = 0.0  # monotonic time of the next look at the team budgets while an attempt runs
        self._ask_at: tuple[int | None, float | None] = (None, None)  # (attempt, its cost at the next look)
        self._budget_store: BudgetStore | None = None  # the shared state's budgets and reservations (budget_store.py)

    def _handle(self, attempt: AttemptRecord) -> Handle:
        return cast(Handle, self.backend.load_handle(handle_text(attempt)))

    def _spent_usd(self, but: int | None = None) -> float:
        return sum(a["cost_usd"] or 0.0 for a in self.db.attempts(self.job_id) if a["number"] != but)

    def halt_before_launch(self) -> StateChange | None:
        """The stop or pause that holds the next launch (one already decided, or a budget spent), if any."""
        if self.halt is None:
            crossed = budget.crossed_before_launch(budget.holding_rules(self.watchdog.engine.rules),
                                                   self._spent_usd())
            if crossed is not None:
                index, rule, message = crossed
                self.db.add_event(self.job_id, "rule", message, rule="budget", index=index, action=rule.action)
                self.halt = (JobState.PAUSED if rule.action == "pause" else JobState.STOPPED, message)
        if self.halt is None:
            self.halt = self._team_budget_halt()
        if self.halt is None:
            return None
        state, why = self.halt
        self.halt = None
        return StateChange(state, why)

    def _team_budget_halt(self, running: AttemptRecord | None = None) -> tuple[JobState, str] | None:
        """The budgets over many jobs (config.yaml, and the shared state's) this job passes: notify (once), or pause.

        Before a launch, its reservation; with `running` (the live attempt), its cost so far counts and
        its allowance is asked for (budget_store.py), which holds the replay's clock where it is spent.
        """
        try:
            budgets = self._team_budgets()
        except SpotfitError as err:  # edited since `spotfit run` checked it: no launch on an unknown budget
            if running is not None:
                return None  # the attempt goes on; the next launch pauses on the error
            message = f"team_budget: the settings file is invalid ({err.message}) -> pause"
            self.db.add_event(self.job_id, "team_budget", message, rule="team_budget", action="pause")
            return JobState.PAUSED, f"{message}; fix it, then `spotfit resume {self.job_id}`"
        if not budgets:
            return None
        store = self._store()
        if running is None:
            found = store.reserve(self.job_id, self.spec.labels, budgets, self._expected_launch_usd()).crossings
        else:
            found = self._ask(store, budgets, running)
        told = {(e["data"].get("budget"), e["data"].get("percent"), e["data"].get("period_start_s"))
                for e in self.db.events(self.job_id) if e["kind"] == "team_budget"}
        for crossing in found:
            key = (crossing.budget.name, crossing.percent, crossing.period_start_s)
            if crossing.action == "notify" and key in told:
                continue
            self.db.add_event(self.job_id, "team_budget", crossing.message, rule="team_budget",
                              budget=crossing.budget.name, percent=crossing.percent, action=crossing.action,
                              period_start_s=crossing.period_start_s, spent_usd=round(crossing.spent_usd, 6),
                              **({"attempt": running["number"]} if running is not None else {}))
            notify.team_budget(self.db, self.job_id, self.webhook, crossing)
            if crossing.action == "pause":
                when = "checked before launching" if running is None else f"attempt {running['number']} running"
                return JobState.PAUSED, f"{crossing.message} ({when}); `spotfit resume {self.job_id}` once the " \
                                        "budget allows"
        return None

    def _ask(self, store: BudgetStore, budgets: list[TeamBudget], running: AttemptRecord) -> list[Crossing]:
        """The running attempt's look at its team budgets: their crossings; its allowance holds the clock."""
        number = running["number"]
        live_usd = self.plan.bill(running)[1]
        want_usd = live_usd + max(self._expected_launch_usd(), self._launch_usd_per_h() * ASK_AHEAD_S / 3600.0)
        grant = store.running_check(self.job_id, self.spec.labels, budgets, live_usd, running["started_at"],
                                    want_usd)
        allowance = grant.allowance_usd
        at_s = None if allowance is None else self.plan.budget_reached_s(running, allowance + budget.EPSILON_USD)
        self.plan.hold_at(number, at_s)
        self._ask_at = (number, min((x for x in (allowance, grant.next_level_usd) if x is not None), default=None))
        return grant.crossings

    def team_budget_while_running(self, attempt: AttemptRecord, progress: dict[str, Any]) -> bool:
        """Whether a team budget paused the job: looked at on the attempt's first pass, when its cost
        reaches its allowance or a level it would pass, and every `TEAM_CHECK_S`.

        The attempt is asked to save a checkpoint and stop, as a rule's pause asks it; the job
        pauses when it has ended.
        """
        if self.halt is not None:
            return False
        number, at_usd = self._ask_at
        due = (number != attempt["number"] or time.monotonic() >= self._next_team_check
               or (at_usd is not None and self.plan.bill(attempt)[1] >= at_usd - SPENT_USD))
        if not due:
            return False
        self._next_team_check = time.monotonic() + TEAM_CHECK_S
        self._ask_at = (attempt["number"], None)  # without a budget that covers it, the next look is the periodic one
        halt = self._team_budget_halt(running=attempt)
        if halt is None:
            return False
        self.halt = halt
        self.request_stop(attempt, progress, halt[1])
        return True

    def _team_budgets(self) -> list[TeamBudget]:
        """config.yaml's budgets, and with a shared state DB the `team_budgets` table's (which win on a name)."""
        budgets = load_settings().budgets
        if not state_is_shared():
            return budgets
        shared = self._store().budgets()
        return [b for b in budgets if b.name not in {s.name for s in shared}] + shared

    def _store(self) -> BudgetStore:
        """The state DB's budgets and reservations (budget_store.py): shared or this home's SQLite, as the job's."""
        if self._budget_store is None:
            from spotfit.controller.budget_store import BudgetStore

            self._budget_store = BudgetStore.of(self.db)  # on the job's own connection
        return self._budget_store

    def _launch_usd_per_h(self) -> float:
        """The dearest price a launch may pay: the zones' highest spot price, else on-demand ($0 without one)."""
        spot = [p for p in (self.plan.spot_price(z) for z in self.plan.zones()) if p is not None]
        price = max(spot, default=None) if self.spec.resources.spot else None
        return price or self.plan.on_demand_usd_per_h() or 0.0

    def _expected_launch_usd(self) -> float:
        """What the next attempt is expected to cost: the work left at the dearest price known ($0 without one)."""
        return self.plan.work_left_s() / 3600.0 * self._launch_usd_per_h()

    def cap_at_budget(self, attempt: AttemptRecord) -> None:
        """Once per attempt: the trace second its smallest holding budget is spent caps the clock.

        The replay then stops there, not at the controller's next look (the local process may
        run ahead of the modeled instance): the bill reaches the budget and no more, and the
        budget rule fires on that bill.
        """
        rules = budget.holding_rules(self.watchdog.engine.rules)
        number = attempt["number"]
        if not rules or self.plan.capped(number) or attempt["trace_start_s"] is None:
            return
        usd = min(rule.usd for _, rule in rules)
        at_s = self.plan.budget_reached_s(attempt, usd - self._spent_usd(but=number) + budget.EPSILON_USD)
        if at_s is not None:
            self.plan.cap_at(number, at_s)

    def over_budget_limit(self, attempt: AttemptRecord, progress: dict[str, Any]) -> bool:
        """Whether the attempt must end now: its cost passed a budget plus half a billing minimum."""
        rules = budget.holding_rules(self.watchdog.engine.rules)
        number = attempt["number"]
        watch = self.watches[number]
        if not rules or watch.cut_off:
            return False
        now = self.plan.now_s()
        cost = self._spent_usd(but=number) + self.plan.bill(attempt, now)[1]
        if (over := budget.over_limit(rules, cost, self.plan.bill({**attempt, "trace_start_s": now}, now)[1])) is None:
            return False
        index, rule = over
        if self.watchdog.active and not watch.switching:  # a busy pass ran past the rule: it fires first
            self.apply(attempt, progress)
        watch.cut_off = watch.switching = True
        message = (f"budget: cost ${cost:.4f} passed the budget ${rule.usd:g} plus half a billing minimum: "
                   f"attempt {number} ended at once -> {rule.action}")
        self.db.add_event(self.job_id, "budget_limit", message, attempt=number, rule="budget", index=index,
                          action=rule.action)
        if self.halt is None:
            self.halt = (JobState.PAUSED if rule.action == "pause" else JobState.STOPPED, message)
        return True

    def apply(self, attempt: AttemptRecord, progress: dict[str, Any]) -> None:
        """Evaluate the watchdog rules; notify, pause or stop as they say."""
        cost = self._spent_usd(but=attempt["number"]) + self.plan.bill(attempt)[1]
        price = self.plan.spot_price(attempt["zone"]) if attempt["market"] == Market.SPOT else None
        for verdict in self.watchdog.check(progress, cost, price):
            saved = f" (saves ~${verdict.saved_usd:.4f})" if verdict.saved_usd else ""
            message = f"{verdict.rule}: {verdict.message} -> {verdict.action}{saved}"
            at_step = progress.get("metrics_step") if verdict.rule == "target_metric" else None
            self.db.add_event(self.job_id, "rule", message, attempt=attempt["number"], rule=verdict.rule,
                              index=verdict.index, action=verdict.action, saved_usd=verdict.saved_usd,
                              **({"at_step": at_step} if at_step is not None else {}))
            notify.rule_fired(self.db, self.job_id, self.webhook, verdict, message)
            if verdict.action in ("pause", "stop") and self.halt is None:
                self.halt = (JobState.PAUSED if verdict.action == "pause" else JobState.STOPPED, message)
                # A fixed price (a node's catalog price) never falls back: that pause waits for `spotfit resume`.
                self.price_paused = (verdict.action == "pause" and verdict.rule == "price_cap"
                                     and self.plan.price_moves())
                self.request_stop(attempt, progress, message, export=verdict.rule == "target_metric",
                                   at_once=verdict.rule == "stalled", at_step=at_step)

    def request_stop(self, attempt: AttemptRecord, progress: dict[str, Any], reason: str, export: bool = False,
                      at_once: bool = False, at_step: int | None = None) -> None:
        """Ask the attempt to save and stop (exit 76); SIGTERM follows if it does not.

        Before training starts there is nothing new to save, and a stalled attempt (`at_once`)
        makes no step after which it would read the request: SIGTERM stops either at once. An
        attempt caught saving a checkpoint is training: it reads the request after that step.
        """
        number = attempt["number"]
        self.watches[number].switching = True
        if at_once or progress.get("phase") not in (Phase.TRAINING, Phase.SAVING):
            self.backend.preempt(self._handle(attempt), self.plan.notice_s())
            return
        request = {"attempt": number, "reason": reason, "export": export}
        if at_step is not None:  # export the weights of that epoch end, where the target held
            request["at_step"] = at_step
        doc = json.dumps(request).encode()
        if not self.guard.call(lambda: self.files.write(layout.STOP, doc), fallback=False, writes=True):
            self.backend.preempt(self._handle(attempt), self.plan.notice_s())  # the signal needs no store
            return
        self.watches[number].stop_sent = time.time()

    # -- a full store: a bounded wait, then a pause ---------------------------------------------

    def _probe_store(self) -> None:
        """A small write, every `STORE_PROBE_S`: the runtime's writes fail unseen when the disk is full."""
        if time.monotonic() >= self._next_probe:
            self._next_probe = time.monotonic() + (STORE_PROBE_S if self.guard.healthy else STORE_PROBE_PROBLEM_S)
            self.guard.call(lambda: self.files.write(layout.PROBE, b"{}"), fallback=False, writes=True)

    def pause_on_full_store(self, attempt: AttemptRecord | None) -> StateChange | None:
        """Once the store has been full for `checkpoint.full_wait_s`: the job pauses (store full).

        A live attempt is asked to stop (it is not a failure: nothing counts toward
        `max_failures`) and the job pauses when it has ended; with none the job pauses now (the
        change returned). The pause names the last good checkpoint, where `spotfit resume` goes on from.
        """
        self._probe_store()
        full_s = self.guard.full_for_s()
        wait_s = self.spec.checkpoint.full_wait_s
        if full_s is None or full_s < wait_s or self.halt is not None:
            return None
        last = self.db.last_event(self.job_id, ("checkpoint",))
        good = f"step {last['data'].get('step')}" if last else "none (the job starts from step 0)"
        message = (f"store full for {full_s:.0f} s (checkpoint.full_wait_s: {wait_s:g}); last good checkpoint: "
                   f"{good}; free space in the store, then `spotfit resume {self.job_id}`")
        if attempt is None:
            self.db.add_event(self.job_id, "store_paused", message)
            return StateChange(JobState.PAUSED, message)
        number = attempt["number"]
        self.db.add_event(self.job_id, "store_paused", message, attempt=number)
        self.halt = (JobState.PAUSED, message)
        self.watches[number].switching = True
        self.backend.preempt(self._handle(attempt), self.plan.notice_s())
        return None

    def store_failure(self, number: int, result: str) -> str | None:
        """`store` when attempt `number` failed unasked on a full store: the store's fault, not the script's."""
        if result != AttemptState.FAILED or self.watches[number].switching:
            return None
        self._next_probe = 0.0
        self._probe_store()
        return "store" if self.guard.full_for_s() is not None else None

    def resume_below_cap(self) -> StateChange | None:
        """A price-cap pause ends by itself when the spot price falls back under the cap (the change returned)."""
        cap = self.watchdog.engine.price_cap()
        zones: list[str | None] = [*self.plan.zones()] or [None]  # none: the last attempt's nodes (Kubernetes)
        prices = [p for p in (self.plan.spot_price(z) for z in zones) if p is not None]
        price = min(prices, default=None)
        if cap is None or (price is not None and price <= cap):
            self.price_paused = False
            self.plan.resume_now()
            self.watchdog.engine.rearm("price_cap")
            why = "the price cap was removed" if cap is None or price is None else \
                f"spot price ${price:.4f}/h is back under the cap ${cap:g}/h"
            return StateChange(JobState.WAITING, "price back under the cap", event=("resumed", why, {}))
        return None
