"""Numbers read from the environment: one reading (`arguments.env_number`), one rule, one error line."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from spotfit import data_helper
from spotfit.controller import waits
from spotfit.core.arguments import env_number
from spotfit.errors import UsageError
from spotfit.host import home
from spotfit.runtime import trial
from spotfit.state import lease, wait
from spotfit.ui import planning

SPOTFIT = Path(__file__).resolve().parents[2] / "spotfit"
# Each setting, and the value that must fail it (a bound's edge where the rule has one).
SETTINGS = [(lease.ttl_s, lease.LEASE_TTL_ENV, "0"), (wait.busy_timeout_s, wait.BUSY_TIMEOUT_ENV, "0"),
            (waits.scale, waits.WAIT_SCALE_ENV, "-0.5"), (planning.plan_limit_s, planning.LIMIT_ENV, "-0.5"),
            (trial.budget_share, trial.BUDGET_ENV, "-1")]


@pytest.mark.parametrize(("read", "name", "edge"), SETTINGS, ids=[s[1] for s in SETTINGS])
@pytest.mark.parametrize("bad", ["inf", "-inf", "nan", "1e400", "fifteen", "1,5", "EDGE"])
def test_each_setting_refuses_a_bad_value_in_one_line_that_names_it(monkeypatch, read, name, edge, bad):
    monkeypatch.setenv(name, edge if bad == "EDGE" else bad)
    with pytest.raises(UsageError) as err:
        read()
    assert err.value.message.startswith(f"Invalid {name}: received ") and "\n" not in err.value.message
    assert err.value.hint and name in err.value.hint


@pytest.mark.parametrize(("read", "name", "edge"), SETTINGS, ids=[s[1] for s in SETTINGS])
def test_unset_or_empty_is_the_default_and_a_good_value_is_read(monkeypatch, read, name, edge):
    monkeypatch.delenv(name, raising=False)
    default = read()
    monkeypatch.setenv(name, "")
    assert read() == default and math.isfinite(default)
    monkeypatch.setenv(name, "2.5")
    assert read() == 2.5


def test_the_bound_is_open_or_closed_as_asked():
    assert env_number("X", 1.0, low_open=False, environ={"X": "0"}) == 0.0
    with pytest.raises(UsageError, match=r"expected a number of seconds > 0\.$"):
        env_number("X", 1.0, environ={"X": "0"})


def _of_the_environment(node: ast.AST, calls: tuple[str, ...]) -> bool:
    """One of `calls` (`float(...)`, `Path(...)`) of `os.environ.get(...)`, `os.getenv(...)` or `os.environ[...]`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls and node.args):
        return False
    text = ast.unparse(node.args[0])
    return "environ" in text or "getenv" in text


def _parses_the_environment(node: ast.AST) -> bool:
    return _of_the_environment(node, ("float", "int"))


def test_no_module_parses_a_number_from_the_environment_itself():
    found = [f"{p.relative_to(SPOTFIT)}:{n.lineno}" for p in sorted(SPOTFIT.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text())) if _parses_the_environment(n)]
    assert found == []
    assert _parses_the_environment(ast.parse("float(os.environ.get('X') or 1)").body[0].value)  # type: ignore[attr-defined]


FOLDERS = [(home.home, "SPOTFIT_HOME"), (home.default_cache_dir, "SPOTFIT_CACHE_DIR"),
           (data_helper.data_dir, home.DATA_DIR_ENV)]


@pytest.mark.parametrize(("read", "name"), FOLDERS, ids=[f[1] for f in FOLDERS])
def test_each_folder_setting_refuses_a_file_in_one_line_and_reads_a_folder(monkeypatch, tmp_path, read, name):
    monkeypatch.setenv("SPOTFIT_HOME", str(tmp_path / "home"))
    deep = tmp_path / ("a-folder-with-a-long-name-" * 8)  # CI's checkout paths are long: the path is shown whole
    deep.mkdir()
    (deep / "a-file").write_text("not a folder")
    monkeypatch.setenv(name, str(deep / "a-file"))
    with pytest.raises(UsageError) as err:
        read()
    assert err.value.message == f"Invalid {name}: received '{deep / 'a-file'}', expected a folder (it is a file)."
    assert err.value.hint and name in err.value.hint
    monkeypatch.setenv(name, str(tmp_path / "elsewhere"))
    assert read() == tmp_path / "elsewhere"


def _folder_of_the_environment(node: ast.AST) -> bool:
    return _of_the_environment(node, ("Path",))


def test_no_module_reads_a_folder_from_the_environment_itself():
    found = [f"{p.relative_to(SPOTFIT)}:{n.lineno}" for p in sorted(SPOTFIT.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text())) if _folder_of_the_environment(n)]
    assert found == []
    assert _folder_of_the_environment(ast.parse("Path(os.environ['X'])").body[0].value)  # type: ignore[attr-defined]
