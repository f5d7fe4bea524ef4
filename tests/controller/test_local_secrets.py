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
