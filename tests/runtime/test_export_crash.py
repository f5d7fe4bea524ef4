"""An export is all or nothing: killed at any crash point, the job's next export completes the same version.

A real process publishes a model folder (runtime/export.py `publish`, as the attempt's export
does after writing and checking the formats) and is held at a crash point
(core/crashpoints.py), then SIGKILLed there. The next export of the same job then
publishes version 1, whole, and no other version exists: no orphaned claim, no half-written
folder, no version 2. Against a `file://` registry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from spotfit.attempt.registry import CARD, CLAIM, claim_version, versions
from spotfit.core.crashpoints import HOLD_ENV
from spotfit.host.home import export_scratch
from spotfit.runtime import export
from spotfit.stores import open_store

POINTS = ["export_claimed", "export_uploading", "export_uploaded"]
FILES = {"saved_model.pb": b"graph" * 100, "variables/variables.index": b"index", "model.tflite": b"tfl" * 50}


def _model_folder(root) -> object:
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def _card(job_id: str = "job-1") -> dict:
    return {"job_id": job_id, "weights_sha256": "ab" * 32, "step": 940}


def _killed_at(point: str, registry: str, folder, holds) -> None:
    """Run `publish` in a process of its own, hold it at `point` and SIGKILL it there."""
    code = (f"from pathlib import Path; from spotfit.runtime.export import publish; "
            f"publish({registry!r}, 'digits', Path({str(folder)!r}), {_card()!r})")
    env = {**os.environ, HOLD_ENV: f"{point}:{holds}"}
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.DEVNULL)
    reached = holds / f"{point}.reached"
    while not reached.exists():  # the hold is an event: no wall-clock margin
        assert process.poll() is None, f"the export ended (rc {process.returncode}) before {point}"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


@pytest.mark.parametrize("point", POINTS)
def test_an_export_killed_at_a_crash_point_is_completed_by_the_jobs_next_export(tmp_path, point):
    registry_url = f"file://{tmp_path}/registry"
    folder = _model_folder(tmp_path / "model")
    holds = tmp_path / "holds"
    holds.mkdir()
    _killed_at(point, registry_url, folder, holds)
    registry = open_store(registry_url)
    assert registry.exists(f"digits/1/{CLAIM}") and versions(registry, "digits") == []  # claimed, not published

    card = export.publish(registry_url, "digits", folder, _card())

    assert card["version"] == 1 and versions(registry, "digits") == [1]
    keys = sorted(k.split("/", 2)[2] for k in registry.list("digits/"))
    assert keys == sorted([*FILES, CARD, CLAIM])  # whole, and nothing beside it
    assert all(registry.read_bytes(f"digits/1/{name}") == data for name, data in FILES.items())
    assert json.loads(registry.read_bytes(f"digits/1/{CARD}"))["job_id"] == "job-1"


def test_another_jobs_unfinished_claim_is_left_alone(tmp_path):
    registry_url = f"file://{tmp_path}/registry"
    registry = open_store(registry_url)
    assert claim_version(registry, "digits", "other-job") == 1  # another job's export, still under way
    card = export.publish(registry_url, "digits", _model_folder(tmp_path / "model"), _card())
    assert card["version"] == 2 and registry.exists(f"digits/1/{CLAIM}") and versions(registry, "digits") == [2]


def test_a_version_the_job_published_is_not_published_twice(tmp_path):
    """Its attempt died after the card, before its result: the next attempt finds the version."""
    registry_url = f"file://{tmp_path}/registry"
    folder = _model_folder(tmp_path / "model")
    first = export.publish(registry_url, "digits", folder, _card())
    again = export.publish(registry_url, "digits", folder, _card())
    assert first["version"] == again["version"] == 1 and versions(open_store(registry_url), "digits") == [1]
    retrained = export.publish(registry_url, "digits", folder, {**_card(), "weights_sha256": "cd" * 32})
    assert retrained["version"] == 2  # other weights: a new version


def test_the_scratch_folder_lives_in_the_jobs_folder_and_goes_on_every_path(spotfit_home):
    root = export_scratch("job-1")
    root.mkdir(parents=True)
    (root / "export-dead").mkdir()
    (root / "export-dead" / "saved_model.pb").write_bytes(b"a copy a killed export left")
    with pytest.raises(RuntimeError), export.scratch("job-1") as folder:
        assert folder.parent == root and not (root / "export-dead").exists()  # the dead export's copy is gone
        (folder / "saved_model.pb").write_bytes(b"x")
        raise RuntimeError("the format check failed")
    assert not root.exists()
    with export.scratch("job-1") as folder:
        (folder / "saved_model.pb").write_bytes(b"x")
    assert not root.exists()
