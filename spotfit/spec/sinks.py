"""Where notifications go: the sinks of `notify.sinks` (Slack, a JSON webhook, e-mail) and the events each wants.

The settings file (`$SPOTFIT_HOME/config.yaml`) takes `Sink`s, whose URL may be written in clear;
a job spec takes `JobSink`s, whose URL is only ever `{secret: NAME}`, since a spec is stored and shown.
docs/costs.md documents them.

Example:

>>> Sink.model_validate({"slack": "https://hooks.slack.com/services/T/B/X", "events": ["failed"]}).kind
'slack'
"""

from __future__ import annotations

from typing import Literal, TypeVar, cast

from pydantic import Field, field_validator

from spotfit.spec.base import _Section, matching

NotifyEvent = Literal["completed", "failed", "preempted", "relaunched", "paused", "budget", "rule", "stalled"]
NOTIFY_EVENTS: tuple[str, ...] = NotifyEvent.__args__  # type: ignore[attr-defined]
_URL = r"https?://[^/\s]+.*"


class Email(_Section):
    """Mail over SMTP, with STARTTLS unless `starttls: false`; the password from the environment."""

    to: list[str] = Field(min_length=1, description="recipients")
    sender: str = Field(description="the From address")
    host: str = Field(description="the SMTP server")
    port: int = Field(587, ge=1, le=65_535)
    starttls: bool = True
    user: str | None = None
    password_env: str | None = Field(None, description="the variable holding the password (never the password)")
    ca_file: str | None = Field(None, description="a CA bundle for a server whose certificate a private CA signed")

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            matching(address, r"[^@\s]+@[^@\s]+", "e-mail addresses such as ops@example.com")
        return value


class SecretRef(_Section):
    """`{secret: NAME}`: the value is the environment variable `NAME` of the controller (and `spotfit run`)."""

    secret: str

    @field_validator("secret")
    @classmethod
    def _name(cls, value: str) -> str:
        return matching(value, r"[A-Za-z_][A-Za-z0-9_]{0,127}", "an environment variable name (letters, digits, `_`)")


class Sink(_Section):
    """One place notifications go (exactly one of `slack`, `webhook`, `email`) and the events it wants."""

    slack: SecretRef | str | None = Field(None, description="a Slack incoming-webhook URL (a POST of {text})")
    webhook: SecretRef | str | None = Field(None, description="a URL that takes the notification as JSON")
    email: Email | None = None
    events: list[NotifyEvent] = Field(default_factory=lambda: cast("list[NotifyEvent]", list(NOTIFY_EVENTS)))

    @field_validator("slack", "webhook")
    @classmethod
    def _url(cls, value: SecretRef | str | None) -> SecretRef | str | None:
        return matching(value, _URL, "an http(s):// URL or {secret: NAME}") if isinstance(value, str) else value

    @property
    def kind(self) -> str:
        return next(k for k in ("slack", "webhook", "email") if getattr(self, k) is not None)

    def url(self, environ: dict[str, str]) -> str:
        """The slack or webhook URL, a secret's read from `environ`; `ValueError` naming the variable when unset."""
        value = self.slack or self.webhook
        if isinstance(value, SecretRef):
            if value.secret not in environ:
                raise ValueError(f"`{value.secret}` is not set in the controller's environment")
            return environ[value.secret]
        assert value is not None
        return value


class JobSink(Sink):
    """A sink in a job spec's `notify.sinks`: its URL only as `{secret: NAME}` (the spec is stored and shown)."""

    @field_validator("slack", "webhook")
    @classmethod
    def _secret_only(cls, value: SecretRef | str | None) -> SecretRef | str | None:
        if isinstance(value, str):
            raise ValueError("expected {secret: NAME} (the URL in the environment variable NAME): a spec is stored "
                             "and shown, a URL in it would be too; or put the sink in $SPOTFIT_HOME/config.yaml")
        return value


SinkT = TypeVar("SinkT", bound=Sink)


def one_target(sinks: list[SinkT]) -> list[SinkT]:
    """`sinks` when each has exactly one of `slack`, `webhook` or `email` (a field validator of `sinks:`)."""
    for i, sink in enumerate(sinks):
        if sum(getattr(sink, k) is not None for k in ("slack", "webhook", "email")) != 1:
            raise ValueError(f"expected exactly one of `slack`, `webhook` or `email` in sink [{i}]")
    return sinks
