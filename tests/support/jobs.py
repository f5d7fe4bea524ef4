"""Running spotfit the way a user does: the CLI in a subprocess, a spec folder beside a script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "examples" / "digits"
# The digits the example scripts and most test scripts train on, read from beside the script (no
# scikit-learn: Keras 3 imports it when installed, 1-2 s of CPU in every TensorFlow process).
DIGITS_DATA = DIGITS / "digits.npz"


def place_script(path: Path, text: str) -> Path:
    """`text` written at `path`, with the digits beside it when the script reads them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if DIGITS_DATA.name in text and not path.with_name(DIGITS_DATA.name).exists():
        shutil.copy(DIGITS_DATA, path.with_name(DIGITS_DATA.name))
    return path


def spotfit_cmd(*args: str) -> list[str]:
    """The command line of `spotfit ARGS` with this interpreter."""
    return [sys.executable, "-m", "spotfit", *args]


def write_spec(folder: Path, text: str, script: Path = DIGITS / "train.py") -> Path:
    """A job spec in `folder` with a copy of the script beside it."""
    place_script(folder / script.name, script.read_text())
    path = folder / "spotfit.yaml"
    path.write_text(text)
    return path


def run_inline_job(tmp_path: Path, spec_text: str, script_text: str, *args: str, timeout: float = 300) -> dict:
    """Write `script_text` as train.py beside a spec, `spotfit run --json` it; the status document."""
    src = place_script(tmp_path / "src" / "train.py", script_text)
    spec = write_spec(tmp_path / "job", spec_text, script=src)
    out = subprocess.run(spotfit_cmd("run", str(spec), "--json", *args), capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def run_plain_script(folder: Path, script_text: str, deterministic: bool = True, keras_2: bool = False) -> dict:
    """`python train.py` of `script_text` in `folder`, as a user runs it (with TensorFlow's op determinism,
    as `training: {deterministic: true}` sets it, unless not `deterministic`; on Keras 2, `tf-keras` with
    `TF_USE_LEGACY_KERAS=1`, with `keras_2`); the `out.json` it writes."""
    place_script(folder / "train.py", script_text)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **({"TF_DETERMINISTIC_OPS": "1"} if deterministic else {}),
           **({"TF_USE_LEGACY_KERAS": "1"} if keras_2 else {})}
    subprocess.run([sys.executable, "train.py"], cwd=folder, check=True, capture_output=True, timeout=300,
                   env=env, stdin=subprocess.DEVNULL)
    return json.loads((folder / "out.json").read_text())


@contextmanager
def spotfit_home_at(home: Path) -> Iterator[Path]:
    """`SPOTFIT_HOME` set to `home` for the block (for module-scoped fixtures, which have no
    `monkeypatch`), restored afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPOTFIT_HOME", str(home))
        yield home
