"""spotfit's own import graph, read from the source (every import that runs, at the top or inside a function;
one under `if TYPE_CHECKING:` is the type checker's alone, never runs, and is no edge).

`module_cycles()` lists the circles between modules; `package_edges()` the graph between its
parts (a sub-package, or a module at the root); `layers()` orders those parts from the bottom
(imports nothing of spotfit) up; `arrows_back_up()` the pairs of parts that import each other.
`python -m tests.support.import_graph` prints the block of docs/architecture.md that
tests/test_architecture.py keeps equal to the code; `--write` puts it there.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from spotfit.script.scriptcheck import parse

PACKAGE = Path(__file__).resolve().parents[2] / "spotfit"


@cache
def modules() -> dict[str, Path]:
    """Every module of spotfit by dotted name (a package by its own name)."""
    return {".".join(("spotfit", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"): p
            for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str:
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the import nodes inside `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks.

    >>> tree = ast.parse("if TYPE_CHECKING:\\n    import a\\nimport b")
    >>> [n.names[0].name for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) in _type_checking_only(tree)]
    ['a']
    """
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return found


@cache
def module_edges() -> dict[str, frozenset[str]]:
    """module -> the spotfit modules it imports (`from spotfit import x` names the module `x`)."""
    mods = modules()
    edges: dict[str, frozenset[str]] = {}
    for name, path in mods.items():
        found: set[str] = set()
        tree = parse(path.read_text(), str(path))
        typing_only = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                           for a in node.names]
            else:
                continue
            found.update(_resolve(t) for t in targets if t == "spotfit" or t.startswith("spotfit."))
        edges[name] = frozenset(found - {name, ""})
    return edges


def _components(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def module_cycles() -> list[list[str]]:
    """The circles between modules: groups of modules that import each other, directly or not."""
    return [c for c in _components(module_edges()) if len(c) > 1]


def part(module: str) -> str:
    """The part a module belongs to: its sub-package (`market/`), or itself at the root (`data_helper.py`)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    if len(parts) == 2 and modules()[module].name != "__init__.py":
        return f"{parts[1]}.py"
    return f"{parts[1]}/"


@cache
def package_edges() -> dict[str, frozenset[str]]:
    """part -> the parts it imports."""
    edges: dict[str, set[str]] = {}
    for module, targets in module_edges().items():
        edges.setdefault(part(module), set()).update(part(t) for t in targets)
    return {p: frozenset(t - {p}) for p, t in edges.items()}


def arrows_back_up() -> list[tuple[str, str]]:
    """Pairs of parts that import each other (each pair once, in name order)."""
    edges = package_edges()
    return sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))


def layers() -> list[list[str]]:
    """The parts by layer: layer 0 imports nothing of spotfit, each part sits one above the highest it
    imports (parts that import each other share a layer)."""
    edges = package_edges()
    component_of = {p: tuple(c) for c in _components(edges) for p in c}
    level: dict[tuple[str, ...], int] = {}

    def height(c: tuple[str, ...]) -> int:
        if c not in level:
            below = {component_of[t] for p in c for t in edges[p]} - {c}
            level[c] = 1 + max((height(b) for b in below), default=-1)
        return level[c]

    out: list[list[str]] = []
    for c in set(component_of.values()):
        h = height(c)
        out.extend([] for _ in range(h + 1 - len(out)))
        out[h].extend(c)
    return [sorted(layer) for layer in out]


def doc_block() -> str:
    """The generated part of docs/architecture.md: the layers, top first, and what each part imports."""
    edges = package_edges()
    lines = ["| layer | part | imports (parts of spotfit) |", "|---|---|---|"]
    for number, layer in reversed(list(enumerate(layers()))):
        for name in layer:
            lines.append(f"| {number} | `{name}` | {', '.join(f'`{t}`' for t in sorted(edges[name])) or '—'} |")
    pairs = arrows_back_up()
    lines += ["", "Parts that import each other (arrows back up): "
              + ("; ".join(f"`{a}` ↔ `{b}`" for a, b in pairs) if pairs else "none") + "."]
    return "\n".join(lines)


def write_doc(doc: Path = PACKAGE.parent / "docs" / "architecture.md") -> None:
    """Put `doc_block()` between the layers markers of `doc`."""
    text = doc.read_text()
    begin, end = "<!-- layers:begin -->\n", "\n<!-- layers:end -->"
    head, rest = text.split(begin, 1)
    doc.write_text(head + begin + doc_block() + end + rest.split(end, 1)[1])


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        write_doc()
    else:
        print(doc_block())
