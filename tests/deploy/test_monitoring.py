"""deploy/monitoring/: the ServiceMonitor reaches the controllers' metrics port, and every Grafana
panel's query names a metric that spotfit serves (read from a seeded state DB's exposition)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from spotfit.controller import metrics
from spotfit.state.db import StateDB
from tests.support.statedb import seed_jobs

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _served(path: Path) -> set[str]:
    seed_jobs(path, 2, running_every=2)
    db = StateDB(path)
    db.add_event("seeded-00000", "rule", "budget: ... -> stop", rule="budget", index=0, action="stop")
    db.close()  # a counter with labels has samples once one of its label sets has a value
    text = metrics.exposition(lambda: StateDB(path)).decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_every_panel_queries_a_served_metric(tmp_path):
    served = _served(tmp_path / "state.db")
    assert {"spotfit_jobs", "spotfit_spend_usd_total", "spotfit_attempts_total", "spotfit_preemptions_total",
            "spotfit_steps_per_second", "spotfit_attempts_live"} <= served
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        exprs = [t["expr"] for t in panel["targets"]]
        assert exprs, panel["title"]
        for expr in exprs:
            named = set(re.findall(r"\bspotfit_[a-z_]+", expr))
            assert named and named <= served, (panel["title"], named - served)


def test_the_service_monitor_scrapes_the_controllers_metrics_port():
    (monitor,) = yaml.safe_load_all((DEPLOY / "monitoring" / "servicemonitor.yaml").read_text())
    objects = list(yaml.safe_load_all((DEPLOY / "controller-postgres.yaml").read_text()))
    (service,) = [o for o in objects if o["kind"] == "Service"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert monitor["kind"] == "ServiceMonitor" and monitor["spec"]["namespaceSelector"]["matchNames"] == ["spotfit"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = service["spec"]["ports"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (container_port,) = container["ports"]
    assert port["targetPort"] == container_port["name"]
    args = container["args"]
    assert args[args.index("--metrics-port") + 1] == str(container_port["containerPort"])
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
