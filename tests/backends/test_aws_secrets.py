"""A secret of the spec reaches the script's environment through SSM and nowhere else (nor a webhook URL).

A canary value is read from the submitting shell, stored as a SecureString under the job's
SSM path, read back by the instance agent's own code with the instance's credentials, and
deleted when the job ends; the test then greps everything spotfit wrote (the state DB, the
job's store, logs, events, user-data, the `--dry-run` output and every `--json` document) and
finds it nowhere. moto answers EC2 and SSM; the instance side is the simulated one of
test_aws_recovery (moto runs no machine), the agent's SSM read is the real function.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from typer.testing import CliRunner

from spotfit import sdk
from spotfit.backends.aws.secrets import agent_env
from spotfit.cli import app
from spotfit.stores import open_store
from tests.backends.test_aws_recovery import SPEC, _drive

NAME = "SPOTFIT_CANARY_TOKEN"
CANARY = "canary-5d1e8b7f2a9c4e60-never-stored"


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_secret_lives_in_ssm_only_and_is_deleted_when_the_job_ends(aws, job_spec, monkeypatch, spotfit_home):
    monkeypatch.setenv(NAME, CANARY)
    # The webhook's URL is a secret too: it holds the canary, and must be written nowhere either.
    spec = str(job_spec(SPEC + f"secrets: [{NAME}]\nnotify: {{webhook: 'http://127.0.0.1:9/hook/{CANARY}'}}\n"))
    runner = CliRunner()
    outputs = [runner.invoke(app, ["run", spec, "--dry-run", "--json"]).output]
    assert '"RunInstances"' in outputs[0], outputs[0]

    seen: dict[str, dict] = {}
    real_submit = sdk.submit

    def submit_and_look(path: str, **kw) -> str:  # what SSM and the agent hold while the job runs
        job_id = real_submit(path, **kw)
        ssm = aws.session.client("ssm")
        seen["param"] = ssm.get_parameter(Name=f"/spotfit/{job_id}/{NAME}", WithDecryption=True)["Parameter"]
        seen["agent"] = agent_env(open_store(sdk.status(job_id)["store"]))
        return job_id

    monkeypatch.setattr(sdk, "submit", submit_and_look)
    doc = _drive(aws, job_spec, interrupt_at={1: 10}, spec=spec)
    assert doc["state"] == "completed", doc
    assert seen["param"]["Type"] == "SecureString" and seen["param"]["Value"] == CANARY
    assert seen["agent"] == {NAME: CANARY}  # what the agent puts into the script's environment
    params = aws.session.client("ssm").describe_parameters()["Parameters"]
    assert params == []  # deleted when the job ended

    job_id = doc["id"]
    for verb in (["status", job_id], ["cost", job_id], ["logs", job_id], ["list"], ["validate", spec]):
        out = runner.invoke(app, [*verb, "--json"])
        assert out.exit_code == 0, out.output
        outputs.append(out.output)
    outputs += [str(sdk.events(job_id))]
    user_data = [base64.b64decode(p["UserData"]).decode() if not p["UserData"].startswith("#!") else p["UserData"]
                 for p in aws.calls.of("RunInstances")]
    assert len(user_data) == 2
    assert not [o for o in outputs + user_data if CANARY in o]
    assert _files_holding(spotfit_home, CANARY.encode()) == []  # state DB (and WAL), store, logs
    assert _files_holding(Path(spec).parent, CANARY.encode()) == [spec]  # the user's own spec only
    assert os.environ[NAME] == CANARY  # the shell keeps it; spotfit never wrote it


def test_an_unset_secret_is_a_usage_error_before_anything_is_recorded(job_spec, monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    out = CliRunner().invoke(app, ["run", str(job_spec(SPEC + f"secrets: [{NAME}]\n")), "--json"])
    assert out.exit_code == 2, out.output
    assert f"Secret `{NAME}`" in out.output and f"export {NAME}=" in out.output
    assert sdk.db().list_jobs() == []


def test_cancelling_a_job_without_a_controller_deletes_its_secrets(aws, job_spec, monkeypatch):
    monkeypatch.setenv(NAME, CANARY)
    job_id = sdk.submit(str(job_spec(SPEC + f"secrets: [{NAME}]\n")))
    ssm = aws.session.client("ssm")
    assert [p["Name"] for p in ssm.describe_parameters()["Parameters"]] == [f"/spotfit/{job_id}/{NAME}"]
    assert sdk.cancel(job_id)["state"] == "cancelled"
    assert ssm.describe_parameters()["Parameters"] == []
