"""Configuration errors fail the job at once: one line in `status`, exit 2, nothing billed or pending.

The CLI cases run `spotfit run` as a user does (a process, no TensorFlow: every one of them is
found before a launch). The runtime's own report (exit 78, a dataset found too large only where
it runs) is driven through a stand-in backend whose attempt exits that way.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spotfit import sdk
from spotfit.backends.base import AttemptStatus
from spotfit.controller.classify import EXIT_CONFIG, ConfigError
from spotfit.controller.loop import Controller
from spotfit.spec.job import JobSpec
from spotfit.stores import open_store
from tests.support.jobs import spotfit_cmd

MARKET = "trace: aws-v100, zones: [us-west-2a], start: '2023-02-17T19:16:00', time_scale: 10"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


@pytest.mark.slow
@pytest.mark.parametrize(("market", "field", "hint"), [
    ("{trace: no-such-trace}", "market.trace", "Set `market.trace: aws-v100`"),
    (f"{{{MARKET.replace('us-west-2a', 'mars-1a')}}}", "Unknown zone 'mars-1a'", "zones that the trace contains"),
    (f"{{{MARKET}, policy: no_such_policy}}", "market.policy", "Set `market.policy:`"),
    (f"{{{MARKET}, policy: optimum}}", "offline policy", "Set `market.policy:`"),
    ("{trace: aws-v100, start: '1990-01-01T00:00:00'}", "market.start", "start inside the trace"),
])
def test_a_market_that_cannot_run_fails_the_job_at_once(job_spec, market, field, hint):
    spec = job_spec(f"name: cfg\nscript: train.py\nmarket: {market}\n")
    out = _cli("run", str(spec), "--json")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and field in lines[0], lines
    assert lines[1].startswith("hint: ") and hint in lines[1] and "--" not in lines[1], lines  # no flag `run` lacks
    doc = sdk.status("cfg")
    assert doc["state"] == "failed" and doc["controller"] == "finished"
    assert doc["message"].startswith("configuration error: ") and field in doc["message"]
    assert doc["attempts"] == [] and doc["cost_usd"] == 0.0


@pytest.mark.slow
def test_a_dataset_over_the_cache_limit_fails_before_any_launch(job_spec, tmp_path):
    data = open_store(f"file://{tmp_path}/dataset")
    data.write_bytes("train/part-0.bin", b"x" * 3 * 2**20)  # 3 MiB against a 1 MiB limit
    spec = job_spec(f"name: big\nscript: train.py\nmarket: {{{MARKET}}}\n"
                    f"data: {{source: 'file://{tmp_path}/dataset', cache_limit_gib: 0.0009765625}}\n")
    out = _cli("run", str(spec), "--json")
    assert out.returncode == 2, out.stderr
    assert "data.cache_limit_gib" in out.stderr.splitlines()[0]
    doc = sdk.status("big")
    assert doc["state"] == "failed" and doc["attempts"] == [] and doc["cost_usd"] == 0.0


@pytest.mark.slow
def test_a_script_gone_before_the_launch_fails_the_job_at_once(job_spec):
    spec = job_spec(f"name: gone\nscript: train.py\nmarket: {{{MARKET}}}\n")
    job_id = sdk.submit(str(spec))
    (spec.parent / "train.py").unlink()
    with pytest.raises(ConfigError, match="no longer exists"):
        sdk.run_job(job_id)
    doc = sdk.status(job_id)
    assert doc["state"] == "failed" and doc["attempts"] == [] and doc["cost_usd"] == 0.0


class _Handle(str):
    def to_json(self) -> str:
        return str(self)


class _ExitsWith:
    """A stand-in backend whose every attempt has ended with `code` (and reported why)."""

    name = "stand-in"
    runs_here = False

    def __init__(self, store_url: str, code: int):
        self.store = open_store(store_url)
        self.code = code
        self.launches = 0

    def launch(self, request):
        self.launches += 1
        event = {"attempt": request.attempt, "ts": 0.0, "kind": "failed",
                 "message": "UsageError: Dataset file:///d needs 3 MiB of cache, more than allowed (1 MiB).",
                 "data": {"error": "UsageError", "hint": "Raise `data.cache_limit_gib` in the job spec."}}
        self.store.write_bytes(f"events/{request.attempt:04d}-000001.json", json.dumps(event).encode())
        return _Handle(f"h{request.attempt}")

    def load_handle(self, text: str) -> _Handle:
        return _Handle(text)

    def status(self, handle) -> AttemptStatus:
        return AttemptStatus(running=False, exit_code=self.code)

    def stop(self, handle, grace_s: float = 10.0) -> None:
        pass

    def find(self, request):
        return None


def _stand_in_job(tmp_path, code: int) -> tuple[Controller, _ExitsWith]:
    spec = JobSpec.model_validate({"name": "rt", "script": "train.py", "max_failures": 3,
                                   "market": {"trace": None, "zones": []}})
    url = f"file://{tmp_path}/store"
    sdk.db().create_job("rt-1", "rt", spec.model_dump_json(), url)
    backend = _ExitsWith(url, code)
    return Controller(sdk.db(), "rt-1", backend=backend, poll_s=0.0), backend


def test_a_configuration_error_the_runtime_reports_is_not_retried(tmp_path, monkeypatch):
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    controller, backend = _stand_in_job(tmp_path, EXIT_CONFIG)
    with pytest.raises(ConfigError, match="cache_limit|needs 3 MiB") as err:
        controller.run()
    assert err.value.hint == "Raise `data.cache_limit_gib` in the job spec."
    assert backend.launches == 1
    job = sdk.db().get_job("rt-1")
    assert job["state"] == "failed" and job["message"].startswith("configuration error: UsageError: Dataset")


def test_a_failure_that_may_pass_is_retried(tmp_path, monkeypatch):
    # The default back-offs (30, 60, 120 s) at a thousandth: the same doubling, kept for real.
    monkeypatch.setenv("SPOTFIT_WAIT_SCALE", "0.001")
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    controller, backend = _stand_in_job(tmp_path, 1)
    assert controller.run() == "failed"
    assert backend.launches == 4  # 1 try + max_failures 3
    delays = [e["data"]["delay_s"] for e in sdk.db().events("rt-1") if e["kind"] == "backoff"]
    assert delays == pytest.approx([0.03, 0.06, 0.12])
    attempts = sdk.db().attempts("rt-1")
    for before, after, delay in zip(attempts[:-1], attempts[1:], delays, strict=True):
        assert after["started_at"] - before["ended_at"] >= delay, (before, after)  # no launch before its back-off
