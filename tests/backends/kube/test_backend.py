"""The kubernetes backend against the emulator's API (real client, real HTTP), pods left Pending.

No pod runs here (`run_pods=False`: as when no node has room), so these tests are fast; the
pods' own behaviour is in test_preemption.py.
"""

from __future__ import annotations

import json
import shlex

import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.backends.base import LaunchRequest
from spotfit.backends.kubernetes import manifests as mf
from spotfit.backends.kubernetes.backend import KubernetesBackend
from spotfit.backends.kubernetes.spec import Kubernetes
from spotfit.backends.wheel import running_wheel
from spotfit.errors import UsageError
from spotfit.stores import open_store
from tests.support.kube import FakeCluster
from tests.support.launch_options import launch_options


@pytest.fixture
def cluster(tmp_path):
    with FakeCluster(tmp_path, tfjob_crd=True, run_pods=False) as fake:
        yield fake


def _request(tmp_path, cluster, workers: int = 1, attempt: int = 1, **options) -> LaunchRequest:
    job_url = f"file://{tmp_path}/store/jobs/j1"
    config = RuntimeConfig(job_id="j1", job_url=job_url, script=str(tmp_path / "train.py"), workdir=str(tmp_path),
                           attempt=attempt)
    open_store(job_url).write_bytes(f"attempts/{attempt:04d}/runtime.json", config.to_json().encode())
    opts = {"kubeconfig": str(cluster.write_kubeconfig(tmp_path / "kubeconfig")), "namespace": "ml",
            "image": "tf:gpu", "spot": "eks", **options}
    return LaunchRequest(job_id="j1", attempt=attempt, job_url=job_url, zone=None, market="spot", workers=workers,
                         accelerator="V100", accelerator_count=1, options=launch_options(Kubernetes, **opts))


def test_launch_sends_exactly_the_dry_run_objects_and_ships_the_code(tmp_path, cluster):
    request = _request(tmp_path, cluster)
    backend = KubernetesBackend(allow_local_store=True)
    handle = backend.launch(request)
    [job] = [o for (plural, _, _), o in cluster.objects.items() if plural == "jobs"]
    [expected] = mf.attempt_objects(backend.settings(request))
    assert {k: job[k] for k in ("apiVersion", "kind", "spec")} == {k: expected[k] for k in ("apiVersion", "kind",
                                                                                             "spec")}
    assert handle.kind == "Job" and handle.name == expected["metadata"]["name"]
    launch = json.loads(open_store(request.job_url).read_bytes("attempts/0001/launch.json"))
    assert launch["code_key"] and launch["workdir"] == str(tmp_path)
    assert backend.status(handle).running  # Pending: the attempt is under way


def test_launch_uploads_the_running_wheel_to_the_url_the_pod_fetches(tmp_path, cluster):
    request = _request(tmp_path, cluster)
    KubernetesBackend(allow_local_store=True).launch(request)
    [job] = [o for (plural, _, _), o in cluster.objects.items() if plural == "jobs"]
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    url = f"file://{tmp_path}/store/cache/wheels/{running_wheel().filename}"
    assert shlex.quote(url) in script and "[s3,gcs]" in script and "pip install --quiet 'spotfit[" not in script
    assert open_store(f"file://{tmp_path}/store/cache").read_bytes(f"wheels/{running_wheel().filename}") == \
        running_wheel().data


def test_a_runtime_wheel_or_runtime_pip_is_installed_instead_and_nothing_is_shipped(tmp_path, cluster):
    backend = KubernetesBackend(allow_local_store=True)
    own = "s3://b/w/spotfit-0.1.0-py3-none-any.whl"
    wheel_script = backend.settings(_request(tmp_path, cluster, runtime_wheel=own)).script
    assert shlex.quote(own) in wheel_script and "cache/wheels" not in wheel_script
    backend.launch(_request(tmp_path, cluster, runtime_pip="spotfit[s3,gcs]==0.1.0"))
    [job] = [o for (plural, _, _), o in cluster.objects.items() if plural == "jobs"]
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "pip install --quiet 'spotfit[s3,gcs]==0.1.0'" in script and ".whl" not in script
    assert not open_store(f"file://{tmp_path}/store/cache").exists(f"wheels/{running_wheel().filename}")


