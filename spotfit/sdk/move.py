"""Moving a job: `spotfit resume JOB --accelerator A100 --count 4` (or `--spec NEW.yaml`) goes on elsewhere.

The job keeps its id, its name, its store (checkpoints, events, logs, TensorBoard runs) and its step;
its next attempt runs on what the move names: another accelerator, count per machine, number of
machines, zone or backend, or everything a new spec says. The checkpoint holds every variable as one
array whatever the number of replicas that wrote it, so it restores under another replica count;
the global batch is the script's own (`strategy.py`), so the steps, the data order and the
checkpoint's data position mean the same after the move (docs/job-spec.md#moving-a-job).

A move rewrites the job's spec (the state DB's and the store's copy) before a controller starts,
and records a `moved` event with what changed; each attempt's ledger row names what it ran on
(`info.runs_on`). It is refused, with nothing written, for a job with a live attempt (that attempt
would be adopted on its old machine), for a new spec that names another job or checkpoint store,
and for a change of backend of a job with `secrets:` (they were stored for the old backend).

Example:

>>> spec = {"resources": {"accelerator": "V100", "count": 1, "workers": 1}, "backend": "local"}
>>> Move(accelerator="A100", count=4).apply_to(spec)["resources"]
{'accelerator': 'A100', 'count': 4, 'workers': 1}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spotfit.errors import UsageError
from spotfit.state.db import StateDB
from spotfit.state.records import JobRecord, raw_spec_of
from spotfit.state.states import AttemptState


@dataclass(frozen=True)
class Move:
    """What `spotfit resume` changes before the job goes on; every field None keeps the job as it is."""

    accelerator: str | None = None
    count: int | None = None
    workers: int | None = None
    zone: str | None = None
    backend: str | None = None
    spec_path: str | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in (self.accelerator, self.count, self.workers, self.zone, self.backend,
                                       self.spec_path))

    def apply_to(self, doc: dict[str, Any]) -> dict[str, Any]:
        """`doc` (a spec's JSON form, without `base_dir`) with the flags' changes; `doc` is not changed."""
        out: dict[str, Any] = json.loads(json.dumps(doc))
        resources = out.setdefault("resources", {})
        for key, value in (("accelerator", self.accelerator), ("count", self.count), ("workers", self.workers)):
            if value is not None:
                resources[key] = value
        if self.zone is not None:
            out.setdefault("market", {})["zones"] = [self.zone]
        if self.backend is not None:
            out["backend"] = self.backend
        return out


def move(state_db: StateDB, job: JobRecord, change: Move) -> dict[str, str]:
    """Rewrite `job`'s spec as `change` says, before its next attempt; returns {"from": ..., "to": ...}.

    Raises `UsageError` (nothing written) for a move that cannot be made; see the module docstring.
    """
    from spotfit.controller import classify
    from spotfit.sdk.submit import check_data_volume
    from spotfit.spec.job import JobSpec, load_spec, parse_spec

    live = [a["number"] for a in state_db.attempts(job["id"]) if AttemptState(a["state"]).is_live()]
    if live:
        raise UsageError(
            f"Job {job['id']} cannot move: its attempt {live[-1]} may still be running, and a resumed controller "
            "adopts it on its old machine.",
            hint=f"Run `spotfit resume {job['id']}`, stop it with Ctrl-C once it trains (it saves a checkpoint), "
                 f"then `spotfit resume {job['id']}` with the new resources.",
        )
    old = raw_spec_of(job)
    was = JobSpec.model_validate(old)
    base_dir = old.pop("base_dir", ".")
    if change.spec_path is not None:
        new_spec = load_spec(change.spec_path)
        base_dir, doc = new_spec.base_dir, new_spec.model_dump(mode="json")
        _same(job, "name", old.get("name"), doc.get("name"), change.spec_path)
        _same(job, "checkpoint.store", (old.get("checkpoint") or {}).get("store"),
              (doc.get("checkpoint") or {}).get("store"), change.spec_path)
        _same(job, "secrets", old.get("secrets") or [], doc.get("secrets") or [], change.spec_path)
    else:
        doc = old
    doc = change.apply_to(doc)
    spec = parse_spec(doc, source="the job's spec with the `spotfit resume` flags", base_dir=base_dir)
    if spec.backend != was.backend and spec.secrets:
        raise UsageError(
            f"Job {job['id']} cannot move from backend {was.backend!r} to {spec.backend!r}: its "
            f"secrets ({', '.join(spec.secrets)}) were stored for the old backend when it was submitted.",
            hint="Move it within its backend, or start a new job on the other one with `spotfit run JOB.yaml`.",
        )
    check_data_volume(spec, spec.backend)
    classify.preflight(spec)
    _check_market(spec)
    if change.spec_path is not None:
        from spotfit.controller import job_secrets
        from spotfit.host.home import state_is_shared

        job_secrets.keep_webhook(job["id"], spec.notify, shared=state_is_shared())
    moved = {"from": was.runs_on(), "to": spec.runs_on()}
    _write_spec(job, spec)
    state_db.replace_spec(job["id"], json.dumps({**spec.model_dump(mode="json"), "base_dir": spec.base_dir}),
                          f"moved to {moved['to']}")
    state_db.add_event(job["id"], "moved", f"moved from {moved['from']} to {moved['to']}; it goes on from its "
                       f"last checkpoint (step {job['step']})", step=job["step"], **moved)
    return moved


def _same(job: JobRecord, field: str, old: Any, new: Any, path: str) -> None:
    if old != new:
        raise UsageError(
            f"Invalid --spec {path}: its `{field}` is {new!r}, job {job['id']}'s is {old!r}; a moved job keeps its "
            "name, its checkpoint store and its secrets.",
            hint=f"Set `{field}: {json.dumps(old)}` in {path}, or start a new job with `spotfit run {path}`.",
        )


def _check_market(spec: Any) -> None:
    """The replayed market the controller will build takes the spec's zones and start (raises `UsageError`)."""
    if not spec.market.trace:
        return
    from spotfit.market.replay import MarketReplay
    from spotfit.market.trace import load_trace, resolve_trace

    trace = load_trace(resolve_trace(spec.market.trace), gap_s=spec.market.gap_s)
    MarketReplay(trace, spec.market.zones, spec.market.time_scale, spec.market.start)


def _write_spec(job: JobRecord, spec: Any) -> None:
    """The store's copy of the spec (`layout.SPEC`), as `submit` wrote it, now the moved one."""
    from spotfit.attempt import layout
    from spotfit.stores import open_store

    open_store(job["store_url"]).write_bytes(layout.SPEC, spec.model_dump_json(indent=2).encode())
