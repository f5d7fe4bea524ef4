"""A pydantic `ValidationError` of a spec file as one `SpecError` line: field, value received, expected, fix.

An unknown key comes first (a misspelt key usually also explains a "missing" one) and gets a
did-you-mean from the fields valid where it stands; a field of a union reports once. The job
spec (`job.py`), the sweep file (`sweep/spec.py`) and the settings file (`host/settings.py`) all
report their problems through `spec_error`.

Example:

>>> from pydantic import ValidationError
>>> from spotfit.spec.job import JobSpec
>>> try:
...     JobSpec.model_validate({"name": "digits", "scrpt": "train.py"})
... except ValidationError as exc:
...     print(spec_error(exc, {"name": "digits", "scrpt": "train.py"}, "job.yaml", JobSpec))
Unknown field `scrpt` in job.yaml: did you mean `script`?
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from spotfit.errors import SpecError
from spotfit.spec.base import _short
from spotfit.spec.rules import RULE_MODELS

DOCS = "docs/job-spec.md"


def _model_at(loc: tuple[int | str, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    """The pydantic model under `root` that holds the field at `loc`."""
    model: type[BaseModel] = root
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


def _value_at(raw: Any, loc: tuple[int | str, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _clean_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The field path as the user wrote it: without pydantic's union member names."""
    tagged = len(loc) > 3 and loc[0] == "rules" and loc[2] in RULE_MODELS
    return tuple(p for i, p in enumerate(loc)
                 if p not in ("literal['auto']", "StepsInterval", "SecondsInterval", "WebhookSecret")
                 and not (tagged and i == 2))


def spec_error(exc: ValidationError, raw: dict[str, Any], source: str, root: type[BaseModel],
               docs: str = DOCS) -> SpecError:
    """One line for the first problem of `raw` (read from `source`) as model `root` (`and N more` when there are
    several); `docs` is the page that documents `root`'s fields."""
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
