"""The user's (or team's) settings file, `$SPOTFIT_HOME/config.yaml`: budgets over many jobs and the webhook.

Validated like a job spec: unknown keys get a did-you-mean, every problem is one `SpecError`
line naming the file, the field, the value and what was expected. A missing file is empty
settings. `docs/costs.md` documents the budgets.

```yaml
notify:
  webhook: https://hooks.slack.com/services/...   # rule firings (docs/rules.md)
  sinks:                                          # notifications of job events (docs/costs.md)
    - {slack: https://hooks.slack.com/services/..., events: [failed, preempted, paused, budget]}
    - {email: {to: [ops@example.com], sender: spotfit@example.com, host: smtp.example.com}, events: [failed]}
paths:                           # where specs may name local folders (docs/job-spec.md#where-a-spec-may-write)
  allow: [/data/experiments]     # besides the home, $SPOTFIT_HOME and the spec's folder (your own jobs)
  shared: [/srv/spotfit/stores]  # a shared controller: besides its $SPOTFIT_HOME/store, registry, cache
budgets:
  - name: nlp-monthly
    labels: {project: nlp}       # the jobs it covers: those with every label given ({} = every job)
    usd: 500
    period: month                # day, week or month (UTC calendar)
    at_80_percent: notify        # none, notify or pause
    at_100_percent: pause        # none, notify or pause
```

Example:

>>> s = Settings.model_validate({"budgets": [{"name": "nlp", "labels": {"project": "nlp"}, "usd": 500}]})
>>> s.budgets[0].period, s.budgets[0].at_80_percent, s.budgets[0].at_100_percent
('month', 'notify', 'pause')
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from spotfit.errors import SpecError
from spotfit.host.home import home
from spotfit.spec.base import Labels, Slug, _Section
from spotfit.spec.sinks import Sink, one_target

DOCS = "docs/costs.md"
Action = Literal["none", "notify", "pause"]


class TeamBudget(_Section):
    """A budget over every job whose labels match, per calendar period."""

    name: Slug = Field(description="the budget's name: letters, digits, `-`, `_`, `.`")
    labels: Labels = Field(default_factory=dict, description="the jobs it covers ({} = every job)")
    usd: float = Field(gt=0, le=1e9, description="USD per period")
    period: Literal["day", "week", "month"] = "month"
    at_80_percent: Action = "notify"
    at_100_percent: Action = "pause"


class NotifySettings(_Section):
    webhook: str | None = Field(None, description="an http(s):// URL that takes a JSON POST (rule firings)")
    sinks: list[Sink] = Field(default_factory=list, description="where each notification event goes")

    _one_target = field_validator("sinks")(one_target)


def _absolute(value: list[str]) -> list[str]:
    for folder in value:
        if not folder.startswith("/"):
            raise ValueError(f"expected absolute folders, e.g. /data/experiments (received {folder[:120]!r})")
    return value


class PathSettings(_Section):
    """Folders, besides the defaults, that a job spec's local paths may resolve inside (host/confine.py)."""

    allow: list[str] = Field(default_factory=list, description="for jobs run by their owner")
    shared: list[str] = Field(default_factory=list, description="for the jobs a shared controller runs")

    _allow = field_validator("allow")(_absolute)
    _shared = field_validator("shared")(_absolute)


class Settings(_Section):
    """The whole file."""

    notify: NotifySettings = Field(default_factory=NotifySettings)
    paths: PathSettings = Field(default_factory=PathSettings)
    budgets: list[TeamBudget] = Field(default_factory=list)

    @field_validator("budgets")
    @classmethod
    def _unique_names(cls, value: list[TeamBudget]) -> list[TeamBudget]:
        names = [b.name for b in value]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"expected each budget name once ({', '.join(twice)} appears more than once)")
        return value


def settings_path() -> Path:
    return home() / "config.yaml"


def load_settings(path: Path | None = None) -> Settings:
    """The settings at `path` (default `$SPOTFIT_HOME/config.yaml`); empty ones when there is no file."""
    from spotfit.spec.file import read_spec_file
    from spotfit.spec.problems import spec_error

    path = path or settings_path()
    if not path.is_file():
        return Settings()
    raw = read_spec_file(path, "Settings file")  # bounded in size, depth and values, like a job spec
    if raw is None:
        return Settings()
    if not isinstance(raw, dict):
        raise SpecError(f"Settings file {path} must be a mapping of fields, received {type(raw).__name__}.",
                        hint=f"Start from the example in {DOCS}.")
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise spec_error(exc, raw, str(path), root=Settings, docs=DOCS) from None


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Write `settings` (comments in the file are not kept); returns the path."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(settings.model_dump(mode="json", exclude_defaults=True), sort_keys=False)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path
