"""The dashboard's first render with 1,000 jobs in the state DB (target: under 1 s).

Seeds a temporary home with `JOBS` jobs as controllers leave them (tests/support/statedb.py:
three attempts each, one job in ten still running), starts `spotfit ui --port 0` on it, and
measures, `REPEATS` times each:

- the server: the time to the full HTML of the jobs page (its first page: the newest 50 jobs,
  each row's state, step, cost and saving from the ledger; and all 1,000 with `?limit=1000`),
  the first request after start apart from the rest;
- the browser: Debian's chromium (Playwright, headless, a fresh profile each time) opening the
  jobs page, by the browser's Navigation Timing, from the start of the navigation (the token's
  redirect to its cookie included) to the end of the `load` event: the page laid out and drawn;
  with it, the page's DOM size;
- one job's page, the same two ways: the page comes with the ledger at once; its hindsight figures
  (every policy and the optimum replayed on the job's window, then cached until its attempts
  change) arrive apart, and the browser figure until they show is taken on jobs not seen before.

The load average (1 min) is read before and after: the figures mean little without it.
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


def _browser_s(base: str, paths: list[str], until: str | None = None) -> list[tuple[float, float, float, int]]:
    """Per path: seconds to the end of `load`, to the first contentful paint, until the JS condition `until`
    holds (else 0), and the page's DOM elements."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for path in paths:
            # A fresh cache each time (a first visit). The pages' CSP forbids the `new Function`
            # that wait_for_function compiles its check with; bypassing it changes nothing measured.
            page = browser.new_context(bypass_csp=True).new_page()
            page.goto(f"{base}{path}{'&' if '?' in path else '?'}token={TOKEN}", wait_until="load", timeout=120_000)
            # The browser's own clock: from the navigation's start (the token's redirect included) to `load`.
            load_s = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000.0
            paint = "performance.getEntriesByName('first-contentful-paint')"  # may be reported after `load`
            page.wait_for_function(f"{paint}.length > 0", timeout=120_000)
            paint_s = page.evaluate(f"{paint}[0].startTime") / 1000.0
            shown_s = 0.0
            if until:
                page.wait_for_function(until, timeout=120_000, polling="raf")
                shown_s = page.evaluate("performance.now()") / 1000.0
            out.append((load_s, paint_s, shown_s, page.evaluate("document.getElementsByTagName('*').length")))
            page.context.close()
        browser.close()
    return out


def main() -> None:
    load_before = os.getloadavg()[0]
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
            hindsight_first = _get_s(f"{base}jobs/{ids[0]}/hindsight")
            board_browser = _browser_s(base, [""] * REPEATS)
            all_browser = _browser_s(base, [f"?limit={JOBS}"] * REPEATS)
            # Jobs not seen before: their hindsight figures are computed while the page waits for them.
            job_browser = _browser_s(base, [f"jobs/{ids[i]}" for i in range(1, REPEATS + 1)],
                                     until="document.getElementById('job').dataset.pending === 'false'")
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
    load_after = os.getloadavg()[0]
    med = statistics.median

    def browser(runs: list[tuple[float, float, float, int]], index: int = 0) -> str:
        values = [run[index] for run in runs]
        return f"{med(values):.3f} ({max(values):.3f})"

    rows = [
        ("jobs page (newest 50 rows): server, first request after start", f"{board_first:.3f}"),
        ("jobs page: server, median of the next", f"{med(board):.3f}"),
        ("jobs page with all 1,000 rows (`?limit=1000`): server, median", f"{med(board_all):.3f}"),
        (f"jobs page: chromium, navigation start to the end of `load`, median (max); {board_browser[0][3]:,} "
         "DOM elements", browser(board_browser)),
        (f"jobs page with all 1,000 rows: chromium, to the end of `load`, median (max); {all_browser[0][3]:,} "
         "DOM elements", browser(all_browser)),
        ("one job's page: server, first request (the ledger; hindsight not computed)", f"{job_first:.3f}"),
        ("one job's page: server, median of the next", f"{med(job):.3f}"),
        ("one job's hindsight figures: server, first request (replays every policy and the optimum)",
         f"{hindsight_first:.3f}"),
        ("jobs page: chromium, to the first contentful paint, median (max)", browser(board_browser, 1)),
        ("another job's page (not seen before): chromium, to the first contentful paint, median (max)",
         browser(job_browser, 1)),
        ("another job's page: chromium, to the end of `load` (plotly.js loaded, its charts drawn), median (max)",
         browser(job_browser)),
        ("another job's page: chromium, until its hindsight figures show, median (max)", browser(job_browser, 2)),
    ]
    lines = [HEADING, "", f"`python bench/bench_ui.py`: {JOBS:,} seeded jobs (three attempts each) in the state DB, "
             f"`spotfit ui` on 127.0.0.1, {REPEATS} repeats. Machine: {machine()}, shared with other work: load "
             f"average (1 min) {load_before:.1f} at the start and {load_after:.1f} at the end, "
             f"{time.strftime('%Y-%m-%d')}. Target: first render under 1 s.", "",
             "| what | seconds |", "|---|---|"]
    lines += [f"| {what} | {seconds} |" for what, seconds in rows]
    lines += ["", "The jobs page's first page is 50 rows rendered by the server (no request before its first paint) "
              "and loads no plotly.js; the 1,000-row figure is what \"show all\" costs. A job's page paints before "
              "plotly.js (3 MB, deferred) is parsed, and its charts take most of the time to `load`; its hindsight "
              "figures come from a request of their own, after the page."]
    write_section(HEADING, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
