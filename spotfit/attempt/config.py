"""What the controller tells an attempt: written as `runtime.json` under the job's prefix."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

# This machine's CPU as N logical devices (N replicas under MirroredStrategy, for data parallelism
# without GPUs): the runtime reads it (`runtime/strategy.py`), the local backend sets it from
# `resources.count` when `resources.accelerator` is CPU.
LOGICAL_CPUS_ENV = "SPOTFIT_LOGICAL_CPUS"
# `SPOTFIT_HOLLOW=1` in an attempt's environment: `python -m spotfit.runtime` trains a hollow
# scenario instead of the script (spotfit/hollow/), with this trainer, loaded by name so that the
# runtime does not import the package built on it.
HOLLOW_ENV = "SPOTFIT_HOLLOW"
HOLLOW_TRAINER = "spotfit.hollow.trainer:train"


@dataclass
class RuntimeConfig:
    """Everything one attempt needs; plain data so that any backend can ship it."""

    job_id: str
    job_url: str  # the job's prefix in the object store
    script: str  # absolute path of the script on the machine that runs it
    workdir: str
    args: list[str] = field(default_factory=list)
    attempt: int = 1
    seed: int = 0
    deterministic: bool = False
    keep: int = 2
    interval_steps: int | None = None
    interval_s: float | None = None
    mtbf_s: float | None = None  # mean time between preemptions, wall seconds (interval: auto)
    hold_at_steps: list[int] = field(default_factory=list)  # injected preemptions
    hold_timeout_s: float = 60.0  # also bounds the wait after a NaN loss (hold_on_nan)
    hold_on_nan: bool = False  # a nan_loss rule pauses or stops: wait at the first NaN step for its verdict
    heartbeat_s: float = 1.0
    metadata_url: str | None = None  # spot interruption notice endpoint (AWS IMDS)
    metadata_poll_s: float = 5.0
    data_source: str | None = None  # store URL synced to the local data cache before the script
    data_cache_dir: str | None = None  # default: $SPOTFIT_CACHE_DIR, else $SPOTFIT_HOME/cache/data
    data_cache_limit_gib: float | None = None
    data_workers: int = 16
    data_verify: str = "etag"  # or "md5": see spotfit/stores/datacache.py
    data_mode: str = "copy"  # or "mount": see spotfit/runtime/datamount.py
    # Speed-ups (runtime/strategy.py, precision.py, xla.py) and outputs (tensorboard.py, export.py).
    keras: str = "3"  # "3" (keras 3) or "2" (tf.keras 2: tf-keras under TF_USE_LEGACY_KERAS=1, runtime/keras2/)
    strategy: str = "auto"  # auto | none | mirrored | multi_worker
    mixed_precision: str = "auto"  # auto | off | mixed_float16 | mixed_bfloat16
    xla: str = "auto"  # auto | on | off
    auto_apply: bool = False  # auto applies what it measured faster (else it only offers it: offer.py)
    workers: int = 1  # processes/machines of this attempt (TF_CONFIG comes from the backend)
    tensorboard: bool = True
    histogram_freq: int = 0  # epochs between weight histograms in TensorBoard; 0 = none
    tensorboard_update_freq: str | int = "auto"  # batch_loss: auto | epoch | every N steps (tensorboard.py)
    kind: str = "train"  # or "notebook": JupyterLab instead of the script (runtime/notebook.py)
    notebook_sync_s: float = 60.0  # a notebook's working folder goes to the store this often
    # {registry, formats, name, spec_hash, cost_usd_before, price_usd_per_h, time_scale}
    export: dict[str, Any] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> RuntimeConfig:
        data = json.loads(text)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})
