"""Spot market traces: load the shared CSV format (or import a public one) and summarise each zone.

A trace is one row per zone per tick::

    tick,timestamp,zone,available,spot_price_usd_per_h,on_demand_usd_per_h
    0,2023-02-15 22:08:16,us-east-1a,0,1.6703,3.06

`available` is 1 when spot capacity could be had (any count >= 1 also means available).
Files may be gzipped. The tick length (`gap_s`) is inferred from the timestamps (the median
step, rounded to whole seconds) unless given. Every zone must cover the same ticks.

The format is told by the header: a file with the columns of `trace_counts.COLUMNS` (the
availability counts of the Can't Be Late / SkyNomad artifact, no prices) is imported by
`trace_counts`, one dataset at a time (`FILE#DATASET`). Any other header is an error.

Example:

>>> trace = load_trace(resolve_trace("aws-v100"))
>>> trace.zones[0], trace.gap_s, trace.n_ticks
('us-east-1a', 195, 20158)
>>> round(zone_stats(trace)[0].availability, 2)
0.17
"""

from __future__ import annotations

import functools
import gzip
import io
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from spotfit.errors import TraceError
from spotfit.market import trace_counts
from spotfit.market.trace_files import BUNDLED as BUNDLED  # re-exported
from spotfit.market.trace_files import resolve_trace as resolve_trace  # re-exported

COLUMNS = ("tick", "timestamp", "zone", "available", "spot_price_usd_per_h", "on_demand_usd_per_h")



@dataclass(frozen=True)
class Trace:
    """Per-zone availability and prices on a common tick grid (arrays are zones × ticks)."""

    zones: tuple[str, ...]
    gap_s: int
    start: datetime
    available: np.ndarray  # bool
    spot_usd_per_h: np.ndarray  # float
    on_demand_usd_per_h: np.ndarray  # float
    source: str = ""

    @property
    def n_ticks(self) -> int:
        return int(self.available.shape[1])

    def zone_index(self, zone: str) -> int:
        """Row of `zone`; raise a TraceError that lists the trace's zones otherwise."""
        try:
            return self.zones.index(zone)
        except ValueError:
            raise TraceError(
                f"Unknown zone {zone!r} for trace {self.source or '<memory>'}: "
                f"expected one of {', '.join(self.zones)}.",
                hint="Pass zones that the trace contains, or omit them to use all.",
            ) from None

    def select(self, zones: list[str] | tuple[str, ...] | None) -> Trace:
        """The same trace restricted to `zones` (all zones when empty or None)."""
        if not zones:
            return self
        rows = [self.zone_index(z) for z in zones]
        return Trace(
            zones=tuple(zones),
            gap_s=self.gap_s,
            start=self.start,
            available=self.available[rows],
            spot_usd_per_h=self.spot_usd_per_h[rows],
            on_demand_usd_per_h=self.on_demand_usd_per_h[rows],
            source=self.source,
        )


@dataclass(frozen=True)
class ZoneStats:
    """What the history says about one zone (times in hours, prices in $/h)."""

    zone: str
    availability: float
    mean_up_h: float
    mean_down_h: float
    mtbf_h: float
    preemptions: int
    spot_min_usd_per_h: float
    spot_mean_usd_per_h: float
    spot_max_usd_per_h: float
    on_demand_usd_per_h: float


def load_trace(path: str | Path, gap_s: float | None = None) -> Trace:
    """Read a trace CSV (gzipped or not) into a `Trace`, validating every row.

    A trace read before, whose file has not changed since (same size and modification time), is
    the same `Trace`, its arrays read-only: a controller driving many jobs on one market reads
    and keeps it once (`controller/pool.py`).
    """
    path = resolve_trace(path)
    file = Path(str(path).partition("#")[0]) if not path.is_file() else path
    try:
        stat = file.stat()
    except OSError:
        return _load_trace(path, gap_s)  # the read says what is wrong
    return _cached_trace(str(path), stat.st_size, stat.st_mtime_ns, gap_s)


@functools.lru_cache(maxsize=8)
def _cached_trace(path: str, size: int, mtime_ns: int, gap_s: float | None) -> Trace:
    trace = _load_trace(Path(path), gap_s)
    for array in (trace.available, trace.spot_usd_per_h, trace.on_demand_usd_per_h):
        array.setflags(write=False)
    return trace


