"""A job with the name of a live job is refused unless `--allow-duplicate` is given; batches too.

`spotfit run` and `spotfit submit` in a subprocess, as a user runs them; the live job is one
recorded with `sdk.submit` (pending: no controller runs it). Only `--allow-duplicate`'s job runs,
on a hollow attempt (its `hollow.json`: the scenario's default small job; no TensorFlow).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.hollow import SCENARIO_FILE
from spotfit.sdk import batch
from tests.support.jobs import spotfit_cmd


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _spec(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('trained')\n")
    (folder / SCENARIO_FILE).write_text("{}")  # what a hollow attempt trains: the scenario's defaults
    (folder / "spotfit.yaml").write_text(f"name: {name}\nscript: train.py\nmax_failures: 0\nmarket: {{trace: null}}\n")
    return folder / "spotfit.yaml"


def test_a_second_run_with_a_live_jobs_name_is_refused_and_names_it(tmp_path):
    spec = _spec(tmp_path / "job", "twin")
    live = sdk.submit(str(spec))
    out = _cli("run", str(spec), "--json")
    assert out.returncode == 2, (out.stdout, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: A job named 'twin' is already live: " + live), lines
    assert "--allow-duplicate" in lines[1], lines
    assert [j["id"] for j in sdk.list_jobs()] == [live]  # nothing else recorded, launched or billed


@pytest.mark.slow  # its job runs a controller and an attempt: `make test`'s, not the fast loop's
@pytest.mark.usefixtures("hollow")
def test_allow_duplicate_runs_both(tmp_path):
    spec = _spec(tmp_path / "job", "twin")
    live = sdk.submit(str(spec))
    out = _cli("run", str(spec), "--allow-duplicate", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed" and doc["id"] != live
    assert doc["step"] == 40  # the hollow attempt trained its scenario (2 epochs of 20 steps)
    assert sorted(j["name"] for j in sdk.list_jobs()) == ["twin", "twin"]


def test_a_job_that_ended_does_not_hold_its_name(tmp_path):
    spec = _spec(tmp_path / "job", "again")
    first = sdk.submit(str(spec))
    assert sdk.cancel(first)["state"] == "cancelled"  # no controller: cancelled at once
    second = sdk.submit(str(spec))
    assert second != first and sdk.status("again")["id"] == second


def test_a_batch_refuses_names_it_shares_with_itself_or_a_live_job(tmp_path):
    a, a_again, b = _spec(tmp_path / "a", "a"), _spec(tmp_path / "a2", "a"), _spec(tmp_path / "b", "b")
    out = _cli("submit", str(a), str(a_again))
    assert out.returncode == 2 and "Two specs of the batch name their job 'a'" in out.stderr, out.stderr[-2000:]
    live = sdk.submit(str(b))
    out = _cli("submit", str(a), str(b))
    assert out.returncode == 2 and f"A job named 'b' is already live: {live}" in out.stderr, out.stderr[-2000:]
    assert [j["id"] for j in sdk.list_jobs()] == [live]  # not even `a` was recorded
    doc = batch.submit([str(a), str(a_again), str(b)], parallel=1, allow_duplicate=True)  # the queue is not started
    assert [sdk.status(j)["state"] for j in doc["jobs"]] == ["queued"] * 3
