"""Backend knowledge stays in `backends/`: no module outside compares a backend's name or probes its abilities.

An AST scan of the package, so that what issue 33 moved into the backends stays there: outside
`spotfit/backends/`, no comparison (`==`, `!=`, `in`, `not in`) has a registered backend's name
as a string literal on either side, and no `hasattr` / `getattr` is asked of a backend (abilities
are declared: `isinstance(backend, Preflight)`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import spotfit
from spotfit.backends.base import (
    DryRunner,
    LeftoverCollector,
    LiveMarketSource,
    MarketRecorder,
    Preflight,
    Reachable,
    SecretKeeper,
    backend_class,
)
from spotfit.core.registry import registered_backends
from spotfit.script.scriptcheck import parse

PACKAGE = Path(spotfit.__file__).parent
NAMES = set(registered_backends())


def _outside_backends() -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(PACKAGE)), parse(path.read_text(), str(path)))
            for path in sorted(PACKAGE.rglob("*.py")) if "backends" not in path.relative_to(PACKAGE).parts]


def _literals(node: ast.expr) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def test_no_module_outside_backends_compares_a_backend_name():
    found = []
    for where, tree in _outside_backends():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = {s for side in (node.left, *node.comparators) for s in _literals(side)} & NAMES
                if names:
                    found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "ask the backend (backends/base.py: BackendTraits, the declared abilities) instead"


def test_no_module_outside_backends_probes_a_backend_with_hasattr():
    found = []
    for where, tree in _outside_backends():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("hasattr", "getattr") and node.args
                    and "backend" in ast.unparse(node.args[0]).lower()):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "declare the ability as a protocol in backends/base.py and check it with isinstance"


def test_the_scan_sees_what_it_looks_for():
    tree = ast.parse('if spec.backend == "aws" or name in ("local", "x"):\n    pass\n')
    compares = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    assert [sorted({s for side in (c.left, *c.comparators) for s in _literals(side)} & NAMES) for c in compares] \
        == [["aws"], ["local"]]


def test_each_backend_declares_its_abilities():
    abilities = {name: sorted(p.__name__ for p in (Preflight, LiveMarketSource, SecretKeeper, Reachable, DryRunner,
                                                   LeftoverCollector, MarketRecorder)
                              if issubclass(backend_class(name), p)) for name in NAMES}
    assert abilities == {
        "local": ["Reachable"],
        "aws": ["DryRunner", "LeftoverCollector", "LiveMarketSource", "MarketRecorder", "Reachable", "SecretKeeper"],
        "kubernetes": ["DryRunner", "Preflight", "Reachable"],
        "gcp": ["DryRunner", "LeftoverCollector", "LiveMarketSource", "MarketRecorder", "Preflight", "Reachable",
                "SecretKeeper"],
    }
    assert [name for name in sorted(NAMES) if backend_class(name).runs_here] == ["local"]
