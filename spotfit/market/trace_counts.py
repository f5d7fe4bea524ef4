"""Import availability-count traces (the multi-node probes of the Can't Be Late / SkyNomad
artifact), which carry no timestamps and no prices.

The format, one row per dataset per zone per tick::

    dataset,tick,gap_seconds,zone,requested_nodes,available_nodes
    availability_16node_2023-08-27,3,300,us-east-2b,16,3

A file may hold several datasets (separate probing campaigns); one is imported at a time,
named after a `#` (`counts.csv.gz#availability_16node_2023-08-27`), or the only one. Spot is
available in a tick when `available_nodes >= nodes` (1 for a one-machine job). Zones of a
dataset that were probed for different lengths are cut to the shortest, so that every zone
covers the same ticks. The start is the date that ends the dataset's name (midnight UTC).

Price model (the file has none): for each zone, the bundled AWS catalog's prices of the
instance type in the zone's region (`us-east-2b` → `us-east-2`): on-demand its `Price`, spot
the median `SpotPrice` over the region's zones (the catalog names zones by AZ ID, which maps
to zone names differently in each AWS account, so a zone's own row cannot be picked). The
instance type is the one named in the file name (`p3.2xlarge`) unless given.

Example:

>>> from spotfit.market.trace import load_trace
>>> trace = load_trace("aws-v100-aug-4node")
>>> trace.zones, trace.gap_s, trace.n_ticks
(('us-east-1f', 'us-east-2a', 'us-west-2c'), 300, 3664)
>>> float(trace.spot_usd_per_h[0, 0]), float(trace.on_demand_usd_per_h[0, 0])
(0.3941, 3.06)
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from spotfit.errors import TraceError
from spotfit.market.data_dir import DATA_DIR

COLUMNS = ("dataset", "tick", "gap_seconds", "zone", "requested_nodes", "available_nodes")


def parse_counts(path: Path, lines: list[str], dataset: str, nodes: int = 1,
                 instance_type: str | None = None) -> dict[str, Any]:
    """The fields of the `Trace` of one dataset of a counts file (`lines` with the header first)."""
    header = [h.strip() for h in lines[0].split(",")]
    idx = [header.index(c) for c in COLUMNS]
    rows = [[f.strip() for f in line.split(",")] for line in lines[1:] if line.strip()]
    bad = next((i for i, r in enumerate(rows) if len(r) != len(header)), None)
    if bad is not None:
        raise _bad(path, f"row {bad + 2} has {len(rows[bad])} fields", f"{len(header)} comma-separated fields",
                   "fix or remove that row")
    datasets = list(dict.fromkeys(r[idx[0]] for r in rows))
    dataset = _pick_dataset(path, datasets, dataset)
    mine = [r for r in rows if r[idx[0]] == dataset]
    gaps = {r[idx[2]] for r in mine}
    if len(gaps) != 1:
        raise _bad(path, f"dataset {dataset!r} has tick lengths {sorted(gaps)}", "one gap_seconds per dataset",
                   "split the dataset")
    gap_s = _number(path, gaps.pop(), "gap_seconds")
    zones = list(dict.fromkeys(r[idx[3]] for r in mine))
    series = {z: _zone_counts(path, [r for r in mine if r[idx[3]] == z], idx, z) for z in zones}
    n = min(s.size for s in series.values())
    available = np.vstack([series[z][:n] >= nodes for z in zones])
    instance_type = instance_type or _instance_from_name(path)
    spot, od = zip(*[catalog_prices(path, instance_type, z) for z in zones], strict=True)
    return {
        "zones": tuple(zones),
        "gap_s": int(gap_s),
        "start": _start(dataset),
        "available": available,
        "spot_usd_per_h": np.repeat(np.array(spot, dtype=float)[:, None], n, axis=1),
        "on_demand_usd_per_h": np.repeat(np.array(od, dtype=float)[:, None], n, axis=1),
        "source": f"{path}#{dataset}",
    }


def catalog_prices(path: Path, instance_type: str, zone: str) -> tuple[float, float]:
    """(spot, on-demand) $/h of `instance_type` in `zone`'s region, from the bundled AWS catalog."""
    from spotfit.market.catalog import CATALOGS, read_catalog

    region = re.sub(r"[a-z]$", "", zone)
    rows = [o for name in CATALOGS["aws"] for o in read_catalog(DATA_DIR / name, "aws")
            if o.instance_type == instance_type and o.region == region]
    spots = [o.spot_usd_per_h for o in rows if o.spot_usd_per_h is not None]
    ods = [o.on_demand_usd_per_h for o in rows if o.on_demand_usd_per_h is not None]
    if not spots or not ods:
        raise TraceError(
            f"No catalog price for {instance_type} in region {region!r} (zone {zone!r} of {path.name}): "
            "expected the trace's instance type and region in the bundled AWS catalog.",
            hint="Use a trace with price columns, or name the instance type in the file name (e.g. p3.2xlarge).")
    return round(float(np.median(spots)), 4), float(np.median(ods))


def _pick_dataset(path: Path, datasets: list[str], wanted: str) -> str:
    if wanted in datasets:
        return wanted
    if not wanted and len(datasets) == 1:
        return datasets[0]
    what = f"no dataset {wanted!r}" if wanted else f"{len(datasets)} datasets"
    raise TraceError(f"Trace {path.name} has {what}: expected one of {', '.join(datasets)}.",
                     hint=f"Name one after a '#': {path.name}#{datasets[0]}")


def _zone_counts(path: Path, rows: list[list[str]], idx: list[int], zone: str) -> np.ndarray:
    ticks = np.array([_number(path, r[idx[1]], "tick") for r in rows])
    counts = np.array([_number(path, r[idx[5]], "available_nodes") for r in rows])
    order = np.argsort(ticks, kind="stable")
    ticks, counts = ticks[order], counts[order]
    if ticks[0] != 0 or np.any(np.diff(ticks) != 1):
        raise _bad(path, f"zone {zone!r} skips or repeats a tick", "ticks 0, 1, 2, ... per dataset and zone",
                   "renumber the ticks")
    return counts


def _number(path: Path, text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value) or value < 0:
        raise _bad(path, f"a bad {name}", "a finite number >= 0", "fix that row")
    return value


def _instance_from_name(path: Path) -> str:
    match = re.search(r"[a-z][a-z0-9]*\.[0-9]*x?large", path.name)
    if not match:
        raise TraceError(f"Trace {path.name} has no prices and its name names no instance type: expected a "
                         "name like aws_p3.2xlarge_....csv.gz.",
                         hint="Rename the file to include the instance type, or add price columns.")
    return match.group(0)


def _start(dataset: str) -> datetime:
    match = re.search(r"(\d{4}-\d{2}-\d{2})$", dataset)
    return datetime.fromisoformat(match.group(1)) if match else datetime(1970, 1, 1)


def _bad(path: Path, what: str, expected: str, fix: str) -> TraceError:
    return TraceError(f"Malformed trace {path.name}: {what}; expected {expected}.", hint=f"Fix: {fix}.")
