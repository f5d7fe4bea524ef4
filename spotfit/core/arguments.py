"""Checks of the plain arguments the SDK takes from a command line or a script, and of the settings
read from the environment.

Each check returns the value when it is good and raises `UsageError` with one line otherwise,
naming the flag (or the variable), the value received and what was expected, so that `spotfit
list --limit nan` or `spotfit status ""` ends with exit 2 before anything is opened or written.
`env_number` is the one reading of a number from the environment (`SPOTFIT_LEASE_TTL_S`,
`SPOTFIT_WAIT_SCALE`, ...): unset or empty gives the default; `inf`, `nan`, a value under the
bound and a typo are each one line, whose hint gives the default back.

Example:

>>> number("--count", 2.0, low=0, high=16, low_open=True, hint="Pass --count 1.")
2.0
>>> number("--count", float("nan"), low=0, high=16, low_open=True, hint="Pass --count 1.")
Traceback (most recent call last):
...
spotfit.errors.UsageError: Invalid `--count`: received nan, expected a number > 0 and <= 16.
>>> env_number("SPOTFIT_X_S", 15.0, environ={}), env_number("SPOTFIT_X_S", 15.0, environ={"SPOTFIT_X_S": "2.5"})
(15.0, 2.5)
>>> env_number("SPOTFIT_X_S", 15.0, environ={"SPOTFIT_X_S": "inf"})
Traceback (most recent call last):
...
spotfit.errors.UsageError: Invalid SPOTFIT_X_S: received 'inf', expected a number of seconds > 0.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path

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


def env_number(name: str, default: float, *, low: float = 0.0, low_open: bool = True,
               what: str = "a number of seconds", note: str = "", unit: str = " s", hint: str | None = None,
               environ: Mapping[str, str] | None = None) -> float:
    """The number in environment variable `name`, or `default` where it is unset or empty: finite, and
    above `low` (at least `low` unless `low_open`). Anything else is one `UsageError` line naming the
    variable, the value and what was expected (`what`, the bound, then `note`); the hint, unless
    given, says how to get the default back."""
    raw = (os.environ if environ is None else environ).get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and (value > low if low_open else value >= low):
        return value
    raise UsageError(f"Invalid {name}: received {_short(raw)}, expected {what} {'>' if low_open else '≥'} "
                     f"{_plain(low)}{note}.", hint=hint or f"Unset {name} for the default of {default:g}{unit}.")


PATH_SHOWN = 4096  # Linux's PATH_MAX: a path in an error is shown whole, it is what its user must find and fix


def env_folder(name: str, default: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The folder in environment variable `name` (`~` expanded, made absolute), or `default` where it is unset or
    empty. A value that names a file, or one with a NUL byte, is one `UsageError` line naming the variable, the
    value and what was expected; a folder that does not exist yet is its user's to create.

    >>> env_folder("SPOTFIT_CACHE_DIR", Path("/default"), environ={"SPOTFIT_CACHE_DIR": "/srv/cache"})
    PosixPath('/srv/cache')
    >>> env_folder("SPOTFIT_CACHE_DIR", Path("/default"), environ={"SPOTFIT_CACHE_DIR": ""})
    PosixPath('/default')
    >>> env_folder("SPOTFIT_CACHE_DIR", Path("/default"), environ={"SPOTFIT_CACHE_DIR": "/etc/passwd"})
    Traceback (most recent call last):
    spotfit.errors.UsageError: Invalid SPOTFIT_CACHE_DIR: received '/etc/passwd', expected a folder (it is a file).
    """
    raw = (os.environ if environ is None else environ).get(name)
    if not raw:
        return default
    hint = f"Point {name} at a folder, or unset it for the default ({default})."
    if "\0" in raw:
        raise UsageError(f"Invalid {name}: received {_short(raw, PATH_SHOWN)}, expected a folder's path "
                         "(it holds a NUL byte).", hint=hint)
    path = Path(raw).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise UsageError(f"Invalid {name}: received {_short(raw, PATH_SHOWN)}, expected a folder (it is a file).",
                         hint=hint)
    return path


def _plain(bound: float) -> str:
    """`1000000` rather than `1e+06`: bounds read as the user would type them."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _short(value: str, limit: int = 80) -> str:
    text_ = repr(value)
    return text_ if len(text_) <= limit else f"{text_[:limit - 1]}… ({len(value):,} characters)"
