"""The digits job of the store-fault tests (a full disk, an S3 outage), and its status seen from the test.

The script trains a small, seeded model on the digits; a callback the test passes in makes the
fault happen at a fixed step, handing the turn back and forth through marker files. Without
its marker variable the callback does nothing: that run gives the uninterrupted reference.
`Reference` runs it once for a whole test module, in its own SPOTFIT_HOME, while the tests'
own jobs train.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from spotfit import sdk
from spotfit.errors import NotFoundError
from tests.support.jobs import place_script, spotfit_cmd, write_spec

_FIT = '''
import numpy as np
from pathlib import Path

digits = np.load(Path(__file__).with_name("digits.npz"))  # tests/support/jobs.py: place_script
x = (digits["images"].astype("float32") / 16.0)[..., None][:1500]
y = digits["target"].astype("int32")[:1500]
model = keras.Sequential([keras.Input(shape=(8, 8, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=4, shuffle=True, verbose=0, callbacks=[{callback}()])
'''
SPEC = """name: {name}
script: train.py
market: {{trace: aws-v100, zones: [us-west-2a], start: '2023-02-17T19:16:00', time_scale: 10}}
checkpoint: {{interval: {{steps: 10}}, keep: 2{store}}}
training: {{seed: 7, deterministic: true}}
env: {env}
{extra}"""


def digits_script(callback_source: str, callback: str) -> str:
    """The training script: `callback_source` (its imports, `keras` and the class `callback`),
    then a seeded digits fit with that callback."""
    return callback_source + _FIT.format(callback=callback)


def write_job(job_spec: Callable[..., Path], tmp_path: Path, script: str, name: str, store: str = "",
              env: dict | None = None, extra: str = "") -> Path:
    """The spec of job `name` running `script` (in `tmp_path/src`); `store` is `, store: URL` or empty;
    `extra`: more top-level lines of the spec (`max_failures: 0`)."""
    place_script(tmp_path / "src" / "train.py", script)
    return job_spec(SPEC.format(name=name, store=store, env=json.dumps(env or {}), extra=extra), name,
                    script=tmp_path / "src" / "train.py")


def status_or_empty(name: str) -> dict:
    """`spotfit status NAME --json`, in this process (the same SPOTFIT_HOME); {} before the job exists."""
    try:
        return sdk.status(name)
    except NotFoundError:
        return {}


class Reference:
    """The uninterrupted run of `script` (`spotfit run --json`, no marker variable), started at once
    in `folder` with a SPOTFIT_HOME of its own; `result()` waits for its status document, once.

    A test module's tests compare their weights with the same reference: started by a module
    fixture, it trains while the first test's job does, and is not trained again for the next.
    """

    def __init__(self, folder: Path, script: str):
        (folder / "src").mkdir(parents=True)
        (folder / "src" / "train.py").write_text(script)
        spec = write_spec(folder / "reference", SPEC.format(name="reference", store="", env="{}", extra=""),
                          script=folder / "src" / "train.py")
        self.home = folder / "spotfit-home"
        self.proc = subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                                     env={**os.environ, "SPOTFIT_HOME": str(self.home)})
        self._doc: dict | None = None

    def result(self, timeout_s: float = 600) -> dict:
        """The reference job's status document (it completed: asserted)."""
        if self._doc is None:
            out, err = self.proc.communicate(timeout=timeout_s)
            assert self.proc.returncode == 0 and out, err[-3000:]
            self._doc = json.loads(out)
        return self._doc

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
