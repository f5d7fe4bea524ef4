"""The job's store prefix: every key that the controller, the backends and the runtime share.

Each key is built here and nowhere else; both sides import it. Who writes what:

| key | writer → reader |
|---|---|
| `attempts/<n>/runtime.json` | controller → runtime: `RuntimeConfig` |
| `progress.json` | runtime → controller: the live attempt's step, loss, phase, heartbeat |
| `events/<n>-<seq>.json` | runtime → controller: one event each, read once |
| `result.json`, `attempts/<n>/result.json` | runtime → controller: the job's result, and the attempt's |
| `attempts/<n>/exit.json` | runtime → controller: the exit code, for an adopted attempt |
| `control/stop` | controller → runtime: save and stop (exit 76) |
| `control/probe` | controller: a small write that proves the store has room |

(`<n>`: the attempt number, four digits.)

>>> runtime_config(3), exit_record(3), event(3, 12)
('attempts/0003/runtime.json', 'attempts/0003/exit.json', 'events/0003-000012.json')
>>> PROGRESS, RESULT, STOP
('progress.json', 'result.json', 'control/stop')
"""

from __future__ import annotations

PROGRESS = "progress.json"
RESULT = "result.json"
EVENTS = "events"  # the folder of the runtime's events
STOP = "control/stop"
PROBE = "control/probe"


def attempt_file(attempt: int, name: str) -> str:
    """A file of one attempt: `attempts/<n>/<name>`."""
    return f"attempts/{attempt:04d}/{name}"


def runtime_config(attempt: int) -> str:
    """What the controller tells the attempt (`RuntimeConfig` as JSON)."""
    return attempt_file(attempt, "runtime.json")


def exit_record(attempt: int) -> str:
    """The exit code the attempt's runtime recorded (`{"code", "at"}`)."""
    return attempt_file(attempt, "exit.json")


def attempt_result(attempt: int) -> str:
    """The result of the attempt that trained the last step (the job's `result.json` too)."""
    return attempt_file(attempt, "result.json")


def event(attempt: int, seq: int) -> str:
    """One runtime event: keys sort by attempt, then by the order the runtime wrote them."""
    return f"{EVENTS}/{attempt:04d}-{seq:06d}.json"
