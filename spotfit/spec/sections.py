"""The sections of a job spec: `resources:`, `market:`, `checkpoint:`, `training:`, `data:`, `export:`,
`environment:`, `notebook:` (the job spec itself, `JobSpec`, is in `job.py`; `rules:` and `notify:` in `rules.py`).

Each is a strict pydantic model (`_Section`: unknown keys are refused) whose fields bound what
they accept, so that a spec's problem is reported as one line by `problems.spec_error`.

Example:

>>> Checkpoint.model_validate({"interval": {"steps": 10}}).interval
StepsInterval(steps=10)
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from spotfit.spec.base import _Section

MAX_HOURS = 87_600.0  # ten years: bounds the hour fields so that dates and seconds never overflow


class Resources(_Section):
    """What to run on: accelerator type and count per machine, machines, spot or on-demand."""

    accelerator: str = Field("V100", description="GPU type, e.g. V100, A100, H100, L4, T4, or CPU.")
    count: int = Field(1, ge=1, le=16, description="accelerators per machine")
    workers: int = Field(1, ge=1, le=64, description="machines (MultiWorkerMirroredStrategy when > 1)")
    spot: bool = Field(True, description="use spot capacity (on-demand only when false)")


class Preemption(_Section):
    """An injected preemption: SIGTERM at `at_step`, SIGKILL `notice_s` seconds later."""

    at_step: int = Field(ge=1)
    notice_s: float = Field(5.0, ge=0)


class Market(_Section):
    """The replayed spot market of the local backend (trace time, not wall time)."""

    trace: str | None = Field("aws-v100", description="bundled trace name or path to a trace CSV")
    zones: list[str] = Field(default_factory=list, description="zones to use; empty = all in the trace")
    start: datetime | None = Field(None, description="trace time at which the job starts")
    time_scale: float = Field(600.0, gt=0, le=1e6, description="trace seconds per real second")
    gap_s: float | None = Field(None, ge=60, le=86_400, description="override the trace's tick length "
                                                                      "(markets report by the minute)")
    policy: str = Field("default", description="spot policy name (see `spotfit simulate`)")
    overhead_h: float = Field(0.2, ge=0, le=MAX_HOURS, description="restart overhead per launch (replay bills it)")
    max_overpay: float = Field(0.1, ge=0, le=10, description="the default policy pays at most this share above "
                               "all-on-demand, in its own model (0: never more)")
    preemptions: list[Preemption] = Field(default_factory=list)

    @field_validator("start")
    @classmethod
    def _plausible(cls, value: datetime | None) -> datetime | None:
        # Far from the years 9999 and 1, so that start + any deadline stays a date.
        if value is not None and not 1970 <= value.year <= 2999:
            raise ValueError("expected a date and time between the years 1970 and 2999, e.g. 2023-02-19T19:02:01")
        return value


class StepsInterval(_Section):
    steps: int = Field(ge=1)


class SecondsInterval(_Section):
    seconds: float = Field(gt=0)


class Checkpoint(_Section):
    """Where and how often to checkpoint."""

    store: str | None = Field(None, description="object store URL; default file://$SPOTFIT_HOME/store")
    interval: Literal["auto"] | StepsInterval | SecondsInterval = "auto"
    keep: int = Field(2, ge=1, description="good checkpoints kept")
    full_wait_s: float = Field(600.0, ge=0, le=86400, description="wall seconds a full store is waited for "
                                                                   "before the job pauses (store full)")

    @field_validator("interval", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        # Pick the form by its key, so that errors speak of that form only.
        if isinstance(value, dict) and set(value) == {"steps"}:
            return _section(StepsInterval, value, "a whole number of steps >= 1")
        if isinstance(value, dict) and set(value) == {"seconds"}:
            return _section(SecondsInterval, value, "a number of seconds > 0")
        if value == "auto" or isinstance(value, (StepsInterval, SecondsInterval)):
            return value
        raise ValueError("expected `auto`, `{steps: N}` or `{seconds: S}`")

    @field_validator("store")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return value if value is None else store_url(value, "a URL such as file:///path, s3://bucket/prefix or memory://x")


# The schemes spotfit's stores open (spotfit/stores/fsspec_store.py): anything else fails at `run`.
STORE_SCHEMES = ("file", "memory", "s3", "s3a", "gs")


def store_url(value: str, expected: str) -> str:
    """`value` if it is a URL of a scheme in `STORE_SCHEMES`; else ValueError naming what was expected.

    >>> store_url("oss://bucket/x", "a store URL")
    Traceback (most recent call last):
    ...
    ValueError: expected a URL of file://, memory://, s3://, s3a:// or gs:// (`oss://` is not a store spotfit opens)
    """
    match = re.match(r"^([a-z0-9]+)://", value)
    if not match:
        raise ValueError(f"expected {expected}")
    if match.group(1) not in STORE_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in STORE_SCHEMES[:-1]) + f" or {STORE_SCHEMES[-1]}://"
        raise ValueError(f"expected a URL of {schemes} (`{match.group(1)}://` is not a store spotfit opens)")
    return value


def _section(model: type[BaseModel], value: dict[str, Any], expected: str) -> BaseModel:
    try:
        return model.model_validate(value)
    except ValidationError:
        raise ValueError(f"expected {expected}") from None


def _on_off(value: Any) -> Any:
    """YAML 1.1 reads unquoted `on`/`off` as booleans: take them back."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class Training(_Section):
    """Speed-ups and reproducibility."""

    keras: Literal["auto", "2", "3"] = Field(
        "auto", description="the Keras the script runs on: 3 (keras 3.15), 2 (tf.keras 2: tf-keras with "
                            "TF_USE_LEGACY_KERAS=1), or auto (2 when the script has Keras-2-only code, else 3; "
                            "said in one line at submission)")
    strategy: Literal["auto", "none", "mirrored", "multi_worker"] = "auto"
    mixed_precision: Literal["auto", "off", "mixed_float16", "mixed_bfloat16"] = "auto"
    xla: Literal["auto", "on", "off"] = "auto"
    auto_apply: bool = Field(False, description="let mixed_precision/xla `auto` apply what it measured faster "
                             "(changes numerics); default: the script runs as written and auto only reports")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of data order and random layers")
    deterministic: bool = Field(False, description="enable TF op determinism (bit-identical resume)")
    tensorboard: bool = Field(True, description="write TensorBoard logs under the job's store prefix")
    histogram_freq: int = Field(0, ge=0, description="epochs between weight histograms in TensorBoard; 0 = none")
    tensorboard_update_freq: str | int = Field(
        "auto", description="batch_loss in TensorBoard: auto (under 0.5% of step time), epoch, or every N steps")

    @field_validator("xla", mode="before")
    @classmethod
    def _xla(cls, value: Any) -> Any:
        return _on_off(value)

    @field_validator("keras", mode="before")
    @classmethod
    def _keras(cls, value: Any) -> Any:
        """YAML reads `keras: 2` as a number."""
        return str(value) if type(value) is int else value

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _precision(cls, value: Any) -> Any:
        return "off" if value is False else value

    @field_validator("tensorboard_update_freq", mode="before")
    @classmethod
    def _update_freq(cls, value: Any) -> Any:
        if value in ("auto", "epoch") or (type(value) is int and value >= 1):
            return value
        raise ValueError("expected `auto`, `epoch` or a number of steps >= 1")


