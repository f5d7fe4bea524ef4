"""Errors that spotfit raises on purpose: a message and a hint that says how to fix it.

Every error a user can cause (bad spec, bad flag, bad trace, unknown job) derives from
`SpotfitError`. The CLI prints `error: <message>` and, on the next line, the hint; it exits
with `exit_code` (2 for bad input) and shows no traceback unless `--debug` is given.

Example:

>>> err = SpecError("Invalid `resources.count`: received 0, expected an integer >= 1.",
...                 hint="Set `resources.count: 1` or more.")
>>> str(err).startswith("Invalid `resources.count`")
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


class SpotfitError(Exception):
    """Base class: `message` says what was wrong, `hint` how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(SpotfitError):
    """Bad input from the user: a spec, a flag, a file. Exit code 2."""

    exit_code = 2


class SpecError(UsageError):
    """The job spec is invalid."""


class TraceError(UsageError):
    """A market trace or price catalog is malformed."""


class NotFoundError(UsageError):
    """A job, store object or registry entry does not exist."""


class StoreError(SpotfitError):
    """The object store failed (unreachable, permission denied, corrupt object)."""


class BackendError(SpotfitError):
    """A backend could not launch, watch or stop an attempt."""


class NoCapacityError(BackendError):
    """The market has no spot capacity for this offer right now; try another offer."""


@contextmanager
def cloud_errors(failure: Callable[[BaseException], str | None], what: str, hint: str) -> Iterator[None]:
    """Inside: an error that `failure` knows as a cloud SDK's (no credentials, no endpoint, an API answer) becomes
    one `BackendError` line, `{what}: {its account}`, with `hint`; spotfit's own errors and any other pass through.

    >>> with cloud_errors(lambda e: "Timeout: no answer" if isinstance(e, TimeoutError) else None,
    ...                   "Could not list the zones", hint="Check the network."):
    ...     raise TimeoutError()
    Traceback (most recent call last):
    spotfit.errors.BackendError: Could not list the zones: Timeout: no answer
    """
    try:
        yield
    except SpotfitError:
        raise
    except Exception as exc:
        reason = failure(exc)
        if reason is None:
            raise
        raise BackendError(f"{what}: {reason}", hint=hint) from exc
