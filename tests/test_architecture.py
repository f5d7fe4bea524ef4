"""docs/architecture.md stays true to the code: its layer table is the import graph, every part of
the package is named in its module table, and no module imports itself back through others."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import import_graph

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
# The pairs of parts allowed to import each other (issue 33 allows at most two); a new pair fails here.
# The job spec no longer imports the backends: it reads their sections from the registry.
ALLOWED_BACK_UP = {("sdk/", "sweep/")}


def test_no_module_imports_itself_back_through_others():
    assert import_graph.module_cycles() == []


def test_at_most_two_pairs_of_parts_import_each_other():
    pairs = set(import_graph.arrows_back_up())
    assert pairs <= ALLOWED_BACK_UP, f"new two-way imports between parts: {sorted(pairs - ALLOWED_BACK_UP)}"
    assert len(ALLOWED_BACK_UP) <= 2


def test_the_layer_table_is_the_import_graph():
    text = DOC.read_text()
    found = re.search(r"<!-- layers:begin -->\n(.*?)\n<!-- layers:end -->", text, re.S)
    assert found, "docs/architecture.md has no layers block"
    assert found.group(1) == import_graph.doc_block(), (
        "docs/architecture.md's layer table differs from the imports: paste the output of "
        "run `.venv/bin/python -m tests.support.import_graph --write`")


def test_every_part_is_named_in_the_module_table():
    text = DOC.read_text()
    table = text[text.index("## The modules, one concept each"):text.index("## Habits")]
    named = set(re.findall(r"`([A-Za-z_][\w/.]*)`", table))
    missing = [p for p in import_graph.package_edges() if p not in named and not any(
        n.startswith(p) for n in named)]
    assert missing == []
    files = {str(m.relative_to(import_graph.PACKAGE)) for m in import_graph.modules().values()}
    stale = [n for n in named if n.endswith(".py") and not any(f == n or f.endswith("/" + n) for f in files)]
    assert stale == [], f"the module table names modules that do not exist: {stale}"


def test_no_function_is_over_80_lines():
    """A function a reader takes in at once (issue 50: the dashboard's 261-line `create_app` became routers)."""
    long = [f"{path.relative_to(import_graph.PACKAGE.parent)}:{node.lineno} {node.name} ({size} lines)"
            for path in sorted(import_graph.PACKAGE.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (size := (node.end_lineno or node.lineno) - node.lineno + 1) > 80]
    assert long == []
