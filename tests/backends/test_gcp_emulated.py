"""The main GCP end-to-end test: the real boot path on an emulated Compute Engine, through a preemption.

The Compute Engine API of the tests, gcp-storage-emulator (GCS) and a metadata server per VM,
all on 127.0.0.1 (tests/support/emulated_gce.py). Each VM runs its actual startup script in a
sandbox: it installs the spotfit wheel the controller shipped and the job's environment (or
unpacks the cached venv), and the agent runs the runtime on the digits script. The controller,
the backend and its official client, the agent, the runtime and TensorFlow are the real ones;
what is emulated is listed in docs/gcp.md.

A secret canary rides along: the spec's `secrets:` names it, the controller puts it in the
emulated Secret Manager, each VM's agent reads it with the token of its metadata server, and the
script (a wrapper around the digits script) writes its hash; the value itself must appear nowhere
else: not the instance metadata or startup script, the `--dry-run` output, the logs, the job's
store or the state DB. It is deleted when the job ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotfit import sdk
from spotfit.cli import app
from spotfit.stores import open_store
from tests.support.emulated_gce import EmulatedGce
from tests.support.gcs import BUCKET
from tests.support.preemption_run import TRAINING, ran, through_preemption
from tests.support.sandbox import PROBE, assert_runs_shipped_wheel

pytestmark = [pytest.mark.slow, pytest.mark.emulated_instance]

NAME = "SPOTFIT_CANARY_TOKEN"
CANARY = "canary-7b3e1d9a4c2f8e60-gcp-never-stored"
WRAPPER = f"""import hashlib, os, runpy
with open(os.environ["SECRET_PROBE"], "w") as fh:
    fh.write(hashlib.sha256(os.environ["{NAME}"].encode()).hexdigest())
runpy.run_path("train.py", run_name="__main__")
"""
GCP = """
name: emulated-gcp
backend: gcp
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-central1-a, us-central1-b], preemptions: [{{at_step: 20, notice_s: 30}}]}}
gcp: {{runtime_extras: [gcs]}}
environment: {{pip: ["{probe}==1.0"]}}
secrets: [SPOTFIT_CANARY_TOKEN]
env: {{SECRET_PROBE: "{secret_probe}"}}
""" + TRAINING.replace("script: train.py", "script: with_secret.py")


@pytest.fixture
def cloud(tmp_path, gcs, monkeypatch):
    emulated = EmulatedGce(tmp_path / "cloud", gcs).start()
    for name, value in emulated.controller_env().items():
        monkeypatch.setenv(name, value)
    yield emulated
    emulated.stop()


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_preemption_on_emulated_vms_resumes_in_the_next_zone_with_identical_weights(tmp_path, cloud, job_spec,
                                                                                     monkeypatch, spotfit_home):
    store = f"gs://{BUCKET}/emulated-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv(NAME, CANARY)
    probe = tmp_path / "secret-probe.txt"
    spec = job_spec(GCP.format(store=store, probe=PROBE, secret_probe=probe))
    (spec.parent / "with_secret.py").write_text(WRAPPER)
    outputs = [CliRunner().invoke(app, ["run", str(spec), "--dry-run", "--json"]).output]
    assert "compute.instances.insert" in outputs[0], outputs[0]

    def stored_in_secret_manager(job_id: str) -> None:
        """The controller stored the value in Secret Manager, labelled with the job; the store names it only."""
        [secret] = cloud.secret_manager.ids()
        assert secret.startswith("spotfit-") and secret.endswith(NAME)
        assert json.loads(open_store(f"{store}/jobs/{job_id}").read_bytes("secrets.json"))["secrets"] == {NAME: secret}

    job_id, doc, baseline = through_preemption(cloud, str(spec), tmp_path, dict(os.environ),
                                               stored_in_secret_manager)  # the baseline trains while the VM boots
    booted = list(cloud.vms.values())
    logs = "\n".join(f"--- {v.name} ({v.zone})\n{v.boot_log[-3000:]}" for v in booted)
    assert doc["state"] == "completed", (doc, logs)

    # Saved at the step of the notice, marked preempted, went on in the next zone.
    assert ran(doc) == [("preempted", "us-central1-a", 0, 20), ("completed", "us-central1-b", 20, 47)], doc["attempts"]
    assert doc["weights_sha256"] == baseline["weights_sha256"]
    # Without a trace, the bill and the policy used the Billing Catalog's prices, and said so.
    assert any(e["kind"] == "market" and "from the Cloud Billing Catalog" in e["message"] for e in doc["events"])

    # Two real boots, each to `shutdown`; the agent long-polled instance/preempted with the header.
    assert [v.zone for v in booted] == ["us-central1-a", "us-central1-b"] and all(v.powered_off for v in booted), logs
    assert all(v.metadata.requests["/computeMetadata/v1/instance/preempted"] > 0 for v in booted)
    assert all(v.metadata.refused == 0 for v in booted)
    first, second = booted
    assert "installed" in first.boot_log and "unpacked from the cache" in second.boot_log, logs
    boot_tail = sdk.logs(job_id)["boot_log_tail"]
    assert "powering off" in boot_tail, boot_tail
    assert_runs_shipped_wheel(second)
    assert open_store(store).exists(f"jobs/{job_id}/attempts/0001/exit.json")

    # Nothing is left running: every VM of the job is gone, and `spotfit gc` finds nothing of it.
    assert cloud.api.live() == [], cloud.api.live()
    gc = CliRunner().invoke(app, ["gc", "--backend", "gcp", "--dry-run", "--json"])
    assert gc.exit_code == 0 and json.loads(gc.stdout)["regions"] == [] == json.loads(gc.stdout)["secrets"], gc.output

    # The secret: each VM's agent read it as the VM (the emulator refuses any other caller), the script
    # saw it, the job's end deleted it, and the value is nowhere else.
    assert cloud.secret_manager.accessed == 2 and cloud.secret_manager.ids() == []
    assert probe.read_text() == hashlib.sha256(CANARY.encode()).hexdigest()
    for verb in (["status", job_id], ["logs", job_id], ["cost", job_id], ["list"]):
        out = CliRunner().invoke(app, [*verb, "--json"])
        assert out.exit_code == 0, out.output
        outputs.append(out.output)
    metadata = [value for vm in booted for value in vm.metadata.docs.values()]
    scripts = [(vm.folder / "startup-script").read_text() for vm in booted]
    assert not [o for o in outputs + metadata + scripts + [str(doc)] if CANARY in o]
    assert _files_holding(cloud.folder, CANARY.encode()) == []  # boot and console logs, the VMs' disks
    assert _files_holding(spotfit_home, CANARY.encode()) == []  # the state DB, the controller's logs
    objects = open_store(store)
    held = [key for key in objects.list("") if CANARY.encode() in objects.read_bytes(key)]
    assert held == []  # the job's store: code, checkpoints, logs, the env cache
