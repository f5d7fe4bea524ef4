"""A failing test explains itself: the jobs it ran, their `status`, last events and attempt logs.

`pytest_runtest_makereport` (imported by tests/conftest.py, so it is a hook of every test) adds
a section "spotfit jobs" to the report of a test that failed: for each of the newest `MAX_JOBS`
jobs in the state the test used (its `$SPOTFIT_HOME`, or `$SPOTFIT_STATE_URL`, still set when
the report is made), the job's `status` document, its last `EVENTS` events and the last
`LOG_LINES` lines of each attempt's log. One red CI run is then diagnosed without a rerun.
A test that ran no job gets no section; a state that cannot be read says why in one line.

Jobs a module-scoped fixture ran in a home of their own (a reference run, `spotfit_home_at`) are
not in the test's state: the fixture names that home with `report_also(request, home)`, and a
test of the module that fails reports its jobs too (read by a child process pointed at that home,
so this process's environment is never switched), in a section of their own.

Example (each test's own `$SPOTFIT_HOME`, before it runs a job, has no state DB: nothing to say):

>>> jobs_report()
''
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SECTION = "spotfit jobs (status, last events, attempt logs)"
MAX_JOBS = 5
EVENTS = 30
LOG_LINES = 60
TIMEOUT_S = 30.0


_ROOT = Path(__file__).resolve().parents[2]  # `python -m tests.support.job_report` runs from here
_MORE_HOMES: list[Path] = []  # homes named by module fixtures (report_also), while their module runs


def report_also(request: pytest.FixtureRequest, home: Path) -> None:
    """Report the jobs of `home` too when a test fails, until `request`'s fixture is torn down
    (so also when the fixture itself fails: its teardown comes after the report)."""
    _MORE_HOMES.append(home)
    request.addfinalizer(lambda: _MORE_HOMES.remove(home))


def _report_of_home(home: Path) -> str:
    """`jobs_report()` of `home`, read by a child process whose SPOTFIT_HOME is `home`."""
    env = {k: v for k, v in os.environ.items() if k != "SPOTFIT_STATE_URL"}
    env["SPOTFIT_HOME"] = str(home)
    try:
        out = subprocess.run([sys.executable, "-m", "tests.support.job_report"], capture_output=True, text=True,
                             timeout=TIMEOUT_S + 10, stdin=subprocess.DEVNULL, env=env, cwd=_ROOT)
    except subprocess.TimeoutExpired:
        return f"(the jobs of {home} were not read: no answer within {TIMEOUT_S + 10:g}s)"
    if out.returncode != 0:
        return f"(the jobs of {home} were not read: {out.stderr[-500:]})"
    return out.stdout.rstrip("\n")


def _has_state() -> bool:
    if os.environ.get("SPOTFIT_STATE_URL"):
        return True
    home = os.environ.get("SPOTFIT_HOME")
    return bool(home) and (Path(home) / "state.db").exists()


def _tail(text: str, lines: int) -> str:
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in kept) if kept else "    (empty)"


def _event_line(event: dict) -> str:
    when = time.strftime("%H:%M:%S", time.gmtime(event["ts"])) if event.get("ts") else "--:--:--"
    attempt = f" #{event['attempt']}" if event.get("attempt") is not None else ""
    return f"  {when} {event['kind']}{attempt}: {event['message']}"


def _job(job_id: str) -> Iterator[str]:
    from spotfit import sdk

    doc = sdk.status(job_id)
    yield f"=== job {job_id}: {doc['state']} ({doc['message']}), step {doc['step']}/{doc['total_steps']}"
    yield "status: " + json.dumps(doc, default=str, sort_keys=True)
    events = sdk.events(job_id)
    yield f"last {min(EVENTS, len(events))} of {len(events)} events:"
    yield from (_event_line(e) for e in events[-EVENTS:])
    for attempt in doc["attempts"]:
        logs = sdk.logs(job_id, attempt=attempt["number"])
        number, state, code = attempt["number"], attempt["state"], attempt["exit_code"]
        yield f"attempt {number} ({state}, exit {code}): last {LOG_LINES} log lines"
        yield _tail(logs["log"], LOG_LINES)
        if logs["boot_log_tail"]:
            yield f"attempt {number} boot log (tail):"
            yield _tail(logs["boot_log_tail"], LOG_LINES)


def _collect(lines: list[str]) -> None:
    from spotfit import sdk

    try:
        jobs = sdk.list_jobs(MAX_JOBS)
    except Exception as exc:  # noqa: BLE001 - the report must never hide the test's own failure
        lines.append(f"the state could not be read: {type(exc).__name__}: {exc}")
        return
    for job in jobs:
        try:
            for line in _job(job["id"]):
                lines.append(line)
        except Exception as exc:  # noqa: BLE001 - as above
            lines.append(f"=== job {job['id']}: could not be read: {type(exc).__name__}: {exc}")


def jobs_report() -> str:
    """The newest jobs of the state this process points at, as text ('' when there are none).

    Read in a thread for at most `TIMEOUT_S`: a test that failed with its store or state server
    away (an outage test) gets what could be read, and a line saying the rest did not answer.
    """
    if not _has_state():
        return ""
    lines: list[str] = []
    reader = threading.Thread(target=_collect, args=(lines,), daemon=True)
    reader.start()
    reader.join(TIMEOUT_S)
    if reader.is_alive():
        lines.append(f"(the rest was not read: the state or a store did not answer within {TIMEOUT_S:g}s)")
    return "\n".join(list(lines))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Add the jobs' report to a test that failed (in its body or its set-up)."""
    report = yield
    if report.failed and report.when in ("setup", "call"):
        text = jobs_report()
        if text:
            report.sections.append((SECTION, text))
        own = os.environ.get("SPOTFIT_HOME")
        for home in [h for h in _MORE_HOMES if str(h) != own]:  # not twice when the test points at it
            text = _report_of_home(home)
            if text:
                report.sections.append((f"{SECTION}, of the module's own home {home}", text))
    return report


if __name__ == "__main__":  # _report_of_home's child: the report of $SPOTFIT_HOME
    print(jobs_report())
