"""Where a gcp job without zones launches: the plan's region, in the zones Compute Engine lists for it.

`spotfit run` (preflight) calls `place` for a job with no `market.zones`, no `gcp.zones` and no
replayed trace. The region is `gcp.region` when set, else the one of the cheapest GCP offer of
`spotfit plan` for the job's resources (`spotfit.market.offers.plan`, with the arguments
`spotfit plan` gives it for such a spec), else `us-central1` when the plan has no GCP offer (N1 +
V100/T4, or GCP ranked below its shown rows). The bundled catalog prices A2/A3/G2 per region, so
the zones come from the API: `zones.list` (those of the region that are `UP`), then, per zone,
`machineTypes.get` of the machine type and, for GPUs attached to an N1 host,
`acceleratorTypes.get` of the GPU; a 404 leaves the zone out. No zone left is one `UsageError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotfit.backends.gcp import client as gc
from spotfit.backends.gcp.machines import ATTACHED, Machine, check_machine_type, machine_for, n1_host
from spotfit.backends.gcp.spec import Gcp
from spotfit.errors import UsageError

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from spotfit.spec.job import JobSpec

DEFAULT_REGION = "us-central1"


@dataclass(frozen=True)
class Placement:
    """The region and zones chosen, the machine asked for, and why (the `backend_note` event)."""

    region: str
    zones: list[str]
    machine: Machine
    why: str

    def note(self) -> str:
        gpu = f" + {self.machine.accelerator_count} × {self.machine.accelerator_type}" \
            if self.machine.accelerator_type else ""
        return (f"no `market.zones`: launching in {self.region} ({self.why}), in the zones Compute Engine lists "
                f"with {self.machine.machine_type}{gpu}, in this order: {', '.join(self.zones)}")


def plan_region(spec: JobSpec) -> tuple[str, str]:
    """(region, why): `gcp.region`, else the plan's cheapest GCP offer, else `us-central1`."""
    from spotfit.market import offers

    section = Gcp.of(spec)
    if section.region:
        return section.region, "`gcp.region`"
    res, market = spec.resources, spec.market
    plan = offers.plan(accelerator=res.accelerator, count=res.count, work_h=spec.work_h,
                       deadline_h=spec.deadline_h, spot=res.spot, trace=None, start=market.start,
                       overhead_h=market.overhead_h, max_overpay=market.max_overpay, policy=market.policy)
    offer = next((o for o in plan.offers if o.cloud == "gcp"), None)
    if offer is None:
        return DEFAULT_REGION, f"`spotfit plan` ranks no GCP offer of {res.count} × {res.accelerator}: the default"
    spot = f"spot ${offer.spot_usd_per_h:.2f}/h, " if res.spot and offer.spot_usd_per_h is not None else ""
    return offer.region, (f"`spotfit plan`'s cheapest GCP offer, rank {offer.rank}: {offer.instance_type} in "
                          f"{offer.region}, {spot}on-demand ${offer.on_demand_usd_per_h:.2f}/h, expected "
                          f"${offer.expected_cost_usd:.2f}")


def place(spec: JobSpec, project: str, endpoint: str | None = None,
          credentials: Credentials | None = None) -> Placement:
    """The placement of a job without zones; `UsageError` when no zone of the region offers its machine."""
    section = Gcp.of(spec)
    region, why = plan_region(spec)
    accelerator, count = spec.resources.accelerator.upper(), spec.resources.count
    if accelerator in ATTACHED:  # the API, not the bundled catalog, says which zones have the GPU
        if section.machine_type:
            check_machine_type(section.machine_type, accelerator, count)
        machine = Machine(section.machine_type or n1_host(accelerator, count), ATTACHED[accelerator], count)
    else:
        machine = machine_for(accelerator, count, f"{region}-a", section.machine_type)
    with gc.sdk_errors(f"The gcp backend could not list the zones of {region}",
                       hint="Check the credentials and that the Compute Engine API is enabled; or set "
                            "`market.zones`."):
        listed = gc.region_zones(project, region, endpoint, credentials)
        zones = [z for z in listed if gc.zone_offers(project, z, machine.machine_type, machine.accelerator_type,
                                                     endpoint, credentials)]
    if not zones:
        gpu = f" with {count} × {machine.accelerator_type}" if machine.accelerator_type else ""
        raise UsageError(f"Invalid region for the gcp backend: no zone of {region} offers {machine.machine_type}{gpu} "
                         f"(Compute Engine lists {', '.join(listed) or 'no zone that is UP'} there); {region} is "
                         f"{why}.", hint="Set `market.zones` to zones that offer it (`gcloud compute machine-types "
                                         f"list --filter=name={machine.machine_type}`), or `gcp.region`.")
    return Placement(region, zones, machine, why)
