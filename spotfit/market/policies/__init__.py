"""Spot policies by name: `make_policy("spotfit")`; see `base` for the per-tick API."""

from spotfit.market.policies.base import DEFAULT_POLICY, POLICIES, make_policy

__all__ = ["DEFAULT_POLICY", "POLICIES", "make_policy"]
