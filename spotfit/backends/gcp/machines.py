"""Machine type and GPUs of an attempt, from `resources` and the bundled GCP catalog (pure).

GCP sells GPUs two ways. A2 (A100), A3 (H100) and G2 (L4) machine types bundle theirs: the
machine type alone says what runs, and the catalog's cheapest one in the region with the job's
accelerator × count is taken. V100, T4, P100 and P4 are attached to an N1 host
(`guestAccelerators`): the host gets `N1_VCPUS_PER_GPU` vCPUs per GPU, rounded up to an N1
size. `gcp.machine_type` overrides the choice (N1 types still get the GPUs attached).

Example:

>>> machine_for("V100", 2, "us-central1-a")
Machine(machine_type='n1-standard-16', accelerator_type='nvidia-tesla-v100', accelerator_count=2)
>>> machine_for("A100", 1, "us-central1-a").machine_type
'a2-highgpu-1g'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spotfit.errors import UsageError

ATTACHED = {"V100": "nvidia-tesla-v100", "T4": "nvidia-tesla-t4", "P100": "nvidia-tesla-p100",
            "P4": "nvidia-tesla-p4"}
N1_VCPUS_PER_GPU = {"V100": 8, "T4": 4, "P100": 8, "P4": 4}
N1_SIZES = (1, 2, 4, 8, 16, 32, 64, 96)
CPU_MACHINE = "n2-standard-8"


@dataclass(frozen=True)
class Machine:
    """What `instances.insert` names: the machine type and, on N1, the attached GPUs."""

    machine_type: str
    accelerator_type: str | None = None  # e.g. nvidia-tesla-v100 (attached GPUs only)
    accelerator_count: int = 0


def region_of(zone: str) -> str:
    """`us-central1-a` -> `us-central1`."""
    return zone.rsplit("-", 1)[0]


def machine_for(accelerator: str, count: int, zone: str, machine_type: str | None = None) -> Machine:
    """The machine of `count` × `accelerator` in `zone`; `UsageError` when GCP offers none there."""
    name = accelerator.upper()
    if machine_type:
        check_machine_type(machine_type, name, count)
    if name == "CPU":
        return Machine(machine_type or CPU_MACHINE)
    if name in ATTACHED:
        _check_attached(name, count, zone)
        host = machine_type or n1_host(name, count)
        return Machine(host, ATTACHED[name], count)
    if machine_type:
        return Machine(machine_type)
    return Machine(_bundled(name, count, region_of(zone)))


def check_machine_type(machine_type: str, accelerator: str, count: int) -> None:
    """`UsageError` for a `gcp.machine_type` that is no Compute Engine machine type, or cannot carry the GPUs.

    >>> try:
    ...     check_machine_type("n1-standard-7", "V100", 1)
    ... except UsageError as err:
    ...     print(err.message[:60])
    Invalid `gcp.machine_type`: received 'n1-standard-7', expect
    """
    family = re.fullmatch(r"(n1)-(standard|highmem|highcpu)-(\d+)", machine_type)
    if accelerator in ATTACHED:
        if family is None or int(family.group(3)) not in N1_SIZES:
            raise UsageError(f"Invalid `gcp.machine_type`: received {machine_type!r}, expected an N1 size "
                             f"(n1-standard-1, 2, 4, 8, 16, 32, 64 or 96) to attach {count} × {accelerator} to.",
                             hint="Leave `gcp.machine_type` out to take the N1 host spotfit sizes for the GPUs.")
        return
    if accelerator == "CPU":
        if not re.fullmatch(r"[a-z][a-z0-9]{1,3}-(standard|highmem|highcpu|custom)-\d+", machine_type):
            raise UsageError(f"Invalid `gcp.machine_type`: received {machine_type!r}, expected a Compute Engine "
                             "machine type such as n2-standard-8.", hint="Leave `gcp.machine_type` out.")
        return
    from spotfit.market.catalog import load_catalog

    known = sorted({str(o.instance_type) for o in load_catalog(accelerator=accelerator, count=count, cloud="gcp")
                    if o.vm_included and o.instance_type})
    if machine_type not in known:
        raise UsageError(f"Invalid `gcp.machine_type`: received {machine_type!r}, expected a machine type with "
                         f"{count} × {accelerator}: {', '.join(known) or 'none in the bundled catalog'}.",
                         hint="Leave `gcp.machine_type` out to take the cheapest one in the zone's region.")


def n1_host(accelerator: str, count: int) -> str:
    """The N1 host of `count` attached `accelerator`s: `N1_VCPUS_PER_GPU` vCPUs each, rounded up to an N1 size."""
    return f"n1-standard-{_n1_size(N1_VCPUS_PER_GPU[accelerator] * count)}"


def _n1_size(vcpus: int) -> int:
    return next((n for n in N1_SIZES if n >= vcpus), N1_SIZES[-1])


def _bundled(accelerator: str, count: int, region: str) -> str:
    from spotfit.market.catalog import load_catalog

    offers = [o for o in load_catalog(accelerator=accelerator, count=count, cloud="gcp")
              if o.vm_included and o.instance_type]
    if not offers:
        known = sorted({*ATTACHED, *{o.accelerator for o in load_catalog(cloud="gcp") if o.vm_included}})
        raise UsageError(f"Invalid `resources` for the gcp backend: no GCP machine type has {count} × "
                         f"{accelerator!r}; expected one of {', '.join(known)} in a count GCP sells.",
                         hint="See `spotfit catalog --cloud gcp`, or set `gcp.machine_type`.")
    here = [o for o in offers if o.region == region]
    if not here:
        regions = sorted({o.region for o in offers})
        raise UsageError(f"Invalid zone for the gcp backend: {count} × {accelerator} is not offered in {region} "
                         f"(the zone's region); expected one of {', '.join(regions[:8])}"
                         f"{', ...' if len(regions) > 8 else ''}.",
                         hint="Set `market.zones` (or `gcp.zones`) to zones of a region that has it.")
    return str(here[0].instance_type)


def _check_attached(accelerator: str, count: int, zone: str) -> None:
    from spotfit.market.catalog import load_catalog

    rows = [o for o in load_catalog(accelerator=accelerator, cloud="gcp") if not o.vm_included]
    if not rows:  # the catalog does not list this GPU at all (P100): leave it to the API
        return
    zones = sorted({o.zone for o in rows if o.zone and o.count == count})
    if zone not in zones:
        raise UsageError(f"Invalid zone for the gcp backend: {count} × {accelerator} is not offered in {zone}; "
                         f"expected one of {', '.join(zones[:8])}{', ...' if len(zones) > 8 else ''}.",
                         hint="Set `market.zones` (or `gcp.zones`) to a zone that offers the GPU.")
