"""Run the real validation suite (tests/) in simulation inside a pytester directory.

The directory gets copies of the project's conftest.py, thresholds.yaml and tests/, so a
self-test can swap a thresholds file or add a tests/conftest.py that overrides a fixture
(e.g. the worker function, to inject a fault) without any switch in production code.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]


def make_project(pytester, thresholds_text: str | None = None, tests_conftest: str | None = None) -> Path:
    root = Path(pytester.path)
    shutil.copy(PROJECT / "conftest.py", root / "conftest.py")
    shutil.copytree(PROJECT / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "thresholds.yaml").write_text(thresholds_text or (PROJECT / "thresholds.yaml").read_text())
    (root / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    if tests_conftest:
        (root / "tests" / "conftest.py").write_text(tests_conftest)
    return root


def pythonpath(env: dict | None = None) -> str:
    """PYTHONPATH for a subprocess: this checkout's package first (not whichever checkout the venv's
    editable install points at, e.g. from a git worktree), then the self-test helpers, then the
    caller's own PYTHONPATH."""
    paths = [str(PROJECT / "src"), str(PROJECT), str(PROJECT / "selftests"),
             (os.environ if env is None else env).get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in paths if p)


def run_suite(pytester, *args: str, timeout: float = 600):
    """pytest in a subprocess (workers need a clean interpreter), project importable."""
    pytester._monkeypatch.setenv("PYTHONPATH", pythonpath())
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=timeout)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def thresholds_with(edit) -> str:
    """The project's thresholds.yaml as text after `edit(data)` changed the loaded mapping."""
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    edit(data)
    return yaml.safe_dump(data, sort_keys=False)
