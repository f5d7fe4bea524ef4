"""Kubernetes nodes priced live where the profile allows it: a spot node on AWS from the EC2 spot price history.

moto answers `DescribeSpotPriceHistory` in-process (its own history is placeholder data, so the
tests publish the prices it answers with: tests/support/aws_moto.py). End to end on the Kubernetes
emulator (tests/support/kube.py): the real controller loop and backend, the real runtime in the
pod (hollow, as in test_prices.py); a `price_cap` pause on a live-priced node waits, alive, and
resumes once the published price falls back under the cap, as it does on a replayed or live AWS
market. The test waits on events.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from pydantic import ValidationError

from spotfit import sdk
from spotfit.backends.kubernetes import nodes as kn
from spotfit.backends.kubernetes.backend import KubernetesBackend
from spotfit.backends.kubernetes.live_price import SOURCE, AwsSpotPrices, LivePrices
from spotfit.backends.kubernetes.spec import Kubernetes
from spotfit.controller import node_market
from tests.backends.kube.test_prices import SCRIPT, SPEC, SPOT_P3, write_job
from tests.support.aws_moto import publish_spot_prices
from tests.support.kube import FakeCluster
from tests.support.kube_controller import drive
from tests.support.wait import wait_for

DEAR, CHEAP, CAP = 0.9, 0.3, 0.5  # $/h: p3.2xlarge spot in us-east-1a, above and under the cap
DEADLINE_S = 300.0


def _hour_ago() -> datetime:
    return datetime.now(UTC) - timedelta(hours=1)


def test_a_spot_node_on_aws_is_priced_from_the_spot_price_history_and_read_again(aws):
    history = {"us-east-1a": [(_hour_ago(), DEAR)], "us-east-1b": [(_hour_ago(), 0.1)]}
    publish_spot_prices(aws.session, "p3.2xlarge", history)
    live = AwsSpotPrices(aws.session)
    priced = kn.price_node("spot-1", SPOT_P3, "spot", None, live)
    assert (priced.source, priced.usd_per_h, priced.live) == (SOURCE, DEAR, True)  # its zone's, not us-east-1b's
    assert priced.describe() == "node spot-1 (p3.2xlarge, spot): $0.9/h from aws spot price history"
    assert priced.on_demand_usd_per_h == 3.06  # the all-on-demand line stays the catalog's
    history["us-east-1a"].append((datetime.now(UTC), CHEAP))
    assert kn.reprice(priced, live).usd_per_h == CHEAP


def test_without_a_live_price_the_catalog_prices_the_node_and_says_why(aws):
    publish_spot_prices(aws.session, "p3.2xlarge", {"us-east-1b": [(_hour_ago(), 0.1)]})  # none in us-east-1a
    live = AwsSpotPrices(aws.session)
    unpublished = kn.price_node("spot-1", SPOT_P3, "spot", None, live)
    assert (unpublished.source, round(unpublished.usd_per_h, 4)) == ("catalog", 0.3967)
    assert "(no live price: none published for p3.2xlarge in us-east-1a)" in unpublished.describe()
    assert kn.reprice(unpublished, live) == unpublished  # still none: the catalog's stands
    no_zone = kn.price_node("spot-2", {k: v for k, v in SPOT_P3.items() if k != kn.ZONE}, "spot", None, live)
    assert no_zone.source == "catalog" and "no topology.kubernetes.io/zone label" in no_zone.note
    asked = []
    on_demand = kn.price_node("od-1", {**SPOT_P3, kn.EKS: "ON_DEMAND"}, "spot", None,
                              lambda *key: asked.append(key) or (9.9, None))
    assert (on_demand.source, on_demand.usd_per_h, asked) == ("catalog", 3.06, [])  # spot prices only


def test_a_refused_read_falls_back_to_the_catalog(aws):
    def refuse(**_):
        raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "not allowed"}},
                          "DescribeSpotPriceHistory")

    aws.session.events.register("before-call.ec2.DescribeSpotPriceHistory", refuse)
    priced = kn.price_node("spot-1", SPOT_P3, "spot", None, AwsSpotPrices(aws.session))
    assert priced.source == "catalog" and "UnauthorizedOperation" in priced.note


def test_the_profile_decides_whether_a_live_price_is_read():
    live = LivePrices(aws_session=object())
    assert live.lookup(Kubernetes(spot="eks")) is None  # not asked for
    assert live.lookup(Kubernetes(spot="eks", live_prices=True), {"spec": {}}) is not None
    custom = Kubernetes(spot="custom", spot_selector={"pool": "spot"}, live_prices=True)
    assert live.lookup(custom, {"spec": {"providerID": "aws:///us-east-1a/i-0abc"}}) is not None
    assert live.lookup(custom, {"spec": {"providerID": "kind://docker/kind/kind-worker"}}) is None
    with pytest.raises(ValidationError, match="reads AWS spot prices only; received `spot: gke`"):
        Kubernetes(spot="gke", live_prices=True)


@pytest.mark.slow
def test_a_price_cap_pause_on_a_live_priced_node_resumes_when_the_price_falls(tmp_path, aws, monkeypatch):
    monkeypatch.setattr(node_market, "REPRICE_S", 0.5)  # read the published price again often
    history = {"us-east-1a": [(_hour_ago(), DEAR)]}
    publish_spot_prices(aws.session, "p3.2xlarge", history)
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir(parents=True)
    src.write_text(SCRIPT)
    (tmp_path / "cluster").mkdir()
    with FakeCluster(tmp_path / "cluster", nodes={"spot-1": SPOT_P3}) as cluster:
        text = SPEC.format(name="kube-live", rule=f"{{rule: price_cap, usd_per_h: {CAP}, action: pause}}",
                           kubeconfig=cluster.write_kubeconfig(tmp_path / "kube.kubeconfig"),
                           extra=", live_prices: true")
        job_id = sdk.submit(str(write_job(tmp_path / "kube-live", text, script=src)))
        run = drive(job_id, KubernetesBackend(allow_local_store=True, aws_session=aws.session))
        try:
            wait_for(lambda: sdk.status(job_id)["state"] == "paused", DEADLINE_S, "the price cap to pause the job")
            paused = sdk.status(job_id)
            history["us-east-1a"].append((datetime.now(UTC), CHEAP))  # the price falls back under the cap
            wait_for(lambda: [e for e in sdk.events(job_id) if e["kind"] == "node_price" and e["attempt"] == 2],
                     DEADLINE_S, "the job to resume and its second attempt to be priced")
        finally:
            sdk.cancel(job_id)
            run["thread"].join(DEADLINE_S)
    assert run["outcome"].get("state") == "cancelled", sdk.status(job_id)
    events = sdk.events(job_id)
    first, *_, second = [e for e in events if e["kind"] == "node_price"]
    assert (first["attempt"], first["data"]["source"], first["data"]["usd_per_h"]) == (1, [SOURCE], [DEAR])
    assert (second["attempt"], second["data"]["usd_per_h"]) == (2, [CHEAP])
    [fired] = [e for e in events if e["kind"] == "rule"]
    assert fired["data"]["rule"] == "price_cap" and f"above the cap ${CAP}/h" in fired["message"]
    assert paused["paused"]["rule"] == "price_cap" and paused["paused"]["resume"] is None  # its controller waits
    [resumed] = [e for e in events if e["kind"] == "resumed"]
    assert resumed["message"] == f"spot price ${CHEAP:.4f}/h is back under the cap ${CAP}/h"
    attempt = sdk.status(job_id)["attempts"][0]
    assert attempt["state"] == "stopped" and attempt["cost_usd"] == pytest.approx(attempt["billed_s"] * DEAR / 3600)
    assert sdk.cost(job_id)["rows"][0]["price_source"] == SOURCE
