"""Digits from TFRecord files that live in object storage, read through spotfit's data cache.

Under spotfit (`spotfit run spotfit.yaml`) the runtime syncs `data.source` into the local cache
before this script starts and sets `SPOTFIT_DATA_DIR`; `data_dir()` returns that folder. Run
directly, `python train.py --data s3://bucket/datasets/digits-tfrecord` syncs the data itself,
and `--data ./folder` reads local files. Upload the data first with `upload_data.py`.
"""

import argparse

import keras
import tensorflow as tf

from spotfit.data_helper import data_dir

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--data", default=None, help="folder or store URL; default $SPOTFIT_DATA_DIR")
args = parser.parse_args()

folder = data_dir(args.data)
FEATURES = {
    "image": tf.io.FixedLenFeature([64], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse(record):
    example = tf.io.parse_single_example(record, FEATURES)
    return tf.reshape(example["image"], (8, 8, 1)), tf.cast(example["label"], tf.int32)


def load(split: str) -> tf.data.Dataset:
    files = sorted(str(p) for p in folder.glob(f"{split}-*.tfrecord"))
    if not files:
        raise SystemExit(f"no {split}-*.tfrecord files in {folder}: upload them with upload_data.py first")
    return tf.data.TFRecordDataset(files).map(parse)


train = load("train").shuffle(1500, seed=7).batch(args.batch_size)
test = load("test").batch(256)

keras.utils.set_random_seed(7)
model = keras.Sequential(
    [
        keras.Input(shape=(8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ]
)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(train, epochs=args.epochs, validation_data=test, verbose=2)

loss, accuracy = model.evaluate(test, verbose=0)
print(f"final test accuracy: {accuracy:.4f} (loss {loss:.4f})")
