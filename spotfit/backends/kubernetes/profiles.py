"""Where an attempt's pods may run: the node pool profile (`kubernetes.spot`) per cloud.

A profile turns the policy's choice (spot or on-demand) into a node selector, tolerations and,
where a cloud labels only its spot nodes, a node affinity that keeps on-demand pods off them:

| profile | spot | on-demand |
|---|---|---|
| eks | `eks.amazonaws.com/capacityType: SPOT` | `eks.amazonaws.com/capacityType: ON_DEMAND` |
| gke | `cloud.google.com/gke-spot: "true"` + its toleration | affinity: `cloud.google.com/gke-spot` absent |
| aks | `kubernetes.azure.com/scalesetpriority: spot` + its toleration | affinity: that label not `spot` |
| custom | `kubernetes.spot_selector` + `spot_tolerations` | `kubernetes.on_demand_selector` |

Without a profile (`spot:` left out) pods go wherever the scheduler puts them.

>>> p = placement("gke", "spot")
>>> p.node_selector, p.tolerations[0]["key"]
({'cloud.google.com/gke-spot': 'true'}, 'cloud.google.com/gke-spot')
>>> placement("eks", "on_demand").node_selector
{'eks.amazonaws.com/capacityType': 'ON_DEMAND'}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spotfit.errors import UsageError
from spotfit.state.states import Market

if TYPE_CHECKING:
    from spotfit.backends.kubernetes.spec import Kubernetes

PROFILES = ("eks", "gke", "aks", "custom")
GKE_SPOT = "cloud.google.com/gke-spot"
AKS_PRIORITY = "kubernetes.azure.com/scalesetpriority"
EKS_CAPACITY = "eks.amazonaws.com/capacityType"


@dataclass(frozen=True)
class Placement:
    """The scheduling fields of a pod: `nodeSelector`, `tolerations`, `affinity`."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    affinity: dict[str, Any] | None = None

    def pod_fields(self) -> dict[str, Any]:
        """The fields to merge into a pod spec (none when empty)."""
        out: dict[str, Any] = {}
        if self.node_selector:
            out["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        if self.affinity:
            out["affinity"] = self.affinity
        return out


def _avoid(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expression["values"] = values
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}


def placement(profile: str | None, market: Market, section: Kubernetes | None = None) -> Placement:
    """The placement of a `market` (spot or on-demand) attempt under `profile` (`custom`: the section's selectors)."""
    spot = market == Market.SPOT
    if profile is None:
        return Placement()
    if profile == "eks":
        return Placement({EKS_CAPACITY: "SPOT" if spot else "ON_DEMAND"})
    if profile == "gke":
        if spot:
            return Placement({GKE_SPOT: "true"},
                             [{"key": GKE_SPOT, "operator": "Equal", "value": "true", "effect": "NoSchedule"}])
        return Placement(affinity=_avoid(GKE_SPOT, "DoesNotExist"))
    if profile == "aks":
        if spot:
            return Placement({AKS_PRIORITY: "spot"},
                             [{"key": AKS_PRIORITY, "operator": "Equal", "value": "spot", "effect": "NoSchedule"}])
        return Placement(affinity=_avoid(AKS_PRIORITY, "NotIn", ["spot"]))
    if profile == "custom":
        if spot:
            return Placement(dict(section.spot_selector if section else {}),
                             list(section.spot_tolerations if section else []))
        return Placement(dict(section.on_demand_selector if section else {}))
    raise UsageError(f"Invalid `kubernetes.spot`: received {profile!r}, expected one of {', '.join(PROFILES)}.",
                     hint="Set `kubernetes.spot:` to the profile of your cluster's node pools (docs/kubernetes.md).")
