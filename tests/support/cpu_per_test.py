"""Per-test CPU, written when `SPOTFIT_TEST_CPU=FILE` is set (`python -m tests.support.cpu_per_test FILE` sums it).

Each xdist worker appends one JSON line per test to FILE: its node id, wall seconds (set-up, call and
teardown), the worker's own CPU seconds and those of the child processes it reaped meanwhile (a
process's CPU joins its parent's when it is reaped: runtimes, CLIs and the TensorFlow they load),
the worker's name and the test's end (Unix time); the sums say when each worker's last test ended
(how evenly `--dist loadfile` shared the files).
Orphans the suite's subreaper reaps (tests/support/suite_run.py) are not counted. It finds where the
suite's CPU goes (docs/benchmarks.md, "The test suite's time"); it changes nothing a test sees.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "SPOTFIT_TEST_CPU"


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    target = os.environ.get(ENV)
    if not target:
        yield
        return
    wall, own, children = time.monotonic(), time.process_time(), _children()
    yield
    row = {"test": item.nodeid, "wall": time.monotonic() - wall, "own": time.process_time() - own,
           "children": _children() - children, "worker": os.environ.get("PYTEST_XDIST_WORKER"), "end": time.time()}
    with open(target, "a") as out:
        out.write(json.dumps(row) + "\n")


def main(path: str, top: int = 30) -> None:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for row in rows:
        entry = by_file[row["test"].split("::")[0]]
        entry[0] += row["wall"]
        entry[1] += row["own"]
        entry[2] += row["children"]
        entry[3] += 1
    total = sum(r["own"] + r["children"] for r in rows)
    print(f"{len(rows)} tests, {total:.0f} s CPU ({sum(r['own'] for r in rows):.0f} own, "
          f"{sum(r['children'] for r in rows):.0f} children), {sum(r['wall'] for r in rows):.0f} s wall summed")
    ends = [r["end"] for r in rows if "end" in r]
    for worker in sorted({r["worker"] for r in rows if r.get("worker")}):
        mine = [r for r in rows if r.get("worker") == worker]
        print(f"{worker}: {len(mine)} tests, {sum(r['own'] + r['children'] for r in mine):.0f} s CPU, "
              f"its last test ended {max(r['end'] for r in mine) - min(ends):.0f} s after the first")
    print(f"{'file':60} {'tests':>5} {'wall':>7} {'own':>7} {'child':>7} {'cpu':>7}")
    for name, (wall, own, child, count) in sorted(by_file.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        print(f"{name:60} {count:5d} {wall:7.1f} {own:7.1f} {child:7.1f} {own + child:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
