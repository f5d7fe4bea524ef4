"""A job whose script waits for a `go` file before it trains, so that a test decides when training starts.

Tests that kill a controller or a process mid-job use it: the runtime is surely still running
when the test looks, whatever the machine's speed (the test, not a margin, decides).
"""

from __future__ import annotations

from pathlib import Path


def gated_script(go_env: str, epochs: int) -> str:
    """The script: wait (at most 300 s) for the file named by `$go_env`, then fit a tiny model `epochs` epochs."""
    return f'''
import os
import time
from pathlib import Path

import keras
import numpy as np

go = Path(os.environ["{go_env}"])
deadline = time.monotonic() + 300
while not go.exists():
    if time.monotonic() > deadline:
        raise SystemExit(f"the test never created {{go}}")
    time.sleep(0.05)
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(x, (x[:, 0] > 0).astype("int32"), batch_size=16, epochs={epochs}, verbose=2)
'''


def write_gated_job(tmp_path: Path, name: str, go_env: str, epochs: int) -> tuple[Path, Path]:
    """Job `name` in `tmp_path/job` (no market trace), its script gated on `tmp_path/go`: (spec file, go file)."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "train.py").write_text(gated_script(go_env, epochs))
    go = tmp_path / "go"
    (folder / "spotfit.yaml").write_text(
        f"name: {name}\nscript: train.py\nmarket: {{trace: null}}\nenv: {{{go_env}: '{go}'}}\n")
    return folder / "spotfit.yaml", go
