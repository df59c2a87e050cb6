"""Every test can fail: each `test_*` function in tests/ and selftests/ asserts something.

Read from the source (ast), not run. A test asserts when its body (nested functions included) has
- an `assert` statement or a `raise AssertionError`;
- a call to pytest.raises, fail, skip, xfail or warns (a skip is an outcome with its reason, not a
  silent pass);
- a call to one of pytester's own asserting methods (RunResult.assert_outcomes,
  LineMatcher.fnmatch_lines, ...): they raise when a run or its output differs, and are the
  end-to-end tests' assertions. Known by name only, so any object's method of that name counts;
- a call to a helper that asserts by these rules: a function of the same module (through `self.`
  in a test class), or of a selftests/ module the test module imports (`from e2e import
  run_suite`, `import terminal`), followed through helpers of helpers.
A fixture that asserts does not count: its failure is reported as an error in the setup of every
test that requests it, not as that test failing, and it checks nothing about what the test does.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Callable

PROJECT = Path(__file__).resolve().parents[1]
SCANNED = ("tests", "selftests")
HELPERS = PROJECT / "selftests"

PYTEST_ASSERTING = frozenset({"raises", "fail", "skip", "xfail", "warns"})
PYTESTER_ASSERTING = frozenset({"assert_outcomes", "fnmatch_lines", "re_match_lines", "no_fnmatch_line",
                                "no_re_match_line"})

Function = ast.FunctionDef | ast.AsyncFunctionDef


class _Module:
    """A parsed module: its top-level functions, test classes' methods and what its names import."""

    def __init__(self, source: str, filename: str):
        tree = ast.parse(source, filename)
        self.filename = filename
        self.functions: dict[str, Function] = {n.name: n for n in tree.body if isinstance(n, Function)}
        self.classes: dict[str, dict[str, Function]] = {
            c.name: {n.name: n for n in c.body if isinstance(n, Function)}
            for c in tree.body if isinstance(c, ast.ClassDef)}
        # local name -> (module, None) for a module, (module, name) for a name imported from one;
        # selftests/ helpers are named without their package ("selftests.e2e" and "e2e" alike).
        self.imports: dict[str, tuple[str, str | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname or "." not in alias.name:
                        self.imports[alias.asname or alias.name] = (_helper_name(alias.name), None)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if node.module == "selftests":
                        self.imports[alias.asname or alias.name] = (alias.name, None)
                    else:
                        self.imports[alias.asname or alias.name] = (_helper_name(node.module), alias.name)

    def tests(self) -> list[tuple[Function, dict[str, Function]]]:
        """Every test function, with the methods `self.` reaches from it (none outside a class)."""
        found = [(fn, {}) for name, fn in self.functions.items() if name.startswith("test")]
        for cls, methods in self.classes.items():
            if cls.startswith("Test"):
                found += [(fn, methods) for name, fn in methods.items() if name.startswith("test")]
        return sorted(found, key=lambda pair: pair[0].lineno)


def _helper_name(module: str) -> str:
    return module.removeprefix("selftests.")


class Scanner:
    """Finds the tests without an assertion. `helper_source(module)`: the source of a selftests/
    module by name, or None for any other module (the library, pytest, the standard library)."""

    def __init__(self, helper_source: Callable[[str], str | None]):
        self._helper_source = helper_source
        self._helpers: dict[str, _Module | None] = {}

    def unasserted(self, source: str, filename: str) -> list[str]:
        """'file:line name' of every test function in `source` that asserts nothing."""
        module = _Module(source, filename)
        return [f"{filename}:{fn.lineno} {fn.name}" for fn, methods in module.tests()
                if not self._asserts(module, fn, methods, set())]

    def _helper(self, name: str) -> _Module | None:
        if name not in self._helpers:
            source = self._helper_source(name)
            self._helpers[name] = _Module(source, f"{name}.py") if source is not None else None
        return self._helpers[name]

    def _asserts(self, module: _Module, fn: Function, methods: dict[str, Function], seen: set) -> bool:
        key = (module.filename, fn.lineno)
        if key in seen:  # a helper reached again (recursion, two paths) adds nothing
            return False
        seen.add(key)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assert) or _raises_assertion_error(node):
                return True
            if isinstance(node, ast.Call) and self._call_asserts(module, node.func, methods, seen):
                return True
        return False

    def _call_asserts(self, module: _Module, func: ast.expr, methods: dict[str, Function], seen: set) -> bool:
        if isinstance(func, ast.Name):
            if func.id in module.functions:
                return self._asserts(module, module.functions[func.id], {}, seen)
            source, name = module.imports.get(func.id, (None, None))
            if source == "pytest":
                return name in PYTEST_ASSERTING
            return self._helper_function_asserts(source, name, seen)
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr in PYTESTER_ASSERTING:
            return True
        if not isinstance(func.value, ast.Name):
            return False
        owner = func.value.id
        if owner == "self" and func.attr in methods:
            return self._asserts(module, methods[func.attr], methods, seen)
        source, name = module.imports.get(owner, (None, None))
        if name is not None:  # an attribute of an imported name, not of a module
            return False
        if source == "pytest":
            return func.attr in PYTEST_ASSERTING
        return self._helper_function_asserts(source, func.attr, seen)

    def _helper_function_asserts(self, source: str | None, name: str | None, seen: set) -> bool:
        helper = self._helper(source) if source is not None and name is not None else None
        return helper is not None and name in helper.functions and self._asserts(
            helper, helper.functions[name], {}, seen)


def _raises_assertion_error(node: ast.AST) -> bool:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "AssertionError"


def _selftests_helper(name: str) -> str | None:
    path = HELPERS / f"{name}.py"
    return path.read_text() if "." not in name and path.is_file() else None


# ---- the scan ----------------------------------------------------------------------------------


def test_every_test_in_the_project_asserts():
    scanner = Scanner(_selftests_helper)
    files = sorted(p for d in SCANNED for p in (PROJECT / d).glob("test_*.py"))
    assert len(files) > 50, f"found only {len(files)} test files under {SCANNED}: the scan looks in the wrong place"
    missing = [line for p in files for line in scanner.unasserted(p.read_text(), str(p.relative_to(PROJECT)))]
    assert not missing, ("test functions without an assertion (assert, pytest.raises/fail/skip/xfail/warns, "
                         "or a helper that asserts):\n  " + "\n  ".join(missing))


# ---- the scanner itself, on small sources -------------------------------------------------------


def _scan(source: str, helpers: dict[str, str] | None = None) -> list[str]:
    return Scanner((helpers or {}).get).unasserted(textwrap.dedent(source).lstrip("\n"), "test_x.py")


def test_a_test_without_an_assertion_is_named_with_its_line():
    source = """
        import pytest

        def test_checks(): assert 1 + 1 == 2

        def test_only_runs():
            value = sorted([2, 1])
            print(value)

        def helper_not_a_test():
            pass
    """
    assert _scan(source) == ["test_x.py:5 test_only_runs"]


def test_pytest_outcomes_and_pytester_matchers_are_assertions():
    source = """
        import pytest
        from pytest import raises as expect_raises

        def test_raises():
            with pytest.raises(ValueError):
                int("x")

        def test_imported_raises():
            with expect_raises(ValueError):
                int("x")

        def test_skips():
            pytest.skip("no GPU here")

        def test_raises_assertion_error():
            raise AssertionError("wrong")

        def test_e2e(pytester):
            pytester.runpytest().assert_outcomes(passed=1)

        def test_approx_alone():
            pytest.approx(1.0)
    """
    assert _scan(source) == ["test_x.py:21 test_approx_alone"]


def test_a_helper_counts_only_when_it_asserts():
    source = """
        from e2e import run_and_check, run_only
        import e2e

        def _local_check(x):
            assert x

        def _local_wrapper(x):
            _local_check(x)

        def _local_quiet(x):
            return x

        def _loop_a(): _loop_b()
        def _loop_b(): _loop_a()

        def test_local(): _local_wrapper(1)
        def test_local_quiet(): _local_quiet(1)
        def test_imported(): run_and_check()
        def test_imported_quiet(): run_only()
        def test_module_attribute(): e2e.run_and_check()
        def test_recursion_without_assert(): _loop_a()

        class TestGroup:
            def _check(self): assert True
            def test_method(self): self._check()
            def test_method_quiet(self): self._quiet()
    """
    helpers = {"e2e": "def run_and_check():\n    _inner()\n\ndef _inner():\n    assert True\n\n"
                      "def run_only():\n    return 1\n"}
    assert _scan(source, helpers) == [
        "test_x.py:17 test_local_quiet",
        "test_x.py:19 test_imported_quiet",
        "test_x.py:21 test_recursion_without_assert",
        "test_x.py:26 test_method_quiet",
    ]


def test_a_fixture_that_asserts_does_not_count():
    source = """
        import pytest

        @pytest.fixture
        def checked():
            assert True
            return 1

        def test_uses_fixture(checked):
            return checked
    """
    assert _scan(source) == ["test_x.py:8 test_uses_fixture"]
