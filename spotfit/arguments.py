"""Checks of the plain arguments the SDK takes from a command line or a script.

Each check returns the value when it is good and raises `UsageError` with one line otherwise,
naming the flag, the value received and what was expected, so that `spotfit list --limit nan`
or `spotfit status ""` ends with exit 2 before anything is opened or written.

Example:

>>> number("--count", 2.0, low=0, high=16, low_open=True, hint="Pass --count 1.")
2.0
>>> number("--count", float("nan"), low=0, high=16, low_open=True, hint="Pass --count 1.")
Traceback (most recent call last):
...
spotfit.errors.UsageError: Invalid `--count`: received nan, expected a number > 0 and <= 16.
"""

from __future__ import annotations

import math
import re
import unicodedata

from spotfit.errors import UsageError


def number(flag: str, value: float, low: float, high: float, hint: str, low_open: bool = False) -> float:
    """`value` if it is finite and in `[low, high]` (`(low, high]` when `low_open`)."""
    above_low = value > low if low_open else value >= low
    if not (math.isfinite(value) and above_low and value <= high):
        kind = "an integer" if isinstance(value, int) else "a number"
        raise UsageError(f"Invalid `{flag}`: received {value!r}, expected {kind} {'>' if low_open else '>='} "
                         f"{_plain(low)} and <= {_plain(high)}.", hint=hint)
    return value


def text(flag: str, value: str, hint: str, pattern: str | None = None, expected: str = "a non-empty name") -> str:
    """`value` if it is printable, non-blank text (and matches `pattern` when given)."""
    bad = not value.strip() or any(unicodedata.category(c) in ("Cc", "Cs") for c in value)
    if bad or (pattern is not None and not re.fullmatch(pattern, value)):
        raise UsageError(f"Invalid `{flag}`: received {_short(value)}, expected {expected}.", hint=hint)
    return value


def job_ref(ref: str) -> str:
    """A job id, id prefix or name: printable and non-blank (an empty prefix would match every job)."""
    return text("JOB", ref, hint="`spotfit list` shows the known jobs.",
                expected="a job id, an id prefix or a job name")


def _plain(bound: float) -> str:
    """`1000000` rather than `1e+06`: bounds read as the user would type them."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _short(value: str, limit: int = 80) -> str:
    text_ = repr(value)
    return text_ if len(text_) <= limit else f"{text_[:limit - 1]}… ({len(value):,} characters)"
