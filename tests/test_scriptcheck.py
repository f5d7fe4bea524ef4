"""`spotfit run` warns at once when the script has nothing spotfit can checkpoint."""

from __future__ import annotations

from spotfit import sdk
from spotfit.scriptcheck import checkpointable


def test_fit_loop_and_optimizer_applies_are_found_hand_assigned_updates_are_not():
    assert checkpointable("import keras\nm = keras.Sequential()\nhistory = m.fit(x, y)\n")
    assert checkpointable("import spotfit\nfor step, batch in spotfit.loop(m, data, steps=10):\n    pass\n")
    assert checkpointable("for b in data:\n    with tf.GradientTape() as t:\n        loss = m(b)\n"
                          "    opt.apply_gradients([])\n")
    assert checkpointable("self.d_optimizer.apply(grads, self.discriminator.trainable_weights)\n")
    assert not checkpointable("import tensorflow as tf\nfor b in data:\n    with tf.GradientTape() as t:\n"
                              "        loss = m(b)\n    w.assign_sub(0.1 * t.gradient(loss, w))\n    df.apply(f)\n")


def test_submitting_a_script_without_fit_records_the_warning(tmp_path):
    (tmp_path / "train.py").write_text("for batch in range(10):\n    print(batch)\n")
    (tmp_path / "spotfit.yaml").write_text("name: bare\nscript: train.py\nmarket: {trace: null}\n")
    job_id = sdk.submit(str(tmp_path / "spotfit.yaml"))
    warnings = [e for e in sdk.events(job_id) if e["kind"] == "nothing_checkpointed"]
    assert len(warnings) == 1 and "train.py calls neither `model.fit` nor `spotfit.loop` nor" in warnings[0]["message"]


def test_a_script_that_calls_fit_gets_no_warning(job_spec):
    job_id = sdk.submit(str(job_spec("name: digits\nscript: train.py\nmarket: {trace: null}\n")))
    assert not [e for e in sdk.events(job_id) if e["kind"] == "nothing_checkpointed"]
