"""The dashboard's first render with 1,000 jobs in the state DB (target: under 1 s).

Seeds a temporary home with `JOBS` jobs as controllers leave them (tests/support/statedb.py:
three attempts each, one job in ten still running), starts `spotfit ui --port 0` on it, and
measures, `REPEATS` times each:

- the server: the time to the full HTML of the jobs page (its first page: the newest 200 jobs,
  each row's state, step, cost and saving from the ledger; and all 1,000 with `?limit=1000`),
  the first request after start apart from the rest;
- the browser: Debian's chromium (Playwright, headless, a fresh profile each time) opening the
  jobs page, by the browser's Navigation Timing, from the start of the navigation (the token's
  redirect to its cookie included) to the end of the `load` event: the page laid out and drawn;
- one job's page, the same two ways: it replays every policy and the optimum on the job's
  window for the first time (cached afterwards until its attempts change).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from _doc import machine, write_section

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `tests.support`
from tests.support.statedb import seed_jobs  # noqa: E402

HEADING = "## Dashboard first render (issue 18)"
JOBS = 1_000
REPEATS = 7
TOKEN = "bench-token"


def _start(home: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "spotfit", "ui", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, "SPOTFIT_HOME": str(home), "SPOTFIT_UI_TOKEN": TOKEN})
    out = proc.stdout
    assert out is not None
    for line in out:
        if "spotfit ui: open" in line:
            threading.Thread(target=out.read, daemon=True).start()  # drain the access log
            return proc, line.split("open ", 1)[1].strip().split("?")[0]
    raise SystemExit("spotfit ui ended before printing its URL")


def _get_s(url: str) -> float:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()
    return time.perf_counter() - start


def _browser_s(base: str, paths: list[str]) -> list[float]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for path in paths:
            page = browser.new_context().new_page()  # a fresh cache each time: a first visit
            page.goto(f"{base}{path}?token={TOKEN}", wait_until="load", timeout=120_000)
            # The browser's own clock: from the navigation's start (the token's redirect included) to `load`.
            out.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000.0)
            page.context.close()
        browser.close()
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        ids = seed_jobs(home / "state.db", JOBS)
        proc, base = _start(home)
        try:
            board_first = _get_s(base)
            board = [_get_s(base) for _ in range(REPEATS)]
            board_all = [_get_s(f"{base}?limit={JOBS}") for _ in range(REPEATS)]
            job_first = _get_s(f"{base}jobs/{ids[0]}")
            job = [_get_s(f"{base}jobs/{ids[0]}") for _ in range(REPEATS)]
            board_browser = _browser_s(base, [""] * REPEATS)
            job_browser = _browser_s(base, [f"jobs/{ids[1]}"] * REPEATS)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
    med = statistics.median
    rows = [
        ("jobs page (newest 200 rows): server, first request after start", f"{board_first:.3f}"),
        ("jobs page: server, median of the next", f"{med(board):.3f}"),
        ("jobs page with all 1,000 rows (`?limit=1000`): server, median", f"{med(board_all):.3f}"),
        ("jobs page: chromium, navigation start to the end of `load`, median (max)",
         f"{med(board_browser):.3f} ({max(board_browser):.3f})"),
        ("one job's page: server, first request (replays the policies once)", f"{job_first:.3f}"),
        ("one job's page: server, median of the next (cached)", f"{med(job):.3f}"),
        ("another job's page: chromium, to the end of `load`, first (uncached)", f"{job_browser[0]:.3f}"),
        ("another job's page: chromium, to the end of `load`, median", f"{med(job_browser):.3f}"),
    ]
    load = os.getloadavg()[0]
    lines = [HEADING, "", f"`python bench/bench_ui.py`: {JOBS:,} seeded jobs (three attempts each) in the state DB, "
             f"`spotfit ui` on 127.0.0.1, {REPEATS} repeats. Machine: {machine()}, load average {load:.1f} at the "
             f"end, {time.strftime('%Y-%m-%d')}. Target: first render under 1 s.", "",
             "| what | seconds |", "|---|---|"]
    lines += [f"| {what} | {seconds} |" for what, seconds in rows]
    write_section(HEADING, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
