"""The TFRecord example end to end on SeaweedFS: data and checkpoints in S3, run twice.

The second run (another job naming the same `data.source` at the same content) must download 0
bytes: its data comes from the one cache entry the first job made (one view, one blob per file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import open_store
from tests.support.jobs import REPO, spotfit_cmd
from tests.support.seaweed import BUCKET

pytestmark = pytest.mark.slow
EXAMPLE = REPO / "examples" / "digits_tfrecord"

SPEC = """
name: {name}
script: train.py
args: ["--epochs", "2"]
market: {{trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}}
data: {{source: "{data}", cache_limit_gib: 1, workers: 4}}
checkpoint: {{store: "{store}", interval: {{steps: 20}}, keep: 2}}
training: {{seed: 0, deterministic: true, tensorboard: false}}
"""


def _events(job_url: str) -> list[dict]:
    store = open_store(job_url)
    return [json.loads(store.read_bytes(k)) for k in store.list("events")]


def test_tfrecord_example_twice_on_seaweedfs_second_run_downloads_nothing(s3_env, tmp_path):
    env = os.environ.copy()  # s3_env points it at the server
    data = f"s3://{BUCKET}/datasets/digits-{uuid.uuid4().hex[:6]}"
    store_url = f"s3://{BUCKET}/spotfit-{uuid.uuid4().hex[:6]}"
    up = subprocess.run([sys.executable, str(EXAMPLE / "upload_data.py"), data], env=env,
                        capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    uploaded = open_store(data).list_info()
    assert [i.key for i in uploaded] == (["test-0000-of-0001.tfrecord"]
                                         + [f"train-{n:04d}-of-0004.tfrecord" for n in range(4)])
    total = sum(i.size for i in uploaded)

    runs = []
    for n in (1, 2):
        folder = tmp_path / f"job{n}"
        folder.mkdir()
        shutil.copy(EXAMPLE / "train.py", folder / "train.py")
        (folder / "spotfit.yaml").write_text(SPEC.format(name=f"tfrecord{n}", data=data, store=store_url))
        out = subprocess.run(spotfit_cmd("run", str(folder / "spotfit.yaml"), "--json"), env=env,
                             capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr[-3000:]
        doc = json.loads(out.stdout)
        assert doc["state"] == "completed" and doc["step"] > 90, doc
        runs.append(doc)

    synced = []
    for doc in runs:
        job_url = f"{store_url}/jobs/{doc['id']}"
        assert job_url.startswith("s3://")
        [event] = [e for e in _events(job_url) if e["kind"] == "data_synced"]
        synced.append(event["data"])
        assert CheckpointStore(open_store(job_url)).load_latest().step == 94  # on SeaweedFS: 47 x 2
    first, second = synced
    assert first["bytes_downloaded"] == first["bytes_total"] == total > 0
    assert (second["bytes_downloaded"], second["downloaded"], second["hits"]) == (0, 0, 5)
    assert first["path"] == second["path"]
    root = Path(first["path"]).parents[1]  # the cache: one entry (a view and its blobs) serves both jobs
    assert [p.name for p in (root / "views").iterdir()] == [Path(first["path"]).name]
    assert len([p for p in (root / "blobs").rglob("*") if p.is_file()]) == 5
    assert runs[0]["weights_sha256"] == runs[1]["weights_sha256"]  # same data, same seed
