"""Sweeps run to their end: kill -9 and resume, ASHA's pauses, prunes and promotions, a preemption, publishing.

The scheduling runs on hollow attempts (spotfit/hollow/): 6 trials of the tiny script, 2 at once,
ASHA, trial 0 preempted at step 5, the sweep controller killed mid-sweep and resumed, each trial's
metrics drawn from its params (`vary_with_args`, tests/support/hollow_jobs.py). Hollow steps take
no time, so each trial hands over to the test at its rungs (`gates`, `referee`): before its first epoch's
report (step 10) until the test lets it report, and after the reports of epochs 1 and 3 (steps 11
and 31) until the sweep has judged them: its pause (a stop request ends the wait) or the test's go.
So the sweep, not the machine's speed, decides where each trial stops, and the kill lands when
trials 0-3 have jobs and trials 2 and 3 have not reported: trials 4 and 5 start after the resume.

One small sweep stays real TensorFlow, two trials and no kill: it is the proof that a sweep
publishes the best trial's real Keras export (`model.keras` and its card) and that a preempted
trial's epochs equal a solo Keras run's. The last two tests are about the sweep controller alone
and run hollow attempts, each held at a step until its cancel.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.sweep import study
from spotfit.sweep.runner import db
from spotfit.sweep.spec import SweepSpec
from spotfit.sweep.trials import param_text
from tests.support.hollow_jobs import reference
from tests.support.jobs import spotfit_cmd
from tests.support.wait import wait_for
from tests.sweep.tiny import SCRIPT, SWEEP, job_folder

TRIALS = 6
RUNG_STEPS = {1: 11, 3: 31}  # the step after each rung's epoch end (10 steps an epoch)


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _epochs(job_id: str) -> dict[int, dict]:
    return {e["data"]["epoch"]: e["data"]["metrics"] for e in sdk.db().events(job_id) if e["kind"] == "epoch_end"}


def _args(params: dict) -> list[str]:
    return [x for name, value in params.items() for x in (f"--{name}", param_text(value))]


def gates(folder: Path) -> list[dict]:
    """Each trial's turns with the test (hollow `handoffs`, one set of files per job): before its first
    epoch's report, and after the reports of the rungs' epochs, where a stop request also ends the wait."""
    turns = [{"at": 10, "touch": f"{folder}/{{job_id}}-10", "wait_for": f"{folder}/{{job_id}}-10.go"}]
    return turns + [{"at": step, "touch": f"{folder}/{{job_id}}-{step}", "wait_for": f"{folder}/{{job_id}}-{step}.go",
                     "until_stop": True} for step in RUNG_STEPS.values()]


def referee(sweep_id: str, folder: Path, report: set[int] | None = None) -> None:
    """Let the trials on: those in `report` (all: None) report their first epoch; a trial the sweep has
    judged at a rung and left running trains on (one it paused stops there on its stop request)."""
    for trial in db().trials(sweep_id):
        job = trial["job_id"]
        if job is None:
            continue
        if (report is None or trial["number"] in report) and (folder / f"{job}-10").exists():
            (folder / f"{job}-10.go").touch()
        ends = {e["data"]["epoch"]: e["id"] for e in sdk.db().events(job) if e["kind"] == "epoch_end"}
        for epoch, step in RUNG_STEPS.items():
            judged = epoch in ends and trial["events_seen"] >= ends[epoch]  # read with the row's state
            if judged and trial["state"] == "running" and (folder / f"{job}-{step}").exists():
                (folder / f"{job}-{step}.go").touch()


@pytest.mark.slow
def test_sweep_survives_kill_and_resume_prunes_promotes_and_reproduces(tmp_path, spotfit_home):
    folder = tmp_path / "gates"
    folder.mkdir()
    spec_path = job_folder(tmp_path / "sweep", "tiny", [], hollow={"handoffs": gates(folder)})
    (spec_path.parent / "sweep.yaml").write_text(SWEEP.replace("trials: 12", f"trials: {TRIALS}"))
    log = (tmp_path / "sweep.err").open("w")
    proc = subprocess.Popen(spotfit_cmd("sweep", str(spec_path.parent / "sweep.yaml"), "--json",
                                        "--preempt-at", "5:5", "--preempt-trial", "0"),
                            stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL, env=os.environ.copy())
    try:
        sweep_id = wait_for(lambda: next((s["id"] for s in db().list_sweeps()), None), 120, "the sweep's record")
        # Trials 0 and 1 report and pause at epoch 1 (a rung of one or two values keeps none); trials 2
        # and 3 start in their slots and stand before their first report until after the resume.
        wait_for(lambda: referee(sweep_id, folder, {0, 1}) or sum(
            t["job_id"] is not None for t in db().trials(sweep_id)) >= 4, 600, "four trials with jobs (mid-sweep)")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert db().get_sweep(sweep_id)["state"] == "running"
    assert [t["number"] for t in db().trials(sweep_id)] == [0, 1, 2, 3]

    with (tmp_path / "resume.out").open("w+") as stdout, (tmp_path / "resume.err").open("w+") as stderr:
        resume = subprocess.Popen(spotfit_cmd("sweep", "resume", sweep_id, "--json"), stdout=stdout, stderr=stderr,
                                  stdin=subprocess.DEVNULL, env=os.environ.copy())
        try:
            wait_for(lambda: referee(sweep_id, folder) or resume.poll() is not None, 600, "the resumed sweep's end")
        finally:
            if resume.poll() is None:
                resume.kill()
            resume.wait()
        stdout.seek(0)
        stderr.seek(0)
        assert resume.returncode == 0, stderr.read()[-3000:]
        doc = json.loads(stdout.read())

    # The documented shape, and every trial run exactly once.
    assert set(doc) == {"id", "state", "trials", "best", "totals"} and doc["state"] == "completed"
    assert set(doc["totals"]) == {"spent_usd", "saved_by_pruning_usd"}
    assert all(set(t) == {"number", "params", "state", "value", "cost_usd", "job_id"} for t in doc["trials"])
    assert [t["number"] for t in doc["trials"]] == list(range(TRIALS))
    trial_jobs = [j for j in sdk.db().list_jobs(1000) if j["name"].startswith(sweep_id)]
    assert sorted(j["id"] for j in trial_jobs) == sorted(t["job_id"] for t in doc["trials"])
    assert len({j["name"] for j in trial_jobs}) == TRIALS
    spec = SweepSpec.model_validate(json.loads(db().get_sweep(sweep_id)["spec_json"]))
    closed = study.load(sweep_id, spec).get_trials(deepcopy=False)
    assert len(closed) == TRIALS and all(t.state.is_finished() for t in closed)
    assert {t["state"] for t in doc["trials"]} <= {"completed", "pruned"}
    assert doc["totals"]["spent_usd"] == pytest.approx(sum(t["cost_usd"] for t in doc["trials"]))
    assert doc["totals"]["spent_usd"] > 0

    # Pruned trials stopped on a checkpoint; a promotion resumed where its trial had stopped.
    pruned = [t for t in doc["trials"] if t["state"] == "pruned"]
    assert len(pruned) >= 2 and doc["totals"]["saved_by_pruning_usd"] > 0
    for trial in pruned:
        job = sdk.status(trial["job_id"])
        assert job["state"] == "stopped" and job["attempts"][-1]["state"] == "stopped"
        assert any(e["kind"] == "pruned" and e["data"]["action"] == "pruned" for e in sdk.events(job["id"]))
    promoted = [t for t in db().trials(sweep_id) if t["promotions"]]
    assert promoted, "no trial was promoted"
    for trial in promoted:
        attempts = sdk.status(trial["job_id"])["attempts"]
        stops = [i for i, a in enumerate(attempts) if a["state"] == "stopped"]
        assert stops and all(attempts[i + 1]["start_step"] == attempts[i]["end_step"] > 0
                             for i in stops if i + 1 < len(attempts))

    # The sweep's last promotion: its best trial completed, though ASHA had paused it.
    best = doc["best"]
    best_job = sdk.status(doc["trials"][best["number"]]["job_id"])
    assert doc["trials"][best["number"]]["state"] == best_job["state"] == "completed"
    assert best_job["weights_sha256"] == reference(SCRIPT, _args(best["params"]))["weights_sha256"]

    # Trial 0 was preempted at step 5 and went on from there.
    first = sdk.status(doc["trials"][0]["job_id"])
    assert first["attempts"][0]["state"] == "preempted" and first["attempts"][0]["end_step"] == 5
    assert first["attempts"][1]["start_step"] == 5

    # Re-run trial 0 and the best trial alone (each its own job, no turns with the test; the two at once).
    reruns = [str(job_folder(tmp_path / label, f"rerun-{label}", _args(params), hollow={}))
              for label, params in (("first", doc["trials"][0]["params"]), ("best", best["params"]))]
    out = _cli("submit", *reruns, "--parallel", "2", "--wait", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    batch = json.loads(out.stdout)
    solo_first, solo_best = (sdk.status(j["id"]) for j in batch["jobs"])
    assert solo_first["state"] == solo_best["state"] == "completed"
    assert solo_best["metrics"]["val_accuracy"] == best["value"]
    # Every epoch trial 0 reported, the interrupted one's included, is the solo run's.
    first_epochs, solo_epochs = _epochs(first["id"]), _epochs(solo_first["id"])
    assert first_epochs  # at least epoch 1, which the preemption at step 5 interrupted
    assert first_epochs == {epoch: solo_epochs[epoch] for epoch in first_epochs}
    listed = json.loads(_cli("list", "--json").stdout)
    assert {j["group"] for j in listed if j["id"] in {solo_first["id"], solo_best["id"]}} == {batch["id"]}
    assert {j["group"] for j in listed if j["name"].startswith(sweep_id)} == {sweep_id}

    page = tmp_path / "compare.html"
    out = _cli("sweep", "compare", sweep_id, "--out", str(page))
    assert out.returncode == 0, out.stderr
    text = page.read_text()
    assert "<h2>Optimization history</h2><div" in text and "<h2>Parameter importances</h2>" in text
    assert "<script src=" not in text and "plotly" in text  # plotly.js inline: opens offline


@pytest.mark.slow
def test_a_sweep_publishes_the_best_trials_keras_export_and_a_preempted_trial_trains_as_a_solo_run(
        tmp_path, spotfit_home):
    # Real TensorFlow, 4 runtime start-ups: two trials at once (trial 0 preempted at step 5, so two
    # attempts), no pruner to pace the steps for (`TINY_PACE_S=0`), and trial 0 re-run alone.
    spec_path = job_folder(tmp_path / "sweep", "tiny", [], {"TINY_PACE_S": "0"})
    sweep = spec_path.parent / "sweep.yaml"
    sweep.write_text(SWEEP.replace("trials: 12", "trials: 2").replace("pruner: asha", "pruner: none"))
    out = _cli("sweep", str(sweep), "--json", "--preempt-at", "5:5", "--preempt-trial", "0")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed" and [t["state"] for t in doc["trials"]] == ["completed", "completed"]

    # The best trial's Keras model, published under the base job's name with the sweep in its card.
    best = doc["best"]
    assert best["value"] == max(t["value"] for t in doc["trials"])
    card = json.loads((spotfit_home / "registry" / "tiny" / "1" / "model_card.json").read_text())
    assert card["sweep"]["id"] == doc["id"] and card["sweep"]["trial"] == best["number"]
    assert card["sweep"]["params"] == best["params"]
    assert card["sweep"]["objective"] == {"metric": "val_accuracy", "mode": "max", "value": best["value"]}
    assert card["sweep"]["trial_model"] == sdk.status(doc["trials"][best["number"]]["job_id"])["export"]["url"]
    assert (spotfit_home / "registry" / "tiny" / "1" / "model.keras").is_file()

    # Trial 0 was preempted at step 5 and went on from there, with the weights of a solo Keras run:
    # the validation metrics (a function of the weights) of every epoch, and all metrics of the epochs
    # after the interrupted one, equal the solo run's. (The interrupted epoch's training means are the
    # runtime's documented exception when its running sums cannot be put back: `metrics_not_restored`.)
    first = sdk.status(doc["trials"][0]["job_id"])
    assert [(a["state"], a["start_step"], a["end_step"]) for a in first["attempts"]][0] == ("preempted", 0, 5)
    assert first["attempts"][1]["start_step"] == 5 and first["state"] == "completed"
    solo_spec = job_folder(tmp_path / "solo", "solo", _args(doc["trials"][0]["params"]), {"TINY_PACE_S": "0"})
    out = _cli("run", str(solo_spec), "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    solo = json.loads(out.stdout)
    assert solo["state"] == "completed" and solo["weights_sha256"] == first["weights_sha256"]
    first_epochs, solo_epochs = _epochs(first["id"]), _epochs(solo["id"])
    assert sorted(first_epochs) == sorted(solo_epochs) == list(range(1, 7))
    for epoch, metrics in first_epochs.items():
        compared = metrics if epoch > 1 else {k: v for k, v in metrics.items() if k.startswith("val_")}
        assert compared == {k: solo_epochs[epoch][k] for k in compared}, epoch


@pytest.mark.slow
def test_a_metric_the_script_never_reports_stops_the_sweep_after_the_first_epoch(tmp_path):
    # Hollow trials: each stands still after its first epoch (at step 11) until the sweep's cancel (a notice).
    spec_path = job_folder(tmp_path / "sweep", "tiny", [], hollow={"wait_for_notice_at": [11]})
    sweep = spec_path.parent / "sweep.yaml"
    sweep.write_text(SWEEP.replace("val_accuracy", "val_auc").replace("trials: 12", "trials: 3"))
    out = _cli("sweep", str(sweep))
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if not line.startswith("sweep ")]
    assert lines[0] == ("error: Invalid `objective.metric`: received 'val_auc', but the script's first epoch "
                        "reported accuracy, loss, val_accuracy, val_loss.")
    assert lines[1].startswith("hint: ") and len(lines) == 2
    [sweep_row] = db().list_sweeps()
    assert sweep_row["state"] == "failed"
    for trial in db().trials(sweep_row["id"]):
        job = wait_for(lambda t=trial: (lambda s: s if s["controller"] == "finished" else None)(
            sdk.status(t["job_id"])), 300, f"trial {trial['number']}'s job to end")
        assert job["state"] == "cancelled" and (job["total_steps"] is None or job["step"] < job["total_steps"])


@pytest.mark.slow
def test_cancel_sweep_stops_every_running_trial_on_a_checkpoint(tmp_path):
    # Hollow trials: each stands still at step 5 (not yet trained) until the cancel's notice.
    spec_path = job_folder(tmp_path / "sweep", "tiny", ["--epochs", "400"], hollow={"wait_for_notice_at": [5]})
    sweep = spec_path.parent / "sweep.yaml"
    sweep.write_text(SWEEP.replace("trials: 12", "trials: 4").replace("pruner: asha", "pruner: none"))
    out = _cli("sweep", str(sweep), "--detach", "--json")
    assert out.returncode == 0, out.stderr
    sweep_id = json.loads(out.stdout)["id"]
    jobs = wait_for(lambda: (lambda ids: ids if len(ids) == 2 and all(sdk.db().get_job(j)["step"] > 0 for j in ids)
                             else None)([t["job_id"] for t in db().trials(sweep_id) if t["job_id"]]),
                    600, "two trials training")
    out = _cli("cancel", sweep_id, "--json")
    assert out.returncode == 0, out.stderr
    for job_id in jobs:
        job = wait_for(lambda j=job_id: (lambda s: s if s["controller"] == "finished" else None)(sdk.status(j)),
                       300, f"{job_id} to end")
        last = job["attempts"][-1]
        assert job["state"] == "cancelled" and last["state"] == "stopped"
        saved = [e["message"] for e in sdk.events(job_id) if e["kind"] == "checkpoint"]
        assert saved and saved[-1].startswith(f"saved step {last['end_step']} ")  # its last step is kept
    assert wait_for(lambda: db().get_sweep(sweep_id)["state"] == "cancelled", 120, "the sweep to end cancelled")
    assert len(db().trials(sweep_id)) == 2  # nothing started after the cancel
