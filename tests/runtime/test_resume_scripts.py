"""Exact resume of ordinary Keras scripts the project has never seen: several `fit` calls,
stateful callbacks, input pipelines. Each is preempted with a notice, without one (SIGKILL) and
at an epoch boundary, and must end with the uninterrupted run's weights and step."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job, spotfit_home_at

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
SPEC = """name: {name}
script: train.py
args: {args}
market: {{trace: null}}
checkpoint: {{interval: {{steps: 10}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""


def _run(tmp_path: Path, script: str, *flags: str, args: str = "[]") -> tuple[dict, Path]:
    doc = run_inline_job(tmp_path, SPEC.format(name=script.replace("_", "-"), args=args),
                         (SCRIPTS / f"{script}.py").read_text(), *flags)
    assert doc["state"] == "completed", doc
    return doc, tmp_path / "job"


def _events(doc: dict, kind: str) -> list[dict]:
    return [e for e in doc.get("events", []) if e["kind"] == kind]


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def two_phase_base(tmp_path_factory) -> tuple[dict, Path]:
    """The uninterrupted two_phase run, computed once for the tests that compare with it."""
    folder = tmp_path_factory.mktemp("two-phase-base")
    with spotfit_home_at(folder / "home"):
        return _run(folder, "two_phase")


def test_two_fit_calls_with_stateful_callbacks_resume_exactly(tmp_path, two_phase_base):
    # 12 steps per epoch; EarlyStopping ends call 1 after 4 epochs (step 48) and call 2 after 4
    # more (step 96). Notice mid-epoch in call 1 (20), SIGKILL mid-epoch in call 2 (70), notice
    # on call 2's epoch boundary (84).
    base, base_dir = two_phase_base
    doc, job_dir = _run(tmp_path / "preempted", "two_phase", "--preempt-at", "20:5,70:0,84:5")
    assert base["step"] == 96
    assert (doc["step"], doc["weights_sha256"]) == (base["step"], base["weights_sha256"])
    attempts = doc["attempts"]
    assert [a["state"] for a in attempts] == ["preempted", "killed", "preempted", "completed"]
    assert [a["end_step"] for a in attempts[:3]] == [20, 70, 84]  # global steps across both calls
    assert attempts[1]["start_step"] == 20 and attempts[3]["start_step"] == 84
    assert attempts[2]["start_step"] == 68  # the SIGKILL: the last periodic save in call 2, not call 1's end
    assert sdk.cost(doc["id"])["totals"]["steps_redone"] == 2  # 69 and 70, trained twice
    assert doc["total_steps"] == 96  # both calls, exact once the script ended
    partial = [e for e in sdk.events(doc["id"]) if e["kind"] == "callback_state_partial"]
    assert partial and all(e["data"]["callback"] == "BatchCounter" and e["data"]["attributes"] == ["lock"]
                           for e in partial)
    assert json.loads((job_dir / "summary.json").read_text()) == json.loads((base_dir / "summary.json").read_text())
    for log in ("phase1.csv", "phase2.csv"):  # appended across attempts, no epoch twice
        assert _rows(job_dir / log) == _rows(base_dir / log)
    for run in ("train", "validation"):  # Keras's TensorBoard callback: every step once, none missing
        assert _scalar_steps(job_dir / "tb" / run) == _scalar_steps(base_dir / "tb" / run)


def _scalar_steps(folder: Path) -> list[tuple[str, int]]:
    """(tag, step) of every scalar in a run's event files, sorted, repeats kept."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out = []
    for path in sorted(folder.glob("events.out.tfevents*")):
        for event in EventFileLoader(str(path)).Load():
            out += [(v.tag, event.step) for v in event.summary.value if v.tag.startswith(("epoch_", "batch_"))]
    return sorted(out)


def test_pydataset_generator_and_weighted_arrays_resume_exactly(tmp_path):
    # Three models in turn: a reshuffling PyDataset with workers (steps 1-80), a Python generator
    # (81-140), arrays with validation_split, class_weight, steps_per_execution=4 and
    # initial_epoch (141-220). Notice in the PyDataset's epoch 1 (30), SIGKILL in the generator's
    # epoch 2 (115), notice on the arrays' epoch boundary (156).
    base, base_dir = _run(tmp_path / "base", "pipelines")
    doc, job_dir = _run(tmp_path / "preempted", "pipelines", "--preempt-at", "30:5,115:0,156:5")
    assert base["step"] == 220
    assert (doc["step"], doc["weights_sha256"]) == (base["step"], base["weights_sha256"])
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "killed", "preempted", "completed"]
    assert json.loads((job_dir / "summary.json").read_text()) == json.loads((base_dir / "summary.json").read_text())


def test_custom_gradient_tape_loop_resumes_exactly(tmp_path):
    # 60 steps over 12 batches a pass: a notice on a pass boundary (24), then a SIGKILL (43).
    base, base_dir = _run(tmp_path / "base", "custom_loop")
    doc, job_dir = _run(tmp_path / "preempted", "custom_loop", "--preempt-at", "24:5,43:0")
    assert base["step"] == 60
    assert (doc["step"], doc["weights_sha256"]) == (base["step"], base["weights_sha256"])
    attempts = doc["attempts"]
    assert [a["state"] for a in attempts] == ["preempted", "killed", "completed"]
    assert attempts[1]["start_step"] == 24 and attempts[2]["start_step"] == 34  # saves every 10 steps from 24
    assert json.loads((job_dir / "summary.json").read_text()) == json.loads((base_dir / "summary.json").read_text())


def test_the_ledger_counts_the_steps_an_attempt_really_resumed_from(tmp_path, two_phase_base):
    # A SIGKILL at step 5, before any checkpoint: the next attempt trains from step 0. A SIGKILL
    # at step 50, in call 2 before its first periodic save (58): the next resumes from call 1's
    # end record (step 48). The ledger takes both from the runtime, not from the step last seen.
    base, _ = two_phase_base
    doc, _ = _run(tmp_path / "killed", "two_phase", "--preempt-at", "5:0,50:0")
    assert (doc["step"], doc["weights_sha256"]) == (base["step"], base["weights_sha256"])
    attempts = doc["attempts"]
    assert [(a["state"], a["start_step"], a["end_step"]) for a in attempts] == [
        ("killed", 0, 5), ("killed", 0, 50), ("completed", 48, 96)]
    assert sdk.cost(doc["id"])["totals"]["steps_redone"] == 5 + 2
