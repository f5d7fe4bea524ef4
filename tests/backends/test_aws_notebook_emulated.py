"""A `kind: notebook` job on the emulated EC2 instance, through the real boot path and a spot interruption.

The harness of test_aws_emulated.py (tests/support/emulated_instance.py): moto server, SeaweedFS
as S3, an IMDSv2 server per instance, and each instance's actual user-data run by bash in a
sandbox. The user-data installs the shipped wheel with the `notebook` extra (JupyterLab comes
from the test venv, which the sandbox's venv sees as its system packages), the agent starts the
runtime, and the runtime starts JupyterLab on 127.0.0.1 with the job's token.
"""

from __future__ import annotations

import json
import uuid

import pytest

from spotfit import interactive, sdk
from spotfit.attempt.exit_codes import EXIT_PREEMPTED
from spotfit.attempt.notebook import token_file
from spotfit.backends.wheel import running_wheel
from spotfit.interactive import notebooks
from spotfit.stores import open_store
from tests.backends.test_aws_emulated import cloud  # noqa: F401 — the emulated cloud fixture
from tests.interactive.jupyter import request
from tests.support.aws_moto import instances
from tests.support.seaweed import BUCKET
from tests.support.wait import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.emulated_instance]

SPEC = """
name: emulated-notebook
kind: notebook
backend: aws
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-west-2a, us-west-2b]}}
aws: {{ami: ami-12c6146b, region: us-west-2, runtime_extras: [s3]}}
checkpoint: {{store: "{store}"}}
notebook: {{sync_s: 3600}}
"""
NOTICE_S = 120 * 0.25  # EC2's two-minute notice, scaled down; the notebook saves within seconds of it
START_S = 300.0  # a boot (venv, wheel, JupyterLab) on a busy 2-core box


def _server(store, job_id: str, zone: str) -> dict:
    """The `notebook/server.json` of the attempt in `zone`, once its JupyterLab is up."""
    def info() -> dict | None:
        ran = [a["number"] for a in sdk.db().attempts(job_id) if a["zone"] == zone and a["state"] != "no_capacity"]
        return notebooks.server_info(store, ran[-1]) if ran else None

    wait_for(lambda: info() or sdk.status(job_id)["state"] in ("failed", "cancelled"), START_S,
             f"JupyterLab of the attempt in {zone} on the emulated instance")
    found = info()
    assert found is not None, sdk.status(job_id)
    return found


def test_a_notebook_on_the_emulated_instance_keeps_its_files_through_a_spot_interruption(
        tmp_path, cloud):  # noqa: F811
    folder = tmp_path / "spec"
    folder.mkdir()
    spec = folder / "notebook.yaml"
    spec.write_text(SPEC.format(store=f"s3://{BUCKET}/emulated-nb-{uuid.uuid4().hex[:6]}"))
    job_id = interactive.notebook(str(spec))
    token = token_file(job_id).read_text().strip()
    loop = cloud.start_controller(job_id)
    store = open_store(sdk.db().get_job(job_id)["store_url"])
    try:
        first = _server(store, job_id, "us-west-2a")
        (booted,) = cloud.instances.values()
        # The instance installed the shipped wheel with the notebook extra, and serves with the token only.
        assert "whl[s3,notebook]" in (booted.folder / "user-data").read_text()
        assert request(first["port"], "/api/contents", None)[0] == 403, "a request without the token must be refused"
        status, _ = request(first["port"], "/api/contents/results.txt", token, "PUT",
                            {"type": "file", "format": "text", "content": "kept through the interruption"})
        assert status in (200, 201)
        listing = request(first["port"], "/api/contents", token)[1]
        assert "results.txt" in [item["name"] for item in listing["content"]]

        cloud.interrupt(booted.instance_id, NOTICE_S)  # the notice in IMDS, the zone's capacity gone
        second = _server(store, job_id, "us-west-2b")
        status, doc = request(second["port"], "/api/contents/results.txt", token)
        assert status == 200 and doc["content"] == "kept through the interruption", (status, doc)
    finally:
        sdk.cancel(job_id)
        wait_for(lambda: not loop.is_alive() or cloud.errors, 240, f"the controller to stop notebook {job_id}")
    assert not cloud.errors, cloud.errors

    booted = list(cloud.instances.values())
    logs = "\n".join(f"--- {i.instance_id} ({i.zone})\n{i.boot_log[-3000:]}" for i in booted)
    attempts = [(a["state"], a["zone"]) for a in sdk.status(job_id)["attempts"] if a["state"] != "no_capacity"]
    assert attempts[0] == ("preempted", "us-west-2a") and attempts[1][1] == "us-west-2b", (attempts, logs)
    assert [i.zone for i in booted] == ["us-west-2a", "us-west-2b"] and all(i.powered_off for i in booted), logs
    states = {i["InstanceId"]: i["State"]["Name"] for i in instances(cloud.ec2, job_id)}
    assert set(states.values()) == {"terminated"}, states
    assert booted[0].imds.requests["GET /latest/meta-data/spot/instance-action"] > 0
    assert not any("no token" in path for i in booted for path in i.imds.requests)
    assert json.loads(store.read_bytes("attempts/0001/exit.json"))["code"] == EXIT_PREEMPTED
    # The instance imported the shipped wheel (with JupyterLab beside it), not this checkout.
    site = booted[0].folder / "opt" / "spotfit" / "venv" / "lib" / "python3.11" / "site-packages"
    version = running_wheel().filename.split("-")[1]
    assert (site / f"spotfit-{version}.dist-info").is_dir(), logs
