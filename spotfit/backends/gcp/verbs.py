"""The gcp backend's answers to `spotfit gc` and `spotfit market record` (backends/base.py:
`LeftoverCollector`, `MarketRecorder`): arguments checked here, before any Google call.

`spotfit gc --backend gcp` lists, in the project, the VMs and the disks labelled
`spotfit-managed=true` (one `aggregatedList` each, every zone at once; `--region` narrows to
regions or zones) whose `spotfit-job` label is no job of `keep`, and the disks among them no VM
uses; unless `--dry-run` it deletes the VMs (their boot disks go with them), then the disks.
Then the Secret Manager secrets of the ended jobs (`ended_secrets`: {job id: project}), found by
their labels, never read. The report has the shape of aws's (`regions`: one entry per zone,
`secrets`: one per job), so `spotfit gc` prints and merges both.

`spotfit market record --cloud gcp --region us-central1 --instance-type a2-highgpu-1g` (an N1
host with attached GPUs: `n1-standard-8+V100`, `n1-standard-16+2xV100`) appends one observation
to a trace: the Billing Catalog publishes today's prices and no history, so a new file gets one
tick (now) and a later call fills the ticks since the file's last one with the prices that
were in force then (the last row's) and puts today's on the newest tick. `available` is 0 at a
tick where a spotfit attempt of this state DB on that machine saw the zone's capacity go.

>>> parse_machine("n1-standard-16+2xV100"), parse_machine("a2-highgpu-1g")
(('n1-standard-16', 'V100', 2), ('a2-highgpu-1g', None, 0))
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotfit.backends.gcp import client as gc
from spotfit.backends.gcp.launch import LABEL_JOB, LABEL_MANAGED, label_value
from spotfit.core import arguments
from spotfit.errors import UsageError
from spotfit.market.trace import COLUMNS
from spotfit.state.records import raw_spec_of

if TYPE_CHECKING:
    from spotfit.backends.base import LeftoverReport, Report
    from spotfit.backends.gcp.backend import GcpBackend
    from spotfit.state.db import StateDB

REGION = r"[a-z]+-[a-z]+\d+"
PLACE = rf"{REGION}(-[a-z])?"
SECRET_STORE = {"name": "secret manager", "what": "secrets", "item": "secret"}  # how `spotfit gc` prints them
_STAMP = "%Y-%m-%d %H:%M:%S"
_MACHINE = re.compile(r"(?P<machine>[a-z][a-z0-9-]*[a-z0-9])(\+((?P<n>\d+)x)?(?P<gpu>[A-Za-z0-9-]+))?")


def owns_place(place: str) -> bool:
    """Whether `place` is a Compute Engine region or zone (us-central1, us-central1-a)."""
    return re.fullmatch(PLACE, place) is not None


def project_of(backend: GcpBackend) -> str:
    project = backend.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise UsageError("No Google Cloud project for the gcp backend: $GOOGLE_CLOUD_PROJECT is not set.",
                         hint="Run `export GOOGLE_CLOUD_PROJECT=MY-PROJECT` (the project the jobs ran in).")
    return str(project)


# -- spotfit gc ---------------------------------------------------------------------------------------


def leftovers(backend: GcpBackend, places: list[str] | None, keep: set[str], job: str | None, dry_run: bool,
              ended_secrets: dict[str, str]) -> LeftoverReport:
    """Find (and unless `dry_run`, delete) the project's VMs and disks of jobs not in `keep`, then the
    secrets of `ended_secrets`; one JSON-able report (see the module doc)."""
    for place in places or []:
        arguments.text("--region", place, pattern=PLACE, expected="a Compute Engine region or zone such as "
                       "us-central1 or us-central1-a", hint="Pass --region us-central1 (repeat it for more).")
    project = project_of(backend)
    kept = {label_value(j) for j in keep}
    only = label_value(job) if job else None

    def wanted(labels: Mapping[str, str] | None, zone: str) -> str | None:
        owner = dict(labels or {}).get(LABEL_JOB, "?")
        if owner in kept or (only is not None and owner != only):
            return None
        if places and not any(zone == p or zone.rsplit("-", 1)[0] == p for p in places):
            return None
        return str(owner)

    report: LeftoverReport = {"dry_run": dry_run, "kept_jobs": sorted(keep), "project": project, "regions": [],
                              "secret_store": SECRET_STORE}
    with gc.sdk_errors(f"Could not clean up Compute Engine in project {project}",
                       hint="Check the credentials, the project and SPOTFIT_GCP_ENDPOINT; docs/gcp.md lists "
                            "the roles `spotfit gc` needs."):
        clients = backend.clients()
        disks_client = gc.disks_client(backend.endpoint, backend.credentials)
        label_filter = f"labels.{LABEL_MANAGED}=true"
        zones: dict[str, dict[str, Any]] = {}

        def entry(zone: str) -> dict[str, Any]:
            return zones.setdefault(zone, {"region": zone, "found": {"instances": {}, "disks": {}}, "count": 0})

        for scope, listed in clients.instances.aggregated_list(request={"project": project, "filter": label_filter}):
            zone = scope.rsplit("/", 1)[-1]
            for vm in listed.instances:
                owner = wanted(vm.labels, zone)
                if owner is not None:
                    entry(zone)["found"]["instances"][vm.name] = owner
        for scope, listed in disks_client.aggregated_list(request={"project": project, "filter": label_filter}):
            zone = scope.rsplit("/", 1)[-1]
            for disk in listed.disks:
                owner = wanted(disk.labels, zone)
                if owner is not None and not disk.users:  # an attached boot disk goes with its VM
                    entry(zone)["found"]["disks"][disk.name] = owner
        for zone, item in sorted(zones.items()):
            item["count"] = len(item["found"]["instances"]) + len(item["found"]["disks"])
            if item["count"] and not dry_run:
                item["still_in_use"] = _remove(backend, disks_client, project, zone, item["found"])
        report["regions"] = [item for _, item in sorted(zones.items()) if item["count"]]
        report["secrets"] = _secrets(backend, ended_secrets, dry_run)
    return report


def _remove(backend: GcpBackend, disks_client: Any, project: str, zone: str, found: dict[str, Any]) -> list[str]:
    """Delete the VMs (waiting for each operation), then the disks; returns the disks still in use."""
    ops = []
    for name in found["instances"]:
        try:
            ops.append(backend.clients().instances.delete(project=project, zone=zone, instance=name))
        except Exception as exc:
            if not gc.is_not_found(exc):
                raise
    for op in ops:
        backend._wait(project, zone, op)
    in_use = []
    for name in found["disks"]:
        try:
            backend._wait(project, zone, disks_client.delete(project=project, zone=zone, disk=name))
        except Exception as exc:
            if gc.is_not_found(exc):
                continue
            if "resourceInUseByAnotherResource" not in gc.error_codes(exc):
                raise
            in_use.append(name)
    return in_use


def _secrets(backend: GcpBackend, ended: dict[str, str], dry_run: bool) -> list[dict[str, object]]:
    """The Secret Manager secrets of the ended jobs ({job id: project}), deleted unless `dry_run`."""
    out: list[dict[str, object]] = []
    for job_id, project in sorted(ended.items()):
        manager = backend.secret_manager(project)
        ids = [s["id"] for s in manager.find(job_id)]
        if not ids:
            continue
        if not dry_run:
            for sid in ids:
                manager.delete(sid)
        out.append({"job": job_id, "region": project, "parameters": ids, "backend": "gcp"})
    return out


# -- spotfit market record ----------------------------------------------------------------------------


def parse_machine(text: str) -> tuple[str, str | None, int]:
    """(machine type, attached GPU or None, count) of `--instance-type`."""
    match = _MACHINE.fullmatch(text)
    if match is None:
        raise UsageError(f"Invalid --instance-type: received {text!r}, expected a Compute Engine machine type such "
                         "as a2-highgpu-1g, or an N1 host with its GPUs such as n1-standard-8+V100.",
                         hint="Pass --instance-type a2-highgpu-1g (or n1-standard-16+2xV100).")
    gpu = match.group("gpu")
    return match.group("machine"), gpu.upper() if gpu else None, (int(match.group("n") or 1) if gpu else 0)


def record_live(backend: GcpBackend, region: str, instance_type: str, path: str, zones: list[str] | None,
                hours: float, gap_s: int, state: StateDB, now: datetime | None = None) -> Report:
    """Append one observation of `instance_type`'s prices in `region` (Billing Catalog) to the trace `path`."""
    from spotfit.backends.gcp.machines import ATTACHED
    from spotfit.backends.gcp.prices import price_from_skus, shape
    from spotfit.market.catalog import load_catalog

    arguments.text("--region", region, pattern=REGION, expected="a Compute Engine region such as us-central1",
                   hint="Pass --region us-central1.")
    machine, gpu, count = parse_machine(instance_type)
    if shape(machine) is None:
        raise UsageError(f"Invalid --instance-type: spotfit does not price {machine!r}; expected an N1, A2, A3 or G2 "
                         "machine type.", hint="Pass --instance-type a2-highgpu-1g (or n1-standard-8+V100).")
    if gpu is not None and (gpu not in ATTACHED or not machine.startswith("n1-")):
        raise UsageError(f"Invalid --instance-type: {gpu} cannot be attached to {machine}; expected an N1 host with "
                         f"one of {', '.join(sorted(ATTACHED))}.", hint="Pass --instance-type n1-standard-8+V100.")
    rows = [o for o in load_catalog(cloud="gcp", region=region)
            if (o.instance_type == machine if gpu is None else (o.accelerator == gpu and not o.vm_included))]
    accelerator, gpus = (gpu, count) if gpu else ((rows[0].accelerator, int(rows[0].count)) if rows else ("", 0))
    for zone in zones or []:
        arguments.text("--zones", zone, pattern=rf"{region}-[a-z]", expected=f"a zone of {region} such as {region}-a",
                       hint=f"Pass --zones {region}-a,{region}-b.")
    zones = sorted(zones or {o.zone for o in rows if o.zone})
    if not zones:
        raise UsageError(f"No zone of {region} offers {instance_type} in the bundled catalog.",
                         hint=f"Pass --zones {region}-a (the zones to record).")
    with gc.sdk_errors(f"Could not read the Cloud Billing Catalog for {instance_type} in {region}",
                       hint="Check the credentials and that the Cloud Billing API is enabled "
                            "(docs/gcp.md#before-the-first-run)."):
        skus = backend.catalog.skus()
    od = price_from_skus(skus, machine, accelerator or "", gpus, region, spot=False)
    spot = price_from_skus(skus, machine, accelerator or "", gpus, region, spot=True)
    if od is None or spot is None:
        raise UsageError(f"The Cloud Billing Catalog has no {'spot' if spot is None else 'on-demand'} price for "
                         f"{instance_type} in {region}.", hint="Check that the machine is sold in that region.")
    return append_observation(Path(path), zones, spot, od, gap_s, observed_outages(state, region, machine),
                              now or datetime.now(UTC).replace(tzinfo=None))


