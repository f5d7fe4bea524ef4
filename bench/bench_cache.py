"""Data cache fill throughput against a plain boto3 download, and the cache-hit start-up time.

Starts SeaweedFS on 127.0.0.1 (tests/support/seaweed.py), uploads a seeded data set of `FILES` objects
of `FILE_MIB` MiB, then alternates, `REPEATS` times each, into fresh local folders:

- plain boto3: `download_file` for each object, one after the other (what a script does);
- boto3 with a thread pool of `WORKERS` (the best a hand-written script does);
- spotfit's `DataCache.sync` (`WORKERS` parallel downloads, md5 verification, resumable parts).

and reports the median throughput of each, the ratio spotfit / plain boto3 (target >= 1), and
the median time of a sync that finds everything cached (what a second job waits for).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from _doc import machine, write_section

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `tests.support`
from spotfit.stores.datacache import DataCache  # noqa: E402
from tests.support.seaweed import BUCKET, SeaweedServer, require_weed, seaweed_env  # noqa: E402

HEADING = "## Data cache (issue 8)"
FILES = 64
FILE_MIB = 4
WORKERS = 16
REPEATS = 7
HIT_REPEATS = 5
PREFIX = "bench/dataset"


def _boto3_plain(client, keys: list[str], folder: Path) -> None:
    for key in keys:
        client.download_file(BUCKET, key, str(folder / key.rsplit("/", 1)[1]))


def _boto3_threads(client, keys: list[str], folder: Path) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda k: client.download_file(BUCKET, k, str(folder / k.rsplit("/", 1)[1])), keys))


def _timed(fn, folder: Path) -> float:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    fn(folder)
    return time.perf_counter() - t0


def main() -> None:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = SeaweedServer(work / "seaweed", require_weed())
        server.start()
        try:
            os.environ.update(seaweed_env(server))
            client = server.client()
            rng = np.random.default_rng(0)
            keys = [f"{PREFIX}/shard-{i:04d}.tfrecord" for i in range(FILES)]
            for key in keys:
                client.put_object(Bucket=BUCKET, Key=key, Body=rng.bytes(FILE_MIB * 2**20))
            total = FILES * FILE_MIB * 2**20
            source = f"s3://{BUCKET}/{PREFIX}"
            times: dict[str, list[float]] = {"plain": [], "threads": [], "spotfit": [], "spotfit_md5": []}
            methods = {
                "plain": lambda i: _timed(lambda f: _boto3_plain(client, keys, f), work / "plain"),
                "threads": lambda i: _timed(lambda f: _boto3_threads(client, keys, f), work / "threads"),
                "spotfit": lambda i: _timed(
                    lambda f: DataCache(f, workers=WORKERS).sync(source, progress=False), work / f"cache{i}"),
                "spotfit_md5": lambda i: _timed(
                    lambda f: DataCache(f, workers=WORKERS, verify="md5").sync(source, progress=False),
                    work / f"cache-md5-{i}"),
            }
            names = list(methods)
            for i in range(REPEATS):
                # Rotate the order each round: no method always runs first (cold) or last.
                for name in names[i % len(names):] + names[:i % len(names)]:
                    times[name].append(methods[name](i))
            hits = []
            for _ in range(HIT_REPEATS):
                stats = DataCache(work / "cache0", workers=WORKERS).sync(source, progress=False)
                assert stats.bytes_downloaded == 0 and stats.hits == FILES
                hits.append(stats.seconds)
        finally:
            server.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    mib_s = {k: total / 2**20 / v for k, v in med.items()}
    hit_ms = statistics.median(hits) * 1e3
    section = "\n".join([
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; `python bench/bench_cache.py`.",
        f"SeaweedFS (`weed mini`) on 127.0.0.1; {FILES} objects of {FILE_MIB} MiB ({total / 2**20:.0f} MiB),",
        f"each method into a fresh local folder, in a rotating order, median of {REPEATS}.",
        "",
        "| method | seconds | MiB/s | vs plain boto3 |",
        "|---|---:|---:|---:|",
        f"| plain boto3 (`download_file`, one object after another) | {med['plain']:.2f} "
        f"| {mib_s['plain']:.0f} | 1.00x |",
        f"| boto3, {WORKERS} threads | {med['threads']:.2f} | {mib_s['threads']:.0f} | "
        f"{med['plain'] / med['threads']:.2f}x |",
        f"| spotfit `DataCache.sync`, {WORKERS} workers (`verify: etag`, the default) | {med['spotfit']:.2f} | "
        f"{mib_s['spotfit']:.0f} | **{med['plain'] / med['spotfit']:.2f}x** |",
        f"| spotfit `DataCache.sync`, {WORKERS} workers (`verify: md5`, content hashed) | "
        f"{med['spotfit_md5']:.2f} | {mib_s['spotfit_md5']:.0f} | {med['plain'] / med['spotfit_md5']:.2f}x |",
        "",
        f"Cache-hit start-up (the same data set synced again, 0 bytes downloaded, {FILES} files "
        f"checked against the store's listing): **{hit_ms:.0f} ms** (median of {HIT_REPEATS}).",
        "",
        "`verify: etag` checks each object's size and pins every range read to the listed ETag",
        "(`If-Match`: the server refuses a changed object); `verify: md5` also hashes the content.",
        "",
        "Target: fill throughput >= 1x plain boto3. The server runs on the same machine, so these",
        "figures measure client overhead and parallelism, not a network; with the server, the clients",
        f"and other work sharing {os.cpu_count()} cores (load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after), they move by tens of percent from run to run.",
    ])
    write_section(HEADING, section)
    print(section)


if __name__ == "__main__":
    main()
