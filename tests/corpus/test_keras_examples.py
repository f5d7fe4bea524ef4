"""A corpus of real Keras scripts (tests/corpus/scripts/, adapted from keras-io; each names its
source in its header) run under spotfit's default spec with a notice and a SIGKILL in one job.

For each script: a plain `python` run (tests/support/plain_run.py: the seed and op determinism
that `training: {seed, deterministic: true}` applies, nothing else), then `spotfit run` with a
spec that sets only the name, the script, `market: {trace: null}` and those two training fields
(every other setting at its default, `mixed_precision` and `xla` included), preempted with a
5 s notice at one step and killed without one at a later step. The job must complete after exactly
those two interruptions, end with the plain run's weights (`weights_sha256`), and the script's own
`final:` line in the last attempt's log must be the plain run's, character for character.

The plain run trains while the job runs, at a lower priority (`nice -n 10`): the two share
nothing, the job's interruptions come at steps (not at times, and with `trace: null` no market runs
on the clock), so the plain run takes only the CPU the job leaves while it starts up and resumes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import REPO, run_inline_job

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
SEED = 7
# `trace: null`: no replayed market. The default replays aws-v100 at 600 trace seconds a second,
# whose own spot losses come on top of the two injected ones (a GAN job saw seven attempts).
SPEC = f"""name: {{name}}
script: train.py
market: {{{{trace: null}}}}
training: {{{{seed: {SEED}, deterministic: true}}}}
"""

# (script, the step of the notice, the step of the SIGKILL); the SIGKILL comes after the
# notice's attempt resumed, both inside the script's training.
CASES = [
    ("mnist_convnet", 8, 25),
    ("gan_train_step", 5, 12),
    ("mirrored_strategy", 8, 27),
    ("timeseries_callbacks", 12, 45),
    ("lstm_text_generation", 4, 14),
    ("feature_space", 10, 29),
    ("image_augmentation_xla", 7, 26),
    ("pydataset_custom_metric", 20, 70),
    ("transfer_learning", 3, 7),
]


def _final_line(log: str) -> str:
    lines = [line for line in log.splitlines() if line.startswith("final: ")]
    assert len(lines) == 1, f"expected one `final:` line, got {lines}"
    return lines[0]


def _start_plain_run(tmp_path: Path, script: Path, keras_2: bool = False) -> subprocess.Popen:
    """The script run by plain `python` (at `nice -n 10`; on Keras 2 with `keras_2`), started;
    `_plain_result` waits for it."""
    work = tmp_path / "plain"
    work.mkdir()
    shutil.copy(script, work / "train.py")
    env = {**os.environ, "PYTHONPATH": str(REPO), **({"TF_USE_LEGACY_KERAS": "1"} if keras_2 else {})}
    # Its output goes to files: a pipe nobody reads until the job ends would stall a chatty script.
    with (work / "stdout.txt").open("w") as out, (work / "stderr.txt").open("w") as err:
        return subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "tests.support.plain_run", "train.py",
                                 str(SEED), "result.json"], cwd=work, stdout=out, stderr=err, env=env,
                                stdin=subprocess.DEVNULL)


def _plain_result(plain: subprocess.Popen, tmp_path: Path) -> tuple[str, str]:
    """(its `final:` line, weights_sha256) of the plain run, once it has ended."""
    work = tmp_path / "plain"
    assert plain.wait(timeout=300) == 0, (work / "stderr.txt").read_text()[-3000:]
    weights = json.loads((work / "result.json").read_text())["weights_sha256"]
    assert weights is not None, "the script called no `fit`"
    return _final_line((work / "stdout.txt").read_text()), weights


@pytest.mark.parametrize(("name", "notice_step", "kill_step"), CASES, ids=[c[0] for c in CASES])
def test_a_keras_example_ends_as_its_plain_run_after_a_notice_and_a_sigkill(tmp_path, name, notice_step, kill_step):
    script = SCRIPTS / f"{name}.py"
    plain = _start_plain_run(tmp_path, script)
    try:
        doc = run_inline_job(tmp_path / "spotfit", SPEC.format(name=name.replace("_", "-")), script.read_text(),
                             "--preempt-at", f"{notice_step}:5,{kill_step}:0")
        final, weights = _plain_result(plain, tmp_path)
    finally:
        if plain.poll() is None:
            plain.kill()
            plain.wait()
    assert doc["state"] == "completed", doc
    attempts = doc["attempts"]
    assert [a["state"] for a in attempts] == ["preempted", "killed", "completed"]
    assert [a["end_step"] for a in attempts[:2]] == [notice_step, kill_step]
    assert doc["weights_sha256"] == weights
    assert _final_line(sdk.logs(doc["id"])["log"]) == final
