"""Every manifest spotfit can produce, validated against the Kubernetes OpenAPI schemas (strict).

The core kinds (Job, Service, Secret, the pods' template) against `kubernetes-validate`'s
schemas of the newest Kubernetes it ships; the TFJob's envelope against tfjob_schema.py and its
pod template against the core `PodTemplateSpec`. Then the properties the issue asks for.
"""

from __future__ import annotations

import itertools
import json
import shlex

import pytest
import yaml

from spotfit.backends.base import LaunchOptions, LaunchRequest, backend_options
from spotfit.backends.kubernetes import manifests as mf
from spotfit.backends.kubernetes.backend import KubernetesBackend
from spotfit.backends.kubernetes.pod import tf_config, worker_env
from spotfit.backends.kubernetes.profiles import PROFILES
from spotfit.backends.kubernetes.spec import Kubernetes
from spotfit.backends.wheel import running_wheel
from spotfit.errors import SpecError
from spotfit.spec.job import parse_spec
from tests.backends.kube.tfjob_schema import TFJOB_SCHEMA
from tests.support.jobs import spotfit_cmd, write_spec
from tests.support.k8s_schemas import schemas
from tests.support.launch_options import launch_options

CUSTOM = {"spot_selector": {"pool": "spot"}, "on_demand_selector": {"pool": "regular"},
          "spot_tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}


def _request(workers: int = 1, market: str = "spot", accelerator: str = "V100", launch: LaunchOptions | None = None,
             **options) -> LaunchRequest:
    """The request; `launch` (a spec's `backend_options`) in place of the flat `options` over the test's defaults."""
    opts = {"namespace": "ml", "image": "tensorflow/tensorflow:2.21.0-gpu", "grace_s": 120, **options}
    return LaunchRequest(job_id="digits-20261130-214352-ab12", attempt=3, job_url="s3://b/spotfit/jobs/digits",
                         zone=None, market=market, workers=workers, env={"MODE": "fast"}, accelerator=accelerator,
                         accelerator_count=2, options=launch or launch_options(Kubernetes, **opts))


def _objects(workers: int = 1, market: str = "spot", tfjob: bool = False, **options) -> list[dict]:
    settings = KubernetesBackend().settings(_request(workers, market, **options), tfjob=tfjob)
    return mf.attempt_objects(settings, {n: "value" for n in settings.secret_env})


def _every_manifest():
    for profile, market in itertools.product([None, *PROFILES], ["spot", "on_demand"]):
        opts = {"spot": profile, **(CUSTOM if profile == "custom" else {})}
        yield f"job-{profile}-{market}", _objects(1, market, **opts)
    yield "job-cpu-secrets", _objects(1, accelerator="CPU", secret_env=["WANDB_API_KEY"],
                                      env_from_secrets=["team-tokens"], service_account="trainer")
    yield "indexed-job", _objects(3, spot="gke")
    yield "tfjob", _objects(3, tfjob=True, spot="aks", secret_env=["TOKEN"])
    yield "job-data-volume", _objects(1, data_size_gib=200, data_storage_class="fast-ssd")
    yield "tfjob-data-volume", _objects(2, tfjob=True, data_size_gib=0.5)
    yield "job-data-mount", _objects(1, data_size_gib=2, data_mode="mount")
    yield "tfjob-data-mount", _objects(2, tfjob=True, data_mode="mount")


def _validate(obj: dict) -> None:
    jsonschema, kubernetes_validate, version = schemas()
    if obj["kind"] == "TFJob":
        jsonschema.validate(obj, TFJOB_SCHEMA)
        for replica in obj["spec"]["tfReplicaSpecs"].values():
            kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                          "template": replica["template"]}, version, strict=True)
    else:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("case", list(_every_manifest()), ids=lambda c: c[0])
def test_every_manifest_validates_against_the_kubernetes_schemas(case):
    _, objects = case
    for obj in objects:
        _validate(obj)


def test_the_schemas_catch_a_broken_manifest():
    jsonschema, kubernetes_validate, _ = schemas()
    [job] = _objects(1)
    job["spec"]["template"]["spec"]["restartPolicy"] = 7
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(job)
    [tfjob] = [o for o in _objects(2, tfjob=True) if o["kind"] == "TFJob"]
    tfjob["spec"]["runPolicy"]["cleanPodPolicy"] = "Sometimes"
    with pytest.raises(jsonschema.ValidationError):
        _validate(tfjob)


