"""Which attempt ends count toward `max_failures`, and how long to wait before the next launch.

A script that exits with an error is a failure. So are three ends that say nothing about why,
because retrying them without a bound launches (and bills) a new machine every time:

- `boot_timeout`: no progress from the runtime within the boot timeout after the launch (an
  install that hangs, an image without a driver);
- `no_exit_record`: the attempt ended unasked and its runtime recorded no exit code (an
  instance that powered off before the runtime ran: a failed install, a crashed agent);
- `oom`: killed by SIGKILL (or exit 137, the shell's report of it) unasked, as the kernel's OOM
  killer does.

A store failure is not the script's: an attempt whose runtime exited `EXIT_STORE` (its store was
full, unreachable or refused a write where the attempt could not go on without it), or that
failed while the controller found the store's disk full, is recorded with `failure: store`. It
does not count toward `max_failures` and sets no backoff; the next launch waits until the store
answers the controller (its launch files are written there first). A store that answers the
controller but keeps failing the attempts (credentials or a network only the attempt's machine
has) is bounded all the same: more store failures in a row, none of which trained a step, than
`max_failures` or `STORE_ROW_LIMIT` (whichever is larger: `max_failures: 0` still rides out a
store's moment) fail the job with a line that says so (`store_in_a_row`).

A host crash is not a failure: an attempt that ended with no exit record after its runtime
reported a step past the one it started from (the machine went away mid-training, the runtime
with it) resumes from its checkpoint, as after a preemption, and its `failure` reads
`host_crash`. Each such attempt trained, so they cannot loop without end; one that reported no
step is still `no_exit_record`.

A preemption, a stop or kill the controller asked for (a switch, a rule, a cancel, an injected
preemption), and a cloud without capacity are never failures. Failures are counted apart from
preemptions, and each one doubles the wait before the next launch, up to `MAX_BACKOFF_S`
(both under `SPOTFIT_WAIT_SCALE`, see `waits`).

A script failure that repeats is not retried: when the runtime of two attempts reported the same
error (the traceback's last line) at the same step, a third would fail the same way, billed;
the job fails at once with that line (`repeated_error`).

Example:

>>> failure_kind("killed", None, None, asked=False), failure_kind("killed", None, 9, asked=False)
('no_exit_record', 'oom')
>>> failure_kind("killed", None, 9, asked=True), failure_kind("killed", None, 15, asked=False)
(None, None)
>>> failure_kind("failed", 1, None, asked=False), failure_kind("failed", 137, None, asked=False)
('script', 'oom')
>>> failure_kind("failed", 74, None, asked=False)
'store'
>>> [backoff_s(n, base_s=30.0) for n in (0, 1, 2, 3)]
[0.0, 30.0, 60.0, 120.0]
>>> repeated_error({2: ("ValueError: bad", 40), 3: ("ValueError: bad", 40)}, 3)
(2, 'ValueError: bad', 40)
>>> repeated_error({2: ("ValueError: bad", 40), 3: ("ValueError: bad", 41)}, 3) is None
True
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Callable
from typing import Any

from spotfit.attempt.exit_codes import EXIT_STORE
from spotfit.backends.base import backend_class
from spotfit.controller import waits
from spotfit.controller.state_change import StateChange
from spotfit.spec.job import JobSpec
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord, EventRecord
from spotfit.state.states import AttemptState, JobState

MAX_BACKOFF_S = 1800.0
EXIT_SIGKILL_SHELL = 128 + _signal.SIGKILL  # how a shell (or an agent's wrapper) reports a SIGKILLed child
KINDS = ("script", "launch", "boot_timeout", "no_exit_record", "oom", "store")
HOST_CRASH = "host_crash"  # recorded as an attempt's `failure`, never counted as one
STORE_ROW_LIMIT = 3  # store failures in a row that trained nothing, at the least, before the job fails
UNCOUNTED = ("store", HOST_CRASH)  # recorded as failures, but not the script's: never toward max_failures


def failure_kind(result: str, exit_code: int | None, signal: int | None, asked: bool) -> str | None:
    """The failure an attempt's end counts as (one of `KINDS`), or None when it is not one.

    `asked`: the controller asked the attempt to end (preemption, switch, rule, cancel, injection).
    """
    if result == AttemptState.FAILED:
        if exit_code == EXIT_STORE:
            return "store"
        return "oom" if exit_code == EXIT_SIGKILL_SHELL and not asked else "script"
    if result != AttemptState.KILLED or asked:
        return None
    if signal == _signal.SIGKILL or exit_code == EXIT_SIGKILL_SHELL:
        return "oom"
    # SIGTERM from elsewhere (a shutdown of this machine) is a stop, as a notice would be.
    return "no_exit_record" if exit_code is None and signal is None else None


def backoff_s(failures: int, base_s: float, max_s: float = MAX_BACKOFF_S) -> float:
    """Seconds to wait before the launch that follows the `failures`-th failure in a row."""
    if failures <= 0 or base_s <= 0:
        return 0.0
    return min(base_s * 2.0 ** (failures - 1), max_s)


def counted(attempt: AttemptRecord) -> bool:
    """Whether a recorded attempt counted toward `max_failures`."""
    failure = (attempt.get("info") or {}).get("failure")
    return failure not in UNCOUNTED and (attempt["state"] == AttemptState.FAILED or bool(failure))


def store_in_a_row(attempts: list[AttemptRecord]) -> int:
    """Store failures since the last attempt that ended otherwise or trained a step (capacity errors aside)."""
    n = 0
    for attempt in reversed(attempts):
        if attempt["state"] == AttemptState.NO_CAPACITY or AttemptState(attempt["state"]).is_live():
            continue
        trained = (attempt["end_step"] or 0) > (attempt["start_step"] or 0)
        if (attempt.get("info") or {}).get("failure") != "store" or trained:
            break
        n += 1
    return n


def failures_in_a_row(attempts: list[AttemptRecord]) -> int:
    """Failures since the last attempt that ended otherwise (capacity errors do not break a row)."""
    n = 0
    for attempt in reversed(attempts):
        if attempt["state"] == AttemptState.NO_CAPACITY or AttemptState(attempt["state"]).is_live():
            continue
        if not counted(attempt):
            break
        n += 1
    return n


MENDABLE = ("StoreError", "NotFoundError")  # spotfit's store errors: an outage, an object not there yet


def script_errors(events: list[EventRecord]) -> dict[int, tuple[str, int]]:
    """Attempt -> (error line, step) of each runtime `failed` event that says both (a store error aside)."""
    out = {}
    for e in events:
        data = e["data"]
        if (e["kind"] == "failed" and e["attempt"] is not None and data.get("step") is not None
                and data.get("error") not in MENDABLE):
            out[e["attempt"]] = (data.get("error_line") or e["message"], int(data["step"]))
    return out


def repeated_error(errors: dict[int, tuple[str, int]], number: int) -> tuple[int, str, int] | None:
    """(earlier attempt, error line, step) when attempt `number` failed as an earlier attempt did, else None."""
    if number not in errors:
        return None
    line, step = errors[number]
    earlier = [n for n, error in errors.items() if n < number and error == (line, step)]
    return (max(earlier), line, step) if earlier else None


def describe(kind: str, boot_timeout_s: float | None = None) -> str:
    """A few words for the attempt's end event."""
    return {
        "boot_timeout": f"no progress from the runtime within the boot timeout ({boot_timeout_s or 0:g}s)",
        "no_exit_record": "it ended without an exit record: the runtime never ran or died without a word",
        "oom": "killed by SIGKILL without being asked, as the OOM killer does",
        HOST_CRASH: "its host went away mid-training without an exit record: not counted as a failure, the "
                    "next attempt resumes from the checkpoint",
        "store": "its store was full, unreachable or refused a write: a store failure, not counted toward "
                 "max_failures; the next launch waits until the store answers",
    }.get(kind, "")


