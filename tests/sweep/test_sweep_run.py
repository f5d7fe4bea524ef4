"""A real sweep: 6 trials of a tiny Keras script, 2 at once, ASHA, a preemption, kill -9 and resume.

One sweep carries the properties (training is the cost, so they share it):
- the sweep controller is killed with SIGKILL mid-sweep; `spotfit sweep resume` finishes it
  with every trial run exactly once (one job per trial, none lost);
- trial 0 is preempted at step 5 and resumed there: its epochs' metrics equal an uninterrupted
  run's of the same parameters;
- ASHA prunes at least two trials (each stopped on a checkpoint: `stopped`, event `pruned`),
  and a promoted trial resumes from the step it stopped at instead of step 0;
- the best trial, re-run alone, reproduces its objective value exactly, and its model is
  published under the base job's name with the sweep and its params in the model card;
- `sweep status --json` has the documented shape, `sweep compare` writes a self-contained page.
The two re-runs go through `spotfit submit --parallel 2 --wait`, side by side (that the queue keeps
its limit is test_batch_resume.py's); alone, they need no pruner's pace (`TINY_PACE_S=0`: the same
numbers, sooner).

Every trial is a runtime start-up (a TensorFlow import), so the sweep runs the 6 trials these
properties need: the kill lands after the 4th, so trials 4 and 5 start only after the resume;
trial 1's promotion at epoch 1 comes when trials 0-2 have reported, before a 5th trial can start;
trial 4 is the one that completes. (Trials 6 and 7 of the earlier 8-trial sweep started once
trial 4 had completed and were both paused at epoch 1: nothing asserted came from them.) All 6
are of TPE's random start-up phase; its sampling past it, across a resume, is test_study.py's.

That sweep stays real TensorFlow: it is the proof that a sweep publishes the best trial's real
Keras export (`model.keras`) and that a preempted trial's epochs equal a solo Keras run's; its
pruning also needs the paced steps of a real trial. The other two tests here are about the sweep
controller alone and run hollow attempts (spotfit/hollow/), each held at a step until its cancel.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from spotfit import sdk
from spotfit.sweep import study
from spotfit.sweep.runner import db
from spotfit.sweep.spec import SweepSpec
from spotfit.sweep.trials import param_text
from tests.support.jobs import spotfit_cmd
from tests.support.wait import wait_for
from tests.sweep.tiny import SWEEP, job_folder

TRIALS = 6


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _epochs(job_id: str) -> dict[int, dict]:
    return {e["data"]["epoch"]: e["data"]["metrics"] for e in sdk.db().events(job_id) if e["kind"] == "epoch_end"}


@pytest.mark.slow
def test_sweep_survives_kill_and_resume_prunes_promotes_and_reproduces(tmp_path, spotfit_home):
    spec_path = job_folder(tmp_path / "sweep", "tiny", [])
    (spec_path.parent / "sweep.yaml").write_text(SWEEP.replace("trials: 12", f"trials: {TRIALS}"))
    log = (tmp_path / "sweep.err").open("w")
    proc = subprocess.Popen(spotfit_cmd("sweep", str(spec_path.parent / "sweep.yaml"), "--json",
                                        "--preempt-at", "5:5", "--preempt-trial", "0"),
                            stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL, env=os.environ.copy())
    try:
        sweep_id = wait_for(lambda: next((s["id"] for s in db().list_sweeps()), None), 120, "the sweep's record")
        wait_for(lambda: sum(t["job_id"] is not None for t in db().trials(sweep_id)) >= 4, 600,
                 "four trials with jobs (mid-sweep)")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert db().get_sweep(sweep_id)["state"] == "running"

    out = _cli("sweep", "resume", sweep_id, "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)

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

    # The best trial's model, published under the base job's name with the sweep in its card.
    card = json.loads((spotfit_home / "registry" / "tiny" / "1" / "model_card.json").read_text())
    assert card["sweep"]["id"] == sweep_id and card["sweep"]["trial"] == doc["best"]["number"]
    assert card["sweep"]["params"] == doc["best"]["params"]
    assert card["sweep"]["objective"] == {"metric": "val_accuracy", "mode": "max", "value": doc["best"]["value"]}
    assert (spotfit_home / "registry" / "tiny" / "1" / "model.keras").is_file()

    # Trial 0 was preempted at step 5 and went on from there.
    first = sdk.status(doc["trials"][0]["job_id"])
    assert first["attempts"][0]["state"] == "preempted" and first["attempts"][0]["end_step"] == 5
    assert first["attempts"][1]["start_step"] == 5

    # Re-run trial 0 and the best trial alone (each its own job; the two at once).
    best = doc["best"]
    reruns = []
    for label, params in (("first", doc["trials"][0]["params"]), ("best", best["params"])):
        args = [x for name, value in params.items() for x in (f"--{name}", param_text(value))]
        reruns.append(str(job_folder(tmp_path / label, f"rerun-{label}", args, {"TINY_PACE_S": "0"})))
    out = _cli("submit", *reruns, "--parallel", "2", "--wait", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    batch = json.loads(out.stdout)
    solo_first, solo_best = (sdk.status(j["id"]) for j in batch["jobs"])
    assert solo_first["state"] == solo_best["state"] == "completed"
    assert solo_best["metrics"]["val_accuracy"] == best["value"]
    # The same weights at every epoch end: the validation metrics (a function of the weights) of
    # every epoch, and all metrics of the epochs after the interrupted one, equal the solo run's.
    # (The interrupted epoch's training means are the runtime's documented exception when its
    # running sums cannot be put back: event `metrics_not_restored`.)
    first_epochs, solo_epochs = _epochs(first["id"]), _epochs(solo_first["id"])
    assert first_epochs  # at least epoch 1: its validation metrics are those of the weights at step 10
    for epoch, metrics in first_epochs.items():
        compared = metrics if epoch > 1 else {k: v for k, v in metrics.items() if k.startswith("val_")}
        assert compared == {k: solo_epochs[epoch][k] for k in compared}, epoch
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
