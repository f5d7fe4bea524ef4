"""A corpus of real Keras scripts (tests/corpus/scripts/, adapted from keras-io; each names its
source in its header) run under spotfit's default spec with a notice and a SIGKILL in one job.

For each script: a plain `python` run, then `spotfit run` with a spec that sets only the name, the
script, `market: {trace: null}` and the seed and op determinism (every other setting at its default,
`mixed_precision` and `xla` included), preempted with a 5 s notice at one step and killed without
one at a later step. The job must complete after exactly those two interruptions, end with the plain
run's weights (`weights_sha256`), and the script's own `final:` line in the last attempt's log must
be the plain run's, character for character (tests/support/corpus.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.corpus import SEED, check_notice_and_kill

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
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


@pytest.mark.parametrize(("name", "notice_step", "kill_step"), CASES, ids=[c[0] for c in CASES])
def test_a_keras_example_ends_as_its_plain_run_after_a_notice_and_a_sigkill(tmp_path, name, notice_step, kill_step):
    check_notice_and_kill(tmp_path, SCRIPTS / f"{name}.py", SPEC.format(name=name.replace("_", "-")), notice_step,
                          kill_step)
