"""The `rules:` and `notify:` sections of the job spec: what to watch and what to do.

Each rule is a mapping that names its rule, its parameters and an action:

    rules:
      - {rule: loss_plateau, window_steps: 10, min_rel_improvement: 0.01, action: stop}
      - {rule: target_metric, metric: val_accuracy, mode: max, value: 0.9, action: stop}
      - {rule: idle_accelerator, below_pct: 30, for_s: 3600, action: pause}
      - {rule: budget, usd: 20, action: stop}
      - {rule: price_cap, usd_per_h: 1.2, action: pause}
      - {rule: nan_loss, action: stop}
      - {rule: stalled, for_s: 600, action: notify}
      - {rule: idle_notebook, below_pct: 10, for_s: 3600, action: stop}
    notify: {webhook: {secret: SLACK_WEBHOOK}}     # read from the submitting shell, like `secrets:`
    notify: {webhook: "https://hooks.slack.com/services/..."}   # kept in memory only, stored redacted

A webhook URL is a credential (anyone who has it may post): wherever a spec is stored or shown,
a literal URL appears redacted (`redact_url`).

Example:

>>> RulesDoc.model_validate({"rules": [{"rule": "budget", "usd": 5}]}).rules[0].action
'stop'
>>> redact_url("https://hooks.slack.com/services/T0001/B0002/XXXXXXXXXXXX")
'https://hooks.slack.com/services/T…/***'
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from spotfit.spec.sinks import JobSink, one_target

Action = Literal["notify", "pause", "stop"]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class LossPlateau(_Rule):
    """Stop when the per-step loss's mean over the last window improved too little on the window before.

    Only the per-step training loss is watched (`metric: loss`): validation metrics come once per
    epoch, too rarely for step windows; `target_metric` watches those.
    """

    rule: Literal["loss_plateau"]
    metric: Literal["loss"] = "loss"
    window_steps: int = Field(10, ge=2, le=1_000_000)
    min_rel_improvement: float = Field(0.01, ge=0)
    action: Action = "stop"


class TargetMetric(_Rule):
    """Stop (checkpoint, export) when an epoch metric reaches a value."""

    rule: Literal["target_metric"]
    metric: str = "val_accuracy"
    mode: Literal["min", "max"] = "max"
    value: float
    action: Action = "stop"


class IdleAccelerator(_Rule):
    """Act when utilization stays below `below_pct` for `for_s` seconds (GPU via NVML, else CPU)."""

    rule: Literal["idle_accelerator"]
    below_pct: float = Field(30.0, gt=0, le=100)
    for_s: float = Field(3600.0, gt=0)
    action: Action = "pause"


class Budget(_Rule):
    """Stop when the job has cost `usd` in total."""

    rule: Literal["budget"]
    usd: float = Field(gt=0)
    action: Action = "stop"


class PriceCap(_Rule):
    """Pause while the spot price is above `usd_per_h`; resume by itself when it falls back."""

    rule: Literal["price_cap"]
    usd_per_h: float = Field(gt=0)
    action: Literal["notify", "pause"] = "pause"


class NanLoss(_Rule):
    """Act as soon as the loss is NaN or infinite."""

    rule: Literal["nan_loss"]
    action: Action = "stop"


class Stalled(_Rule):
    """Act when no step was made for `for_s` seconds while training."""

    rule: Literal["stalled"]
    for_s: float = Field(600.0, gt=0)
    action: Action = "notify"


class IdleNotebook(_Rule):
    """Save and stop a notebook with no kernel activity and the accelerator below `below_pct` for `for_s`.

    A `kind: notebook` job gets it with these defaults unless its `rules:` name one.
    """

    rule: Literal["idle_notebook"]
    below_pct: float = Field(10.0, gt=0, le=100)
    for_s: float = Field(3600.0, gt=0)
    action: Action = "stop"


RuleSpec = Annotated[
    LossPlateau | TargetMetric | IdleAccelerator | Budget | PriceCap | NanLoss | Stalled | IdleNotebook,
    Field(discriminator="rule"),
]




class WebhookSecret(BaseModel):
    """`webhook: {secret: NAME}`: the URL is the value of `NAME` in the submitting shell (and controller)."""

    model_config = ConfigDict(extra="forbid")
    secret: str

    @field_validator("secret")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value):
            raise ValueError("expected an environment variable name (letters, digits, `_`)")
        return value


class Notify(BaseModel):
    """Where rule firings are sent: a webhook that takes a JSON POST (Slack-compatible `text`).

    A literal URL is kept on this object only: every dump of it (the stored spec, `--json`) is redacted.
    """

    model_config = ConfigDict(extra="forbid")
    webhook: WebhookSecret | str | None = None
    sinks: list[JobSink] = Field(default_factory=list, description="where the job's events go (docs/costs.md)")

    _one_target = field_validator("sinks")(one_target)

    @field_validator("webhook", mode="before")
    @classmethod
    def _webhook(cls, value: Any) -> Any:
        if isinstance(value, str) and not re.match(r"^https?://[^/\s]", value):
            raise ValueError("expected an http(s):// URL or {secret: NAME} (the URL in the environment variable NAME)")
        if isinstance(value, str) and "@" in urlsplit(value).netloc:  # as the settings file refuses it
            raise ValueError("expected a URL without credentials (`user:password@`): put the whole URL in an "
                             "environment variable and write {secret: NAME}")
        return value

    @field_serializer("webhook")
    def _redacted(self, value: WebhookSecret | str | None) -> WebhookSecret | str | None:
        return redact_url(value) if isinstance(value, str) else value

    @property
    def webhook_secret(self) -> str | None:
        """The environment variable that holds the URL, when the spec names one."""
        return self.webhook.secret if isinstance(self.webhook, WebhookSecret) else None


REDACTED = "…/***"


def redact_url(url: str) -> str:
    """`url` with only its scheme, host and first path segment kept (Slack's `services/T…`); idempotent."""
    if is_redacted(url):
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    segments = [s for s in parts.path.split("/") if s]
    head = f"/{segments[0]}" if len(segments) > 1 else ""
    tail = segments[1] if len(segments) > 1 else (segments[0] if segments else "")
    return f"{parts.scheme}://{host}{head}/{tail[:1]}{REDACTED}"


def is_redacted(url: str) -> bool:
    return url.endswith(REDACTED)


class RulesDoc(BaseModel):
    """For the doctest: the two sections alone."""

    rules: list[RuleSpec] = Field(default_factory=list)
    notify: Notify | None = None

RULE_MODELS: dict[str, type[BaseModel]] = {
    get_args(m.model_fields["rule"].annotation)[0]: m
    for m in (LossPlateau, TargetMetric, IdleAccelerator, Budget, PriceCap, NanLoss, Stalled, IdleNotebook)
}
