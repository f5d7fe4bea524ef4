"""The base of every spec section: strict keys, plain scalars, names checked by pattern.

Each section of a job spec (and of a sweep spec) is a `_Section`: unknown keys are errors, no
value is blank, NaN or infinite, and no integer is beyond what JSON keeps exactly.

Example:

>>> matching("team-a", r"[a-z-]+", "lowercase letters and `-`")
'team-a'
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

MAX_INT = 2**53  # larger integers lose precision in JSON and as floats: no spec field needs one


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
        return value


def matching(value: str, pattern: str, expected: str) -> str:
    """`value` when the whole of it matches `pattern`; else the field's error, saying what was `expected`."""
    if not re.fullmatch(pattern, value):
        raise ValueError(f"expected {expected}")
    return value