def test_a_retried_launch_and_find_reuse_the_first_objects(tmp_path, cluster):
    request = _request(tmp_path, cluster)
    backend = KubernetesBackend(allow_local_store=True)
    first = backend.launch(request)
    assert backend.launch(request) == first
    assert len(cluster.pods()) == 1 and len([k for k in cluster.objects if k[0] == "jobs"]) == 1
    assert backend.find(request) == first
    assert backend.find(_request(tmp_path, cluster, attempt=2)) is None


def test_several_workers_with_the_crd_make_a_tfjob(tmp_path, cluster):
    backend = KubernetesBackend(allow_local_store=True)
    request = _request(tmp_path, cluster, workers=2)
    handle = backend.launch(request)
    assert handle.kind == "TFJob" and backend.find(request) == handle
    [tfjob] = [o for (plural, _, _), o in cluster.objects.items() if plural == "tfjobs"]
    assert tfjob["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2
    assert backend.status(handle).running  # no pods yet (the emulator runs no operator), the TFJob is there
    backend.stop(handle, grace_s=0)
    assert cluster.objects == {}


def test_preempt_evicts_the_pods_and_the_attempt_ends(tmp_path, cluster):
    backend = KubernetesBackend(allow_local_store=True)
    handle = backend.launch(_request(tmp_path, cluster))
    [pod] = cluster.pods()
    backend.preempt(handle, notice_s=30)
    assert ("POST", f"/api/v1/namespaces/ml/pods/{pod['metadata']['name']}/eviction") in cluster.requests
    status = backend.status(handle)
    # The evicted pod never ran and is gone, its Job failed: over, and the store's exit record tells how.
    assert not status.running and status.exit_code is None


def test_stop_deletes_every_object_of_the_attempt(tmp_path, cluster, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "k")
    backend = KubernetesBackend(allow_local_store=True)
    handle = backend.launch(_request(tmp_path, cluster, workers=2, multi_worker="indexed",
                                     secret_env=["WANDB_API_KEY"]))
    assert {k[0] for k in cluster.objects} == {"secrets", "services", "jobs", "pods"}
    backend.stop(handle, grace_s=0)
    backend.stop(handle, grace_s=0)  # idempotent
    assert cluster.objects == {}


def test_store_credentials_in_the_spec_are_refused(tmp_path, cluster):
    request = _request(tmp_path, cluster)
    request.env = {"AWS_SECRET_ACCESS_KEY": "x"}
    with pytest.raises(UsageError, match="store credentials come from the cluster"):
        KubernetesBackend(allow_local_store=True).launch(request)


def test_a_file_store_is_refused_for_real_clusters(tmp_path, cluster):
    with pytest.raises(UsageError, match="s3:// or gs://"):
        KubernetesBackend().launch(_request(tmp_path, cluster))


def test_a_pod_lost_with_its_node_is_preempted_by_the_node_event(tmp_path, cluster):
    backend = KubernetesBackend(allow_local_store=True)
    handle = backend.launch(_request(tmp_path, cluster))
    [pod] = cluster.pods()
    cluster.lose_node(pod["metadata"]["name"], namespace="ml")
    status = backend.status(handle)
    assert (status.running, status.exit_code, status.disrupted) == (False, 137, True)


def test_a_pod_that_failed_on_a_healthy_node_is_a_failure(tmp_path, cluster):
    backend = KubernetesBackend(allow_local_store=True)
    handle = backend.launch(_request(tmp_path, cluster))
    [pod] = cluster.pods()
    cluster.lose_node(pod["metadata"]["name"], namespace="ml", reason="Scheduled")  # an event that means nothing
    status = backend.status(handle)
    assert (status.running, status.exit_code, status.disrupted) == (False, 137, False)