class Data(_Section):
    """The dataset: synced from object storage to a local cache before the script starts."""

    source: str = Field(description="store URL of the dataset, e.g. s3://bucket/prefix or file:///path")
    cache_dir: str | None = Field(None, description="local cache folder; default $SPOTFIT_HOME/cache/data")
    cache_limit_gib: float | None = Field(None, gt=0, description="evict least-recently-used data above this")
    size_gib: float | None = Field(None, gt=0, description="the dataset's size: cloud disks are sized for it "
                                                           "(docs/aws.md#disks)")
    volume: Literal["root", "snapshot"] = Field(
        "root", description="root: the cache on the attempt's own disk; snapshot (aws): on a data volume made "
                            "from a snapshot of the synced data, kept between attempts (docs/aws.md#snapshots)")
    mode: Literal["copy", "mount"] = Field(
        "copy", description="copy: synced to the cache before the script; mount: mounted read-only with rclone or "
                            "mount-s3 (FUSE), copied where FUSE is not allowed (docs/storage.md#mounting-the-data)")
    workers: int = Field(16, ge=1, le=64, description="parallel downloads")
    verify: Literal["etag", "md5"] = Field(
        "etag", description="etag: size + reads pinned to the listed ETag; md5: also hash the content")

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        return store_url(value, "a URL such as s3://bucket/prefix, gs://bucket/prefix or file:///path")


ExportFormat = Literal["savedmodel", "tflite", "keras"]


def _default_formats() -> list[ExportFormat]:
    return ["savedmodel"]


class Export(_Section):
    """Where the trained model goes."""

    registry: str | None = Field(None, description="registry URL; default file://$SPOTFIT_HOME/registry")
    formats: list[ExportFormat] = Field(default_factory=_default_formats)

    @field_validator("registry")
    @classmethod
    def _registry(cls, value: str | None) -> str | None:
        return value if value is None else store_url(value, "a URL such as file:///path, s3://bucket/prefix or gs://bucket/prefix")




class Environment(_Section):
    """Python packages the script needs on a cloud instance, installed on top of spotfit."""

    requirements: str | None = Field(None, description="a pip requirements file, relative to the spec file")
    pip: list[str] = Field(default_factory=list, description="pip requirement specifiers, e.g. 'pandas>=2,<3'")


JobKind = Literal["train", "notebook"]


class Notebook(_Section):
    """A `kind: notebook` job's settings (docs/notebooks.md)."""

    folder: str | None = Field(None, description="folder whose files seed the notebook's working folder, "
                                                 "relative to the spec; default none")
    sync_s: float = Field(60.0, gt=0, le=86_400, description="seconds between syncs of the working folder "
                                                             "to the store")
