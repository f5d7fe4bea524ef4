"""`spotfit gc` deletes the SSM secrets of aws jobs that ended, and never those of live or resumable ones.

A controller that dies between its job's end and the delete leaves `/spotfit/<job>/<NAME>`
SecureStrings behind. moto answers SSM (and EC2 for the rest of `gc`); the state DB holds one
aws job of each kind, each with a parameter as `spotfit run` stores it (secrets.put).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from typer.testing import CliRunner

from spotfit import sdk
from spotfit.backends.aws import secrets
from spotfit.cli import app
from spotfit.spec.job import JobSpec
from spotfit.state.states import JobState
from tests.support.aws_moto import REGION

NAME = "TOKEN"


def _job(job_id: str, state: JobState, backend: str = "aws", with_secrets: bool = True) -> None:
    spec = JobSpec.model_validate({"name": job_id, "script": "train.py", "backend": backend,
                                   "secrets": [NAME] if with_secrets else [],
                                   "market": {"zones": [f"{REGION}a"], "trace": None}})
    sdk.db().create_job(job_id, job_id, spec.model_dump_json(), f"file:///tmp/{job_id}", state=state)


def _parameters(aws) -> set[str]:
    return {p["Name"] for p in aws.session.client("ssm", region_name=REGION).describe_parameters()["Parameters"]}


def test_gc_deletes_the_secrets_of_ended_aws_jobs_only(aws, monkeypatch):
    monkeypatch.setattr("spotfit.backends.aws.gc.load_boto3", lambda: SimpleNamespace(Session=lambda: aws.session))
    ssm = aws.session.client("ssm", region_name=REGION)
    kinds = {"done": JobState.COMPLETED, "broke": JobState.FAILED, "live": JobState.RUNNING,
             "paused": JobState.STOPPED, "waits": JobState.WAITING}
    for job_id, state in kinds.items():
        _job(job_id, state)
        secrets.put(ssm, job_id, {NAME: f"value-of-{job_id}"})
    secrets.put(ssm, "elsewhere", {NAME: "a job this state DB does not know"})
    everything = _parameters(aws)
    ended = {f"/spotfit/done/{NAME}", f"/spotfit/broke/{NAME}"}

    runner = CliRunner()
    listed = runner.invoke(app, ["gc", "--region", REGION, "--dry-run", "--json"])
    assert listed.exit_code == 0, (listed.output, listed.exception)
    doc = json.loads(listed.stdout)
    assert {n for e in doc["secrets"] for n in e["parameters"]} == ended
    assert {e["region"] for e in doc["secrets"]} == {REGION}
    assert _parameters(aws) == everything  # a dry run deletes nothing
    assert "value-of" not in listed.stdout  # names only

    narrowed = json.loads(runner.invoke(app, ["gc", "--region", REGION, "--job", "done", "--dry-run",
                                              "--json"]).stdout)
    assert [e["job"] for e in narrowed["secrets"]] == ["done"]

    done = runner.invoke(app, ["gc", "--region", REGION, "--include-active"])
    assert done.exit_code == 0, (done.output, done.exception)
    assert "ssm: removed the secret parameters of 2 ended job(s)" in done.stdout
    assert f"parameter /spotfit/done/{NAME}" in done.stdout
    assert _parameters(aws) == everything - ended  # live, stopped, waiting and unknown jobs keep theirs

    again = json.loads(runner.invoke(app, ["gc", "--region", REGION, "--json"]).stdout)
    assert again["secrets"] == []
