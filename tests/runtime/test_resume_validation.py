"""A resumed `fit` call's validation data stands where the uninterrupted call's would: a reshuffling
validation `Dataset` gives the resumed call's first validation the order of the pass after those
done before the checkpoint (keras-io's FeatureSpace example shuffles its validation set: without
this its resumed `val_loss` differed in the last bits)."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras.src.backend.tensorflow import trainer as tf_trainer  # noqa: E402

from spotfit.runtime import resume  # noqa: E402


def _passes(iterator, count: int) -> list[list[int]]:
    """The samples of `count` validation passes, each begun as `evaluate` begins it (`reset()`)."""
    out = []
    for _ in range(count):
        iterator.reset()
        samples: list[int] = []
        with iterator.catch_stop_iteration():
            for _, _, batches in iterator:
                samples += [int(v) for batch in batches for v in np.ravel(batch)]
        out.append(samples)
    return out


def _iterator(x, armed: bool):
    cls = resume.ResumingEpochIterator if armed else tf_trainer.TFEpochIterator
    return cls(x=x, y=None, sample_weight=None, batch_size=None, steps_per_execution=1, shuffle=False,
               distribute_strategy=tf.distribute.get_strategy())


def test_the_validation_iterator_resumes_after_the_passes_done_before_the_checkpoint():
    def validation_set():  # as a new process makes it: its shuffle's seed stream starts again
        return tf.data.Dataset.range(12).shuffle(12, seed=3).batch(4)

    uninterrupted = _passes(_iterator(validation_set(), armed=False), 4)
    assert len({tuple(p) for p in uninterrupted}) > 1  # reshuffled each pass

    validation = validation_set()
    resume.arm(resume.Position(epoch=2, batch=1), validation, validations=2)
    try:
        training = _iterator(tf.data.Dataset.range(8).batch(2), armed=True)  # fit builds it first
        assert training._resume_at == resume.Position(epoch=2, batch=1)
        other = _iterator(tf.data.Dataset.range(12).batch(4), armed=True)  # not the call's validation data
        assert other._resume_at is None
        resumed = _passes(_iterator(validation, armed=True), 2)
    finally:
        resume.disarm()
    assert resumed == uninterrupted[2:]


def test_validations_follow_validation_freq():
    assert resume.validations_done(0, 0, 1) == 0
    assert resume.validations_done(4, 2, 2) == 2  # epochs 2..5: validates after 3 and 5 (1-based 4 and 6)
