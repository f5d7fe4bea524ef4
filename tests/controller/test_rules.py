"""Watchdog rules on small training runs, with a webhook receiver on 127.0.0.1.

The jobs run hollow attempts (spotfit/hollow/: rules_train.py's shape, no TensorFlow), whose
steps take no time: where a rule must fire while the job trains, the job's first attempt stands
still at a step (`--wait-for-stop-at`) until the controller's stop request reaches it, so the
rule fires during training whatever the machine's speed. Weights are compared with the hollow
reference (the uninterrupted run). The export of the epoch end that met a target is a Keras
model: that test stays a real-TensorFlow run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.hollow_jobs import reference, write_scenario
from tests.support.jobs import spotfit_cmd
from tests.support.ledger import ticks

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parent / "scripts" / "rules_train.py"
CALM_MARKET = 'market: {trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}'


def _spec(job_spec, name: str, args: list[str], rules: str, market: str = CALM_MARKET, extra: str = "",
          **scenario) -> Path:
    """The job's spec folder; with the script's hollow scenario beside it (`scenario`: its overrides)."""
    text = (f"name: {name}\nscript: rules_train.py\nargs: {json.dumps(args)}\n{market}\n"
            f"checkpoint: {{interval: {{steps: 20}}, keep: 2}}\ntraining: {{seed: 0, deterministic: true}}\n"
            f"rules: {rules}\n{extra}")
    spec = job_spec(text, name, script=SCRIPT)
    write_scenario(spec.parent, SCRIPT, **scenario)
    return spec


def _cli(*args: str) -> dict:
    out = subprocess.run(spotfit_cmd(*args, "--json"), capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode in (0, 1, 3), out.stderr[-3000:]  # 3: paused
    return json.loads(out.stdout)


def _rule_events(job_id: str) -> list[dict]:
    return [e for e in _cli("logs", job_id)["events"] if e["kind"] == "rule"]


@pytest.mark.usefixtures("hollow")
def test_zero_learning_rate_is_stopped_by_loss_plateau(job_spec, webhook):
    url, received = webhook
    # A learning rate of 0 trains nothing: the loss stays where it starts.
    spec = _spec(job_spec, "flat", ["--lr", "0", "--epochs", "50", "--wait-for-stop-at", "100"],
                 "[{rule: loss_plateau, window_steps: 10, action: stop}]", extra=f"notify: {{webhook: {url}}}\n",
                 loss={"start": 2.3, "end": 2.3})
    doc = _cli("run", str(spec))
    assert doc["state"] == "stopped"
    assert doc["step"] < doc["total_steps"] == 47 * 50
    events = _rule_events(doc["id"])
    assert [e["data"]["rule"] for e in events] == ["loss_plateau"]
    assert events[0]["data"]["saved_usd"] > 0
    assert doc["attempts"][-1]["state"] == "stopped"
    assert received and received[0]["rule"] == "loss_plateau" and "plateau" in received[0]["text"]


def test_easy_target_stops_the_job_with_a_checkpoint_and_exports(job_spec, tmp_path):
    # Real TensorFlow: the export is the Keras model of the epoch end that met the target (runtime/main.py's
    # `_held_target`), which a hollow attempt has not; the only run of that export on a rule's stop.
    registry = tmp_path / "registry"
    spec = _spec(job_spec, "target", ["--epochs", "40"],
                 "[{rule: target_metric, metric: val_accuracy, mode: max, value: 0.5, action: stop}]",
                 extra=f"export: {{registry: 'file://{registry}', formats: [keras]}}\n")
    doc = _cli("run", str(spec))
    assert doc["state"] == "stopped"
    assert doc["step"] < doc["total_steps"]
    assert _rule_events(doc["id"])[0]["data"]["rule"] == "target_metric"
    saves = [e for e in _cli("logs", doc["id"])["events"] if e["kind"] == "checkpoint"]
    assert saves[-1]["data"]["step"] == doc["attempts"][-1]["end_step"]  # stopped on a checkpoint
    card = json.loads((registry / "target" / "1" / "model_card.json").read_text())
    assert card["version"] == 1 and card["metrics"]["val_accuracy"] >= 0.5
    # The export is the model of the epoch end whose metric met the target, not the later one it stopped at.
    [rule] = _rule_events(doc["id"])
    held = float(re.search(r"val_accuracy = ([0-9.]+) reached", rule["message"])[1])
    assert card["step"] == rule["data"]["at_step"] <= doc["attempts"][-1]["end_step"]
    assert f"{card['metrics']['val_accuracy']:.4g}" == f"{held:.4g}"
    assert re.fullmatch(r"[0-9a-f]{64}", card["weights_sha256"])


@pytest.mark.usefixtures("hollow")
def test_starved_pipeline_trips_idle_accelerator_and_pauses(job_spec):
    # The starved pipeline: at step 100 the attempt waits (no CPU used) until the stop request comes.
    spec = _spec(job_spec, "starved", ["--epochs", "20", "--wait-for-stop-at", "100"],
                 "[{rule: idle_accelerator, below_pct: 30, for_s: 3, action: pause}]")
    doc = _cli("run", str(spec))
    assert doc["state"] == "paused"
    event = _rule_events(doc["id"])[0]
    assert event["data"]["rule"] == "idle_accelerator" and "utilization" in event["message"]
    assert doc["attempts"][-1]["state"] == "stopped"


@pytest.mark.usefixtures("hollow")
def test_tiny_budget_stops_the_job(job_spec, webhook):
    url, received = webhook
    # $0.2 at $0.918/h of spot is 784 trace seconds: 1.3 wall seconds at time_scale 600. What the
    # stop itself takes is wall time too (and billed), so its cost depends on the machine: the
    # checks are that the rule fires once the spend reaches the cap, never before, and that
    # nothing more is launched or trained after it. The attempt stands still at step 100 until then.
    market = 'market: {trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 600}'
    spec = _spec(job_spec, "budget", ["--epochs", "200", "--wait-for-stop-at", "100"],
                 "[{rule: budget, usd: 0.2, action: stop}]", market=market, extra=f"notify: {{webhook: {url}}}\n")
    doc = _cli("run", str(spec))
    assert doc["state"] == "stopped"
    [event] = _rule_events(doc["id"])
    fired_usd = float(re.search(r"cost \$([0-9.]+) reached the budget", event["message"])[1])
    assert event["data"]["rule"] == "budget" and event["data"]["action"] == "stop"
    assert fired_usd >= 0.2  # not before the cap
    ledger = _cli("cost", doc["id"])
    assert ledger["totals"]["spent_usd"] >= fired_usd - 5e-5  # and the stop's own seconds (message: 4 decimals)
    [attempt] = doc["attempts"]  # nothing launched after the stop
    assert attempt["state"] == "stopped" and doc["step"] < 47 * 200
    kinds = [e["kind"] for e in _cli("logs", doc["id"])["events"]]
    assert kinds.count("launch") == 1 and kinds.index("launch") < kinds.index("rule")
    assert received and received[0]["rule"] == "budget"


@pytest.mark.usefixtures("hollow")
def test_price_cap_pauses_and_resumes_by_itself_and_loses_no_work(job_spec):
    args = ["--epochs", "10"]
    base = reference(SCRIPT, args)
    # us-east-2b from this start (tick 4344): $0.918/h, then $0.9191/h from tick 4364 to 4484, then
    # $0.918/h again; spot is up until tick 4648. `work_h` advances the trace by steps while the job
    # trains (its start-up holds the clock): the price rises 3180 trace s into the first attempt's
    # training, at step 208 of 470, and the first attempt waits at step 300 for the stop, so the
    # pause lands between the two whatever this machine's speed. It waits on the wall: 120 ticks,
    # 6 s at time_scale 3900; the resumed attempt's at most 25 ticks end long before spot is gone.
    market = 'market: {trace: aws-v100, zones: [us-east-2b], start: "2023-02-25T17:26:16", time_scale: 3900}'
    spec = _spec(job_spec, "capped", [*args, "--wait-for-stop-at", "300"],
                 "[{rule: price_cap, usd_per_h: 0.9185, action: pause}]", market=market, extra="work_h: 2\n")
    doc = _cli("run", str(spec))
    assert doc["state"] == "completed", doc
    kinds = [e["kind"] for e in _cli("logs", doc["id"])["events"]]
    assert "rule" in kinds and "resumed" in kinds
    assert kinds.index("rule") < kinds.index("resumed")
    # Paused at the rise (not before), trained again once the price fell, and not preempted since.
    first, second = doc["attempts"]
    assert (first["state"], second["state"]) == ("stopped", "completed")
    rise, fall = ticks("us-east-2b")[4364].start_s, ticks("us-east-2b")[4484].start_s
    assert first["trace_end_s"] >= rise and 208 <= first["end_step"] <= 300, first
    assert second["trace_start_s"] >= fall, second
    assert doc["weights_sha256"] == base["weights_sha256"]


@pytest.mark.usefixtures("hollow")
def test_a_stopped_job_resumes_to_the_uninterrupted_result(job_spec):
    args = ["--epochs", "40"]
    base = reference(SCRIPT, args)
    # The target is met at the end of epoch 6 (step 282); the first attempt stands still at step 400
    # until the stop request, so the stop lands before the end.
    spec = _spec(job_spec, "halted", [*args, "--wait-for-stop-at", "400"],
                 "[{rule: target_metric, metric: val_accuracy, mode: max, value: 0.5, action: stop}]")
    stopped = _cli("run", str(spec))
    assert stopped["state"] == "stopped" and stopped["step"] <= 400
    final = _cli("resume", stopped["id"])
    assert final["state"] == "completed"
    assert final["weights_sha256"] == base["weights_sha256"]
