"""On the local backend a secret reaches the script's process environment and is written nowhere.

The jobs run on hollow attempts (spotfit/hollow/): the attempt's process is the one the script
runs in (runpy, in the runtime's process), so the environment the backend gave that process is
the script's; the first test reads it while the attempt stands still at step 1 (`pause_at`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest

from spotfit import sdk
from spotfit.hollow import SCENARIO_FILE
from tests.support.hollow_jobs import write_hollow_spec
from tests.support.jobs import spotfit_cmd
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

NAME = "SPOTFIT_CANARY_TOKEN"
CANARY = "canary-9e4c2b7a1f6d3e58-local-only"
SCRIPT = "import os\nprint(len(os.environ))\n"


@pytest.mark.usefixtures("hollow")
def test_a_secret_is_in_the_script_environment_only(tmp_path, spotfit_home):
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(SCRIPT)
    (tmp_path / "job" / SCENARIO_FILE).write_text(json.dumps({"epochs": 1, "steps_per_epoch": 2, "pause_at": 1,
                                                               "pause_dir": str(marks)}))
    spec = tmp_path / "job" / "spotfit.yaml"
    spec.write_text(f"name: sec\nscript: train.py\nsecrets: [{NAME}]\nmarket: {{trace: null}}\n")
    env = {**os.environ, NAME: CANARY}
    job = subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, stdin=subprocess.DEVNULL, env=env)
    try:
        wait_for(lambda: (marks / "paused").exists() or job.poll() is not None, 300,
                 "the attempt to stand still at step 1")
        assert job.poll() is None, job.stderr.read()[-3000:]  # type: ignore[union-attr]
        [attempt] = sdk.db().attempts(sdk.status("sec")["id"])
        seen = psutil.Process(json.loads(attempt["handle"])["pid"]).environ()  # the script's environment
        (marks / "go").touch()
        out, err = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, err
    doc = json.loads(out)
    assert doc["state"] == "completed", doc
    assert seen.get(NAME) == CANARY, "the secret is not in the environment of the script's process"
    outputs = [out, err]
    for verb in (["status", doc["id"]], ["logs", doc["id"]], ["cost", doc["id"]], ["list"]):
        outputs.append(subprocess.run(spotfit_cmd(*verb, "--json"), capture_output=True, text=True, env=env).stdout)
    assert not [o for o in outputs if CANARY in o]
    held = [str(p) for root in (Path(spotfit_home), tmp_path / "job") for p in root.rglob("*")
            if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert held == []  # state DB, store, logs, spec folder


def test_an_unset_secret_stops_spotfit_run_with_exit_2(tmp_path):
    (tmp_path / "train.py").write_text("print('never runs')\n")
    spec = tmp_path / "spotfit.yaml"
    spec.write_text(f"name: sec\nscript: train.py\nsecrets: [{NAME}]\nmarket: {{trace: null}}\n")
    env = {k: v for k, v in os.environ.items() if k != NAME}
    out = subprocess.run(spotfit_cmd("run", str(spec)), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env=env)
    assert out.returncode == 2 and f"Secret `{NAME}`" in out.stderr, out.stderr


HOOK_CANARY = "canary-webhook-3f8a1c9d7b2e4f60"
RULES_SCRIPT = Path(__file__).parent / "scripts" / "rules_train.py"


@pytest.mark.usefixtures("hollow")
@pytest.mark.parametrize("form", ["literal", "secret"])
def test_a_webhook_url_is_used_and_written_nowhere(tmp_path, spotfit_home, form):
    """The webhook (its path holds the canary) gets the rule's POST; no file, output or event holds the URL."""
    from tests.support.webhook import webhook_receiver

    with webhook_receiver() as (url, received):
        hook = f"{url}/{HOOK_CANARY}"
        env = {**os.environ, "SPOTFIT_CANARY_HOOK": hook}
        webhook = f"'{hook}'" if form == "literal" else "{secret: SPOTFIT_CANARY_HOOK}"
        # As tests/controller/test_rules.py's budget test: $0.2 is spent within a few wall seconds, while
        # the attempt stands still at step 100 until the rule's stop request reaches it.
        spec = write_hollow_spec(tmp_path / "job", "name: hook\nscript: rules_train.py\n"
                                 "args: [--epochs, '200', --wait-for-stop-at, '100']\n"
                                 "rules: [{rule: budget, usd: 0.2, action: stop}]\n"
                                 'market: {trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", '
                                 f"time_scale: 600}}\nnotify: {{webhook: {webhook}}}\n", script=RULES_SCRIPT)
        out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=600,
                             stdin=subprocess.DEVNULL, env=env)
        assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: stopped by a rule
        doc = json.loads(out.stdout)
        assert doc["state"] == "stopped", doc
        assert [p["rule"] for p in received] == ["budget"]  # the URL reached the controller, in memory
    outputs = [out.stdout, out.stderr]
    for verb in (["status", doc["id"]], ["logs", doc["id"]], ["cost", doc["id"]], ["list"]):
        outputs.append(subprocess.run(spotfit_cmd(*verb, "--json"), capture_output=True, text=True, env=env).stdout)
    assert not [o for o in outputs if HOOK_CANARY in o]
    held = [str(p) for root in (Path(spotfit_home), tmp_path / "job") for p in root.rglob("*")
            if p.is_file() and p.name != "spotfit.yaml" and HOOK_CANARY.encode() in p.read_bytes()]
    assert held == []  # state DB (and WAL), store (spec.json), controller and attempt logs
