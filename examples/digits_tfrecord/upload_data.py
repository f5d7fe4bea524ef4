"""Setup for the TFRecord example: write the digits data set as TFRecord shards, upload them.

    python examples/digits_tfrecord/upload_data.py s3://my-bucket/datasets/digits-tfrecord
    python examples/digits_tfrecord/upload_data.py --create-bucket s3://my-bucket/...  # a new local server

Writes `train-0000-of-0004.tfrecord` ... (1,500 images) and `test-0000-of-0001.tfrecord`
(297 images) of the 8x8 digits of examples/digits/digits.npz (no download), then uploads them with
spotfit's store layer: S3 settings and credentials come from the environment (docs/storage.md).
`--create-bucket` makes the URL's bucket first, waiting up to 2 minutes for a server that is
still starting (docs/local-s3.md).
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from spotfit.stores import open_store

TRAIN_ROWS = 1500


def _example(image: np.ndarray, label: int) -> bytes:
    features = {
        "image": tf.train.Feature(float_list=tf.train.FloatList(value=image.tolist())),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_shards(folder: Path, train_shards: int = 4) -> list[Path]:
    """The TFRecord files of the example, written into `folder`."""
    digits = np.load(Path(__file__).resolve().parents[1] / "digits" / "digits.npz")
    x = (digits["images"].astype("float32") / 16.0).reshape(len(digits["images"]), 64)
    y = digits["target"]
    splits = {"train": (x[:TRAIN_ROWS], y[:TRAIN_ROWS], train_shards), "test": (x[TRAIN_ROWS:], y[TRAIN_ROWS:], 1)}
    paths = []
    for split, (images, labels, shards) in splits.items():
        for n, rows in enumerate(np.array_split(np.arange(len(images)), shards)):
            path = folder / f"{split}-{n:04d}-of-{shards:04d}.tfrecord"
            with tf.io.TFRecordWriter(str(path)) as writer:
                for i in rows:
                    writer.write(_example(images[i], labels[i]))
            paths.append(path)
    return paths


def create_bucket(url: str, timeout_s: float = 120.0) -> None:
    """Make the bucket of an s3:// `url` if it is missing, and check that it takes a write."""
    import s3fs

    from spotfit.stores.fsspec_store import s3_options

    bucket = url.split("://", 1)[1].split("/", 1)[0]
    fs = s3fs.S3FileSystem(**s3_options(os.environ))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if not fs.exists(bucket):
                fs.mkdir(bucket)
            fs.pipe(f"{bucket}/.upload-probe", b"ok")  # a server still starting answers before it stores
            fs.rm(f"{bucket}/.upload-probe")
            return
        except Exception as exc:  # noqa: BLE001  (not up yet: connection refused, 5xx; retried until the deadline)
            if time.monotonic() > deadline:
                raise SystemExit(f"error: bucket {bucket!r} not created within {timeout_s:g} s: {exc}") from None
            fs.invalidate_cache()
            time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="store URL to upload to, e.g. s3://bucket/datasets/digits-tfrecord")
    parser.add_argument("--train-shards", type=int, default=4)
    parser.add_argument("--create-bucket", action="store_true", help="make the s3:// bucket first if it is missing")
    args = parser.parse_args()
    if args.create_bucket:
        create_bucket(args.url)
    store = open_store(args.url)
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_shards(Path(tmp), args.train_shards):
            store.put_file(str(path), path.name)
            print(f"uploaded {path.name} ({path.stat().st_size} bytes) to {args.url}")


if __name__ == "__main__":
    main()
