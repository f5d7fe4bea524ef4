"""The next attempt's configuration: what the runtime is told to run, and how (`RuntimeConfig`).

Built from the job spec and the planner's answers (the zone's MTBF, the injected preemptions
still to come, the price of the attempt's market); the controller writes it to the job's store
before it launches the attempt.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotfit.attempt.config import RuntimeConfig
from spotfit.script import keras2

if TYPE_CHECKING:
    from spotfit.controller.attempts import AttemptPlanner


def runtime_config(plan: AttemptPlanner, job_url: str, attempt: int, zone: str | None = None) -> RuntimeConfig:
    """The `RuntimeConfig` of attempt `attempt` of the planner's job, to run in `zone` (None: on demand)."""
    spec = plan.spec
    interval = spec.checkpoint.interval
    return RuntimeConfig(
        job_id=plan.job_id,
        job_url=job_url,
        script="" if spec.is_notebook else str(spec.script_path),
        # A notebook's spec folder: where a cloud backend unpacks the code shipped beside it.
        workdir=str(Path(spec.base_dir).resolve()) if spec.is_notebook else str(spec.script_path.parent),
        kind=spec.kind,
        notebook_sync_s=spec.notebook.sync_s,
        args=list(spec.args),
        attempt=attempt,
        seed=spec.training.seed,
        deterministic=spec.training.deterministic,
        keep=spec.checkpoint.keep,
        interval_steps=getattr(interval, "steps", None),
        interval_s=getattr(interval, "seconds", None),
        mtbf_s=plan.mtbf_wall_s(zone),
        hold_at_steps=sorted(p.at_step for p in plan.pending_injections()),
        hold_on_nan=_nan_rule_armed(plan),
        heartbeat_s=0.5,
        # Decided again from the script, as at submission (script/keras2.py): the same file gives the same answer.
        keras="3" if spec.is_notebook else keras2.choose(spec.training.keras, spec.script_path).version,
        strategy=spec.training.strategy,
        mixed_precision=spec.training.mixed_precision,
        xla=spec.training.xla,
        auto_apply=spec.training.auto_apply,
        workers=spec.resources.workers,
        tensorboard=spec.training.tensorboard,
        histogram_freq=spec.training.histogram_freq,
        tensorboard_update_freq=spec.training.tensorboard_update_freq,
        export=_export_options(plan, attempt, zone),
        data_source=spec.data.source if spec.data else None,
        data_cache_dir=spec.data.cache_dir if spec.data else None,
        data_cache_limit_gib=spec.data.cache_limit_gib if spec.data else None,
        data_workers=spec.data.workers if spec.data else 16,
        data_verify=spec.data.verify if spec.data else "etag",
        data_mode=spec.data.mode if spec.data else "copy",
    )


def _nan_rule_armed(plan: AttemptPlanner) -> bool:
    """A `nan_loss` rule will pause or stop the job (it has not fired yet): the runtime waits for it."""
    fired = {e["data"].get("index") for e in plan.db.events(plan.job_id) if e["kind"] == "rule"}
    return any(r.rule == "nan_loss" and r.action in ("pause", "stop") and i not in fired
               for i, r in enumerate(plan.spec.rules))


def _export_options(plan: AttemptPlanner, attempt: int, zone: str | None) -> dict[str, Any] | None:
    """What the runtime needs to export and to fill the model card (runtime/export.py)."""
    if plan.spec.export is None:
        return None
    from spotfit.host.home import default_registry_url

    before = sum(a["cost_usd"] or 0.0 for a in plan.db.attempts(plan.job_id) if a["number"] < attempt)
    price = plan.spot_price(zone) if zone is not None else plan.on_demand_usd_per_h()
    return {"registry": plan.spec.export.registry or default_registry_url(),
            "formats": list(plan.spec.export.formats), "name": plan.spec.name,
            "spec_hash": plan.spec.spec_hash(), "cost_usd_before": round(before, 6),
            "price_usd_per_h": price, "time_scale": plan.time_scale(),
            # The runtime keeps the weights of the epoch ends that meet a stopping target, so
            # that a target_metric stop exports the epoch it fired on (runtime/main.py).
            "targets": [{"metric": r.metric, "mode": r.mode, "value": r.value} for r in plan.spec.rules
                        if r.rule == "target_metric" and r.action == "stop"]}
