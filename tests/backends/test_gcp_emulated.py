"""The main GCP end-to-end test: the real boot path on an emulated Compute Engine, through a preemption.

The Compute Engine API of the tests, gcp-storage-emulator (GCS) and a metadata server per VM,
all on 127.0.0.1 (tests/support/emulated_gce.py). Each VM runs its actual startup script in a
sandbox: it installs the spotfit wheel the controller shipped and the job's environment (or
unpacks the cached venv), and the agent runs the runtime on the digits script. The controller,
the backend and its official client, the agent, the runtime and TensorFlow are the real ones;
what is emulated is listed in docs/gcp.md.
"""

from __future__ import annotations

import os
import uuid

import pytest

from spotfit import sdk
from spotfit.stores import open_store
from tests.support.emulated_gce import EmulatedGce
from tests.support.gcs import BUCKET
from tests.support.preemption_run import TRAINING, ran, through_preemption
from tests.support.sandbox import PROBE, assert_runs_shipped_wheel

pytestmark = [pytest.mark.slow, pytest.mark.emulated_instance]

GCP = """
name: emulated-gcp
backend: gcp
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-central1-a, us-central1-b], preemptions: [{{at_step: 20, notice_s: 30}}]}}
gcp: {{runtime_extras: [gcs]}}
environment: {{pip: ["{probe}==1.0"]}}
""" + TRAINING


@pytest.fixture
def cloud(tmp_path, gcs, monkeypatch):
    emulated = EmulatedGce(tmp_path / "cloud", gcs).start()
    for name, value in emulated.controller_env().items():
        monkeypatch.setenv(name, value)
    yield emulated
    emulated.stop()


def test_preemption_on_emulated_vms_resumes_in_the_next_zone_with_identical_weights(tmp_path, cloud, job_spec):
    store = f"gs://{BUCKET}/emulated-{uuid.uuid4().hex[:6]}"
    job_id, doc, baseline = through_preemption(cloud, str(job_spec(GCP.format(store=store, probe=PROBE))), tmp_path,
                                               dict(os.environ))  # the baseline trains while the first VM boots
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

    # Nothing is left running: every VM of the job is gone.
    assert cloud.api.live() == [], cloud.api.live()
