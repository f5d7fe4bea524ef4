"""The fast loop's list of heavy tests: those `make check` leaves to `make test`.

A test is *heavy* when it took at least `THRESHOLD_S` (set-up, call and teardown together) in
a measured run of the fast loop; in the first run, a test whose set-up alone took that long (a
module fixture that simulates a market or starts a server) makes its whole file heavy, since the
next test of the file would pay the set-up instead. A second run, without those, adds the tests
that now pay a set-up shared by the session. `tests/heavy.txt` holds the list; `tests/conftest.py` marks
each listed test `heavy`, and `make check` runs `-m "not slow and not heavy"`. `make test` runs
everything, heavy or not. `make heavy-list` measures the fast loop again and rewrites the list
(the figures of the last measure: docs/benchmarks.md, "The fast loop").

>>> text = '''
... 3.10s setup    tests/a.py::test_x[p 1]
... 0.40s call     tests/a.py::test_x[p 1]
... 0.90s call     tests/b.py::test_y
... 0.20s teardown tests/b.py::test_y
... 0.30s call     tests/b.py::test_z
... '''
>>> durations(text)["tests/b.py::test_y"]
1.1
>>> heavy_ids(text, ["tests/a.py::test_x[p 1]", "tests/a.py::test_w", "tests/b.py::test_y", "tests/b.py::test_z"], 1.0)
['tests/a.py::test_w', 'tests/a.py::test_x[p 1]', 'tests/b.py::test_y']
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

THRESHOLD_S = 1.0
LIST = Path(__file__).resolve().parents[1] / "heavy.txt"
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*?)\s*$")


def _phases(text: str) -> Iterator[tuple[float, str, str]]:
    """(seconds, phase, test id) of each line of pytest's `--durations=0` report."""
    for line in text.splitlines():
        if m := _LINE.match(line):
            yield float(m.group(1)), m.group(2), m.group(3)


def durations(text: str) -> dict[str, float]:
    """Seconds per test id (all phases) from pytest's `--durations=0` report."""
    total: dict[str, float] = defaultdict(float)
    for seconds, _, test in _phases(text):
        total[test] = round(total[test] + seconds, 6)
    return dict(total)


def heavy_ids(text: str, collected: list[str], threshold_s: float = THRESHOLD_S, whole_files: bool = True) -> list[str]:
    """The heavy tests among `collected` (ids), from a `--durations=0` report `text`; with
    `whole_files`, every test of a file whose set-up took `threshold_s`."""
    seconds = durations(text)
    heavy_files = {test.split("::", 1)[0] for secs, phase, test in _phases(text)
                   if whole_files and phase == "setup" and secs >= threshold_s}
    return sorted(test for test in collected
                  if seconds.get(test, 0.0) >= threshold_s or test.split("::", 1)[0] in heavy_files)


def listed() -> frozenset[str]:
    """The ids in `tests/heavy.txt` (none when it is missing)."""
    if not LIST.exists():
        return frozenset()
    return frozenset(line.strip() for line in LIST.read_text().splitlines()
                     if line.strip() and not line.startswith("#"))


def _measure(marks: str) -> str | None:
    """pytest's `--durations=0` report of the fast loop under `marks` (None if a test failed)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", marks, "-p", "no:cacheprovider", "-q", "-n", "2",
                          "--durations=0"], capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout[-3000:], file=sys.stderr)
        return None
    return run.stdout


def _write(heavy: list[str]) -> None:
    LIST.write_text(f"# `make check` leaves these to `make test`: each took >= {THRESHOLD_S} s in the fast loop,\n"
                    "# or its file has a set-up that long (tests/support/heavy.py; `make heavy-list` rewrites it).\n"
                    "# Doc examples are named by their line: an edit above one renames it (`make heavy-list` again).\n"
                    + "".join(f"{test}\n" for test in heavy))


def main() -> int:
    """Measure the fast loop without the list and write it; then measure what is left and add
    the tests heavy there: a set-up shared by a whole session (SeaweedFS, PostgreSQL) moves to the
    next test that needs it, which is listed alone (its file is not)."""
    ids = subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "-p", "no:cacheprovider",
                          "--collect-only", "-q"], capture_output=True, text=True, check=True)
    collected = [line for line in ids.stdout.splitlines() if "::" in line]
    heavy: list[str] = []
    for marks in ("not slow", "not slow and not heavy"):
        text = _measure(marks)  # the first run ignores the list: `heavy` is not in its marks
        if text is None:
            print("error: the fast loop failed; tests/heavy.txt is left as the last complete run wrote it, "
                  "run `make heavy-list` again once it passes", file=sys.stderr)
            return 1
        heavy = sorted(set(heavy) | set(heavy_ids(text, collected, whole_files=marks == "not slow")))
        _write(heavy)
    print(f"{len(heavy)} of {len(collected)} tests are heavy; written to {LIST}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
