"""The job spec: what a user writes next to a Keras script, validated with pydantic.

`load_spec(path)` reads the YAML, rejects unknown keys with a did-you-mean, and turns every
validation problem into one `SpecError` line that names the field, the value received, what
was expected and the fix. `docs/job-spec.md` documents each field.

The file is untrusted input: `load_spec` reads at most `MAX_SPEC_BYTES`, accepts UTF-8 only,
bounds the nesting depth and the number of values after YAML aliases are expanded (a "billion
laughs" document stops at the limit instead of filling memory), and refuses NaN, infinity and
numbers beyond each field's range, each with one clear line. The sections (`resources:`,
`market:`, ...) are in `sections.py`; a problem becomes its one line in `problems.py`.

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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import Field, ValidationError, create_model, field_validator

from spotfit.core.registry import load, registered_backends, section_targets
from spotfit.errors import SpecError
from spotfit.spec.base import BackendSection, Labels, Slug, _Section, quoted_path
from spotfit.spec.file import read_spec_file
from spotfit.spec.problems import DOCS, spec_error
from spotfit.spec.rules import Notify, RuleSpec
from spotfit.spec.sections import (
    MAX_HOURS,
    Checkpoint,
    Data,
    Environment,
    Export,
    JobKind,
    Market,
    Notebook,
    Resources,
    Training,
)


class JobSpecBase(_Section):
    """A job: a Keras script (or a notebook) plus where, how and within which limits to run it.

    `JobSpec` is this model plus one field per backend section in spotfit/core/registry.py (`aws:`,
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
    backend: str = Field("local", description="where attempts run: a backend in spotfit/core/registry.py")
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

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        # The OS refuses these at the launch (`illegal environment variable name`), after the job is recorded.
        for name, text in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
                raise ValueError(f"expected environment variable names (letters, digits, `_`, not starting with a "
                                 f"digit), received {name!r}")
            if "\x00" in text:
                raise ValueError(f"expected values without a NUL byte, received one in `{name}`")
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


# The backends' sections (spotfit/core/registry.py), each a field named after its backend.
SECTIONS: dict[str, type[BackendSection]] = {name: load(target) for name, target in section_targets().items()}

if TYPE_CHECKING:
    JobSpec = JobSpecBase
else:
    JobSpec = create_model(
        "JobSpec", __base__=JobSpecBase, __module__=__name__, __doc__=JobSpecBase.__doc__,
        **{name: (cls, Field(default_factory=cls, description=f"the `{name}` backend's settings"))
           for name, cls in SECTIONS.items()},
    )


def load_spec(path: str | os.PathLike[str], check_script: bool = True) -> JobSpec:
    """Read and validate a job spec YAML file; raise `SpecError` with one clear line."""
    path = Path(path)
    if not _is_file(path):
        raise SpecError(
            f"Job spec not found: received {quoted_path(path)}, expected a YAML file.",
            hint="Pass the path of your job YAML, e.g. `spotfit validate examples/digits/spotfit.yaml`.",
        )
    raw = read_spec_file(path)
    spec = parse_spec(raw, source=str(path), base_dir=str(path.parent.resolve()))
    script = Path(spec.base_dir) / (spec.script or "")
    if check_script and not spec.is_notebook and not _is_file(script):
        raise SpecError(
            f"Invalid `script` in {path}: received {quoted_path(spec.script)}, expected a file relative to the "
            f"spec's folder (looked for {quoted_path(script)}).",
            hint="Fix the path in `script:`; it is relative to the spec file.",
        )
    requirements = spec.environment.requirements
    if check_script and requirements and not _is_file(Path(spec.base_dir) / requirements):
        raise SpecError(
            f"Invalid `environment.requirements` in {path}: received {quoted_path(requirements)}, expected a file "
            f"relative to the spec's folder (looked for {quoted_path(Path(spec.base_dir) / requirements)}).",
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
        raise spec_error(exc, raw, source, JobSpec) from None
    if spec.deadline_h is not None and spec.market.overhead_h >= spec.deadline_h:
        raise SpecError(
            f"Invalid `market.overhead_h` in {source}: received {spec.market.overhead_h:g}, expected less than "
            f"`deadline_h` ({spec.deadline_h:g} h): no launch could train before the deadline.",
            hint="Set `market.overhead_h` to the hours one launch takes to start (0.2 by default).",
        )
    if spec.kind == "train" and spec.script is None:
        raise SpecError(
            f"Missing field `script` in {source}: it is required for a training job.",
            hint=f"Add `script:` to the spec, or `kind: notebook` for JupyterLab (see {DOCS}).",
        )
    return spec


def dump_spec(spec: JobSpec) -> str:
    """The spec as YAML, such that `parse_spec(yaml.safe_load(dump_spec(s)))` equals `s`."""
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)


def spec_of(job: Mapping[str, Any]) -> JobSpec:
    """The spec a job's row holds (its `spec_json`), as this spotfit reads it: the one accessor (a
    controller reads it once, for the job it drives). `SpecError` when it no longer validates (a job
    that another version of spotfit recorded)."""
    try:
        return JobSpec.model_validate(json.loads(job["spec_json"]))
    except ValueError as exc:  # JSON, or pydantic's ValidationError
        first = str(exc).strip().splitlines()[0][:200]
        raise SpecError(f"The recorded spec of job {job['id']} does not validate with this spotfit: {first}.",
                        hint="Use the spotfit version that submitted it, or run the job again.") from None
