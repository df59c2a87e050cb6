"""No import circle inside a package: the modules of each package of src/wirecheck import one another in one
direction only (module-level and function-level imports alike), so each can be read, and changed, knowing
what it stands on. A package's own `__init__` importing its modules (to register them) is the package, not a
module of it, and is left out. test_layering.py holds the arrows between packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

from e2e import PROJECT

SRC = PROJECT / "src"


def _modules() -> dict[str, Path]:
    """Every module of src/wirecheck by its dotted name; a package by its own name (its __init__)."""
    out = {}
    for path in sorted((SRC / "wirecheck").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(source: str, filename: str, known: set[str]) -> set[str]:
    """The wirecheck modules `source` imports, anywhere in it: `import a.b`, `from a import b` (b a module
    or a name of a), `from a.b import c`."""
    found = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                      for a in node.names}
    return {name for name in found if name in known}


def graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """module -> the modules of its own package it imports (a package's __init__ left out both ways)."""
    known = set(sources)
    packages = {name for name in known if any(other.startswith(name + ".") for other in known)}
    edges = {}
    for name, source in sources.items():
        if name in packages:
            continue
        parent = name.rsplit(".", 1)[0]
        edges[name] = {m for m in _imported(source, name, known)
                       if m not in packages and m != name and m.rsplit(".", 1)[0] == parent}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle once, as the modules along it (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_inside_a_package():
    sources = {name: path.read_text() for name, path in _modules().items()}
    found = circles(graph(sources))
    assert not found, "import circles (each a set of modules that import one another):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_scan_sees_a_circle_through_a_function_level_import():
    sources = {
        "wirecheck.pkg": "from wirecheck.pkg import a\n",  # the package registering its modules: not a circle
        "wirecheck.pkg.a": "from wirecheck.pkg.b import helper\n",
        "wirecheck.pkg.b": "def helper():\n    from wirecheck.pkg import a\n    return a\n",
        "wirecheck.pkg.c": "import wirecheck.pkg.a\n",
    }
    assert circles(graph(sources)) == [["wirecheck.pkg.a", "wirecheck.pkg.b"]]
    sources["wirecheck.pkg.b"] = "def helper():\n    return 1\n"
    assert circles(graph(sources)) == []
