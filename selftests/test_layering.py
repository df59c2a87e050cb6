"""Arrows only run down: every import between packages of src/wirecheck (module-level, inside functions,
and `importlib.import_module("wirecheck....")` with a literal name) goes from a package to one on a lower
floor, as docs/architecture.md's package graph draws them. A dynamic `import_module` of a computed name
must be listed with why (it names modules of its own package, or a worker target handed in as data).
"""

from __future__ import annotations

import ast
from pathlib import Path

from e2e import PROJECT

SRC = PROJECT / "src"
FLOORS = {"core": 0, "vocab": 0, "node": 1, "records": 1, "workers": 1, "gpu": 2, "measure": 2, "training": 2,
          "thresholds": 3, "advise": 3, "nccl": 4, "plan": 4, "checks": 5, "burnin": 6, "diagnose": 6, "report": 7,
          "fleet": 8, "cli": 9, "multinode": 9}
# Arrows known to run up, each to be removed; a listed arrow that is gone fails too, so the list only shrinks.
KNOWN_UP = {("wirecheck.thresholds.declared", "checks"): "declarations() imports the checks package by name"}
# import_module of a computed name: (module) -> why it cannot be an arrow up
DYNAMIC = {
    "wirecheck.checks": "every module of its own package",
    "wirecheck.cli.protocol": "every module of the cli package",
    "wirecheck.cli.fleet": "the fleet modules it dispatches to (cli is the top floor)",
    "wirecheck.training": "its own lazy names (_LAZY)",
    "wirecheck.training.runner": "a grad hook the user names",
    "wirecheck.training.trainer": "the trainer a strategy row names, in a worker",
    "wirecheck.workers.worker": "the target function a parent names, in a worker",
}


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "wirecheck" and len(parts) > 1 else None


def _imports():
    """(module, its package, imported package, line) for every cross-package import; and dynamic ones."""
    found, dynamic = [], []
    for path in sorted((SRC / "wirecheck").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        me = _package(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names = [arg.value]
                else:
                    dynamic.append(module)
            for name in names:
                other = _package(name)
                if other in FLOORS and other != me:
                    found.append((module, me, other, node.lineno))
    return found, dynamic


def test_every_package_has_a_floor():
    packages = {p.name for p in (SRC / "wirecheck").iterdir() if (p / "__init__.py").exists()} | {"multinode"}
    assert packages == set(FLOORS), packages ^ set(FLOORS)


def test_arrows_only_run_down():
    found, _ = _imports()
    up = {(m, other): line for m, me, other, line in found if FLOORS[other] >= FLOORS[me]}
    unknown = {k: v for k, v in up.items() if k not in KNOWN_UP}
    assert not unknown, "\n".join(f"{m}:{line} imports {o} (floor {FLOORS[o]} >= its own)" for (m, o), line in unknown.items())
    assert set(KNOWN_UP) <= set(up), f"remove from KNOWN_UP, the arrow is gone: {set(KNOWN_UP) - set(up)}"


def test_a_dynamic_import_says_why():
    _, dynamic = _imports()
    assert set(dynamic) <= set(DYNAMIC), f"import_module of a computed name, not in DYNAMIC: {set(dynamic) - set(DYNAMIC)}"


def test_the_rule_catches_an_arrow_up():
    """The scan is not blind: the literal import_module up in thresholds/declared.py is seen as an import."""
    found, _ = _imports()
    assert ("wirecheck.thresholds.declared", "thresholds", "checks") in [(m, me, o) for m, me, o, _ in found]
