"""The policies by name, each as `module:Class`, imported on first use (`base.make_policy`): what names a
policy (the spec's `market.policy`, `cost`'s document) reads this alone and loads no NumPy.

>>> ALIASES["default"] == DEFAULT_POLICY and DEFAULT_POLICY in POLICIES
True
"""

from __future__ import annotations

POLICIES: dict[str, str] = {
    "on_demand": "spotfit.market.policies.on_demand:OnDemand",
    "greedy": "spotfit.market.policies.greedy:Greedy",
    "greedy_first": "spotfit.market.policies.greedy:GreedyFirst",
    "uniform_progress": "spotfit.market.policies.uniform_progress:UniformProgress",
    "uniform_progress_first": "spotfit.market.policies.uniform_progress:UniformProgressFirst",
    "spotfit": "spotfit.market.policies.spotfit:Spotfit",
    "rollout": "spotfit.market.policies.rollout:Rollout",
    "mdp": "spotfit.market.policies.mdp:Mdp",
    "optimum": "spotfit.market.policies.optimum:Optimum",
}

DEFAULT_POLICY = "mdp"
ALIASES = {"default": DEFAULT_POLICY}
