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
FLOORS = {"core": 0, "vocab": 1, "node": 2, "records": 2, "workers": 2, "gpu": 3, "measure": 3, "training": 3,
          "thresholds": 4, "advise": 4, "nccl": 5, "plan": 5, "checks": 6, "burnin": 7, "diagnose": 7, "report": 8,
          "fleet": 9, "cli": 10, "multinode": 10}
# Arrows known to run up, each to be removed; a listed arrow that is gone fails too, so the list only shrinks.
# (Empty: the thresholds loader finds the checks by entry point, wirecheck.thresholds.declared.)
KNOWN_UP: dict[tuple[str, str], str] = {}
# import_module of a computed name: (module) -> why it cannot be an arrow up
DYNAMIC = {
    "wirecheck.checks": "every module of its own package",
    "wirecheck.cli.protocol": "every module of the cli package",
    "wirecheck.training": "its own lazy names (_LAZY)",
    "wirecheck.training.runner": "a grad hook the user names",
    "wirecheck.training.trainer": "the trainer a strategy row names, in a worker",
    "wirecheck.workers.worker": "the target function a parent names, in a worker",
    "wirecheck.workers.zygote": "torch's modules every trainer imports (TRAINER_MODULES), in the zygote",
}


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "wirecheck" and len(parts) > 1 else None


def _imports_in(module: str, source: str, filename: str = "<source>"):
    """(module, its package, imported package, line) for each cross-package import of `source`, the text
    of `module`; and whether it calls import_module with a computed name."""
    me = _package(module)
    found, dynamic = [], False
    for node in ast.walk(ast.parse(source, filename)):
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
                dynamic = True
        for name in names:
            other = _package(name)
            if other in FLOORS and other != me:
                found.append((module, me, other, node.lineno))
    return found, dynamic


def _imports():
    """(module, its package, imported package, line) for every cross-package import; and dynamic ones."""
    found, dynamic = [], []
    for path in sorted((SRC / "wirecheck").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        arrows, computed = _imports_in(module, path.read_text(), str(path))
        found += arrows
        if computed:
            dynamic.append(module)
    return found, dynamic


def _up(found) -> set:
    return {(m, other) for m, me, other, _ in found if FLOORS[other] >= FLOORS[me]}


def test_every_package_has_a_floor():
    packages = {p.name for p in (SRC / "wirecheck").iterdir() if (p / "__init__.py").exists()} | {"multinode"}
    assert packages == set(FLOORS), packages ^ set(FLOORS)


def test_arrows_only_run_down():
    found, _ = _imports()
    up = {(m, other): line for m, me, other, line in found if (m, other) in _up(found)}
    unknown = {k: v for k, v in up.items() if k not in KNOWN_UP}
    assert not unknown, "\n".join(f"{m}:{line} imports {o} (floor {FLOORS[o]} >= its own)" for (m, o), line in unknown.items())
    assert set(KNOWN_UP) <= set(up), f"remove from KNOWN_UP, the arrow is gone: {set(KNOWN_UP) - set(up)}"


def test_a_dynamic_import_says_why():
    _, dynamic = _imports()
    assert set(dynamic) <= set(DYNAMIC), f"import_module of a computed name, not in DYNAMIC: {set(dynamic) - set(DYNAMIC)}"


def test_the_rule_catches_an_arrow_up():
    """The scan is not blind: each way of importing up (a literal import_module, from-import, an import
    inside a function, a side floor) is reported as an arrow up, an arrow down is not, and a computed
    import_module name is seen as dynamic."""
    source = '''
import importlib
from wirecheck.core.quantity import UNITS
from wirecheck.records import figures


def load():
    importlib.import_module("wirecheck.checks")


def later():
    from wirecheck.report.gpus import GPU_FIGURES
    import wirecheck.cli.main
    from wirecheck import advise


def named(name):
    return importlib.import_module(f"wirecheck.checks.{name}")
'''
    found, dynamic = _imports_in("wirecheck.thresholds.synthetic", source)
    lines = {(other, line) for _, _, other, line in found}
    assert {("checks", 8), ("report", 12), ("cli", 13), ("advise", 14)} <= lines, lines
    assert _up(found) == {("wirecheck.thresholds.synthetic", p) for p in ("checks", "report", "cli", "advise")}
    assert ("core", 3) in lines and ("records", 4) in lines  # seen, and down: not an arrow up
    assert dynamic
    clean, computed = _imports_in("wirecheck.thresholds.synthetic", "import os\nfrom wirecheck.core import quantity\n")
    assert not _up(clean) and not computed and {o for _, _, o, _ in clean} == {"core"}


ARCHITECTURE = PROJECT / "docs/architecture.md"


def _documented() -> dict[str, set[str]]:
    """docs/architecture.md's package table: package -> the packages its "may import" column names
    ("core, vocab, ..."; "nothing of wirecheck"; "everything"; "everything above but X and Y": the rows
    above it, less those)."""
    out: dict[str, set[str]] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = cells[0].strip("`").rstrip("/") if cells and cells[0].startswith("`") else None
        if len(cells) != 3 or name not in FLOORS:
            continue
        may = cells[2]
        if may == "nothing of wirecheck":
            out[name] = set()
        elif may == "everything":
            out[name] = set(FLOORS) - {name}
        elif may.startswith("everything above but "):
            out[name] = set(out) - {w.strip() for w in may[len("everything above but "):].replace(" and ", ",").split(",")}
        else:
            out[name] = {w.split()[0].strip("`") for w in may.split(",") if w.strip()}
    return out


def test_every_import_is_one_the_architecture_page_allows():
    """What each package may import is written once, in docs/architecture.md; an import it does not
    list fails here, so the page stays the map of the code."""
    allowed = _documented()
    assert set(allowed) == set(FLOORS) - {"multinode"}, set(FLOORS) ^ set(allowed)
    found, _ = _imports()
    unlisted = sorted({(me, other) for _, me, other, _ in found if me in allowed and other not in allowed[me]
                       and (_, other) not in KNOWN_UP})
    assert not unlisted, "imports docs/architecture.md does not list for the package: " + ", ".join(
        f"{me} -> {other}" for me, other in unlisted)


def _privates_used(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, `alias._name`) for each private name of another wirecheck module that `source` reads: through
    a module it imported (`ns._tail`) or imported by name (`from wirecheck.x import _y`)."""
    tree = ast.parse(source, filename)
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("wirecheck")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("wirecheck"):
            modules |= {a.asname or a.name for a in node.names}
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(found)


def test_a_command_uses_only_the_public_names_of_another():
    """A cli module calls another through its public API (the drain hook reads node-state's decision through
    read_record, output_tail and decide), so that a command's privates can change without breaking another."""
    used = {path.name: _privates_used(path.read_text(), str(path)) for path in sorted((SRC / "wirecheck" / "cli").rglob("*.py"))}
    assert not {k: v for k, v in used.items() if v}, used
    # the scan sees both ways of reaching a private name
    planted = ("from wirecheck.cli import node_state as ns\nfrom wirecheck.cli.node_state import _hidden\n"
               "state = ns.decide(0, None, ns._tail('out'))\n")
    assert _privates_used(planted) == [(2, "wirecheck.cli.node_state._hidden"), (3, "ns._tail")]
