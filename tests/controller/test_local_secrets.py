"""On the local backend a secret reaches the script's process environment and is written nowhere."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.jobs import spotfit_cmd

pytestmark = pytest.mark.slow

NAME = "SPOTFIT_CANARY_TOKEN"
CANARY = "canary-9e4c2b7a1f6d3e58-local-only"
SCRIPT = f"""import hashlib, os
with open(os.environ["SECRET_PROBE"], "w") as fh:
    fh.write(hashlib.sha256(os.environ["{NAME}"].encode()).hexdigest())
"""


def test_a_secret_is_in_the_script_environment_only(tmp_path, spotfit_home):
    probe = tmp_path / "probe.txt"
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(SCRIPT)
    spec = tmp_path / "job" / "spotfit.yaml"
    spec.write_text(f"name: sec\nscript: train.py\nsecrets: [{NAME}]\nenv: {{SECRET_PROBE: '{probe}'}}\n"
                    "market: {trace: null}\n")
    env = {**os.environ, NAME: CANARY}
    out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed", doc
    assert probe.read_text() == hashlib.sha256(CANARY.encode()).hexdigest()  # the script saw it
    outputs = [out.stdout, out.stderr]
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


@pytest.mark.parametrize("form", ["literal", "secret"])
def test_a_webhook_url_is_used_and_written_nowhere(tmp_path, spotfit_home, form):
    """The webhook (its path holds the canary) gets the rule's POST; no file, output or event holds the URL."""
    from tests.support.jobs import write_spec
    from tests.support.webhook import webhook_receiver

    with webhook_receiver() as (url, received):
        hook = f"{url}/{HOOK_CANARY}"
        env = {**os.environ, "SPOTFIT_CANARY_HOOK": hook}
        webhook = f"'{hook}'" if form == "literal" else "{secret: SPOTFIT_CANARY_HOOK}"
        # As tests/controller/test_rules.py's budget test: $0.2 is spent within a few wall seconds.
        spec = write_spec(tmp_path / "job", "name: hook\nscript: rules_train.py\nargs: [--epochs, '200']\n"
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
