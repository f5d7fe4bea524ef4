"""A job as the market sees it: its work, deadline and restart overhead, and the share above all-on-demand
its policy may pay (`max_overpay`); no NumPy here, so that what only describes a job loads no array code.

>>> Job.from_hours(8, 9).deadline_s
32400.0
"""

from __future__ import annotations

from dataclasses import dataclass

from spotfit.errors import UsageError

DEFAULT_MAX_OVERPAY = 0.1  # `market.max_overpay`: the default policy's hard bound (`within_floor`, floor.py)


@dataclass(frozen=True)
class Job:
    """Work, deadline and restart overhead of a job, in seconds; `max_overpay`: the share above
    all-on-demand its policy may pay at most (`market.max_overpay`; the default policy holds it)."""

    work_s: float
    deadline_s: float
    overhead_s: float
    max_overpay: float = DEFAULT_MAX_OVERPAY

    @classmethod
    def from_hours(cls, work_h: float, deadline_h: float, overhead_h: float = 0.2,
                   max_overpay: float = DEFAULT_MAX_OVERPAY) -> Job:
        for name, value in (("work_h", work_h), ("deadline_h", deadline_h)):
            if not value > 0:
                raise UsageError(f"Invalid `{name}`: received {value}, expected a number > 0.",
                                 hint=f"Pass --{name.replace('_', '-')} 48 (hours).")
        if overhead_h < 0:
            raise UsageError(f"Invalid `overhead_h`: received {overhead_h}, expected a number >= 0.",
                             hint="Pass --overhead-h 0.2 (hours of start-up per launch).")
        if overhead_h >= deadline_h:
            raise UsageError(f"Invalid `overhead_h`: received {overhead_h:g}, expected less than the deadline "
                             f"({deadline_h:g} h): no launch could train before it.",
                             hint="Set `market.overhead_h` to the hours one launch takes to start (0.2 by default).")
        if not max_overpay >= 0:
            raise UsageError(f"Invalid `max_overpay`: received {max_overpay}, expected a number >= 0.",
                             hint="Pass --max-overpay 0.05 (at most 5% above all-on-demand) or 0 (never above "
                                  "it, in the policy's model).")
        return cls(work_h * 3600.0, deadline_h * 3600.0, round(overhead_h * 3600.0, 6), max_overpay)
