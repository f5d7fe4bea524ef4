"""Prometheus metrics of a state DB: what `spotfit controller --metrics-port` and `spotfit ui` serve on `/metrics`.

Every scrape reads the state DB (nothing is counted in memory), so every controller and
dashboard over one state serves the same figures, and a restart loses none:

| metric | type | labels | what |
|---|---|---|---|
| `spotfit_jobs` | gauge | `state` | jobs in each state |
| `spotfit_attempts_total` | counter | `outcome`, `market`, `backend` | attempts that ended, by how |
| `spotfit_attempts_live` | gauge | `market`, `backend` | attempts launching or running |
| `spotfit_spend_usd_total` | counter | `backend`, `project`, `owner` | USD billed (the job's labels; `""` without) |
| `spotfit_preemptions_total` | counter | `backend`, `zone` | attempts the market reclaimed |
| `spotfit_rule_firings_total` | counter | `rule`, `action` | rule verdicts (`rule`, `budget_limit`, `team_budget`) |
| `spotfit_steps_per_second` | gauge | `job`, `name` | running jobs: steps since the attempt launched ÷ seconds since |

`prometheus_client` (the `metrics` extra, also in `ui`) is imported on first use, with an
install hint. Example:

>>> import os, tempfile
>>> from spotfit.state.db import StateDB
>>> path = os.path.join(tempfile.mkdtemp(), "state.db")
>>> StateDB(path).create_job("j-1", "j", spec_json='{"labels": {"project": "nlp"}}', store_url="memory://j")
>>> text = exposition(lambda: StateDB(path)).decode()
>>> [line for line in text.splitlines() if line.startswith('spotfit_jobs{state="p')]  # every state is listed
['spotfit_jobs{state="pending"} 1.0', 'spotfit_jobs{state="paused"} 0.0']
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from spotfit.errors import UsageError
from spotfit.state.db import StateDB
from spotfit.state.records import raw_spec_of
from spotfit.state.states import AttemptState, JobState

RULE_EVENTS = ("rule", "budget_limit", "team_budget")
_LIVE = (str(AttemptState.LAUNCHING), str(AttemptState.RUNNING))


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise UsageError("Serving metrics needs prometheus_client, which is not installed.",
                         hint="pip install 'spotfit[metrics]' (the `ui` extra has it too).") from None
    return prometheus_client


class StateCollector:
    """A Prometheus collector over the state DB `open_db()` gives (None: no state yet); closed after each scrape."""

    def __init__(self, open_db: Callable[[], StateDB | None]):
        self.open_db = open_db

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        db = self.open_db()
        try:
            jobs = db.jobs_since(0.0) if db is not None else []
            firings = db.events_of_kinds(RULE_EVENTS) if db is not None else []
        finally:
            if db is not None:
                db.close()
        states: Counter[str] = Counter({str(s): 0 for s in JobState})
        ended: Counter[tuple[str, str, str]] = Counter()
        live: Counter[tuple[str, str]] = Counter()
        spend: dict[tuple[str, ...], float] = defaultdict(float)
        preempted: Counter[tuple[str, str]] = Counter()
        rates = []
        now = time.time()
        for job, attempts in jobs:
            states[job["state"]] += 1
            spec = raw_spec_of(job)
            backend, labels = spec.get("backend", "local"), spec.get("labels") or {}
            for a in attempts:
                if a["state"] in _LIVE:
                    live[(a["market"], a["backend"])] += 1
                else:
                    ended[(a["state"], a["market"], a["backend"])] += 1
                if a["state"] == AttemptState.PREEMPTED:
                    preempted[(a["backend"], a["zone"] or "")] += 1
                spend[(backend, labels.get("project", ""), labels.get("owner", ""))] += a["cost_usd"] or 0.0
            running = [a for a in attempts if a["state"] == AttemptState.RUNNING]
            if job["state"] == JobState.RUNNING and running and now > running[-1]["started_at"]:
                done = max(0, (job["step"] or 0) - (running[-1]["start_step"] or 0))
                rates.append(((job["id"], job["name"]), done / (now - running[-1]["started_at"])))
        yield _family(GaugeMetricFamily, "spotfit_jobs", "Jobs in each state.", ["state"],
                      [((k,), v) for k, v in states.items()])
        yield _family(CounterMetricFamily, "spotfit_attempts", "Attempts that ended, by outcome.",
                      ["outcome", "market", "backend"], ended.items())
        yield _family(GaugeMetricFamily, "spotfit_attempts_live", "Attempts launching or running.",
                      ["market", "backend"], live.items())
        yield _family(CounterMetricFamily, "spotfit_spend_usd", "USD billed, by the jobs' backend and labels.",
                      ["backend", "project", "owner"], spend.items())
        yield _family(CounterMetricFamily, "spotfit_preemptions", "Attempts the spot market reclaimed.",
                      ["backend", "zone"], preempted.items())
        fired = Counter((e["data"].get("rule", e["kind"]), e["data"].get("action") or "") for e in firings)
        yield _family(CounterMetricFamily, "spotfit_rule_firings", "Rule verdicts (rules, budgets, team budgets).",
                      ["rule", "action"], fired.items())
        yield _family(GaugeMetricFamily, "spotfit_steps_per_second",
                      "Each running job's steps since its attempt launched per second since then.",
                      ["job", "name"], rates)


def _family(kind: Any, name: str, doc: str, labels: list[str], values: Any) -> Any:
    family = kind(name, doc, labels=labels)
    for key, value in values:
        family.add_metric([str(k) for k in key], float(value))
    return family


def registry(open_db: Callable[[], StateDB | None]) -> Any:
    """A registry holding only the state's metrics (not the process's own)."""
    prometheus_client = _prometheus()
    reg = prometheus_client.CollectorRegistry(auto_describe=False)
    reg.register(StateCollector(open_db))
    return reg


def exposition(open_db: Callable[[], StateDB | None]) -> bytes:
    """The metrics in Prometheus's text format (what `/metrics` answers)."""
    return bytes(_prometheus().generate_latest(registry(open_db)))


def serve(target: str, host: str, port: int) -> Any:
    """Serve `/metrics` of the state at `target` on `host:port` in a thread; returns the server (`.server_port`)."""
    server, _ = _prometheus().start_http_server(port, addr=host, registry=registry(lambda: StateDB(target)))
    return server
