"""A part's outcome that changes the job's state: the loop alone applies it.

The controller's parts (`rule_actions`, `launch`, `failures`) decide that a job pauses, waits,
runs or fails; they never move it themselves. They return a `StateChange`, and the loop
(`Controller.apply` in `loop.py`) moves the job through `StateDB.move_job`
(`state/transitions.py`), then records the change's `event`, if it has one: the order in which a
reader sees the state and the event is the one the part had before.

>>> change = StateChange(JobState.WAITING, "price back under the cap", event=("resumed", "cap removed", {}))
>>> str(change.to), change.event[0]
('waiting', 'resumed')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotfit.state.states import JobState


@dataclass(frozen=True)
class StateChange:
    """Move the job to `to` with `why`; then record `event` (kind, message, data), if any."""

    to: JobState
    why: str
    event: tuple[str, str, dict[str, Any]] | None = None