def test_one_worker_is_a_job_of_one_pod_that_never_restarts_and_asks_for_gpus():
    [job] = _objects(1, spot="eks")
    pod = job["spec"]["template"]["spec"]
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0 and "completions" not in job["spec"]
    assert pod["restartPolicy"] == "Never" and pod["terminationGracePeriodSeconds"] == 120
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert pod["nodeSelector"] == {"eks.amazonaws.com/capacityType": "SPOT"}


@pytest.mark.parametrize(("profile", "spot_fields", "on_demand_fields"), [
    ("eks", {"nodeSelector": {"eks.amazonaws.com/capacityType": "SPOT"}},
     {"nodeSelector": {"eks.amazonaws.com/capacityType": "ON_DEMAND"}}),
    ("gke", {"nodeSelector": {"cloud.google.com/gke-spot": "true"},
             "tolerations": [{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true",
                              "effect": "NoSchedule"}]},
     {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}]}]}}}}),
    ("aks", {"nodeSelector": {"kubernetes.azure.com/scalesetpriority": "spot"},
             "tolerations": [{"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
                              "effect": "NoSchedule"}]},
     {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "kubernetes.azure.com/scalesetpriority", "operator": "NotIn",
                                "values": ["spot"]}]}]}}}}),
    ("custom", {"nodeSelector": {"pool": "spot"}, "tolerations": CUSTOM["spot_tolerations"]},
     {"nodeSelector": {"pool": "regular"}}),
])
def test_the_profile_places_spot_and_on_demand_attempts(profile, spot_fields, on_demand_fields):
    keys = ("nodeSelector", "tolerations", "affinity")
    opts = {"spot": profile, **(CUSTOM if profile == "custom" else {})}
    for market, expected in (("spot", spot_fields), ("on_demand", on_demand_fields)):
        [job] = _objects(1, market, **opts)
        pod = job["spec"]["template"]["spec"]
        assert {k: pod[k] for k in keys if k in pod} == expected, market