def _load_trace(path: Path, gap_s: float | None) -> Trace:
    dataset = ""
    if not path.is_file():
        path, dataset = Path(str(path).partition("#")[0]), str(path).partition("#")[2]
    text = _read_text(path)
    if _header(text) >= set(trace_counts.COLUMNS):
        trace = Trace(**trace_counts.parse_counts(path, text.splitlines(), dataset))
        return trace if gap_s is None else replace(trace, gap_s=_positive_gap(gap_s))
    rows = _parse_rows(path, _columns(path, text))
    zones, zone_rows = _zone_rows(path, rows)
    stamps = [rows.timestamp[r] for r in zone_rows[0]]
    start = _timestamp(path, stamps[0], int(zone_rows[0][0]))
    if gap_s is None:
        gap_s = _infer_gap(path, stamps, zone_rows[0])
    return Trace(
        zones=tuple(zones),
        gap_s=_positive_gap(gap_s),
        start=start,
        available=np.vstack([rows.available[r] >= 1 for r in zone_rows]),
        spot_usd_per_h=np.vstack([rows.spot_usd_per_h[r] for r in zone_rows]),
        on_demand_usd_per_h=np.vstack([rows.on_demand_usd_per_h[r] for r in zone_rows]),
        source=str(path),
    )


def zone_stats(trace: Trace) -> list[ZoneStats]:
    """Availability, mean up/down time, MTBF and price summary for every zone."""
    hours = trace.gap_s / 3600.0
    out = []
    for i, zone in enumerate(trace.zones):
        a = trace.available[i]
        up_runs, down_runs = run_lengths(a)
        preemptions = int(np.sum(a[:-1] & ~a[1:]))
        up_ticks = int(a.sum())
        spot = trace.spot_usd_per_h[i]
        out.append(ZoneStats(
            zone=zone,
            availability=float(a.mean()),
            mean_up_h=float(up_runs.mean() * hours) if up_runs.size else 0.0,
            mean_down_h=float(down_runs.mean() * hours) if down_runs.size else 0.0,
            mtbf_h=up_ticks * hours / preemptions if preemptions else float("inf"),
            preemptions=preemptions,
            spot_min_usd_per_h=float(spot.min()),
            spot_mean_usd_per_h=float(spot.mean()),
            spot_max_usd_per_h=float(spot.max()),
            on_demand_usd_per_h=float(trace.on_demand_usd_per_h[i].mean()),
        ))
    return out


