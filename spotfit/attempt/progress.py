"""What the runtime reports and the controller reads: `progress.json` (`Progress`) and its `Phase`.

The runtime rewrites `progress.json` at most every heartbeat (and at once when the phase
changes); its events are documents of their own (`events.py`).
Phases are a `StrEnum`: the stored strings are the members' values, so `progress.json` files
written before the enum read the same.

>>> Phase("training") is Phase.TRAINING, Phase.TRAINING == "training"
(True, True)
>>> "holding" in TRAINED_PHASES, "running script" in TRAINED_PHASES
(True, False)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict


class Phase(StrEnum):
    """Where an attempt stands, in the order an attempt usually passes them."""

    STARTING = "starting"  # the runtime's process started
    SYNCING_DATA = "syncing data"  # `data.source` copied to the local cache
    RUNNING_SCRIPT = "running script"  # importing, building: no step yet
    REPLAYING = "replaying"  # an unmodified custom loop runs its steps up to the checkpoint again
    TRAINING = "training"
    SAVING = "saving"  # a checkpoint is being written
    HOLDING = "holding"  # held at a step: an injected preemption, or a NaN loss awaiting the rule's verdict
    PREEMPTED = "preempted"  # saved after a notice, exiting 75
    STOPPED = "stopped"  # saved after a stop request, exiting 76
    DONE = "done"
    SERVING = "serving"  # a notebook attempt: JupyterLab is up


# The runtime's phases once in fit: the attempt trains (WorkMeter counts its work from here).
TRAINED_PHASES = (Phase.TRAINING, Phase.SAVING, Phase.HOLDING, Phase.PREEMPTED, Phase.STOPPED, Phase.DONE)


class Progress(TypedDict, total=False):
    """`progress.json`: the live attempt's latest report (a field is absent until first reported)."""

    attempt: int
    pid: int
    phase: str  # a `Phase` value
    step: int
    total_steps: int | None
    total_steps_estimated: bool
    epoch: int
    fit_index: int  # the script's fit call now training (fit_calls.py)
    loss: float | None
    losses: list[tuple[int, float | None]]  # the last steps' (step, loss): rules over windows of steps
    metrics: dict[str, float]
    metrics_step: int
    timings: dict[str, float]  # seconds: process_start_s, tf_import_s, ...
    nan_loss: bool
    nan_step: int | None  # the first step whose loss was NaN or infinite
    heartbeat_at: float  # epoch seconds of the write
    store_error: str  # the store failed the last write; training goes on
    utilization_source: str | None
    utilization_pct: float | None
    gpu: dict[str, Any]  # with a GPU: util_pct, mem_pct, mem_used_gib, mem_total_gib, count, at (utilization.py)
    data_bytes_done: int
    data_bytes_total: int
    last_activity_at: float  # a notebook: the kernels' last activity
    kernels: int
