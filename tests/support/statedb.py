"""A state DB filled with jobs as a controller leaves them, without running any (for the dashboard).

Each seeded job has the spec of a replayed job on the bundled trace and three attempts as the
replay records them: spot (preempted at a tick start), on-demand, spot (completed, or still
running for every `running_every`-th job).
"""

from __future__ import annotations

import json
from pathlib import Path

from spotfit.spec.job import JobSpec
from spotfit.state.db import StateDB
from spotfit.state.states import JobState

ZONE = "us-east-1f"
START = "2023-03-19T17:43:31"
ORIGIN_S = 1679247811.0  # START as epoch seconds
GAP_S = 195.0
SPEC = JobSpec.model_validate({"name": "seeded", "script": "train.py", "work_h": 2.0, "deadline_h": 3.0,
                               "market": {"trace": "aws-v100", "zones": [ZONE], "start": START, "time_scale": 2000.0}})


def seed_jobs(path: Path | str, count: int, running_every: int = 10, labels: list[dict] | None = None) -> list[str]:
    """`count` jobs in the state DB at `path` (a file or a URL; newest last); returns their ids.

    `labels`: the spec labels of job i are `labels[i % len(labels)]`.
    """
    db = StateDB(path)
    ids = []
    for i in range(count):
        spec = SPEC.model_copy(update={"labels": labels[i % len(labels)]}) if labels else SPEC
        spec_json = json.dumps(spec.model_dump(mode="json"))
        job_id = f"seeded-{i:05d}"
        running = running_every and i % running_every == running_every - 1
        db.create_job(job_id, f"seeded-{i % 7}", spec_json, f"memory://seeded/{job_id}")
        spans = [("spot", ZONE, "preempted", 0, 1, ORIGIN_S, ORIGIN_S + GAP_S, 0.0748),
                 ("on_demand", None, "stopped", 1, 48, ORIGIN_S + GAP_S, ORIGIN_S + 15 * GAP_S, 2.3205),
                 ("spot", ZONE, "running" if running else "completed", 48, None if running else 94,
                  ORIGIN_S + 15 * GAP_S, None if running else ORIGIN_S + 45 * GAP_S, None if running else 2.2669)]
        for market, zone, state, start_step, end_step, start_s, end_s, cost in spans:
            number = db.add_attempt(job_id, backend="local", zone=zone, market=market, state=state,
                                    trace_start_s=start_s, start_step=start_step)
            if end_s is not None:
                db.update_attempt(job_id, number, trace_end_s=end_s, end_step=end_step, billed_s=end_s - start_s,
                                  cost_usd=cost, info={"overhead_s": 720.0, "on_demand_usd_per_h": 3.06})
        db.move_job(job_id, JobState.RUNNING if running else JobState.COMPLETED, "seeded")
        db.update_job(job_id, step=60 if running else 94, total_steps=94, loss=0.3, trace_origin_s=ORIGIN_S,
                      trace_now_s=ORIGIN_S + (20 if running else 45) * GAP_S)
        ids.append(job_id)
    db.close()
    return ids
