"""The local data cache over file:// and memory:// stores: hits, resume, eviction, progress."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

from spotfit.data_helper import data_dir
from spotfit.errors import StoreError, UsageError
from spotfit.stores import open_store
from spotfit.stores.datacache import DataCache
from spotfit.stores.fsspec_store import FsspecStore


def _blob(i: int, size: int) -> bytes:
    return bytes((i * 31 + j) % 251 for j in range(size))


@pytest.fixture(params=["file", "memory"])
def source(request, tmp_path) -> str:
    url = f"file://{tmp_path}/src" if request.param == "file" else f"memory://dc-{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    for i in range(5):
        store.write_bytes(f"shards/train-{i}.tfrecord", _blob(i, 10_000 + i))
    store.write_bytes("meta.json", b"{}")
    return url


def _tree(path: str) -> dict[str, bytes]:
    out = {}
    for folder, _, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            out[os.path.relpath(full, path)] = open(full, "rb").read()
    return out


def test_second_sync_downloads_nothing(source, tmp_path):
    cache = DataCache(tmp_path / "cache", workers=4)
    first = cache.sync(source)
    assert (first.files, first.downloaded, first.hits) == (6, 6, 0)
    assert first.bytes_downloaded == first.bytes_total == sum(10_000 + i for i in range(5)) + 2
    second = DataCache(tmp_path / "cache").sync(source)
    assert (second.bytes_downloaded, second.downloaded, second.hits) == (0, 0, 6)
    assert second.path == first.path
    tree = _tree(second.path)
    assert tree["shards/train-3.tfrecord"] == _blob(3, 10_003) and tree["meta.json"] == b"{}"


def test_changed_and_removed_objects(source, tmp_path):
    cache = DataCache(tmp_path / "cache")
    cache.sync(source)
    store = open_store(source)
    time.sleep(0.01)  # a new mtime for stores without content tags
    store.write_bytes("shards/train-0.tfrecord", b"new content")
    store.delete("meta.json")
    stats = cache.sync(source)
    assert (stats.downloaded, stats.bytes_downloaded, stats.hits) == (1, len(b"new content"), 4)
    tree = _tree(stats.path)
    assert tree["shards/train-0.tfrecord"] == b"new content" and "meta.json" not in tree


def test_interrupted_sync_resumes_where_it_stopped(source, tmp_path, monkeypatch):
    original = FsspecStore.read_range
    calls = []

    def failing(self, key, start, end):
        calls.append(key)
        if key == "shards/train-4.tfrecord" and start >= 4096:
            raise StoreError("connection lost")
        return original(self, key, start, end)

    monkeypatch.setattr(FsspecStore, "read_range", failing)
    cache = DataCache(tmp_path / "cache", workers=1, chunk_bytes=4096)
    with pytest.raises(StoreError):
        cache.sync(source)
    monkeypatch.setattr(FsspecStore, "read_range", original)
    stats = cache.sync(source)
    assert stats.bytes_resumed == 4096  # the part of train-4 fetched before the failure
    assert stats.bytes_hit + stats.bytes_resumed + stats.bytes_downloaded == stats.bytes_total
    assert _tree(stats.path)["shards/train-4.tfrecord"] == _blob(4, 10_004)


def test_downloads_run_in_parallel(source, tmp_path, monkeypatch):
    # Each read waits until three are in flight at once (or 60 s pass): serial downloads can
    # never get there, parallel ones always do, however slow the machine.
    original = FsspecStore.read_range
    active, peak, lock = [0], [0], threading.Lock()
    three_at_once = threading.Event()

    def gathering(self, key, start, end):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            if active[0] >= 3:
                three_at_once.set()
        three_at_once.wait(timeout=60)
        with lock:
            active[0] -= 1
        return original(self, key, start, end)

    monkeypatch.setattr(FsspecStore, "read_range", gathering)
    DataCache(tmp_path / "cache", workers=4).sync(source)
    assert peak[0] >= 3


def test_lru_eviction_keeps_the_limit(tmp_path):
    urls = []
    for name in ("a", "b", "c"):
        url = f"memory://lru-{uuid.uuid4().hex[:6]}-{name}"
        open_store(url).write_bytes("x.bin", _blob(ord(name), 40_000))
        urls.append(url)
    cache = DataCache(tmp_path / "cache", limit_bytes=100_000)
    cache.sync(urls[0])
    time.sleep(0.02)
    cache.sync(urls[1])
    time.sleep(0.02)
    assert cache.sync(urls[0]).hits == 1  # a is now more recently used than b
    time.sleep(0.02)
    third = cache.sync(urls[2])
    assert (third.evicted, third.bytes_evicted) == (1, 40_000)
    assert cache.usage_bytes() <= 100_000
    assert cache.sync(urls[0]).hits == 1  # kept
    assert cache.sync(urls[1]).downloaded == 1  # evicted, fetched again


def test_dataset_larger_than_the_limit_is_a_clear_error(source, tmp_path):
    with pytest.raises(UsageError, match="cache_limit_gib"):
        DataCache(tmp_path / "cache", limit_bytes=1000).sync(source)


def test_progress_callback_and_bar(source, tmp_path, capsys):
    seen = []
    stats = DataCache(tmp_path / "cache").sync(source, progress=True, on_progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (stats.bytes_total, stats.bytes_total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert "data" in capsys.readouterr().err


def test_data_dir_helper(source, tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTFIT_DATA_DIR", raising=False)
    with pytest.raises(UsageError, match="SPOTFIT_DATA_DIR"):
        data_dir()
    path = data_dir(source)
    assert (path / "meta.json").read_bytes() == b"{}"
    monkeypatch.setenv("SPOTFIT_DATA_DIR", str(tmp_path))
    assert data_dir(source) == tmp_path


def test_spec_data_section():
    from spotfit.errors import SpecError
    from spotfit.spec.job import parse_spec

    spec = parse_spec({"name": "j", "script": "t.py", "data": {"source": "s3://b/p", "cache_limit_gib": 2}})
    assert (spec.data.source, spec.data.cache_limit_gib, spec.data.workers) == ("s3://b/p", 2, 16)
    with pytest.raises(SpecError, match="without credentials"):
        parse_spec({"name": "j", "script": "t.py", "data": {"source": "s3://KEY:SECRET@b/p"}})
    with pytest.raises(SpecError, match="did you mean `cache_dir`"):
        parse_spec({"name": "j", "script": "t.py", "data": {"source": "s3://b/p", "cachedir": "/x"}})
    with pytest.raises(SpecError, match="data.source"):
        parse_spec({"name": "j", "script": "t.py", "data": {"source": "/local/path"}})


class _Reporter:
    def __init__(self):
        self.events, self.timings, self.state = [], {}, {}

    def progress(self, force=False, **fields):
        self.state.update(fields)

    def timing(self, name, seconds):
        self.timings[name] = seconds

    def event(self, kind, message, **data):
        self.events.append((kind, data))


def test_runtime_data_step_sets_the_env_var_and_reports(source, tmp_path, monkeypatch):
    from spotfit.attempt.config import RuntimeConfig
    from spotfit.runtime.job_data import sync_job_data

    monkeypatch.delenv("SPOTFIT_DATA_DIR", raising=False)
    config = RuntimeConfig.from_json(RuntimeConfig(
        job_id="j", job_url="memory://j", script="t.py", workdir=".", data_source=source,
        data_cache_dir=str(tmp_path / "cache"), data_cache_limit_gib=1.0).to_json())
    rep = _Reporter()
    stats = sync_job_data(config, rep)
    assert os.environ["SPOTFIT_DATA_DIR"] == stats.path
    [(kind, data)] = rep.events
    assert kind == "data_synced" and data["bytes_downloaded"] == stats.bytes_total > 0
    assert "data_sync_s" in rep.timings and rep.state["data_bytes_done"] == stats.bytes_total
    assert sync_job_data(RuntimeConfig(job_id="j", job_url="memory://j", script="t.py", workdir="."), rep) is None
