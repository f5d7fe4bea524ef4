"""Spot policies by name: `make_policy("spotfit")`; see `base` for the per-tick API and `registry` for the names.

The package's names load on first use (PEP 562): `spotfit.market.policies.registry` alone loads no NumPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotfit.core.lazy import lazy_names

if TYPE_CHECKING:
    from spotfit.market.policies.base import DEFAULT_POLICY as DEFAULT_POLICY
    from spotfit.market.policies.base import POLICIES as POLICIES
    from spotfit.market.policies.base import make_policy as make_policy

__all__ = ["DEFAULT_POLICY", "POLICIES", "make_policy"]
__getattr__ = lazy_names(__name__, "spotfit.market.policies.base")
