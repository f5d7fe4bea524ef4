"""Bad input for the kubernetes backend: one clear line and exit 2, before any job is recorded."""

from __future__ import annotations

import os
import subprocess

from spotfit import sdk
from tests.support.jobs import spotfit_cmd, write_spec
from tests.support.kube import FakeCluster

SPEC = """
name: kjob
script: train.py
backend: kubernetes
resources: {{accelerator: CPU, workers: {workers}}}
kubernetes: {{{kube}}}
"""


def _run(spec) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd("run", str(spec)), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _one_error_line(out: subprocess.CompletedProcess, *needles: str) -> None:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("error: "), out.stderr
    for needle in needles:
        assert needle in first, first


def test_a_missing_kubeconfig_is_one_line_exit_2(tmp_path):
    missing = tmp_path / "nowhere" / "config"
    spec = write_spec(tmp_path / "job", SPEC.format(workers=1, kube=f"kubeconfig: '{missing}'"))
    _one_error_line(_run(spec), "No kubeconfig", str(missing))
    assert sdk.list_jobs() == []


def test_an_unknown_context_names_the_known_ones(tmp_path):
    with FakeCluster(tmp_path) as cluster:
        config = cluster.write_kubeconfig(tmp_path / "kubeconfig", context="prod")
        spec = write_spec(tmp_path / "job", SPEC.format(workers=1, kube=f"kubeconfig: '{config}', context: staging"))
        _one_error_line(_run(spec), "kubernetes.context", "'staging'", "prod")


def test_an_unknown_node_pool_profile_is_one_line_exit_2(tmp_path):
    spec = write_spec(tmp_path / "job", SPEC.format(workers=1, kube="spot: ovh"))
    _one_error_line(_run(spec), "kubernetes.spot", "'ovh'", "'eks', 'gke', 'aks' or 'custom'")


def test_several_workers_asking_for_tfjob_without_its_crd_is_exit_2(tmp_path):
    with FakeCluster(tmp_path, tfjob_crd=False) as cluster:
        config = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        spec = write_spec(tmp_path / "job", SPEC.format(workers=2, kube=f"kubeconfig: '{config}', "
                                                                        "multi_worker: tfjob"))
        _one_error_line(_run(spec), "no TFJob CRD", "tfjobs.kubeflow.org")
        assert sdk.list_jobs() == []


def test_without_the_crd_auto_says_it_falls_back_to_an_indexed_job(tmp_path):
    with FakeCluster(tmp_path, tfjob_crd=False) as cluster:
        config = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        spec = write_spec(tmp_path / "job", SPEC.format(workers=2, kube=f"kubeconfig: '{config}'"))
        job_id = sdk.submit(str(spec))
    [note] = [e["message"] for e in sdk.events(job_id) if e["kind"] == "backend_note"]
    assert "no TFJob CRD" in note and "Indexed Job" in note


def test_with_the_crd_several_workers_need_no_note(tmp_path):
    with FakeCluster(tmp_path, tfjob_crd=True) as cluster:
        config = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        spec = write_spec(tmp_path / "job", SPEC.format(workers=2, kube=f"kubeconfig: '{config}'"))
        job_id = sdk.submit(str(spec))
    assert not [e for e in sdk.events(job_id) if e["kind"] == "backend_note"]


def test_store_credentials_in_the_spec_are_exit_2(tmp_path):
    spec = write_spec(tmp_path / "job", SPEC.format(workers=1, kube="namespace: ml")
                      + "env: {AWS_SECRET_ACCESS_KEY: abc}\n")
    _one_error_line(_run(spec), "AWS_SECRET_ACCESS_KEY", "store credentials come from the cluster")


def test_a_secret_variable_missing_here_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTFIT_TEST_TOKEN", raising=False)
    spec = write_spec(tmp_path / "job", SPEC.format(workers=1, kube="secret_env: [SPOTFIT_TEST_TOKEN]"))
    _one_error_line(_run(spec), "kubernetes.secret_env", "SPOTFIT_TEST_TOKEN")
