"""The job spec: what a user writes next to a Keras script, validated with pydantic.

`load_spec(path)` reads the YAML, rejects unknown keys with a did-you-mean, and turns every
validation problem into one `SpecError` line that names the field, the value received, what
was expected and the fix. `docs/job-spec.md` documents each field.

The file is untrusted input: `load_spec` reads at most `MAX_SPEC_BYTES`, accepts UTF-8 only,
bounds the nesting depth and the number of values after YAML aliases are expanded (a "billion
laughs" document stops at the limit instead of filling memory), and refuses NaN, infinity and
numbers beyond each field's range, each with one clear line.

Example:

>>> spec = JobSpec.model_validate({"name": "digits", "script": "train.py"})
>>> spec.resources.accelerator, spec.checkpoint.keep, spec.training.strategy
('V100', 2, 'auto')
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model, field_validator

from spotfit.errors import SpecError
from spotfit.registry import load, registered_backends, section_targets
from spotfit.spec.base import BackendSection, Labels, Slug, _Section, _short
from spotfit.spec.file import read_spec_file
from spotfit.spec.rules import RULE_MODELS, Notify, RuleSpec

DOCS = "docs/job-spec.md"
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
    gap_s: float | None = Field(None, gt=0, le=86_400, description="override the trace's tick length")
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
        if value is not None and not re.match(r"^[a-z0-9]+://", value):
            raise ValueError("expected a URL such as file:///path, s3://bucket/prefix or memory://x")
        return value


def _section(model: type[BaseModel], value: dict, expected: str) -> BaseModel:
    try:
        return model.model_validate(value)
    except ValidationError:
        raise ValueError(f"expected {expected}") from None


def _on_off(value: Any) -> Any:
    """YAML 1.1 reads unquoted `on`/`off` as booleans: take them back."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class Training(_Section):
    """Speed-ups and reproducibility."""

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
        if not re.match(r"^[a-z0-9]+://", value):
            raise ValueError("expected a URL such as s3://bucket/prefix, gs://bucket/prefix or file:///path")
        return value


ExportFormat = Literal["savedmodel", "tflite", "keras"]


def _default_formats() -> list[ExportFormat]:
    return ["savedmodel"]


class Export(_Section):
    """Where the trained model goes."""

    registry: str | None = Field(None, description="registry URL; default file://$SPOTFIT_HOME/registry")
    formats: list[ExportFormat] = Field(default_factory=_default_formats)




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


