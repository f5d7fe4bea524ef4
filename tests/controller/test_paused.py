"""Paused is its own state: `spotfit run` exits 3, `status` says which rule paused it and how to resume.

The job runs a hollow attempt (spotfit/hollow/) that spends its start-up as the script sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spotfit.cli.jobs import EXIT_PAUSED
from spotfit.hollow import SCENARIO_FILE
from tests.support.jobs import spotfit_cmd
from tests.support.stand_in import START, ZONE, first_minute_usd

pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


@pytest.mark.usefixtures("hollow")
def test_a_job_paused_by_a_rule_exits_3_and_says_how_to_resume(job_spec, tmp_path):
    budget = round(first_minute_usd() * 0.75, 6)  # crossed at the first look: pauses during start-up
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("import time\ntime.sleep(300)\n")
    spec = job_spec(f"name: paused\nscript: train.py\n"
                    f"market: {{trace: aws-v100, zones: [{ZONE}], start: '{START}', time_scale: 60}}\n"
                    f"rules: [{{rule: budget, usd: {budget}, action: pause}}]\n", script=tmp_path / "src" / "train.py")
    (spec.parent / SCENARIO_FILE).write_text(json.dumps({"start_s": 300}))  # the script's sleep
    out = _cli("run", str(spec), "--json")
    assert out.returncode == EXIT_PAUSED == 3, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "paused"
    assert doc["paused"]["rule"] == "budget" and "reached the budget" in doc["paused"]["reason"]
    assert doc["paused"]["resume"] == f"spotfit resume {doc['id']}"
    assert doc["controller"] == "none (paused)"  # not "gone": nothing died

    text = _cli("status", doc["id"]).stdout
    assert "paused (budget, cost $" in text and f"resume with `spotfit resume {doc['id']}`" in text, text
