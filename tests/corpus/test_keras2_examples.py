"""tf.keras 2 scripts on Keras 2, checked as the Keras 3 corpus is (test_keras_examples.py; issue 48,
items 3 and 4): a corpus written here in the style of the TensorFlow 2.x tutorials
(tests/corpus/scripts/keras2/, each naming its tutorial), and the source documents' own snippets
(examples/keras2/, each saying what was changed and why).

Each script runs plain on Keras 2 (`python` with `TF_USE_LEGACY_KERAS=1`), and as a job with
`training.keras: 2` preempted with a 5 s notice at one step and killed at a later one; the job must
complete after exactly those two interruptions with the plain run's weights and `final:` line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.corpus import SEED, check_notice_and_kill
from tests.support.jobs import REPO

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts" / "keras2"
EXAMPLES = REPO / "examples" / "keras2"
SPEC = f"""name: {{name}}
script: train.py
market: {{{{trace: null}}}}
training: {{{{keras: 2, seed: {SEED}, deterministic: true}}}}
"""

# (script, the step of the notice, the step of the SIGKILL): both inside training, the SIGKILL
# after the notice's attempt resumed.
CASES = [
    (SCRIPTS / "cnn_arrays.py", 20, 50),
    (SCRIPTS / "text_classification.py", 25, 70),
    (SCRIPTS / "custom_train_step.py", 30, 70),
    (SCRIPTS / "transfer_learning.py", 40, 65),
    (SCRIPTS / "tf_data_pipeline.py", 50, 100),
    (SCRIPTS / "sequence_fit_generator.py", 30, 110),
    (SCRIPTS / "gradient_tape_checkpoint.py", 20, 50),
    (EXAMPLES / "mnist_dropout.py", 60, 180),
    (EXAMPLES / "checkpoint_period.py", 40, 100),
    (EXAMPLES / "mirrored_strategy.py", 60, 130),
    (EXAMPLES / "mixed_precision.py", 20, 55),
    (EXAMPLES / "tensorboard_callback.py", 50, 150),
]


@pytest.mark.parametrize(("script", "notice_step", "kill_step"), CASES,
                         ids=[f"{c[0].parent.name}/{c[0].stem}" for c in CASES])
def test_a_keras_2_script_ends_as_its_plain_run_after_a_notice_and_a_sigkill(tmp_path, script, notice_step,
                                                                               kill_step):
    check_notice_and_kill(tmp_path, script, SPEC.format(name=script.stem.replace("_", "-")), notice_step, kill_step,
                          keras_2=True)
