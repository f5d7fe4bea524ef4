"""The gcp backend's pure parts: the `gcp:` section, machines, insert bodies, `run --dry-run`, preflight."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spotfit.backends.gcp.backend import GcpBackend
from spotfit.backends.gcp.launch import LaunchSettings, check_no_secrets, insert_requests, instance_name
from spotfit.backends.gcp.machines import Machine, machine_for
from spotfit.backends.gcp.spec import Gcp
from spotfit.errors import BackendError, SpecError, UsageError
from spotfit.spec.job import load_spec
from spotfit.state.states import Market
from tests.support.jobs import spotfit_cmd

SPEC = """
name: digits
script: train.py
backend: gcp
resources: {accelerator: V100, count: 1, workers: 2}
market: {zones: [us-central1-b, us-central1-a]}
checkpoint: {store: "gs://my-bucket/spotfit"}
gcp:
  project: my-project
  service_account: trainer@my-project.iam.gserviceaccount.com
data: {source: "gs://my-bucket/data", size_gib: 50}
"""


def test_the_section_validates_project_and_zones():
    assert Gcp(project="my-project", zones=["us-central1-a"]).external_ip is False
    with pytest.raises(ValueError, match="project id"):
        Gcp(project="My_Project")
    with pytest.raises(ValueError, match="Compute Engine zone"):
        Gcp(zones=["us-central1"])


@pytest.mark.parametrize(("accelerator", "count", "expected"), [
    ("V100", 1, Machine("n1-standard-8", "nvidia-tesla-v100", 1)),
    ("T4", 4, Machine("n1-standard-16", "nvidia-tesla-t4", 4)),
    ("A100", 8, Machine("a2-highgpu-8g")),
    ("H100", 8, Machine("a3-highgpu-8g")),
    ("L4", 1, Machine("g2-standard-4")),
    ("CPU", 1, Machine("n2-standard-8")),
])
def test_machines_from_resources(accelerator, count, expected):
    assert machine_for(accelerator, count, "us-central1-a") == expected


def test_a_gpu_not_offered_in_the_zone_is_refused():
    with pytest.raises(UsageError, match="not offered in asia-east1-a"):
        machine_for("V100", 1, "asia-east1-a")
    with pytest.raises(UsageError, match="expected one of"):
        machine_for("B200", 1, "us-central1-a")


def test_names_are_valid_and_distinct():
    names = {instance_name("A_very_long_Job.Name-" * 4, 12, w) for w in range(3)}
    assert len(names) == 3 and all(len(n) <= 63 and n == n.lower() for n in names)


def test_the_body_carries_no_external_ip_no_ssh_key_and_only_storage_scopes():
    s = LaunchSettings(project="p-1", zone="us-central1-a", machine=Machine("a2-highgpu-1g"), market=Market.SPOT,
                       service_account="sa@p-1.iam.gserviceaccount.com")
    [insert] = insert_requests(s, "job-1", 1, "#!/bin/bash\n")
    body = insert.body
    assert body["networkInterfaces"] == [{"network": "global/networks/default"}]
    items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    assert items["enable-oslogin"] == "TRUE" and items["block-project-ssh-keys"] == "TRUE" and "ssh-keys" not in items
    assert body["serviceAccounts"][0]["scopes"] == ["https://www.googleapis.com/auth/devstorage.read_write",
                                                    "https://www.googleapis.com/auth/cloud-platform.read-only"]
    assert body["disks"][0]["initializeParams"]["sourceImage"].startswith(
        "projects/deeplearning-platform-release/global/images/family/tf-")


def test_a_script_with_credentials_is_refused():
    with pytest.raises(BackendError, match="Google credentials"):
        check_no_secrets('{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"}')


def test_run_dry_run_prints_the_exact_inserts_and_the_script_and_sends_nothing(job_spec, tmp_path):
    spec = job_spec(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "SPOTFIT_GCP_"))}
    env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / "none.json")  # no credentials, none needed
    out = subprocess.run(spotfit_cmd("run", str(spec), "--dry-run", "--json"), capture_output=True, text=True,
                         timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["sent"] is False and doc["zone"] == "us-central1-b" and doc["warnings"] == []
    assert [c["operation"] for c in doc["calls"]] == ["compute.instances.insert"] * 2
    body = doc["calls"][0]["params"]["instanceResource"]
    assert doc["calls"][0]["params"]["project"] == "my-project"
    assert body["disks"][0]["initializeParams"]["diskSizeGb"] == "150"  # 100 + the data's 50 GiB
    assert body["scheduling"]["provisioningModel"] == "SPOT"
    assert doc["scripts"][0]["text"].startswith("#!/bin/bash")
    text = subprocess.run(spotfit_cmd("run", str(spec), "--dry-run"), capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL).stdout
    assert "compute.instances.insert" in text and "startup-script" in text and "gcloud storage cp" in text


def test_preflight_refuses_what_cannot_work_in_one_line(job_spec, monkeypatch):
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.setenv("SPOTFIT_GCP_ENDPOINT", "http://127.0.0.1:9")  # credentials are not asked of an emulator
    spec = load_spec(job_spec(SPEC.replace("project: my-project", "region: us-central1")))
    with pytest.raises(UsageError, match="No Google Cloud project"):
        GcpBackend().preflight(spec)
    spec = load_spec(job_spec(SPEC.replace("us-central1-b, us-central1-a", "asia-east1-a")))
    with pytest.raises(UsageError, match="not offered in asia-east1-a"):
        GcpBackend().preflight(spec)
    spec = load_spec(job_spec(SPEC.replace('"gs://my-bucket/spotfit"', '"s3://b/p"')))
    with pytest.raises(UsageError, match="expected a gs:// URL"):
        GcpBackend().preflight(spec)


def test_the_requirements_file_reaches_the_startup_environment(job_spec):
    spec_path = job_spec(SPEC + "environment: {requirements: requirements.txt, pip: [rich]}\n")
    (spec_path.parent / "requirements.txt").write_text("pandas>=2,<3\n")
    from spotfit.backends.gcp.spec import gcp_options

    assert gcp_options(load_spec(spec_path)).environment == {"pip": ["rich"], "requirements": "pandas>=2,<3\n"}


def test_no_credentials_is_one_usage_line(job_spec, monkeypatch, tmp_path):
    for key in ("SPOTFIT_GCP_ENDPOINT", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # never the real metadata server
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    spec = load_spec(job_spec(SPEC))
    with pytest.raises((UsageError, SpecError)) as err:
        GcpBackend().preflight(spec)
    assert "credentials" in str(err.value).lower()


def test_a_bucket_that_does_not_exist_is_one_usage_line(job_spec, gcs_env, monkeypatch):
    from tests.support.gcs import BUCKET

    monkeypatch.setenv("SPOTFIT_GCP_ENDPOINT", "http://127.0.0.1:9")  # credentials are not asked of an emulator
    ok = load_spec(job_spec(SPEC.replace('"gs://my-bucket/spotfit"', f'"gs://{BUCKET}/spotfit"')))
    assert GcpBackend().preflight(ok) == []
    missing = load_spec(job_spec(SPEC.replace('"gs://my-bucket/spotfit"', '"gs://no-such-bucket-here/spotfit"')))
    with pytest.raises(UsageError, match="the bucket gs://no-such-bucket-here does not exist"):
        GcpBackend().preflight(missing)


def test_secrets_are_accepted_and_without_a_service_account_get_a_note(job_spec, gcs_env, monkeypatch):
    from tests.support.gcs import BUCKET

    monkeypatch.setenv("SPOTFIT_GCP_ENDPOINT", "http://127.0.0.1:9")  # credentials are not asked of an emulator
    text = SPEC.replace('"gs://my-bucket/spotfit"', f'"gs://{BUCKET}/spotfit"') + "secrets: [API_TOKEN]\n"
    assert GcpBackend().preflight(load_spec(job_spec(text))) == []
    bare = text.replace("  service_account: trainer@my-project.iam.gserviceaccount.com\n", "")
    [note] = GcpBackend().preflight(load_spec(job_spec(bare, name="bare")))
    assert "without `gcp.service_account`" in note and "secretAccessor" in note


def test_a_job_with_secrets_gives_its_vms_the_cloud_platform_scope(job_spec):
    from spotfit.backends.gcp.secrets import SCOPE
    from spotfit.backends.gcp.spec import gcp_options

    spec = load_spec(job_spec(SPEC + "secrets: [API_TOKEN]\n"))
    doc = GcpBackend().plan(_request(spec))[0].body
    assert doc["serviceAccounts"][0]["scopes"][-1] == SCOPE
    assert f"{SCOPE}.read-only" not in doc["serviceAccounts"][0]["scopes"]
    assert gcp_options(load_spec(job_spec(SPEC, name="plain"))).has_secrets is False
    plain = GcpBackend().plan(_request(load_spec(job_spec(SPEC, name="plain2"))))[0].body
    assert SCOPE not in plain["serviceAccounts"][0]["scopes"]


def _request(spec):
    from spotfit.backends.base import LaunchRequest
    from spotfit.backends.gcp.spec import gcp_options

    return LaunchRequest(job_id="j-1", attempt=1, job_url="gs://my-bucket/spotfit/jobs/j-1", zone="us-central1-a",
                         market=Market.SPOT, accelerator="V100", accelerator_count=1, options=gcp_options(spec))


@pytest.mark.parametrize("change, said", [
    ("  machine_type: n1-standard-7\n", "Invalid `gcp.machine_type`: received 'n1-standard-7', expected an N1 size"),
    ("  machine_type: a2-highgpu-1g\n", "Invalid `gcp.machine_type`: received 'a2-highgpu-1g', expected an N1 size"),
    ("", "Invalid zone for the gcp backend: 1 × V100 is not offered in asia-east1-a"),
])
def test_spotfit_run_refuses_a_bad_machine_or_zone_in_one_line_before_recording(job_spec, monkeypatch, change, said):
    from typer.testing import CliRunner

    from spotfit import sdk
    from spotfit.cli import app

    monkeypatch.setenv("SPOTFIT_GCP_ENDPOINT", "http://127.0.0.1:9")  # credentials are not asked of an emulator
    text = SPEC.replace("data: {source", change + "data: {source") if change else \
        SPEC.replace("us-central1-b, us-central1-a", "asia-east1-a")
    out = CliRunner().invoke(app, ["run", str(job_spec(text))])
    assert out.exit_code == 2, (out.output, out.exception)
    lines = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and said in lines[0], out.output
    assert sdk.db().list_jobs() == []


def test_a_bundled_gpu_takes_only_a_machine_type_that_has_it():
    assert machine_for("A100", 1, "us-central1-a", "a2-highgpu-1g").machine_type == "a2-highgpu-1g"
    with pytest.raises(UsageError, match="expected a machine type with 1 × A100: a2-highgpu-1g"):
        machine_for("A100", 1, "us-central1-a", "a2-highgpu-8g")
    with pytest.raises(UsageError, match="expected a Compute Engine machine type"):
        machine_for("CPU", 1, "us-central1-a", "n2-bogus")


# Renamed from test_without_zones_run_says_where_it_launches_and_that_the_plan_does_not_move_it: without a
# trace, `run` now follows the plan (tests/backends/test_gcp_backend.py::test_no_zones_launches_in_the_plans_region_*);
# with a replayed trace (the default `aws-v100`) it still launches in the default zone and says so.
def test_without_zones_and_with_a_trace_run_says_where_it_launches(job_spec, gcs_env, monkeypatch):
    from tests.support.gcs import BUCKET

    monkeypatch.setenv("SPOTFIT_GCP_ENDPOINT", "http://127.0.0.1:9")  # credentials are not asked of an emulator
    text = SPEC.replace('"gs://my-bucket/spotfit"', f'"gs://{BUCKET}/spotfit"').replace(
        "market: {zones: [us-central1-b, us-central1-a]}", "market: {trace: aws-v100}")
    spec = load_spec(job_spec(text))
    [note] = GcpBackend().preflight(spec)
    assert "and a replayed `market.trace`: the gcp backend launches in us-central1-a" in note
    assert "set `market.trace: null` to launch in the region `spotfit plan` ranks cheapest" in note
    assert spec.market.zones == []
