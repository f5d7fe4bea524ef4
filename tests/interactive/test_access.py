"""Pure parts of interactive work: the spec, the idle rule, the access commands, the AWS requests of a notebook."""

from __future__ import annotations

import json

import pytest

from spotfit import interactive, sdk
from spotfit.backends.aws.handle import AwsHandle
from spotfit.backends.aws.spec import Aws
from spotfit.backends.base import LaunchOptions
from spotfit.backends.kubernetes.handle import KubernetesHandle
from spotfit.controller.budget import rules_of
from spotfit.controller.rules import Observation, RuleEngine
from spotfit.errors import SpecError, UsageError
from spotfit.interactive import access
from spotfit.spec.job import parse_spec
from spotfit.spec.rules import IdleNotebook
from spotfit.stores import open_store
from tests.support.launch_options import launch_options


def test_a_notebook_needs_no_script_and_gets_the_default_idle_rule():
    spec = parse_spec({"name": "nb", "kind": "notebook"})
    assert spec.is_notebook and spec.script is None
    (rule,) = rules_of(spec)
    assert (rule.rule, rule.below_pct, rule.for_s, rule.action) == ("idle_notebook", 10.0, 3600.0, "stop")
    own = parse_spec({"name": "nb", "kind": "notebook", "rules": [{"rule": "idle_notebook", "for_s": 60}]})
    assert [r.for_s for r in rules_of(own)] == [60]


def test_a_training_job_still_needs_its_script():
    with pytest.raises(SpecError, match="Missing field `script`"):
        parse_spec({"name": "job"})


def test_idle_notebook_fires_only_without_kernel_activity_and_with_a_quiet_accelerator():
    rule = IdleNotebook(rule="idle_notebook", for_s=60, below_pct=10)
    quiet = [(t, 2.0) for t in range(1000, 1100)]
    assert RuleEngine([rule]).check(Observation(now_s=1100, last_activity_at=1050, utilization=quiet)) == []
    busy = [*quiet[:-1], (1099, 55.0)]
    assert RuleEngine([rule]).check(Observation(now_s=1100, last_activity_at=1000, utilization=busy)) == []
    (verdict,) = RuleEngine([rule]).check(Observation(now_s=1100, last_activity_at=1000, utilization=quiet))
    assert verdict.action == "stop" and "no kernel activity for 100s" in verdict.message


def test_aws_access_goes_through_ssm_and_ssh_rides_on_it():
    handle = AwsHandle(region="us-east-1", job="nb", attempt=1, job_url="s3://b/j", instances=("i-0abc",))
    forward = access.port_forward_command("aws", handle, LaunchOptions(), 8888, 8888)
    assert forward[:7] == ["aws", "ssm", "start-session", "--region", "us-east-1", "--target", "i-0abc"]
    assert json.loads(forward[-1]) == {"portNumber": ["8888"], "localPortNumber": ["8888"]}
    assert "AWS-StartPortForwardingSession" in forward
    ssh = access.port_forward_command("aws", handle, launch_options(Aws, key_name="team"), 6006, 6006)
    assert ssh[0] == "ssh" and ssh[-3:] == ["-L", "127.0.0.1:6006:127.0.0.1:6006", "ubuntu@i-0abc"]
    assert any("AWS-StartSSHSession" in part for part in ssh)  # no inbound port: SSH rides on SSM
    shell = access.shell_command("aws", handle, LaunchOptions(), ["nvidia-smi"])
    assert shell[-1] == json.dumps({"command": ["nvidia-smi"]})


def test_kubernetes_access_is_kubectl_on_the_attempts_job():
    handle = KubernetesHandle(namespace="ml", name="nb-1", kind="Job", job="nb", attempt=1, job_url="s3://b/j",
                              context="prod")
    assert access.shell_command("kubernetes", handle, LaunchOptions(), []) == [
        "kubectl", "--context", "prod", "--namespace", "ml", "exec", "-it", "job/nb-1", "--", "/bin/bash"]


