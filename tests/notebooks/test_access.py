"""Pure parts of interactive work: the spec, the idle rule, the access commands, the AWS requests of a notebook."""

from __future__ import annotations

import json

import pytest

from spotfit import access, sdk
from spotfit.backends.aws.handle import AwsHandle
from spotfit.backends.kubernetes.handle import KubernetesHandle
from spotfit.controller.budget import rules_of
from spotfit.controller.rules import Observation, RuleEngine
from spotfit.errors import SpecError, UsageError
from spotfit.rulespec import IdleNotebook
from spotfit.spec import parse_spec


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
    forward = access.port_forward_command("aws", handle, {}, 8888, 8888)
    assert forward[:7] == ["aws", "ssm", "start-session", "--region", "us-east-1", "--target", "i-0abc"]
    assert json.loads(forward[-1]) == {"portNumber": ["8888"], "localPortNumber": ["8888"]}
    assert "AWS-StartPortForwardingSession" in forward
    ssh = access.port_forward_command("aws", handle, {"key_name": "team"}, 6006, 6006)
    assert ssh[0] == "ssh" and ssh[-3:] == ["-L", "127.0.0.1:6006:127.0.0.1:6006", "ubuntu@i-0abc"]
    assert any("AWS-StartSSHSession" in part for part in ssh)  # no inbound port: SSH rides on SSM
    assert access.shell_command("aws", handle, {}, ["nvidia-smi"])[-1] == json.dumps({"command": ["nvidia-smi"]})


def test_kubernetes_access_is_kubectl_on_the_attempts_job():
    handle = KubernetesHandle(namespace="ml", name="nb-1", kind="Job", job="nb", attempt=1, job_url="s3://b/j",
                              context="prod")
    assert access.shell_command("kubernetes", handle, {}, []) == [
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
