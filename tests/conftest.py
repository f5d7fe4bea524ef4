"""Shared test setup: every test gets its own SPOTFIT_HOME; nothing reaches a network."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DIGITS = REPO / "examples" / "digits"

# Never let TF probe a metadata server (DESIGN.md): a closed loopback port.
os.environ.setdefault("GCE_METADATA_IP", "127.0.0.1:9")
os.environ.setdefault("GCE_METADATA_HOST", "127.0.0.1:9")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(autouse=True)
def spotfit_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "spotfit-home"
    monkeypatch.setenv("SPOTFIT_HOME", str(home))
    return home


def write_spec(folder: Path, text: str, script: Path = DIGITS / "train.py") -> Path:
    """A job spec in `folder` with a copy of the script beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(script, folder / script.name)
    path = folder / "spotfit.yaml"
    path.write_text(text)
    return path


def spotfit_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "spotfit", *args]
