"""Shared test setup: every test gets its own SPOTFIT_HOME; nothing reaches a network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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


def run_inline_job(tmp_path: Path, spec_text: str, script_text: str, *args: str, timeout: float = 300) -> dict:
    """Write `script_text` as train.py beside a spec, `spotfit run --json` it; the status document."""
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(script_text)
    spec = write_spec(tmp_path / "job", spec_text, script=src)
    out = subprocess.run(spotfit_cmd("run", str(spec), "--json", *args), capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)