class FailureTracker:
    """The job's failures so far: counts them, records each with its backoff, fails the job past the limit.

    Counts and the backoff survive a controller restart: both are read back from the attempts.
    """

    def __init__(self, db: StateDB, job_id: str, spec: JobSpec,
                 progress_of: Callable[[int], dict[str, Any]] | None = None):
        self.db = db
        self.job_id = job_id
        self.progress_of = progress_of or (lambda number: {})  # an attempt's progress.json
        self.max_failures = spec.max_failures
        self.base_s, self.max_s = waits.scaled(spec.failure_backoff_s), waits.scaled(MAX_BACKOFF_S)
        self.boot_timeout_s = backend_class(spec.backend).boot_timeout_s(spec)
        attempts = db.attempts(job_id)
        self.count = sum(1 for a in attempts if counted(a))
        self.in_a_row = failures_in_a_row(attempts)
        last_end = max((a["ended_at"] or 0.0 for a in attempts if counted(a)), default=0.0)
        self.backoff_until = last_end + backoff_s(self.in_a_row, self.base_s, self.max_s)

    def kind_of(self, number: int, result: str, code: int | None, signal: int | None, asked: bool) -> str | None:
        """The failure the end of attempt `number` counts as (an injected kill was asked for)."""
        injected = any(e["kind"] == "injected_preemption" and e["attempt"] == number
                       for e in self.db.events(self.job_id))
        kind = failure_kind(result, code, signal, asked or injected)
        return HOST_CRASH if kind == "no_exit_record" and self._trained(number) else kind

    def _trained(self, number: int) -> bool:
        """Attempt `number`'s runtime reported a step past the one the attempt started from."""
        start = next((a["start_step"] or 0 for a in self.db.attempts(self.job_id) if a["number"] == number), 0)
        return (self.progress_of(number).get("step") or 0) > start

    def boot_overdue(self, attempt: AttemptRecord, progress: dict[str, Any], now: float) -> bool:
        """The attempt has reported nothing from its runtime for longer than the boot timeout."""
        if self.boot_timeout_s is None or progress:
            return False
        return now - attempt["started_at"] > self.boot_timeout_s

    def backoff_left_s(self, now: float) -> float:
        return max(0.0, self.backoff_until - now)

    def waiting_message(self, wait_s: float) -> str:
        return f"backing off {wait_s:.0f}s after {self.in_a_row} failure(s) in a row before the next launch"

    def record(self, number: int, kind: str, now: float) -> StateChange | None:
        """Count a failure of attempt `number`; record the backoff; the job's failure when it must fail now."""
        self.count += 1
        self.in_a_row += 1
        if self.count > self.max_failures:
            why = (f"{self.count} failures (the last: {kind} in attempt {number}), more than max_failures="
                   f"{self.max_failures}; see `spotfit logs {self.job_id}`")
            return StateChange(JobState.FAILED, why)
        delay = backoff_s(self.in_a_row, self.base_s, self.max_s)
        self.backoff_until = now + delay
        self.db.add_event(self.job_id, "backoff",
                          f"failure {self.count} of at most {self.max_failures} ({kind}): next launch in {delay:g}s",
                          attempt=number, failure=kind, delay_s=delay, failures=self.count)
        return None

    def success(self) -> None:
        """An attempt ended otherwise (trained and was preempted, stopped, completed): the row is broken."""
        self.in_a_row = 0

    def ended(self, number: int, kind: str | None, now: float) -> StateChange | None:
        """An attempt ended (not for lack of capacity): count it if it failed; the job's failure when it must fail."""
        limit = max(self.max_failures, STORE_ROW_LIMIT)
        if kind == "store" and (row := store_in_a_row(self.db.attempts(self.job_id))) > limit:
            why = (f"{row} attempts in a row failed on the store without training a step (the last: attempt "
                   f"{number}), more than {limit}: the store answers the controller but "
                   f"not the attempts' machines (credentials, network, a full or read-only disk there); see "
                   f"`spotfit logs {self.job_id}`")
            self.db.add_event(self.job_id, "store_failures", why, attempt=number, in_a_row=row)
            return StateChange(JobState.FAILED, why)
        if kind is None or kind in UNCOUNTED:
            self.in_a_row = 0
            return None
        if kind == "script" and (repeated := self.repeated(number)) is not None:
            return repeated
        return self.record(number, kind, now)

    def repeated(self, number: int) -> StateChange | None:
        """Attempt `number` failed as an earlier one did (same error, same step): the job fails now."""
        same = repeated_error(script_errors(self.db.events(self.job_id)), number)
        if same is None:
            return None
        earlier, line, step = same
        self.count += 1
        why = (f"the script failed the same way in attempts {earlier} and {number}, at step {step}: {line} "
               f"(not retried: it would fail again; see `spotfit logs {self.job_id}`)")
        self.db.add_event(self.job_id, "repeated_failure", why, attempt=number, earlier=earlier, step=step,
                          error_line=line)
        return StateChange(JobState.FAILED, why)

    def launch_failed(self, number: int, exc: BaseException, trace_end_s: float, now: float) -> StateChange | None:
        """A launch that raised: one event with the cause, a failed attempt, never a crashed controller."""
        from spotfit.errors import SpotfitError

        if isinstance(exc, SpotfitError):
            message, hint = exc.message, exc.hint
        else:  # a bug or an SDK error no backend translated: still one line
            message, hint = f"{type(exc).__name__}: {' '.join(str(exc).split())}", None
        row = next((a for a in self.db.attempts(self.job_id) if a["number"] == number), None)
        info = {**(row["info"] if row is not None else {}), "failure": "launch"}  # its decision kept
        self.db.update_attempt(self.job_id, number, state=AttemptState.FAILED, ended_at=now, trace_end_s=trace_end_s,
                               billed_s=0.0, cost_usd=0.0, info=info)
        self.db.add_event(self.job_id, "launch_failed", f"attempt {number}: {message}", attempt=number, hint=hint)
        return self.record(number, "launch", now)