class JobSpecBase(_Section):
    """A job: a Keras script (or a notebook) plus where, how and within which limits to run it.

    `JobSpec` is this model plus one field per backend section in spotfit/registry.py (`aws:`,
    `kubernetes:`): a backend's settings live in its own folder, not here.
    """

    name: Slug = Field(description="job name: letters, digits, `-`, `_`")
    labels: Labels = Field(default_factory=dict, description="free `key: value` labels that costs and "
                                                                      "budgets group by (docs/job-spec.md)")
    kind: JobKind = Field("train", description="train (a Keras script) or notebook (JupyterLab)")
    script: str | None = Field(None, description="path to the Keras script, relative to the spec file "
                                                 "(required for kind: train)")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="environment for the script")
    backend: str = Field("local", description="where attempts run: a backend in spotfit/registry.py")
    resources: Resources = Field(default_factory=Resources)
    market: Market = Field(default_factory=Market)
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    training: Training = Field(default_factory=Training)
    data: Data | None = Field(None, description="dataset to sync into the local cache before the script runs")
    deadline_h: float | None = Field(None, gt=0, le=MAX_HOURS, description="finish within this many trace hours")
    work_h: float | None = Field(None, gt=0, le=MAX_HOURS, description="expected training time, for planning")
    budget_usd: float | None = Field(None, gt=0, description="stop when the job has cost this much")
    max_failures: int = Field(3, ge=0, description="failures (script, launch, boot, lost, OOM) retried")
    failure_backoff_s: float = Field(30.0, ge=0, description="wait after a failure, doubled for each one in a row")
    secrets: list[str] = Field(default_factory=list, description="names of variables passed from the submitting "
                                                                   "shell to the script, never stored in clear")
    rules: list[RuleSpec] = Field(default_factory=list, description="watchdog rules (docs/rules.md)")
    notify: Notify | None = None
    export: Export | None = None
    environment: Environment = Field(default_factory=Environment)
    notebook: Notebook = Field(default_factory=Notebook)

    # Not part of the YAML: where the spec file lives (script paths are relative to it).
    base_dir: str = Field(".", exclude=True, repr=False)

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
                raise ValueError(f"expected environment variable names (letters, digits, `_`), received {name!r}")
        if len(set(value)) != len(value):
            raise ValueError("expected each name once")
        return value

    @field_validator("backend")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in registered_backends():
            close = difflib.get_close_matches(value, registered_backends(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"expected one of {', '.join(map(repr, registered_backends()))}{hint}")
        return value

    def backend_sections(self) -> dict[str, BackendSection]:
        """Every registered backend's section of this spec, by the backend's name."""
        return {name: getattr(self, name) for name in SECTIONS}

    @property
    def script_path(self) -> Path:
        """Absolute path of the training script (a notebook has none: its spec's folder)."""
        return (Path(self.base_dir) / (self.script or "")).resolve()

    def runs_on(self) -> str:
        """What the job runs on, in a few words (`spotfit resume`'s moves, each attempt's ledger row).

        >>> JobSpec(name="j", script="t.py", resources={"accelerator": "A100", "count": 4}, backend="aws").runs_on()
        'A100×4 on aws'
        """
        r = self.resources
        machines = f" ×{r.workers} machines" if r.workers > 1 else ""
        zones = f" in {', '.join(self.market.zones)}" if self.market.zones else ""
        return f"{r.accelerator}×{r.count}{machines} on {self.backend}{zones}"

    @property
    def is_notebook(self) -> bool:
        return self.kind == "notebook"

    def runtime_extras(self, extras: list[str]) -> list[str]:
        """`extras` of the backend's spotfit; a notebook job's attempt runs JupyterLab: it gets `notebook` too."""
        return [*extras, "notebook"] if self.is_notebook and "notebook" not in extras else list(extras)

    def spec_hash(self) -> str:
        """sha256 of the canonical JSON form of the spec (stable across key order)."""
        doc = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(doc.encode()).hexdigest()


# The backends' sections (spotfit/registry.py), each a field named after its backend.
SECTIONS: dict[str, type[BackendSection]] = {name: load(target) for name, target in section_targets().items()}

if TYPE_CHECKING:
    JobSpec = JobSpecBase
else:
    JobSpec = create_model(
        "JobSpec", __base__=JobSpecBase, __module__=__name__, __doc__=JobSpecBase.__doc__,
        **{name: (cls, Field(default_factory=cls, description=f"the `{name}` backend's settings"))
           for name, cls in SECTIONS.items()},
    )


def load_spec(path: str | os.PathLike, check_script: bool = True) -> JobSpec:
    """Read and validate a job spec YAML file; raise `SpecError` with one clear line."""
    path = Path(path)
    if not _is_file(path):
        raise SpecError(
            f"Job spec not found: received {_short(str(path))}, expected a YAML file.",
            hint="Pass the path of your job YAML, e.g. `spotfit validate examples/digits/spotfit.yaml`.",
        )
    raw = read_spec_file(path)
    spec = parse_spec(raw, source=str(path), base_dir=str(path.parent.resolve()))
    script = Path(spec.base_dir) / (spec.script or "")
    if check_script and not spec.is_notebook and not _is_file(script):
        raise SpecError(
            f"Invalid `script` in {path}: received {_short(spec.script)}, expected a file relative to the "
            f"spec's folder (looked for {_short(str(script))}).",
            hint="Fix the path in `script:`; it is relative to the spec file.",
        )
    requirements = spec.environment.requirements
    if check_script and requirements and not _is_file(Path(spec.base_dir) / requirements):
        raise SpecError(
            f"Invalid `environment.requirements` in {path}: received {_short(requirements)}, expected a file "
            f"relative to the spec's folder (looked for {_short(str(Path(spec.base_dir) / requirements))}).",
            hint="Fix the path, or list the packages in `environment.pip` instead.",
        )
    return spec


def _is_file(path: Path) -> bool:
    """`path.is_file()`, and False for a path the OS cannot look up (a NUL byte, a name too long)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def parse_spec(raw: Any, source: str = "<spec>", base_dir: str = ".") -> JobSpec:
    """Validate a parsed YAML document (a mapping) into a `JobSpec`."""
    if not isinstance(raw, dict):
        kind = "an empty document" if raw is None else type(raw).__name__
        raise SpecError(
            f"Job spec {source} must be a mapping of fields, received {kind}.",
            hint=f"Start from examples/digits/spotfit.yaml; fields are listed in {DOCS}.",
        )
    if "base_dir" in raw:
        raise SpecError(
            f"Unknown field `base_dir` in {source}: it is set by spotfit, not by the spec.",
            hint="Remove `base_dir:`; paths are relative to the spec file.",
        )
    try:
        spec = JobSpec.model_validate({**raw, "base_dir": base_dir})
    except ValidationError as exc:  # a misspelt `scrpt:` gets its did-you-mean before `script` is missed
        raise _to_spec_error(exc, raw, source) from None
    if spec.kind == "train" and spec.script is None:
        raise SpecError(
            f"Missing field `script` in {source}: it is required for a training job.",
            hint=f"Add `script:` to the spec, or `kind: notebook` for JupyterLab (see {DOCS}).",
        )
    return spec


def dump_spec(spec: JobSpec) -> str:
    """The spec as YAML, such that `parse_spec(yaml.safe_load(dump_spec(s)))` equals `s`."""
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)


def _model_at(loc: tuple, root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    """The pydantic model under `root` (the job spec by default) that holds the field at `loc`."""
    model: Any = root or JobSpec
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        for sub in candidates:
            sub_args = getattr(sub, "__args__", ())
            found = next((a for a in (sub, *sub_args) if isinstance(a, type) and issubclass(a, BaseModel)), None)
            if found:
                model = found
                break
        else:
            return None
    return model


def _value_at(raw: Any, loc: tuple) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _clean_loc(loc: tuple) -> tuple:
    """The field path as the user wrote it: without pydantic's union member names."""
    tagged = len(loc) > 3 and loc[0] == "rules" and loc[2] in RULE_MODELS
    return tuple(p for i, p in enumerate(loc)
                 if p not in ("literal['auto']", "StepsInterval", "SecondsInterval", "WebhookSecret")
                 and not (tagged and i == 2))


def _to_spec_error(exc: ValidationError, raw: dict, source: str, root: type[BaseModel] | None = None,
                   docs: str = DOCS) -> SpecError:
    """One line for the first problem (`and N more` when there are several).

    `root` and `docs` name another file's model and its page (the sweep file reuses this).
    """
    # Unknown keys first: a misspelt key usually also explains a "missing" one.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    # A field with several union members reports one error per member: keep the first per loc.
    first = errors[0]
    raw_loc = first["loc"]
    rule_model = RULE_MODELS.get(str(raw_loc[2])) if len(raw_loc) > 3 and raw_loc[0] == "rules" else None
    loc = _clean_loc(raw_loc)
    dotted = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc).replace(".[", "[")
    more_locs = {_clean_loc(e["loc"])[:len(loc)] for e in errors} - {loc}
    more = f" ({len(more_locs)} more problem{'s' if len(more_locs) > 1 else ''} after this one)" if more_locs else ""
    if first["type"] == "extra_forbidden":
        model = rule_model or _model_at(loc, root)
        known = sorted(n for n, f in (model.model_fields.items() if model else []) if not f.exclude)
        key = str(loc[-1])
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc[:-1])
        parent = path.replace(".[", "[") or "the top level"
        suggestion = f": did you mean `{close[0]}`?" if close else "."
        return SpecError(
            f"Unknown field `{dotted}` in {source}{suggestion}{more}",
            hint=f"Valid fields at {parent}: {', '.join(known)} (see {docs}).",
        )
    received = _value_at(raw, loc) if first["type"] != "missing" else None
    if first["type"] == "missing":
        return SpecError(
            f"Missing field `{dotted}` in {source}: it is required.{more}",
            hint=f"Add `{loc[-1]}:` to the spec (see {docs}).",
        )
    expected = first["msg"]
    if first["type"] == "union_tag_invalid":
        expected = "expected `rule:` to be one of " + ", ".join(f"`{n}`" for n in RULE_MODELS)
    elif first["type"] == "union_tag_not_found":
        expected = "expected a mapping with `rule:` naming the rule"
    elif first["type"] == "literal_error":
        choices = first.get("ctx", {}).get("expected", "")
        expected = first["msg"].replace("Input should be", "expected" if " or " not in choices else "expected one of")
    elif first["type"] == "value_error":
        expected = first["msg"].removeprefix("Value error, ")
    else:
        expected = "expected: " + expected[0].lower() + expected[1:]
    if str(loc[-1]) == "interval":
        expected = "expected `auto`, `{steps: N}` or `{seconds: S}`"
    return SpecError(
        f"Invalid `{dotted}` in {source}: received {_short(received)}, {expected}.{more}",
        hint=f"Fix `{dotted}` (see {docs}).",
    )
