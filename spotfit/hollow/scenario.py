"""What a hollow attempt trains and does: `hollow.json` beside the script, then the job's `args`.

Every field is optional; the defaults are a small job of 2 epochs of 20 steps.

- `epochs`, `steps_per_epoch`: one `fit` call of that shape (`--epochs N` in the args overrides `epochs`);
- `fits`: several `fit` calls instead, a list of `{"epochs", "steps_per_epoch"}`;
- `shuffle`: each epoch visits its batches in a seeded random order (default true);
- `prints`: lines the script prints when it starts (before its imports' `start_s`);
- `start_s`, `step_s`: wall seconds before the first step (the imports) and per step;
- `loss`: `{"start", "end"}`, the loss falls from start to end over the job's steps;
- `metrics`: per epoch, `{"name": [v1, v2, ...]}` (the last value repeats) or `{"name": {"start", "end"}}`;
- `nan_at_step`: from this step on, the loss and the weights are NaN;
- `fail_at_step`, `fail_error`, `fail_message`, `fail_attempts`: raise after that step (0: before
  training) in those attempts (all when absent);
- `kill_at_step`: the script's process SIGKILLs itself after that step (0: before training), as the
  OOM killer ends it: no exit record, no `failed` event;
- `exit_code`: the script's own `sys.exit(code)` after its last `fit`;
- `wait_for_notice_at`, `wait_timeout_s`: the script stands still at these steps until a notice
  (`--wait-for-market-at`, `--wait-timeout-s`);
- `pause_at`, `pause_dir`: the first attempt at that step writes `DIR/paused` and waits for
  `DIR/go` (`--pause-at`, `--pause-dir`);
- `wait_for_stop_at`: an attempt that started at step 0 stands still at this step until the
  controller's stop request or a notice, then stops there (`--wait-for-stop-at`);
- `stall_after`, `stall_until`: after that step the data stops coming until the file `stall_until`
  exists (`--steps`, `--wait-for` of the stalled-pipeline script);
- `handoffs`: the script's turns with the test through marker files, each `{"at", "touch", "wait_for",
  "sigterm"}`: at step `at` it creates the file `touch`, then waits (600 s at most) until the file
  `wait_for` exists, or sends itself SIGTERM (`"sigterm": true`, a preemption notice); a turn whose
  `touch` exists already is skipped (a later attempt passing that step again); `{job_id}` in a path is
  the job's id (each trial of a sweep its own files); `"until_stop": true` also ends the wait when the
  controller asks the attempt to stop (its stop request read, or a notice), which it then does at that step;
- `vary_with_args`: each metric is shifted by an amount drawn from the job's `args` (trials of a
  sweep differ, each the same in every attempt);
- `args`: more of the script's flags, each onto a field: `{"--nan-step": "nan_at_step"}`. The flags
  above are mapped already; a flag mapped to null is the script's own and ignored.

>>> s = Scenario.from_dict({"epochs": 3, "steps_per_epoch": 5}, ["--epochs", "1", "--wait-for-market-at", "4"])
>>> s.fits, s.wait_for_notice_at, s.total_steps
([Fit(epochs=1, steps_per_epoch=5)], [4], 5)
>>> round(s.loss_at(0), 3), round(s.loss_at(5), 3), s.epoch_metrics(0, 0)["accuracy"]
(2.3, 0.25, 0.5)
>>> Scenario.from_dict({"bogus": 1}, [])
Traceback (most recent call last):
...
spotfit.errors.UsageError: Invalid hollow scenario: received unknown field(s) ['bogus'], expected some of ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from spotfit.errors import UsageError
from spotfit.hollow import SCENARIO_FILE

# The test scripts' own flags (tests/controller/scripts/), mapped onto the scenario's fields.
FLAGS: dict[str, str | None] = {"--epochs": "epochs", "--wait-for-market-at": "wait_for_notice_at",
                                "--wait-timeout-s": "wait_timeout_s", "--pause-at": "pause_at",
                                "--pause-dir": "pause_dir", "--wait-for-stop-at": "wait_for_stop_at"}


@dataclass(frozen=True)
class Fit:
    """One `fit` call: its epochs and the batches of each."""

    epochs: int
    steps_per_epoch: int

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch


@dataclass
class Scenario:
    epochs: int = 2
    steps_per_epoch: int = 20
    fits: list[Fit] = field(default_factory=list)
    shuffle: bool = True
    prints: list[str] = field(default_factory=list)
    start_s: float = 0.0
    step_s: float = 0.0
    loss: dict[str, float] = field(default_factory=lambda: {"start": 2.3, "end": 0.25})
    metrics: dict[str, Any] = field(default_factory=lambda: {"accuracy": {"start": 0.5, "end": 0.95}})
    nan_at_step: int | None = None
    fail_at_step: int | None = None
    fail_error: str = "RuntimeError"
    fail_message: str = "the hollow script failed as scripted"
    fail_attempts: list[int] | None = None
    kill_at_step: int | None = None
    exit_code: int = 0
    wait_for_notice_at: list[int] = field(default_factory=list)
    wait_timeout_s: float = 300.0
    pause_at: int | None = None
    pause_dir: str = ""
    wait_for_stop_at: int | None = None
    stall_after: int | None = None
    stall_until: str = ""
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    vary_with_args: bool = False
    args: dict[str, str | None] = field(default_factory=dict)
    arg_text: str = ""  # the job's args, as the shift of `vary_with_args` draws from them

    @classmethod
    def from_dict(cls, doc: dict[str, Any], args: list[str]) -> Scenario:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise UsageError(f"Invalid hollow scenario: received unknown field(s) {unknown}, expected some of "
                             f"{sorted(known)}", hint=f"Fix {SCENARIO_FILE} beside the script (hollow/scenario.py).")
        scenario = cls(**doc)
        scenario._apply_args(args)
        raw_fits: list[Any] = list(scenario.fits) or [{"epochs": scenario.epochs,
                                                       "steps_per_epoch": scenario.steps_per_epoch}]
        scenario.fits = [f if isinstance(f, Fit) else Fit(int(f["epochs"]), int(f["steps_per_epoch"]))
                         for f in raw_fits]
        return scenario

    def _apply_args(self, args: list[str]) -> None:
        """The script's flags that the scenario maps onto its fields, where the job's `args` give them."""
        mapping = {**FLAGS, **self.args}
        parser = argparse.ArgumentParser(add_help=False)
        for flag, name in mapping.items():
            if name is not None:
                parser.add_argument(flag, dest=name, default=None)
        known, _ = parser.parse_known_args(args)
        types = {f.name: f.type for f in fields(self)}
        for name, text in vars(known).items():
            if text is None:
                continue
            kind = str(types[name])
            if "list" in kind:
                setattr(self, name, [int(s) for s in text.split(",") if s])
            elif "int" in kind:
                setattr(self, name, int(text))
            elif "float" in kind:
                setattr(self, name, float(text))
            else:
                setattr(self, name, text)
            if name == "epochs":
                self.fits = []
        self.arg_text = " ".join(args)

    @property
    def total_steps(self) -> int:
        return sum(f.steps for f in self.fits)

    def loss_at(self, step: int) -> float:
        """The loss of global step `step` (counted from 1): a decay from `start` to `end`, NaN from `nan_at_step`."""
        if self.nan_at_step is not None and step >= self.nan_at_step:
            return math.nan
        start, end = float(self.loss["start"]), float(self.loss["end"])
        frac = min(step / max(self.total_steps, 1), 1.0)
        return end + (start - end) * (1.0 - frac) ** 2

    def epoch_metrics(self, fit_index: int, epoch: int) -> dict[str, float]:
        """The metrics epoch `epoch` of call `fit_index` (from 0) logs besides its mean loss."""
        before = sum(f.epochs for f in self.fits[:fit_index])
        n = before + epoch  # epochs ended before this one, over the job
        count = max(sum(f.epochs for f in self.fits), 1)
        out: dict[str, float] = {}
        for name, values in self.metrics.items():
            if isinstance(values, list):
                out[name] = float(values[min(n, len(values) - 1)])
            else:
                start, end = float(values["start"]), float(values["end"])
                out[name] = start + (end - start) * (n / max(count - 1, 1))
            out[name] += self.shift()
        return out

    def shift(self) -> float:
        """What `vary_with_args` adds to every metric's values: from -0.2 to 0.2, drawn from the args."""
        if not self.vary_with_args:
            return 0.0
        digest = hashlib.sha256(self.arg_text.encode()).digest()
        return (int.from_bytes(digest[:4], "big") / 2**32 - 0.5) * 0.4

    def fails_in(self, attempt: int) -> bool:
        return self.fail_at_step is not None and (self.fail_attempts is None or attempt in self.fail_attempts)


def load(script: str, args: list[str]) -> Scenario:
    """The scenario of the script at `script`: `hollow.json` beside it (defaults without), then `args`."""
    path = Path(script).with_name(SCENARIO_FILE)
    try:
        doc = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError as exc:
        raise UsageError(f"Invalid hollow scenario {path}: received text that is not JSON ({exc}), expected a "
                         "JSON object", hint="Fix the file (spotfit/hollow/scenario.py lists its fields).") from None
    if not isinstance(doc, dict):
        raise UsageError(f"Invalid hollow scenario {path}: received {type(doc).__name__}, expected a JSON object",
                         hint="Fix the file (spotfit/hollow/scenario.py lists its fields).")
    return Scenario.from_dict(doc, args)