def test_several_workers_without_tfjob_are_an_indexed_job_behind_a_headless_service():
    service, job = _objects(3, spot="gke")
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 3
    assert job["spec"]["parallelism"] == 3
    assert job["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == {mf.LABEL_NAME: job["metadata"]["name"]}
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    pod_env = worker_env({"SPOTFIT_WORKERS": "3", "JOB_COMPLETION_INDEX": "2", "SPOTFIT_NAMESPACE": "ml",
                          "SPOTFIT_SERVICE": env["SPOTFIT_SERVICE"]["value"],
                          "SPOTFIT_WORKER_PORT": env["SPOTFIT_WORKER_PORT"]["value"]})
    config = json.loads(pod_env["TF_CONFIG"])
    name = job["metadata"]["name"]
    assert config == tf_config(3, 2, name, "ml", 2222)
    assert config["cluster"]["worker"][0] == f"{name}-0.{name}.ml.svc:2222"  # the pod's DNS name in the Service


def test_several_workers_with_the_crd_are_a_tfjob_and_secrets_come_as_env_from():
    secret, tfjob = _objects(2, tfjob=True, secret_env=["TOKEN"])
    worker = tfjob["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2 and worker["restartPolicy"] == "Never"
    assert tfjob["spec"]["runPolicy"]["backoffLimit"] == 0
    container = worker["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    assert secret["stringData"] == {"TOKEN": "value"}
    assert "TF_CONFIG" not in {e["name"] for e in container["env"]}  # the operator sets it


def test_a_notebook_job_pod_installs_the_notebook_extra_and_a_training_job_pod_does_not():
    def script(raw: dict) -> str:
        spec = parse_spec({"name": "j", "backend": "kubernetes", **raw})
        return KubernetesBackend().settings(_request(launch=backend_options(spec))).script

    wheel = f"/tmp/{running_wheel().filename}"
    assert shlex.quote(f"{wheel}[s3,gcs,notebook]") in script({"kind": "notebook"})
    assert shlex.quote(f"{wheel}[s3,gcs]") in script({"script": "train.py"})


def test_runtime_wheel_and_runtime_pip_together_are_refused():
    with pytest.raises(SpecError, match="runtime_pip"):
        parse_spec({"name": "j", "script": "train.py", "kubernetes": {"runtime_pip": "spotfit==0.1.0",
                                                                       "runtime_wheel": "s3://b/spotfit-0.1.0.whl"}})


def test_a_job_with_a_data_size_gets_an_ephemeral_volume_for_its_cache_sized_like_on_aws():
    [job] = _objects(1, data_size_gib=200, data_storage_class="fast-ssd")
    pod = job["spec"]["template"]["spec"]
    [volume] = pod["volumes"]
    claim = volume["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "250Gi"}},
                     "storageClassName": "fast-ssd"}  # 200 GiB + 20% + 10 GiB
    [container] = pod["containers"]
    assert container["volumeMounts"] == [{"name": volume["name"], "mountPath": mf.DATA_CACHE_MOUNT}]
    assert {"name": "SPOTFIT_CACHE_DIR", "value": mf.DATA_CACHE_MOUNT} in container["env"]
    [plain] = _objects(1)
    assert "volumes" not in plain["spec"]["template"]["spec"]
    assert "SPOTFIT_CACHE_DIR" not in json.dumps(plain)
    # Through the spec: `data.size_gib` and `kubernetes.data_storage_class` reach the options.
    spec = parse_spec({"name": "d", "script": "t.py", "backend": "kubernetes",
                       "data": {"source": "s3://b/d", "size_gib": 3}, "kubernetes": {"data_storage_class": "gp3"}})
    opts = backend_options(spec)
    assert opts.data.size_gib == 3 and opts.section_as(Kubernetes).data_storage_class == "gp3"


def test_a_job_that_mounts_its_data_gets_dev_fuse_and_sys_admin_and_no_other_job_does():
    [job] = _objects(1, data_size_gib=2, data_mode="mount")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert {"name": mf.FUSE_VOLUME, "mountPath": "/dev/fuse"} in container["volumeMounts"]
    assert {"name": mf.FUSE_VOLUME, "hostPath": {"path": "/dev/fuse", "type": "CharDevice"}} in pod["volumes"]
    assert len(pod["volumes"]) == 2  # the data cache's volume too: the VFS cache lives there
    assert "securityContext" not in json.dumps(_objects(1, data_size_gib=2))
    spec = parse_spec({"name": "d", "script": "t.py", "backend": "kubernetes",
                       "data": {"source": "s3://b/d", "mode": "mount"}})
    assert backend_options(spec).data.mode == "mount"


def test_dry_run_prints_exactly_the_manifests(tmp_path):
    import subprocess

    spec = write_spec(tmp_path / "job", "name: digits\nscript: train.py\nbackend: local\n"
                                        "resources: {accelerator: T4, workers: 2}\n"
                                        "checkpoint: {store: 's3://bucket/spotfit'}\n"
                                        "kubernetes: {spot: aks, namespace: ml, service_account: trainer}\n")
    out = subprocess.run(spotfit_cmd("run", str(spec), "--backend", "kubernetes", "--dry-run"),
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    objects = [o for o in yaml.safe_load_all(out.stdout) if o]
    assert [o["kind"] for o in objects] == ["Service", "Job"]
    for obj in objects:
        _validate(obj)
    assert "Indexed Job + headless Service fallback" in out.stdout
    doc = subprocess.run(spotfit_cmd("run", str(spec), "--backend", "kubernetes", "--dry-run", "--json"),
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    as_json = json.loads(doc.stdout)["objects"]
    wheel = f"s3://bucket/spotfit/cache/wheels/{running_wheel().filename}"  # where `launch` uploads it
    for listing in (objects, as_json):
        assert shlex.quote(wheel) in listing[1]["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    name = as_json[1]["metadata"]["name"]  # job ids differ between the two runs: compare all else
    assert json.dumps(objects).replace(objects[1]["metadata"]["name"], "N").replace(
        objects[1]["metadata"]["labels"][mf.LABEL_JOB], "J") == json.dumps(as_json).replace(name, "N").replace(
        as_json[1]["metadata"]["labels"][mf.LABEL_JOB], "J")