@pytest.mark.parametrize("text", ["", "0", "99999", "a:b", "1:2:3"])
def test_bad_ports_are_one_clear_error(text):
    with pytest.raises(UsageError, match="expected LOCAL:REMOTE or PORT"):
        access.parse_ports(text)


def test_a_notebook_on_aws_opens_nothing_to_the_world_and_requires_imdsv2(tmp_path):
    spec = tmp_path / "nb.yaml"
    spec.write_text("name: nb\nkind: notebook\nbackend: aws\naws: {key_name: k, ssh_cidr: 203.0.113.7/32}\n")
    calls = sdk.dry_run(str(spec))["calls"]
    ingress = [r for c in calls if c["operation"] == "AuthorizeSecurityGroupIngress"
               for perm in c["params"]["IpPermissions"] for r in perm.get("IpRanges", []) + perm.get("Ipv6Ranges", [])]
    assert ingress and all(r.get("CidrIp", r.get("CidrIpv6")) not in ("0.0.0.0/0", "::/0") for r in ingress)
    assert {r.get("CidrIp") for r in ingress} == {"203.0.113.7/32"}
    (run,) = [c for c in calls if c["operation"] == "RunInstances"]
    assert run["params"]["MetadataOptions"]["HttpTokens"] == "required"


def _running_notebook(tmp_path, backend: str, handle) -> str:
    """A notebook job recorded as running on `backend` with `handle`, its server up on port 8888."""
    from spotfit.attempt import notebook
    from spotfit.interactive import notebooks
    from spotfit.state.states import AttemptState

    spec = parse_spec({"name": "nb", "kind": "notebook", "backend": backend}, base_dir=str(tmp_path))
    url = f"file://{tmp_path}/store/jobs/nb-1"
    store = open_store(url)
    notebook.new_token("nb-1")
    notebooks.seed(spec, "nb-1", store)
    sdk.db().create_job("nb-1", "nb", spec.model_dump_json(), url)
    number = sdk.db().add_attempt("nb-1", backend=backend, zone=None, market="spot", state=AttemptState.LAUNCHING)
    sdk.db().update_attempt("nb-1", number, handle=handle.to_json(), state=AttemptState.RUNNING)
    store.write_bytes("notebook/server.json", json.dumps({"attempt": number, "port": 8888}).encode())
    return "nb-1"


def test_notebook_open_on_aws_forwards_its_port_over_ssm_and_keeps_the_token_out_of_json(tmp_path):
    handle = AwsHandle(region="us-west-2", job="nb-1", attempt=1, job_url="s3://b/j", instances=("i-0abc",))
    where = interactive.notebook_where(_running_notebook(tmp_path, "aws", handle))
    token = open(where["token_file"]).read().strip()
    assert where["url"] == "http://127.0.0.1:8888/lab" and token not in json.dumps(where)
    assert where["forward"][:7] == ["aws", "ssm", "start-session", "--region", "us-west-2", "--target", "i-0abc"]
    assert interactive.port_forward("nb-1", "6006")["argv"][-1] == json.dumps({"portNumber": ["6006"],
                                                                        "localPortNumber": ["6006"]})


def test_notebook_open_on_kubernetes_is_a_kubectl_port_forward(tmp_path):
    handle = KubernetesHandle(namespace="default", name="nb-1-0001", kind="Job", job="nb-1", attempt=1,
                              job_url="s3://b/j")
    where = interactive.notebook_where(_running_notebook(tmp_path, "kubernetes", handle))
    assert where["forward"] == ["kubectl", "--namespace", "default", "port-forward", "--address", "127.0.0.1",
                                "job/nb-1-0001", "8888:8888"]
    assert interactive.shell("nb-1", ["nvidia-smi"])["argv"][-2:] == ["--", "nvidia-smi"]
