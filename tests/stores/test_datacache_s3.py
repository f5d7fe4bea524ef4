"""The local data cache against a real S3 server (SeaweedFS) and a real GCS API server (gcp-storage-emulator):
ETag hits, dedupe, verification, reads pinned to the listed version."""

from __future__ import annotations

import uuid

import pytest

from spotfit.errors import StoreError
from spotfit.stores import open_store
from spotfit.stores.datacache import DataCache
from spotfit.stores.fsspec_store import FsspecStore
from tests.support import gcs
from tests.support.seaweed import BUCKET


@pytest.fixture(params=["s3", "gs"])
def source(request) -> str:
    if request.param == "gs":
        request.getfixturevalue("gcs_env")
        url = f"gs://{gcs.BUCKET}/datacache-{uuid.uuid4().hex[:8]}"
    else:
        request.getfixturevalue("s3_env")
        url = f"s3://{BUCKET}/datacache-{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    for i in range(4):
        store.write_bytes(f"train-{i}.tfrecord", bytes([i]) * (50_000 + i))
    store.write_bytes("copy-of-train-0.tfrecord", bytes([0]) * 50_000)  # same content, same ETag
    return url


def test_second_sync_downloads_zero_bytes_and_same_content_is_one_blob(source, tmp_path):
    cache = DataCache(tmp_path / "cache", workers=4)
    first = cache.sync(source)
    assert (first.files, first.downloaded) == (5, 4)  # the copy shares train-0's download
    assert first.bytes_downloaded == sum(50_000 + i for i in range(4))
    assert len(list((tmp_path / "cache" / "blobs").glob("*/md5-*"))) == 4
    second = DataCache(tmp_path / "cache").sync(source)
    assert (second.bytes_downloaded, second.hits) == (0, 5)
    assert open(f"{second.path}/copy-of-train-0.tfrecord", "rb").read() == bytes([0]) * 50_000


def test_a_corrupted_transfer_fails_the_md5_check_and_is_fetched_again(source, tmp_path, monkeypatch):
    original, corrupted = FsspecStore.read_range, []

    def flip_once(self, key, start, end, etag=None):
        data = original(self, key, start, end, etag)
        if key == "train-2.tfrecord" and not corrupted:
            corrupted.append(key)
            return bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    monkeypatch.setattr(FsspecStore, "read_range", flip_once)
    stats = DataCache(tmp_path / "cache", verify="md5").sync(source)
    assert corrupted and open(f"{stats.path}/train-2.tfrecord", "rb").read() == bytes([2]) * 50_002
    assert stats.bytes_downloaded == sum(50_000 + i for i in range(4)) + 50_002  # train-2 twice


def test_reads_are_pinned_to_the_listed_etag(source):
    store = open_store(source)
    etag = store.info("train-1.tfrecord").etag
    assert store.read_range("train-1.tfrecord", 0, 4, etag=etag) == bytes([1]) * 4
    store.write_bytes("train-1.tfrecord", b"a new version")  # changed after the listing
    with pytest.raises(StoreError, match="changed while it was downloaded"):
        store.read_range("train-1.tfrecord", 0, 4, etag=etag)