def run_lengths(available: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths (in ticks) of the up runs and the down runs of a boolean series."""
    a = np.asarray(available, dtype=bool)
    if a.size == 0:
        return np.zeros(0, int), np.zeros(0, int)
    edges = np.flatnonzero(a[1:] != a[:-1]) + 1
    bounds = np.concatenate(([0], edges, [a.size]))
    lengths = np.diff(bounds)
    states = a[bounds[:-1]]
    return lengths[states], lengths[~states]


@dataclass(frozen=True)
class _Rows:
    """The data rows column by column, in file order (index i is the file's line i + 2)."""

    tick: np.ndarray
    timestamp: list[str]
    zone: np.ndarray
    available: np.ndarray
    spot_usd_per_h: np.ndarray
    on_demand_usd_per_h: np.ndarray


def _read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise _bad(path, f"cannot be read ({type(exc).__name__})", "a UTF-8 CSV, optionally gzipped",
                   "re-export the trace") from None


def _positive_gap(gap_s: float) -> int:
    if not gap_s >= 1:  # ticks are whole seconds: 0.5 would be a tick of 0 s
        raise TraceError(f"Invalid gap_s: received {gap_s}, expected a number of seconds >= 1.",
                         hint="Pass --gap-s 195 (or omit it to infer the gap from the timestamps).")
    return int(gap_s)


def _header(text: str) -> set[str]:
    first = text.split("\n", 1)[0]
    return {h.strip() for h in first.split(",")}


def _columns(path: Path, text: str) -> dict[str, list[str]]:
    """The raw text of each of `COLUMNS`, found by header name; every row must have the header's width."""
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise _bad(path, "the file is empty", "a header line", "write the header " + ",".join(COLUMNS))
    header = [h.strip() for h in lines[0].split(",")]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise TraceError(
            # The file's own first line is never quoted: the path may name any file the caller can read.
            f"Unknown trace format in {path}: its first line is not a trace header; expected the header "
            f"{','.join(COLUMNS)} or {','.join(trace_counts.COLUMNS)}.",
            hint="Convert the file to one of these formats (docs/market.md, 'Trace formats').")
    body = [line for line in lines[1:] if line.strip()]
    if not body:
        raise _bad(path, "no data rows", "one row per zone per tick", "add rows under the header")
    width = len(header)
    # One split of the joined body is much faster than one per row; a count mismatch means a bad row.
    flat = ",".join(body).split(",")
    if len(flat) != width * len(body):
        for i, line in enumerate(lines[1:]):
            if line.strip() and line.count(",") != width - 1:
                raise _bad(path, f"row {i + 2} has {line.count(',') + 1} fields",
                           f"{width} comma-separated fields", "fix or remove that row")
    return {name: flat[header.index(name)::width] for name in COLUMNS}


def _parse_rows(path: Path, columns: dict[str, list[str]]) -> _Rows:
    """Numbers parsed and checked (finite, >= 0), zone names stripped; timestamps stay text."""
    rows = _Rows(
        tick=_numbers(path, columns["tick"], "tick", int),
        timestamp=columns["timestamp"],
        zone=np.char.strip(np.array(columns["zone"])),
        available=_numbers(path, columns["available"], "available", float),
        spot_usd_per_h=_numbers(path, columns["spot_price_usd_per_h"], "spot_price_usd_per_h", float),
        on_demand_usd_per_h=_numbers(path, columns["on_demand_usd_per_h"], "on_demand_usd_per_h", float),
    )
    for name, arr in (("available", rows.available), ("spot_price_usd_per_h", rows.spot_usd_per_h),
                      ("on_demand_usd_per_h", rows.on_demand_usd_per_h)):
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
        if bad.size:
            r = int(bad[0])
            raise _bad(path, f"row {r + 2} has a bad {name}", "a finite number >= 0",
                       "fix that row")
    return rows


def _zone_rows(path: Path, rows: _Rows) -> tuple[list[str], list[np.ndarray]]:
    """Zones in order of first appearance, and each zone's row indices in tick order.

    Every zone must have ticks 0, 1, 2, ... with no gap or repeat, and as many as the first zone.
    """
    names, first_seen, zone_ids = np.unique(rows.zone, return_index=True, return_inverse=True)
    zones = [str(names[i]) for i in np.argsort(first_seen)]
    n = int(np.sum(rows.zone == zones[0]))
    out = []
    for z in zones:
        rows_z = np.flatnonzero(zone_ids == int(np.searchsorted(names, z)))
        if rows_z.size != n:
            raise _bad(path, f"zone {z!r} has {rows_z.size} rows but zone {zones[0]!r} has {n}",
                       "the same ticks for every zone", "fill the missing ticks or drop the zone")
        rows_z = rows_z[np.argsort(rows.tick[rows_z], kind="stable")]
        _check_ticks(path, z, rows.tick[rows_z], rows_z)
        out.append(rows_z)
    return zones, out


def _check_ticks(path: Path, zone: str, ticks: np.ndarray, rows: np.ndarray) -> None:
    if ticks[0] != 0 or np.any(np.diff(ticks) != 1):
        k = 0 if ticks[0] != 0 else int(np.flatnonzero(np.diff(ticks) != 1)[0]) + 1
        raise _bad(path, f"zone {zone!r} has tick {ticks[k]} at row {rows[k] + 2} after tick "
                   f"{ticks[k - 1] if k else 'none'}", "ticks 0, 1, 2, ... with no gap or repeat",
                   "renumber the ticks")


def _numbers(path: Path, values: list[str], name: str, kind: type) -> np.ndarray:
    try:
        return np.array(values, dtype=float).astype(kind) if kind is int else np.array(values, dtype=float)
    except ValueError:
        for r, v in enumerate(values):
            try:
                float(v)
            except ValueError:
                raise _bad(path, f"row {r + 2} has a bad {name}", "a number", "fix that row") from None
        raise


def _timestamp(path: Path, text: str, row: int) -> datetime:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise _bad(path, f"row {row + 2} has a bad timestamp", "ISO format like 2023-02-15 22:08:16",
                   "fix that row") from None


def _infer_gap(path: Path, stamps: list[str], rows: np.ndarray) -> int:
    if len(stamps) < 2:
        raise _bad(path, "only one tick, so the tick length cannot be inferred",
                   "two or more ticks per zone", "add ticks or pass --gap-s")
    secs = np.array([_timestamp(path, s, int(r)).timestamp() for s, r in zip(stamps, rows, strict=True)])
    steps = np.diff(secs)
    if np.any(steps <= 0):
        k = int(np.flatnonzero(steps <= 0)[0]) + 1
        raise _bad(path, f"row {rows[k] + 2} has timestamp={stamps[k]!r}, not after {stamps[k - 1]!r}",
                   "timestamps increasing with the tick", "fix the timestamps or pass --gap-s")
    return int(round(float(np.median(steps))))


def _bad(path: Path, what: str, expected: str, fix: str) -> TraceError:
    return TraceError(f"Malformed trace {path.name}: {what}; expected {expected}.", hint=f"Fix: {fix}.")
