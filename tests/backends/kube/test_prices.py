"""Kubernetes has prices: an attempt is billed at its node's price, so `budget` and `price_cap` work there.

The node's labels (instance type, region, capacity type) are priced from the bundled catalog,
else from the spec's `kubernetes.price_usd_per_h`. End to end on the Kubernetes emulator
(tests/support/kube.py, which puts each pod on a labelled node): the real controller loop and
backend, the real runtime in the pod, hollow (the spec's `env` sets SPOTFIT_HOLLOW=1 in the pod;
`SCENARIO` beside the script: no TensorFlow). The jobs train until a rule stops them, so the test
waits on the rule, never on a time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.backends.kubernetes import nodes as kn
from spotfit.hollow import SCENARIO_FILE
from tests.support.jobs import write_spec
from tests.support.kube import FakeCluster
from tests.support.kube_controller import drive
from tests.support.wait import wait_for

SCRIPT = '''
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=100000, verbose=0)  # trains until a rule ends it
'''
# What the hollow attempt trains instead of SCRIPT: until a rule ends it. The pace only spares the
# CPU; no outcome depends on it (the rules fire on prices and spend, not on steps).
SCENARIO = {"epochs": 1, "steps_per_epoch": 10_000_000, "step_s": 0.01, "metrics": {}}
SPEC = """
name: {name}
script: train.py
backend: kubernetes
env: {{SPOTFIT_HOLLOW: "1"}}
resources: {{accelerator: CPU, spot: true}}
market: {{trace: null}}
rules: [{rule}]
kubernetes: {{kubeconfig: "{kubeconfig}", spot: eks{extra}}}
"""
DEADLINE_S = 300.0
SPOT_P3 = {kn.INSTANCE_TYPE: "p3.2xlarge", kn.REGION: "us-east-1", kn.ZONE: "us-east-1a", kn.EKS: "SPOT"}


def write_job(folder: Path, text: str, script: Path) -> Path:
    """The spec in `folder`, the script and its hollow scenario beside it."""
    spec = write_spec(folder, text, script=script)
    (folder / SCENARIO_FILE).write_text(json.dumps(SCENARIO))
    return spec


def test_a_nodes_labels_give_its_market_and_price():
    spot = kn.price_node("a", {**SPOT_P3, kn.EKS: "SPOT"}, "on_demand", None)
    assert (spot.market, spot.source, round(spot.usd_per_h, 4)) == ("spot", "catalog", 0.3967)  # us-east-1's mean
    on_demand = kn.price_node("b", {kn.INSTANCE_TYPE: "p3.2xlarge", kn.REGION: "us-east-1",
                                    kn.KARPENTER: "on-demand"}, "spot", None)
    assert (on_demand.market, on_demand.usd_per_h) == ("on_demand", 3.06)
    assert kn.price_node("c", {kn.INSTANCE_TYPE: "p3.2xlarge"}, "spot", None).market == "spot"  # no label: as launched
    own = kn.price_node("d", {kn.INSTANCE_TYPE: "my-gpu-box", kn.EKS: "SPOT"}, "spot", 2.5)
    assert (own.usd_per_h, own.source) == (2.5, "kubernetes.price_usd_per_h")
    unknown = kn.price_node("e", {}, "spot", None)
    assert unknown.usd_per_h is None and "price_usd_per_h" in unknown.describe()


def _run(tmp_path, name: str, nodes: dict, rule: str, extra: str = "", until_paused: bool = False) -> dict:
    """Run the job on the emulator until its controller ends (`until_paused`: until it pauses, then until
    its controller ends, or, when it waits alive for a price to fall back, cancel it)."""
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(SCRIPT)
    folder = tmp_path / f"cluster-{name}"
    folder.mkdir()
    with FakeCluster(folder, nodes=nodes) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / f"{name}.kubeconfig")
        spec = write_job(tmp_path / name, SPEC.format(name=name, rule=rule, kubeconfig=kubeconfig, extra=extra),
                         script=src)
        job_id = sdk.submit(str(spec))
        paused: dict = {}
        run = drive(job_id)
        if until_paused:
            wait_for(lambda: sdk.status(job_id)["state"] == "paused", DEADLINE_S, "the job to pause")
            paused = sdk.status(job_id)
            run["thread"].join(DEADLINE_S)
            if run["thread"].is_alive():
                sdk.cancel(job_id)
        run["thread"].join(DEADLINE_S)
        assert run["outcome"].get("state") is not None, f"the controller did not end: {sdk.status(job_id)}"
    status = paused if until_paused else sdk.status(job_id)
    return {"status": status, "events": sdk.events(job_id), "state": status["state"],
            "controller_ended": run["outcome"]["state"]}


@pytest.mark.slow
def test_price_cap_pauses_a_job_on_a_spot_node_priced_from_the_catalog(tmp_path):
    done = _run(tmp_path, "kube-cap", {"spot-1": SPOT_P3}, "{rule: price_cap, usd_per_h: 0.1, action: pause}",
                until_paused=True)
    [priced] = [e for e in done["events"] if e["kind"] == "node_price"]
    assert priced["data"]["nodes"] == ["spot-1"] and priced["data"]["source"] == ["catalog"]
    assert "p3.2xlarge, spot" in priced["message"]
    assert done["state"] == "paused", done["status"]
    fired = [e for e in done["events"] if e["kind"] == "rule"]
    assert fired and fired[0]["data"]["rule"] == "price_cap" and "above the cap $0.1/h" in fired[0]["message"]
    [attempt] = done["status"]["attempts"]
    assert attempt["cost_usd"] > 0
    assert attempt["cost_usd"] == pytest.approx(attempt["billed_s"] * 0.3967 / 3600, rel=1e-3)
    # A catalog price never falls back: the pause ends its controller and waits for `spotfit resume`.
    assert done["controller_ended"] == "paused"


@pytest.mark.slow
def test_a_budget_stops_a_job_priced_from_the_specs_price(tmp_path):
    nodes = {"box-1": {kn.INSTANCE_TYPE: "my-gpu-box", kn.EKS: "SPOT"}}
    done = _run(tmp_path, "kube-budget", nodes, "{rule: budget, usd: 0.002, action: stop}",
                extra=", price_usd_per_h: 3.6")  # $0.001 a second: the budget is spent within seconds
    [priced] = [e for e in done["events"] if e["kind"] == "node_price"]
    assert priced["data"]["usd_per_h"] == [3.6] and priced["data"]["source"] == ["kubernetes.price_usd_per_h"]
    assert done["state"] == "stopped", done["status"]
    assert any(e["kind"] in ("rule", "budget_limit") and e["data"].get("rule") == "budget" for e in done["events"])
    attempt = done["status"]["attempts"][-1]
    assert attempt["cost_usd"] == pytest.approx(attempt["billed_s"] * 3.6 / 3600)
    assert done["status"]["cost_usd"] >= 0.002
