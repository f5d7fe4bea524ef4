"""The table of error lines in docs/job-spec.md: each row's spec gives exactly the line shown."""

from __future__ import annotations

import re

import pytest

from spotfit import sdk
from spotfit.errors import SpecError
from tests.docs.shell_session import REPO, matches

_ROW = re.compile(r"^\| `` (.+?) `` \| ``(.+?)`` \|$", re.M)
_SECTION = (REPO / "docs" / "job-spec.md").read_text().split("## Error messages", 1)[1]
ROWS = _ROW.findall(_SECTION)


def test_the_table_is_found():
    assert len(ROWS) >= 8, "docs/job-spec.md's table of error lines changed shape; update _ROW"


@pytest.mark.parametrize(("spec", "line"), ROWS, ids=[spec for spec, _ in ROWS])
def test_error_line(spec, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    (tmp_path / "spotfit.yaml").write_text(spec + "\n")
    with pytest.raises(SpecError) as err:
        sdk.validate("spotfit.yaml")
    assert matches(line, err.value.message), f"{spec}\nreal:    {err.value.message}\ndoc:     {line}"
