"""`spotfit submit`: every spec is checked before any job is recorded; folders expand to their specs."""

from __future__ import annotations

import subprocess

import pytest

from spotfit import sdk
from spotfit.sdk import batch
from tests.support.jobs import spotfit_cmd


def _spec(folder, name: str, text: str | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('never run')\n")
    path = folder / f"{name}.yaml"
    path.write_text(text or f"name: {name}\nscript: train.py\n")
    return path


@pytest.mark.parametrize(("args", "first_line"), [
    (["--parallel", "0"], "error: Invalid `--parallel`: received 0, expected an integer >= 1 and <= 1024."),
    (["BAD"], "error: Unknown field `scrpt` in {bad}: did you mean `script`?"),
    (["EMPTY"], "error: Folder {empty} holds no job spec: expected *.yaml or *.yml files in it."),
], ids=["parallel-0", "one-bad-spec", "empty-folder"])
def test_bad_input_records_nothing(tmp_path, args, first_line):
    good = _spec(tmp_path / "specs", "a")
    bad = _spec(tmp_path / "other", "b", "name: b\nscrpt: train.py\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [{"BAD": str(bad), "EMPTY": str(empty)}.get(a, a) for a in args]
    out = subprocess.run(spotfit_cmd("submit", str(good), *args), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0] == first_line.format(bad=bad, empty=empty)
    assert sdk.list_jobs() == []


def test_a_folder_stands_for_its_yaml_files_in_order(tmp_path):
    for name in ("b", "a"):
        _spec(tmp_path / "specs", name)
    (tmp_path / "specs" / "notes.txt").write_text("not a spec")
    assert [p.name for p in batch.expand([str(tmp_path / "specs")])] == ["a.yaml", "b.yaml"]


def test_without_gpus_one_job_runs_at_a_time(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi
    assert batch.default_parallel() == 1


def test_a_queued_job_is_shown_queued_cancelled_at_once_and_not_resumed_by_hand(tmp_path):
    doc = batch.submit([str(_spec(tmp_path / "specs", "a")), str(_spec(tmp_path / "specs", "b"))], parallel=1)
    first, second = doc["jobs"]  # recorded; no queue started here
    status = sdk.status(first)
    assert (status["state"], status["controller"]) == ("queued", "none (queued)")
    out = subprocess.run(spotfit_cmd("resume", first), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0] == f"error: Job {first} is queued: it waits in its batch for a slot, " \
                                         "and its batch's queue starts it."
    assert sdk.cancel(second)["state"] == "cancelled" and sdk.status(first)["state"] == "queued"
    assert not sdk.db().release_queued(second, "a slot is free")  # a cancelled job stays cancelled
