"""The gcp backend through the official client (REST) against the emulated Compute Engine API on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from spotfit.backends.base import LaunchRequest, make_backend
from spotfit.backends.gcp.backend import GcpBackend
from spotfit.backends.gcp.spec import Gcp
from spotfit.errors import NoCapacityError, UsageError
from spotfit.market.policies.base import ON_DEMAND, spot
from spotfit.state.states import Market
from spotfit.stores import open_store
from tests.support.gce_api import GceApi
from tests.support.jobs import spotfit_cmd
from tests.support.launch_options import launch_options

pytestmark = pytest.mark.emulated_instance
PROJECT = "spotfit-test"


@pytest.fixture
def api() -> Iterator[GceApi]:
    server = GceApi()
    yield server
    server.stop()


def backend(api: GceApi) -> GcpBackend:
    return GcpBackend(project=PROJECT, endpoint=api.url, allow_local_store=True, operation_timeout_s=30)


def request(job: str, zone: str = "us-central1-a", attempt: int = 1, decision=None, **options) -> LaunchRequest:
    decision = decision or spot(zone)
    return LaunchRequest(job_id="job-1", attempt=attempt, job_url=job, zone=zone, market=Market.SPOT,
                         accelerator="V100", accelerator_count=1, decision=decision,
                         options=launch_options(Gcp, runtime_pip="spotfit==0.1.0", **options))


def test_registered_and_loaded_lazily():
    assert make_backend("gcp").name == "gcp"


def test_a_spot_vm_as_compute_engine_records_it(api, job):
    handle = backend(api).launch(request(job))
    [vm] = api.live()
    assert handle.instances == (vm["name"],) and handle.zone == "us-central1-a" == vm["zone"]
    assert vm["machineType"] == "zones/us-central1-a/machineTypes/n1-standard-8"
    assert vm["guestAccelerators"] == [{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-v100",
                                        "acceleratorCount": 1}]
    assert vm["scheduling"]["provisioningModel"] == "SPOT"
    assert vm["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert "accessConfigs" not in vm["networkInterfaces"][0]  # no external IP by default
    assert vm["labels"]["spotfit-job"] == "job-1" and vm["labels"]["spotfit-attempt"] == "1"
    script = {i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"]
    assert job in script and "shutdown -h now" in script
    assert ("GET", f"/compute/v1/projects/{PROJECT}/zones/us-central1-a/operations/") not in api.calls
    assert any("/operations/" in path for _, path in api.calls)  # the client polled the zone operation
    assert open_store(job).exists("attempts/0001/launch.json")


def test_on_demand_when_the_decision_says_so(api, job):
    backend(api).launch(request(job, decision=ON_DEMAND))
    [vm] = api.live()
    assert vm["scheduling"]["provisioningModel"] == "STANDARD"
    assert "instanceTerminationAction" not in vm["scheduling"]


def test_the_decisions_zone_wins_and_bundled_gpus_need_no_attachment(api, job):
    req = request(job, zone="us-central1-a", decision=spot("us-central1-b"))
    req.accelerator = "A100"
    backend(api).launch(req)
    [vm] = api.live()
    assert vm["zone"] == "us-central1-b" and vm["machineType"].endswith("/a2-highgpu-1g")
    assert "guestAccelerators" not in vm


@pytest.mark.parametrize("code", ["ZONE_RESOURCE_POOL_EXHAUSTED", "QUOTA_EXCEEDED"])
def test_capacity_errors_end_the_attempt_no_capacity(api, job, code):
    api.fail_inserts("us-central1-a", code)
    with pytest.raises(NoCapacityError, match=code):
        backend(api).launch(request(job))
    assert api.live() == []
    backend(api).launch(request(job, zone="us-central1-b", attempt=2))  # the next zone has room
    assert [vm["zone"] for vm in api.live()] == ["us-central1-b"]


def test_status_preemption_and_stop(api, job):
    gcp = backend(api)
    handle = gcp.launch(request(job))
    assert gcp.status(handle).running
    api.preempt(handle.instances[0])  # Google deletes a preempted spot VM
    assert not gcp.status(handle).running
    gcp.stop(handle, grace_s=0)  # nothing left: idempotent
    handle = gcp.launch(request(job, attempt=2))
    api.power_off(handle.instances[0])  # the startup script's `shutdown -h now`
    assert not gcp.status(handle).running
    gcp.stop(handle, grace_s=0)
    assert api.live() == []


def test_a_retried_launch_and_find_reuse_the_first_vm(api, job):
    gcp = backend(api)
    first = gcp.launch(request(job))
    assert gcp.launch(request(job)) == first  # alreadyExists: the same VM
    assert len(api.live()) == 1
    assert gcp.load_handle(first.to_json()) == first
    assert gcp.find(request(job)) == first
    assert gcp.find(request(job, attempt=2)) is None


def test_several_workers_get_their_addresses(api, job):
    req = request(job)
    req.workers = 2
    handle = backend(api).launch(req)
    assert [n[-2:] for n in handle.instances] == ["w0", "w1"]
    cluster = open_store(job).read_bytes("attempts/0001/cluster.json").decode()
    assert all(vm["networkInterfaces"][0]["networkIP"] in cluster for vm in api.live())


def test_an_unknown_zone_or_a_gpu_not_offered_there_is_one_usage_line(api, job):
    with pytest.raises(UsageError, match="not offered in"):
        backend(api).launch(request(job, zone="us-central1-z", decision=spot("us-central1-z")))
    req = request(job, decision=spot("europe-west4-a"))
    req.accelerator = "H100"
    req.accelerator_count = 3
    with pytest.raises(UsageError, match="no GCP machine type has 3"):
        backend(api).launch(req)
    assert api.live() == []


def test_local_stores_are_refused_outside_tests(api, job):
    with pytest.raises(UsageError, match="expected a gs:// URL"):
        GcpBackend(project=PROJECT, endpoint=api.url).launch(request(job))
    assert api.live() == []


PLANNED = """
name: planned
script: train.py
backend: gcp
resources: {{accelerator: {accelerator}, count: 1}}
market: {{trace: null}}
checkpoint: {{store: "file://{store}"}}
gcp: {{project: spotfit-test}}
"""
NORTH = ("europe-north1-a", "europe-north1-b", "europe-north1-c")


def _plans_gcp_offer(accelerator: str):
    from spotfit.market import offers

    return next(o for o in offers.plan(accelerator, 1).offers if o.cloud == "gcp")


def test_no_zones_launches_in_the_plans_region_in_the_zones_the_api_lists(job_spec, tmp_path, job):
    from spotfit.spec.job import load_spec
    from tests.support.gce_api import ZONES

    offer = _plans_gcp_offer("A100")
    region = offer.region
    api = GceApi(zones=(*ZONES, *NORTH, f"{region}-a", f"{region}-b", f"{region}-c"))
    try:
        api.offer(f"{region}-b", "n2-standard-8")  # a zone of the region without A100 machines
        spec = load_spec(job_spec(PLANNED.format(accelerator="A100", store=tmp_path / "store")))
        [note] = backend(api).preflight(spec)
        assert spec.market.zones == [f"{region}-a", f"{region}-c"]
        assert f"launching in {region}" in note and "cheapest GCP offer" in note
        assert f"spot ${offer.spot_usd_per_h:.2f}/h" in note and f"{region}-a, {region}-c" in note
        assert ("GET", f"/compute/v1/projects/{PROJECT}/zones") in api.calls
        assert ("GET", f"/compute/v1/projects/{PROJECT}/zones/{region}-b/machineTypes/a2-highgpu-1g") in api.calls

        # The controller launches in those zones in order, on to the next after a capacity error.
        api.fail_inserts(f"{region}-a", "ZONE_RESOURCE_POOL_EXHAUSTED")
        launches = []
        for zone in spec.market.zones:
            req = request(job, zone=zone, decision=spot(zone))
            req.accelerator, req.options = "A100", launch_options(Gcp, runtime_pip="spotfit==0.1.0", project=PROJECT)
            try:
                launches.append(backend(api).launch(req))
                break
            except NoCapacityError:
                continue
        [handle] = launches
        [vm] = api.live()
        assert handle.zone == f"{region}-c" == vm["zone"]
        assert vm["machineType"] == f"zones/{region}-c/machineTypes/{offer.instance_type}"
    finally:
        api.stop()


def test_attached_gpus_take_the_zones_that_list_the_gpu(job_spec, tmp_path, api):
    from spotfit.spec.job import load_spec

    api.offer("us-central1-b", "n1-standard-8")  # the host, not the V100
    spec = load_spec(job_spec(PLANNED.format(accelerator="V100", store=tmp_path / "store")))
    [note] = backend(api).preflight(spec)
    assert spec.market.zones == ["us-central1-a", "us-central1-c", "us-central1-f"]
    assert "ranks no GCP offer of 1 × V100" in note and "n1-standard-8 + 1 × nvidia-tesla-v100" in note


def test_a_region_whose_zones_offer_no_such_machine_is_one_usage_line(job_spec, tmp_path, spotfit_home):
    from tests.support.gce_api import ZONES

    region = _plans_gcp_offer("A100").region
    zones = (f"{region}-a", f"{region}-b")
    api = GceApi(zones=(*ZONES, *zones))
    try:
        for zone in zones:
            api.offer(zone, "n2-standard-8")
        spec = job_spec(PLANNED.format(accelerator="A100", store=tmp_path / "store"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SPOTFIT_GCP_"))}
        env["SPOTFIT_GCP_ENDPOINT"] = api.url
        out = subprocess.run(spotfit_cmd("run", str(spec)), capture_output=True, text=True, timeout=120,
                             env=env, stdin=subprocess.DEVNULL)
        assert out.returncode == 2, out.stderr
        [line] = [ln for ln in out.stderr.splitlines() if "Invalid region" in ln]
        assert f"no zone of {region} offers a2-highgpu-1g (Compute Engine lists {', '.join(zones)} there)" in line
        assert api.live() == []
    finally:
        api.stop()


def test_run_records_the_plans_zones_with_the_job_and_one_event_saying_why(job_spec, gcs_env, spotfit_home,
                                                                          monkeypatch):
    import json

    from spotfit import sdk
    from spotfit.sdk.context import db
    from tests.support.gcs import BUCKET

    region = _plans_gcp_offer("A100").region
    api = GceApi(zones=(f"{region}-a", f"{region}-b", "us-central1-a"))
    try:
        monkeypatch.setenv("SPOTFIT_GCP_ENDPOINT", api.url)
        text = PLANNED.format(accelerator="A100", store="x").replace('"file://x"', f'"gs://{BUCKET}/planned"')
        job_id = sdk.submit(str(job_spec(text)))
        recorded = json.loads(db().get_job(job_id)["spec_json"])
        assert recorded["market"]["zones"] == [f"{region}-a", f"{region}-b"]
        [note] = [e for e in db().events(job_id) if e["kind"] == "backend_note"]
        assert f"launching in {region}" in note["message"] and f"{region}-a, {region}-b" in note["message"]
        assert api.live() == []  # recorded only: the controller launches
    finally:
        api.stop()
