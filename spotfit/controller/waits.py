"""How long the controller's own waits last: `SPOTFIT_WAIT_SCALE` multiplies them.

The failure back-offs (`failure_backoff_s`, doubled per failure in a row, capped at 30 minutes)
are real waits of the controller. A test that drives a job through several failures, or a demo
of a crash-looping job, sets `SPOTFIT_WAIT_SCALE=0.001` and sees the same doubling in
milliseconds: 30/60/120 s become 0.03/0.06/0.12 s, and each `backoff` event records the wait
that was actually kept. The back-offs between the controller's tries of a store that does not
answer (`store_guard`, 1 s doubling to 8 s) are scaled alike. Unset (the default) it is 1.
Timeouts that a spec sets (`aws.boot_timeout_s`, `kubernetes.pending_timeout_s`) and the
lease's length (`SPOTFIT_LEASE_TTL_S`) are set directly and are not scaled.

Example:

>>> import os
>>> os.environ[WAIT_SCALE_ENV] = "0.001"
>>> scaled(30.0)
0.03
>>> del os.environ[WAIT_SCALE_ENV]
>>> scaled(30.0)
30.0
"""

from __future__ import annotations

from spotfit.core.arguments import env_number

WAIT_SCALE_ENV = "SPOTFIT_WAIT_SCALE"


def scale() -> float:
    """The factor on the controller's waits: `SPOTFIT_WAIT_SCALE`, else 1."""
    return env_number(WAIT_SCALE_ENV, 1.0, low_open=False, what="a number",
                      note=" (1 keeps the controller's waits as they are)",
                      hint=f"Unset {WAIT_SCALE_ENV} for real waits, or set it to 0.001 in a test.")


def scaled(seconds: float) -> float:
    """`seconds` of a controller's wait, under `SPOTFIT_WAIT_SCALE`."""
    return seconds * scale()
