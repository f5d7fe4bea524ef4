"""Crash points: named places where a test can hold the controller or the runtime, then kill it right there.

Crash safety is claimed for precise moments (an attempt recorded but not launched, launched
but its handle not stored); tests prove it by killing a real controller at those moments,
not by hoping a kill lands in a window of microseconds.

Set `SPOTFIT_TEST_HOLD=<point>:<folder>` (tests only). On reaching `<point>` the process
creates `<folder>/<point>.reached` (holding its pid) and waits until `<folder>/<point>.release`
exists, at most `HOLD_LIMIT_S`; a test that kills it there never creates the release file.

- `launching`: the attempt is recorded (state `launching`, no handle); the backend is not called yet;
- `launched`: the backend has started the attempt; its handle is not stored yet;
- in the dashboard (ui/planning.py): `plan_running` (a plan's worker thread started, nothing simulated);
- in the runtime's export (runtime/export.py): `export_writing` (the scratch folder made, nothing
  written), `export_claimed` (a version claimed, nothing uploaded), `export_uploading` (one file
  uploaded), `export_uploaded` (every file, no model card).

>>> hold("launched")  # not set: returns at once
"""

from __future__ import annotations

import os
import time
from pathlib import Path

HOLD_ENV = "SPOTFIT_TEST_HOLD"
HOLD_LIMIT_S = 600.0


def hold(point: str) -> None:
    """Wait at `point` if `SPOTFIT_TEST_HOLD` names it; otherwise return at once."""
    name, _, folder = os.environ.get(HOLD_ENV, "").partition(":")
    if name != point or not folder:
        return
    reached = Path(folder) / f"{point}.reached"
    tmp = reached.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.replace(reached)  # whole or absent: the test reads it once it exists
    release = Path(folder) / f"{point}.release"
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
