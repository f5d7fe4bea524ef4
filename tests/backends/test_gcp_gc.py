"""`spotfit gc --backend gcp` and `spotfit market record --cloud gcp`, against the emulators on 127.0.0.1.

gc: VMs launched by the real backend (official client, REST) into the emulated Compute Engine
API, a disk left behind, and Secret Manager secrets as `spotfit run` stores them; the state DB
holds jobs of each kind. market record: the Billing Catalog emulator's SKUs of an n1-standard-8
with a V100.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime

import pytest
from typer.testing import CliRunner

from spotfit import sdk
from spotfit.backends.base import LaunchRequest
from spotfit.backends.gcp.backend import GcpBackend
from spotfit.backends.gcp.launch import labels
from spotfit.backends.gcp.secrets import SecretManager, secret_id
from spotfit.backends.gcp.spec import Gcp
from spotfit.backends.gcp.verbs import append_observation
from spotfit.cli import app
from spotfit.market.policies.base import spot
from spotfit.market.trace import load_trace
from spotfit.spec.job import JobSpec
from spotfit.state.states import JobState, Market
from tests.support.billing_api import BillingApi, n1_v100_skus
from tests.support.gce_api import GceApi
from tests.support.launch_options import launch_options
from tests.support.secret_manager import SecretManagerApi

pytestmark = pytest.mark.emulated_instance
PROJECT = "spotfit-test"
NAME = "TOKEN"


@pytest.fixture
def cloud(monkeypatch) -> Iterator[tuple[GceApi, SecretManagerApi]]:
    api, secrets = GceApi(), SecretManagerApi()
    for name, value in {"SPOTFIT_GCP_ENDPOINT": api.url, "SPOTFIT_GCP_SECRETS_ENDPOINT": secrets.url,
                        "GOOGLE_CLOUD_PROJECT": PROJECT}.items():
        monkeypatch.setenv(name, value)
    yield api, secrets
    api.stop()
    secrets.stop()


def _job(job_id: str, state: JobState) -> None:
    spec = JobSpec.model_validate({"name": job_id, "script": "train.py", "backend": "gcp", "secrets": [NAME],
                                   "market": {"zones": ["us-central1-a"], "trace": None}})
    sdk.db().create_job(job_id, job_id, spec.model_dump_json(), f"file:///tmp/{job_id}", state=state)


def _launch(job_url: str, job_id: str, zone: str) -> None:
    GcpBackend(project=PROJECT, allow_local_store=True, operation_timeout_s=30).launch(LaunchRequest(
        job_id=job_id, attempt=1, job_url=job_url, zone=zone, market=Market.SPOT, accelerator="V100",
        decision=spot(zone), options=launch_options(Gcp, runtime_pip="spotfit==0.1.0")))


def test_gc_deletes_the_vms_disks_and_secrets_of_jobs_no_live_job_owns(cloud, job):
    api, secrets = cloud
    kinds = {"done": JobState.COMPLETED, "live": JobState.RUNNING, "paused": JobState.STOPPED}
    manager = SecretManager(PROJECT, secrets.url)
    for job_id, state in kinds.items():
        _job(job_id, state)
        manager.put(job_id, {NAME: f"value-of-{job_id}"})
    _launch(job, "done", "us-central1-a")  # the store's code and settings serve both jobs' VMs
    _launch(job, "live", "us-east1-b")
    api.add_disk(PROJECT, "us-central1-b", "left-disk", labels("done", 1))
    api.add_disk(PROJECT, "us-central1-b", "not-ours", {"team": "x"})
    vms = {vm["labels"]["spotfit-job"]: vm["name"] for vm in api.live()}

    runner = CliRunner()
    listed = runner.invoke(app, ["gc", "--backend", "gcp", "--dry-run", "--json"])
    assert listed.exit_code == 0, (listed.output, listed.exception)
    doc = json.loads(listed.stdout)
    found = {e["region"]: e["found"] for e in doc["regions"]}
    assert found == {"us-central1-a": {"instances": {vms["done"]: "done"}, "disks": {}},
                     "us-central1-b": {"instances": {}, "disks": {"left-disk": "done"}}}
    assert [(e["job"], e["parameters"]) for e in doc["secrets"]] == [("done", [secret_id("done", NAME)])]
    assert doc["backends"] == ["gcp"] and "value-of" not in listed.stdout  # ids, never a value
    assert len(api.live()) == 2 and len(secrets.ids()) == 3  # a dry run deletes nothing

    text = runner.invoke(app, ["gc", "--cloud", "gcp"])  # --cloud: the name of --backend
    assert text.exit_code == 0, (text.output, text.exception)
    assert "us-central1-a: removed 1 resource(s)" in text.stdout and f"instance {vms['done']}" in text.stdout
    assert "disk left-disk  (job done)" in text.stdout
    assert "secret manager: removed the secrets of 1 ended job(s)" in text.stdout
    assert [vm["name"] for vm in api.live()] == [vms["live"]]  # the live job's VM stays
    assert sorted(k[2] for k in api.disks) == sorted([vms["live"], "not-ours"])  # its boot disk, and others'
    assert secrets.ids() == [secret_id("live", NAME), secret_id("paused", NAME)]  # live and resumable keep theirs

    again = json.loads(runner.invoke(app, ["gc", "--backend", "gcp", "--include-active", "--region",
                                           "us-east1", "--json"]).stdout)
    assert [e["found"]["instances"] for e in again["regions"]] == [{vms["live"]: "live"}]
    assert api.live() == [] and again["secrets"] == []


def test_plain_gc_goes_over_every_backend_that_can_leave_resources(cloud, job, monkeypatch):
    api, _ = cloud
    _job("done", JobState.COMPLETED)
    _launch(job, "done", "us-central1-a")
    seen = []
    monkeypatch.setattr("spotfit.backends.aws.backend.AwsBackend.collect_leftovers",
                        lambda self, places, *a: seen.append(places) or {
                            "dry_run": True, "kept_jobs": [], "regions": [], "secrets": []})
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["gc", "--dry-run", "--json"]).stdout)
    assert doc["backends"] == ["aws", "gcp"] and seen == [None]
    assert [(e["backend"], e["region"]) for e in doc["regions"]] == [("gcp", "us-central1-a")]
    # With --region, each backend gets its own places: an AWS region goes to aws only.
    doc = json.loads(runner.invoke(app, ["gc", "--dry-run", "--json", "--region", "us-east-1"]).stdout)
    assert doc["backends"] == ["aws"] and seen[-1] == ["us-east-1"]
    doc = json.loads(runner.invoke(app, ["gc", "--dry-run", "--json", "--region", "us-central1-a"]).stdout)
    assert doc["backends"] == ["gcp"] and len(seen) == 2
    # gcp not set up here: plain gc cleans the rest and says so; --backend gcp is a usage error.
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    doc = json.loads(runner.invoke(app, ["gc", "--dry-run", "--json"]).stdout)
    assert doc["backends"] == ["aws"] and doc["skipped"][0]["backend"] == "gcp"
    out = runner.invoke(app, ["gc", "--backend", "gcp", "--dry-run"])
    assert out.exit_code == 2 and "No Google Cloud project" in out.output
    out = runner.invoke(app, ["gc", "--dry-run", "--region", "mars-1"])
    assert out.exit_code == 2 and "expected an AWS region such as us-east-1 or a Compute Engine" in out.output


@pytest.fixture
def billing(monkeypatch) -> Iterator[BillingApi]:
    server = BillingApi(n1_v100_skus(["us-central1"]))
    monkeypatch.setenv("SPOTFIT_GCP_BILLING_ENDPOINT", server.url)
    yield server
    server.stop()


def test_market_record_appends_billing_catalog_observations_to_a_trace(billing, tmp_path):
    trace = tmp_path / "n1-v100.csv"
    args = ["market", "record", "--cloud", "gcp", "--region", "us-central1", "--instance-type",
            "n1-standard-8+V100", "--zones", "us-central1-a,us-central1-b", "--trace", str(trace), "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, (out.output, out.exception)
    doc = json.loads(out.stdout)
    assert doc["rows"] == 2 and doc["zones"] == ["us-central1-a", "us-central1-b"] and billing.requests > 0
    rows = list(csv.DictReader(trace.open()))
    spot = 8 * 0.00698 + 30 * 0.000936 + 0.992  # vCPUs, GiB and the V100 at the emulator's spot SKUs
    on_demand = 8 * 0.031611 + 30 * 0.004237 + 2.48
    assert [float(r["spot_price_usd_per_h"]) for r in rows] == [round(spot, 6)] * 2
    assert [float(r["on_demand_usd_per_h"]) for r in rows] == [round(on_demand, 6)] * 2
    # Without --cloud, a Compute Engine region picks gcp; a second call appends (none due within a tick).
    again = CliRunner().invoke(app, args[:2] + args[4:])
    assert again.exit_code == 0 and json.loads(again.stdout)["rows"] == 0, again.output
    assert list(load_trace(str(trace), gap_s=300).zones) == ["us-central1-a", "us-central1-b"]


def test_a_later_observation_fills_the_gap_at_the_old_price(tmp_path):
    trace = tmp_path / "t.csv"
    t0 = datetime(2026, 1, 1, 0, 0, 0)
    append_observation(trace, ["z-a"], 1.0, 3.0, 300, [], t0)
    doc = append_observation(trace, ["z-a"], 0.8, 3.0, 300, [("z-a", 1767226000.0, "preempted")],
                             datetime(2026, 1, 1, 0, 15, 0))
    rows = list(csv.DictReader(trace.open()))
    assert doc["rows"] == 3 and [r["tick"] for r in rows] == ["0", "1", "2", "3"]
    assert [float(r["spot_price_usd_per_h"]) for r in rows] == [1.0, 1.0, 1.0, 0.8]
    assert [r["available"] for r in rows] == ["1", "0", "1", "1"] and doc["outages"] == 1


def test_market_record_refuses_what_it_cannot_price(billing, tmp_path):
    for bad, said in (("n1-standard-8+A100", "cannot be attached"), ("e2-medium", "does not price"),
                      ("N1 standard", "Invalid --instance-type")):
        out = CliRunner().invoke(app, ["market", "record", "--cloud", "gcp", "--region", "us-central1",
                                       "--instance-type", bad, "--trace", str(tmp_path / "x.csv")])
        assert out.exit_code == 2 and said in out.output, out.output
    assert not (tmp_path / "x.csv").exists()
