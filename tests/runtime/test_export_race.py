"""Two exports of one model name racing for a version number get distinct versions, each complete.

Both racers are held on a barrier right after they computed their candidate number, so each
sees the same registry and picks the same number: the claim (`create_exclusive` of
`<version>/claim.json`) must part them. Against file:// and a real S3 server (SeaweedFS).
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from spotfit.attempt import registry as registry_layout
from spotfit.runtime import export
from spotfit.stores import open_store
from tests.support.seaweed import BUCKET

RACERS = 2


@pytest.fixture(params=["file", "s3"])
def registry_url(request, tmp_path) -> str:
    if request.param == "file":
        return f"file://{tmp_path}/registry"
    request.getfixturevalue("s3_env")
    return f"s3://{BUCKET}/registry-{uuid.uuid4().hex[:8]}"


def _model_folder(folder: Path, seed: int) -> dict[str, bytes]:
    """A folder standing for one export's formats, each racer's content its own."""
    rng = np.random.default_rng(seed)
    files = {"savedmodel/saved_model.pb": rng.bytes(50_000), "savedmodel/variables/variables.data": rng.bytes(200_000),
             "model.tflite": rng.bytes(30_000)}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return files


def test_racing_exports_get_distinct_versions_each_complete(registry_url, tmp_path, monkeypatch):
    barrier = threading.Barrier(RACERS, timeout=60)
    computed = registry_layout.next_version

    def candidate_then_wait(registry, name):
        version = computed(registry, name)
        barrier.wait()  # every racer has picked its candidate before any claims it
        return version

    monkeypatch.setattr(registry_layout, "next_version", candidate_then_wait)
    open_store(registry_url).write_bytes("m/1/model_card.json", b"{}")  # an earlier version: the race is for 2
    folders = []
    for i in range(RACERS):
        folder = tmp_path / f"racer{i}"
        folders.append(_model_folder(folder, seed=i))
    cards: dict[int, dict] = {}
    errors: list[BaseException] = []

    def race(i):
        try:
            cards[i] = export.publish(registry_url, "m", tmp_path / f"racer{i}", {"job_id": f"job-{i}"})
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(c["version"] for c in cards.values()) == [2, 3]
    registry = open_store(registry_url)
    assert registry_layout.versions(registry, "m") == [1, 2, 3]
    for i, card in cards.items():
        prefix = f"m/{card['version']}/"
        stored = {k[len(prefix):] for k in registry.list(prefix.rstrip("/"))}
        assert stored == {*folders[i], registry_layout.CARD, registry_layout.CLAIM}  # this racer's files, nobody else's
        for name, data in folders[i].items():
            assert registry.read_bytes(prefix + name) == data
        assert json.loads(registry.read_bytes(prefix + registry_layout.CARD))["job_id"] == f"job-{i}"
        assert json.loads(registry.read_bytes(prefix + registry_layout.CLAIM))["job_id"] == f"job-{i}"


def test_a_claim_whose_reply_was_lost_is_still_recognized_as_ours(monkeypatch):
    registry = open_store(f"memory://claims-{uuid.uuid4().hex[:8]}")
    create = registry.create_exclusive

    def reply_lost(key, data):  # the create landed; its retry found the key taken
        create(key, data)
        return False

    monkeypatch.setattr(registry, "create_exclusive", reply_lost)
    assert registry_layout.claim_version(registry, "m") == 1
    assert registry.list("m") == ["m/1/claim.json"]  # no second number taken
