"""The base of every spec section: strict keys, plain scalars, names checked by pattern.

Each section of a job spec (and of a sweep spec) is a `_Section`: unknown keys are errors, no
value is blank, NaN or infinite, no integer is beyond what JSON keeps exactly, and no URL carries
credentials (`s3://KEY:SECRET@host/...`): they come from the environment or a profile, never
from a spec, which is stored and shown.

Example:

>>> matching("team-a", r"[a-z-]+", "lowercase letters and `-`")
'team-a'
>>> redact_userinfo("s3://AKIA:secret@127.0.0.1:8333/bucket")
's3://***@127.0.0.1:8333/bucket'
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Protocol, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, field_validator

from spotfit.core.arguments import PATH_SHOWN
from spotfit.spec import labels

MAX_INT = 2**53  # larger integers lose precision in JSON and as floats: no spec field needs one
# PROTOCOL://USERINFO@...: whatever stands before an `@` in the authority is a credential.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")
NO_CREDENTIALS = ("expected a URL without credentials: give them in the environment (AWS_ACCESS_KEY_ID and "
                  "AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS) or a profile (SPOTFIT_S3_PROFILE, "
                  "~/.aws/credentials), never in the spec")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _plain_scalar(cls, value: Any) -> Any:
        # One rule for every field, before its own: no blank text, no integer beyond 2**53.
        if isinstance(value, str) and not value.strip():
            raise ValueError("expected a non-empty value (leave the field out for its default)")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise ValueError(f"expected a number between -2**53 and 2**53 ({MAX_INT})")
        if isinstance(value, str) and _USERINFO.search(value):
            raise ValueError(NO_CREDENTIALS)
        return value


class ProgressPublisher(Protocol):
    """Somewhere a running job's progress and spend also go (CloudWatch with `aws.cloudwatch: true`)."""

    failed_event: str  # the event kind recorded (once) when publishing fails, e.g. `cloudwatch_failed`

    def publish(self, progress: dict[str, Any], spent_usd: float) -> str | None:
        """Publish when due; None, or (once) a line saying what went wrong (the job goes on)."""


class BackendSection(_Section):
    """A backend's settings: the job spec's `NAME:` section, named beside the backend in spotfit/core/registry.py.

    The spec builds one field per registered section; a backend reads its own with `Section.of(spec)`.
    """

    @classmethod
    def of(cls, spec: Any) -> Self:
        """This section of `spec` (a `JobSpec`)."""
        for section in spec.backend_sections().values():
            if isinstance(section, cls):
                return section
        raise LookupError(f"{cls.__name__} is not a section of this spec: is it registered in "
                          "spotfit/core/registry.py?")

    def publisher(self, job_id: str, job_name: str) -> ProgressPublisher | None:
        """Where the controller also sends the job's progress while an attempt runs (None: nowhere)."""
        return None


def redact_userinfo(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by `***` (for messages that quote a value)."""
    return _USERINFO.sub(r"\1***@", text)


def _short(value: Any, limit: int = 120) -> str:
    """`repr(value)`, cut to `limit` characters: a message quotes a huge value without becoming one."""
    text = redact_userinfo(repr(value))
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text):,} characters)"


def quoted_path(path: Any) -> str:
    """`repr(str(path))`, whole up to `PATH_SHOWN` characters (credentials of a URL redacted)."""
    return _short(str(path), PATH_SHOWN)


def matching(value: str, pattern: str, expected: str) -> str:
    """`value` when the whole of it matches `pattern`; else the field's error, saying what was `expected`."""
    if not re.fullmatch(pattern, value):
        raise ValueError(f"expected {expected}")
    return value


def _slug(value: str) -> str:
    return matching(value, r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}",
                    "1-63 letters, digits, `-`, `_` or `.`, starting with a letter or digit")


def _labels(value: Any) -> Any:
    return labels.check(value) if isinstance(value, dict) else value


# A name of a job or a budget (it becomes a file name, a tag and a Kubernetes label value).
Slug = Annotated[str, AfterValidator(_slug)]
# Free `key: value` labels (spotfit.spec.labels): costs and budgets group jobs by them.
Labels = Annotated[dict[str, str], BeforeValidator(_labels)]
