"""The corpus check (tests/corpus/): a script's plain run against the same script as a spotfit job
preempted with a notice at one step and killed without one at a later step.

The plain run (tests/support/plain_run.py: the seed and op determinism that `training: {seed,
deterministic: true}` applies, nothing else; on Keras 2 with `TF_USE_LEGACY_KERAS=1`) trains while
the job runs, at the same priority: the two share nothing, and the job's interruptions come at steps
(not at times, and with `trace: null` no market runs on the clock). It once ran at `nice -n 10`, to
take only what the job left; on a loaded machine (`make test-stress`: two busy loops at the suite's
priority) that left it about 5% of a core, and a corpus test took up to 173 s instead of 35.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spotfit import sdk
from tests.support.jobs import REPO, place_script, run_inline_job

SEED = 7


def final_line(log: str) -> str:
    """The script's one `final:` line in `log`."""
    lines = [line for line in log.splitlines() if line.startswith("final: ")]
    assert len(lines) == 1, f"expected one `final:` line, got {lines}"
    return lines[0]


def _start_plain_run(work: Path, script: Path, keras_2: bool) -> subprocess.Popen:
    place_script(work / "train.py", script.read_text())
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"TF_USE_LEGACY_KERAS": "1"} if keras_2 else {})}
    # Its output goes to files: a pipe nobody reads until the job ends would stall a chatty script.
    with (work / "stdout.txt").open("w") as out, (work / "stderr.txt").open("w") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.support.plain_run", "train.py", str(SEED), "result.json"],
                                cwd=work, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)


def _plain_result(plain: subprocess.Popen, work: Path) -> tuple[str, str]:
    """(its `final:` line, weights_sha256) of the plain run, once it has ended."""
    assert plain.wait(timeout=300) == 0, (work / "stderr.txt").read_text()[-3000:]
    weights = json.loads((work / "result.json").read_text())["weights_sha256"]
    assert weights is not None, "the script called no `fit`"
    return final_line((work / "stdout.txt").read_text()), weights


def check_notice_and_kill(tmp_path: Path, script: Path, spec_text: str, notice_step: int, kill_step: int,
                          keras_2: bool = False) -> None:
    """Run `script` plain and as the job `spec_text` (notice at `notice_step`, SIGKILL at `kill_step`):
    the job completes after exactly those two interruptions, with the plain run's weights, and the last
    attempt's log has the plain run's `final:` line, character for character."""
    plain = _start_plain_run(tmp_path / "plain", script, keras_2)
    try:
        doc = run_inline_job(tmp_path / "spotfit", spec_text, script.read_text(),
                             "--preempt-at", f"{notice_step}:5,{kill_step}:0")
        final, weights = _plain_result(plain, tmp_path / "plain")
    finally:
        if plain.poll() is None:
            plain.kill()
            plain.wait()
    assert doc["state"] == "completed", doc
    attempts = doc["attempts"]
    assert [a["state"] for a in attempts] == ["preempted", "killed", "completed"]
    assert [a["end_step"] for a in attempts[:2]] == [notice_step, kill_step]
    assert doc["weights_sha256"] == weights
    assert final_line(sdk.logs(doc["id"])["log"]) == final
