"""Run the real validation suite (tests/) in simulation inside a pytester directory.

The directory gets copies of the project's conftest.py, thresholds.yaml and tests/, so a
self-test can swap a thresholds file or add a tests/conftest.py that overrides a fixture
(e.g. the worker function, to inject a fault) without any switch in production code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from _pytest.pytester import RunResult

PROJECT = Path(__file__).resolve().parents[1]
# One test, the busbw of all_reduce on both GPUs of h200-sxm-2: the run several files need a record of
# (conftest.py's healthy_busbw_runs; test_fleet_e2e's slow node runs it with a fault).
BUSBW_SELECTION = "test_busbw and all_reduce and nvswitch"
HEALTHY_RUNS = 3
SUITE_TIMEOUT_S = 420


def make_project(pytester, thresholds_text: str | None = None, tests_conftest: str | None = None) -> Path:
    return copy_project(Path(pytester.path), thresholds_text, tests_conftest)


def copy_project(root: Path, thresholds_text: str | None = None, tests_conftest: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
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


def start_busbw_run(root: Path, record: Path, tests_conftest: str | None = None) -> subprocess.Popen:
    """pytest on a copy of the suite made at `root`, in simulation (h200-sxm-2), BUSBW_SELECTION only,
    its record written to `record`; finish_run waits for it."""
    project = copy_project(root, tests_conftest=tests_conftest)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--simulate=h200-sxm-2",
           "--benchmark-disable", "-k", BUSBW_SELECTION, f"--wirecheck-json={record}", "tests"]
    proc = subprocess.Popen(cmd, cwd=project, env=dict(os.environ, PYTHONPATH=pythonpath()), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.started = time.monotonic()
    return proc


def finish_run(proc: subprocess.Popen, timeout: float = SUITE_TIMEOUT_S) -> RunResult:
    """The run's exit code and output as pytester's runs give them (assert_outcomes, fnmatch_lines)."""
    out, err = proc.communicate(timeout=timeout)
    return RunResult(proc.returncode, out.splitlines(), err.splitlines(), time.monotonic() - proc.started)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def thresholds_with(edit) -> str:
    """The project's thresholds.yaml as text after `edit(data)` changed the loaded mapping."""
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    edit(data)
    return yaml.safe_dump(data, sort_keys=False)
