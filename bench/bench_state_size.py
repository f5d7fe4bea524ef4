"""What a user waits for with 20,000 jobs in the state DB (issue 49: at most 1 s each).

Seeds a temporary home with `JOBS` jobs as controllers leave them (tests/support/statedb.py: three
attempts each, on the bundled trace; one in `LIVE_EVERY` still running, the rest completed), then
times, as a user runs them (a new process each, the median of `REPEATS`):

- `spotfit list`, `spotfit status JOB` (a job among the oldest), `spotfit cost JOB`;
- `spotfit cost --all` the first time (nothing kept: every window's optimum solved, the ended jobs'
  documents and spend entries then kept) and after (`controller/cost_doc.py`: an ended job's document
  and entry are kept, by its controller as it ends or by the first read; a live job's optimum is kept
  by its window's inputs and solved again only when they change). The seeded jobs share two windows
  (one for the running jobs, one for the completed), so the first call here solves two optima, where
  a real state would solve one per distinct window;
- the dashboard's jobs page (`spotfit ui`, the newest 50 jobs), from a server started on the home.

Run: `.venv/bin/python bench/bench_state_size.py [--jobs N] [--no-doc]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _doc import machine, write_section
from bench_ui import _get_s, _start

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `tests.support`
from tests.support.statedb import seed_jobs  # noqa: E402

HEADING = "## The CLI and the dashboard with 20,000 jobs in the state (issue 49)"
JOBS = 20_000
LIVE_EVERY = 100
REPEATS = 3


def _run_s(home: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "spotfit", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env={**os.environ, "SPOTFIT_HOME": str(home)})
    return time.perf_counter() - start


def _median(home: Path, *args: str) -> float:
    return statistics.median(_run_s(home, *args) for _ in range(REPEATS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--no-doc", action="store_true", help="print, do not rewrite docs/benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spotfit-bench-state-") as tmp:
        home = Path(tmp)
        os.chmod(home, 0o700)
        start = time.perf_counter()
        ids = seed_jobs(home / "state.db", args.jobs, running_every=LIVE_EVERY)
        seeded_s = time.perf_counter() - start
        rows = [("`spotfit list`", _median(home, "list")),
                ("`spotfit status JOB`", _median(home, "status", ids[1])),
                ("`spotfit cost JOB`", _median(home, "cost", ids[2])),
                ("`spotfit cost --all`, the first time (nothing kept yet)", _run_s(home, "cost", "--all")),
                ("`spotfit cost --all` after (ended jobs' documents kept)", _median(home, "cost", "--all"))]
        proc, base = _start(home)
        try:
            rows.append(("the dashboard's jobs page (server time, first request)", _get_s(base)))
            rows.append(("the dashboard's jobs page (server time, after)",
                         statistics.median(_get_s(base) for _ in range(REPEATS))))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    live = len(range(LIVE_EVERY - 1, args.jobs, LIVE_EVERY))
    lines = [HEADING, "",
             f"{args.jobs:,} jobs seeded in {seeded_s:.0f} s ({live} running, the rest completed; three attempts "
             f"each on the bundled trace); {machine()}; wall seconds, the median of {REPEATS} runs where several, "
             "each command a new process as a user runs it.", "",
             "| what | s |", "|---|---:|", *[f"| {what} | {s:.2f} |" for what, s in rows]]
    print("\n".join(lines))
    if not args.no_doc:
        write_section(HEADING, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
