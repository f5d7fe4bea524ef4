"""The store conformance suite: every store (file://, memory://, a real S3 server, a GCS API server) passes it."""

from __future__ import annotations

import hashlib
import threading
import uuid

import numpy as np
import pytest

from spotfit.errors import NotFoundError
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import ObjectInfo, ObjectStore, child, open_store
from tests.support import gcs
from tests.support.seaweed import BUCKET


@pytest.fixture(params=["file", "memory", "s3", "gs"])
def store(request, tmp_path) -> ObjectStore:
    name = uuid.uuid4().hex[:8]
    if request.param == "file":
        return open_store(f"file://{tmp_path}/store")
    if request.param == "memory":
        return open_store(f"memory://conformance-{name}")
    if request.param == "gs":
        request.getfixturevalue("gcs_env")
        return open_store(f"gs://{gcs.BUCKET}/conformance-{name}")
    request.getfixturevalue("s3_env")
    return open_store(f"s3://{BUCKET}/conformance-{name}")


def test_is_an_object_store(store):
    assert isinstance(store, ObjectStore)


def test_round_trip_binary_and_empty(store):
    blob = bytes(range(256)) * 3
    store.write_bytes("a/blob.bin", blob)
    store.write_bytes("a/empty", b"")
    assert store.read_bytes("a/blob.bin") == blob
    assert store.read_bytes("a/empty") == b""


def test_overwrite_replaces(store):
    store.write_bytes("k", b"first version")
    store.write_bytes("k", b"second")
    assert store.read_bytes("k") == b"second"


def test_missing_object_raises_not_found(store):
    with pytest.raises(NotFoundError):
        store.read_bytes("nope/missing")
    with pytest.raises(NotFoundError):
        store.info("nope/missing")
    assert not store.exists("nope/missing")


def test_list_is_recursive_sorted_and_scoped_to_the_prefix(store):
    for key in ("d/b/2", "d/a", "d/b/1", "dd/x", "e"):
        store.write_bytes(key, key.encode())
    assert store.list("d") == ["d/a", "d/b/1", "d/b/2"]
    assert store.list("d/b") == ["d/b/1", "d/b/2"]
    assert store.list("") == ["d/a", "d/b/1", "d/b/2", "dd/x", "e"]
    assert store.list("nothing-here") == []


def test_info_and_list_info_give_size_and_a_version_tag(store):
    store.write_bytes("i/x", b"12345")
    info = store.info("i/x")
    assert isinstance(info, ObjectInfo) and info.key == "i/x" and info.size == 5
    assert info.etag is not None or info.mtime is not None
    if info.etag is not None and "-" not in info.etag:
        assert info.etag == hashlib.md5(b"12345").hexdigest()  # S3 single-part ETag is the md5
    assert store.list_info("i") == [info]


def test_read_range(store):
    store.write_bytes("r", b"0123456789")
    assert store.read_range("r", 2, 5) == b"234"
    assert store.read_range("r", 8, 100) == b"89"


def test_delete_and_delete_missing(store):
    store.write_bytes("x/y", b"1")
    store.delete("x/y")
    store.delete("x/y")
    assert not store.exists("x/y") and store.list("x") == []


def test_files_round_trip(store, tmp_path):
    src = tmp_path / "src.bin"
    data = np.random.default_rng(0).bytes(3 * 2**20 + 17)
    src.write_bytes(data)
    store.put_file(str(src), "files/big.bin")
    store.get_file("files/big.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == data
    assert store.info("files/big.bin").size == len(data)


def test_concurrent_writers_leave_whole_objects(store):
    def write(i):
        store.write_bytes(f"c/{i:02d}", bytes([i]) * (1000 + i))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.list("c") == [f"c/{i:02d}" for i in range(8)]
    assert all(store.read_bytes(f"c/{i:02d}") == bytes([i]) * (1000 + i) for i in range(8))


def test_create_exclusive_creates_only_a_free_key(store):
    assert store.create_exclusive("claims/1", b"first")
    assert not store.create_exclusive("claims/1", b"second")
    store.write_bytes("claims/2", b"written")
    assert not store.create_exclusive("claims/2", b"third")
    assert (store.read_bytes("claims/1"), store.read_bytes("claims/2")) == (b"first", b"written")
    assert store.list("claims") == ["claims/1", "claims/2"]  # no temporary left behind


def test_create_exclusive_has_one_winner_among_racers_and_its_content_is_whole(store):
    racers = 8
    barrier = threading.Barrier(racers, timeout=60)
    won: dict[int, bool] = {}
    payloads = [bytes([i]) * (100_000 + i) for i in range(racers)]  # large enough to be written in pieces

    def race(i):
        barrier.wait()  # all start together
        won[i] = store.create_exclusive("race/key", payloads[i])

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(won) == racers, f"only {len(won)} of {racers} racers answered"
    [winner] = [i for i, ok in won.items() if ok]
    assert store.read_bytes("race/key") == payloads[winner]


def test_child_urls_open_the_same_objects(store):
    store.write_bytes("jobs/j1/spec.json", b"{}")
    sub = open_store(child(store.url, "jobs", "j1"))
    assert sub.read_bytes("spec.json") == b"{}" and sub.list() == ["spec.json"]


def test_checkpoint_protocol(store):
    """Manifest last, verified restore, pruning: the runtime's checkpoints on this store."""
    ckpts = CheckpointStore(store, keep=2)
    for step in (10, 20, 30):
        ckpts.save(step, {"w": np.full(4, float(step))}, {"epoch": 0})
    store.write_bytes("checkpoints/000000000040/state.npz", b"orphan: no manifest")
    assert ckpts.steps() == [20, 30]
    latest = ckpts.load_latest()
    assert latest.step == 30 and latest.arrays["w"][0] == 30.0