def append_observation(path: Path, zones: list[str], spot: float, od: float, gap_s: int,
                       outages: list[tuple[str, float, str]], now: datetime) -> Report:
    """Append the ticks since the file's last one (one tick for a new file) with the observed prices."""
    tail = _read_tail(path)
    if tail is None:
        first, times, previous = 0, [now], dict[str, tuple[float, float]]()
    else:
        file_zones, last_tick, last_at, previous = tail
        if sorted(zones) != sorted(file_zones):
            raise UsageError(f"Invalid --zones: received {', '.join(zones)}, but {path} records "
                             f"{', '.join(file_zones)}; every zone of a trace covers the same ticks.",
                             hint=f"Pass --zones {','.join(file_zones)}, or record into a new file.")
        zones = file_zones
        first, times = last_tick + 1, []
        at = last_at + timedelta(seconds=gap_s)
        while at <= now:
            times.append(at)
            at += timedelta(seconds=gap_s)
    rows = []
    for i, at in enumerate(times):
        newest = i == len(times) - 1
        for zone in zones:
            old = previous.get(zone)
            start = at.replace(tzinfo=UTC).timestamp()
            gone = any(z == zone and start <= t < start + gap_s for z, t, _ in outages)
            rows.append({"tick": first + i, "timestamp": at.strftime(_STAMP), "zone": zone,
                         "available": 0 if gone else 1,
                         "spot_price_usd_per_h": round(spot if newest or old is None else old[0], 6),
                         "on_demand_usd_per_h": round(od if newest or old is None else old[1], 6)})
    with open(path, "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        if tail is None:
            writer.writeheader()
        writer.writerows(rows)
    return {"trace": str(path), "rows": len(rows), "zones": zones,
            "outages": sum(1 for r in rows if not r["available"]),
            "source": "the Cloud Billing Catalog (Compute Engine SKUs): today's prices on the newest tick"}


def _read_tail(path: Path) -> tuple[list[str], int, datetime, dict[str, tuple[float, float]]] | None:
    """(zones, last tick, its time, {zone: (spot, on-demand) at it}) of an existing trace; None for none."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise UsageError(f"Cannot append to {path}: its header is {reader.fieldnames}, expected {list(COLUMNS)}.",
                             hint="Record into a new file (--trace NEW.csv).")
        rows = list(reader)
    if not rows:
        return None
    last = int(rows[-1]["tick"])
    at_last = [r for r in rows if int(r["tick"]) == last]
    zones = list(dict.fromkeys(r["zone"] for r in rows))
    prices = {r["zone"]: (float(r["spot_price_usd_per_h"]), float(r["on_demand_usd_per_h"])) for r in at_last}
    return zones, last, datetime.strptime(rows[-1]["timestamp"], _STAMP), prices


def observed_outages(db: StateDB, region: str, machine: str) -> list[tuple[str, float, str]]:
    """(zone, epoch s, kind) of the preemptions and capacity errors of this machine's gcp attempts in `region`."""
    from spotfit.backends.gcp.machines import machine_for

    out: list[tuple[str, float, str]] = []
    for job in db.list_jobs(limit=1_000_000):
        spec = raw_spec_of(job)
        if spec.get("backend") != "gcp":
            continue
        section, res = spec.get("gcp") or {}, spec.get("resources") or {}
        for a in db.attempts(job["id"]):
            zone = a["zone"] or ""
            if a["state"] not in ("preempted", "no_capacity") or zone.rsplit("-", 1)[0] != region or not a["ended_at"]:
                continue
            try:
                used = machine_for(res.get("accelerator", "V100"), res.get("count", 1), zone,
                                   section.get("machine_type")).machine_type
            except UsageError:
                continue
            if used == machine:
                out.append((zone, float(a["ended_at"]), a["state"]))
    return out
