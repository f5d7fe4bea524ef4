"""The attempt contract is the only bridge: the controller side never loads TensorFlow, Keras or
the runtime, the runtime never imports the controller, and `spotfit.attempt` imports neither."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import spotfit
from spotfit.script.scriptcheck import parse

PACKAGE = Path(spotfit.__file__).parent
FORBIDDEN_ON_CONTROLLER_SIDE = ("tensorflow", "keras", "spotfit.runtime")


def _modules(folder: str) -> list[str]:
    return sorted(".".join(("spotfit", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
                  for p in (PACKAGE / folder).rglob("*.py") if p.name != "__main__.py")


def _loaded_after_importing(modules: list[str]) -> list[str]:
    """The modules in sys.modules of a fresh interpreter after importing `modules`."""
    code = ("import importlib, json, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _forbidden(loaded: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes)]


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_controller_side_loads_neither_tensorflow_nor_the_runtime():
    controller = _modules("controller")
    assert "spotfit.controller.loop" in controller and "spotfit.controller.launch" in controller
    side = [*controller, "spotfit.backends.local", "spotfit.backends.aws.backend",
            "spotfit.backends.kubernetes.backend", "spotfit.sdk", "spotfit.cli"]
    loaded = _loaded_after_importing(side)
    assert "spotfit.attempt.layout" in loaded  # the contract is what it uses instead
    assert _forbidden(loaded, FORBIDDEN_ON_CONTROLLER_SIDE) == []


def test_the_attempt_contract_imports_neither_side():
    contract = _modules("attempt")
    assert {"spotfit.attempt.exit_codes", "spotfit.attempt.config", "spotfit.attempt.layout",
            "spotfit.attempt.progress", "spotfit.attempt.notebook"} <= set(contract)
    loaded = _loaded_after_importing(contract)
    assert _forbidden(loaded, ("tensorflow", "keras", "spotfit.runtime", "spotfit.controller", "spotfit.backends",
                               "spotfit.sdk", "spotfit.spec")) == []


def test_neither_side_imports_the_other_even_inside_a_function():
    """The controller side here: controller/, backends/ (which start `python -m spotfit.runtime` by name),
    and interactive/ (notebooks, ssh, port-forward)."""
    runtime_to_controller = {p.name: sorted(n for n in _imports(p) if n.startswith("spotfit.controller"))
                             for p in (PACKAGE / "runtime").rglob("*.py")}
    controller_side = [*(PACKAGE / "controller").rglob("*.py"), *(PACKAGE / "backends").rglob("*.py"),
                       *(PACKAGE / "interactive").rglob("*.py")]
    controller_to_runtime = {str(p.relative_to(PACKAGE)): sorted(n for n in _imports(p)
                                                                 if n.startswith("spotfit.runtime"))
                             for p in controller_side}
    assert {k: v for k, v in runtime_to_controller.items() if v} == {}
    assert {k: v for k, v in controller_to_runtime.items() if v} == {}
