"""Which tests a run holds, in the order they run: the real suite collected by a pytest subprocess,
or the tests a recorded run judged.

Collecting the suite itself (`pytest --collect-only -q --level L --simulate TOPO`) keeps the plan from
drifting from what runs: the levels, the placements, a site's hooks and its own tests are all in it.
The run's header, which the collection hands to header_probe through the suite's site hook (a
collection runs no test, so it keeps no record), gives the placements (id, class, GPUs) and the link
matrix. A simulated collection holds the same tests as the hardware run of that topology.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wirecheck.core.levels import BURN_IN, DEFAULT_LEVEL
from wirecheck.core.paths import suite_paths, suite_plugin_args, suite_pytest_env
from wirecheck.plan.header_probe import HEADER_FILE_ENV, WORK_FILE_ENV
from wirecheck.records.file import read_run
from wirecheck.vocab.strategies import SINGLE_GPU_PREPARED_IN_LOAD
from wirecheck.workers.bytecode import worker_env

COLLECT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Collected:
    tests: tuple[str, ...]  # test ids in run order
    header: dict  # the record's run line: placements, gpus, fabric, matrix, level
    source: str  # what was collected: "--simulate NAME", "this node", or a record's path
    work: dict  # test function -> what it declared it costs: {"work": [kinds], "opt_in": why} (its work marker)

    @property
    def placements(self) -> list[dict]:
        return list(self.header.get("placements") or [])

    @property
    def n_gpus(self) -> int:
        return len(self.header.get("gpus") or [])


class CollectError(ValueError):
    """Collecting the suite failed: the message says how, with pytest's own last words."""


def pytest_command(level: str, simulate: str | None, extra: list[str]) -> list[str]:
    suite = suite_paths()
    cmd = [sys.executable, "-m", "pytest", str(suite.tests), "--rootdir", str(suite.root), "-p", "no:cacheprovider",
           *suite_plugin_args(), "--collect-only", "-q", "--level", level]
    if simulate:
        cmd.append(f"--simulate={simulate}")
    return cmd + list(extra)


def collect(level: str, simulate: str | None = None, extra: list[str] | None = None,
            timeout_s: float = COLLECT_TIMEOUT_S) -> Collected:
    """The suite's tests at `level` on `simulate` (a recorded topology), or on this node's GPUs."""
    with tempfile.TemporaryDirectory(prefix="wirecheck-plan-") as folder:
        header_file, work_file = Path(folder) / "header.json", Path(folder) / "work.json"
        cmd = pytest_command(level, simulate, ["-p", "wirecheck.plan.header_probe",
                                               f"--wirecheck-json={Path(folder) / 'collected.jsonl'}", *(extra or [])])
        try:
            env = suite_pytest_env({**os.environ, HEADER_FILE_ENV: str(header_file), WORK_FILE_ENV: str(work_file)})
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                                  env=worker_env(env))  # the bytecode cache where the node's Python keeps none
        except subprocess.TimeoutExpired:
            raise CollectError(f"collecting the suite took over {timeout_s:.0f} s: {' '.join(cmd)}") from None
        tests = _test_ids(done.stdout)
        if done.returncode not in (0, 10) or not tests:
            # pytest's last words, without the collected test ids --collect-only lists before them
            listed = set(tests)
            said = [line for line in (done.stderr + done.stdout).splitlines()
                    if line.strip() and line.strip() not in listed and " tests collected" not in line][-6:]
            raise CollectError(f"collecting the suite failed (pytest exit {done.returncode}):\n  " + "\n  ".join(said))
        try:
            header = json.loads(header_file.read_text(encoding="utf-8"))
            work = json.loads(work_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CollectError(f"collecting the suite gave no run header or work declarations ({exc}): "
                               f"{' '.join(cmd)}") from None
    return Collected(tests, header, f"--simulate {simulate}" if simulate else "this node", work)


def _test_ids(stdout: str) -> tuple[str, ...]:
    """The ids `pytest --collect-only -q` lists: its first run of `path::name` lines (a warnings summary
    after it may name tests again)."""
    ids: list[str] = []
    for line in stdout.splitlines():
        if "::" in line and not line.startswith(" "):
            ids.append(line.strip())
        elif ids:
            break
    return tuple(ids)


# What the suite's tests declare does not depend on the node: a record's tests are priced with the
# declarations of the suite collected on this recorded topology, at the record's level.
DECLARATIONS_TOPOLOGY = "h100-sxm-8-nics"


@functools.lru_cache(maxsize=None)
def suite_work(level: str) -> dict:
    """What each test function of the suite declares it costs at `level` (one collection per level)."""
    extra = ["--duration", "1h"] if level == BURN_IN else []
    return collect(level, DECLARATIONS_TOPOLOGY, extra).work


def from_record(path: str | Path) -> tuple[Collected, dict]:
    """The tests a recorded run judged, in its order, with the suite's declarations of what they cost,
    and its end line (None's place: {})."""
    run = read_run(path)
    tests, seen = [], set()
    for verdict in run.verdicts:
        test = verdict.get("test")
        if test and test not in seen:
            seen.add(test)
            tests.append(test)
    level = run.run.get("level") or DEFAULT_LEVEL
    return Collected(tuple(tests), _header(run), str(path), suite_work(level)), run.end or {}


def _header(run) -> dict:
    """The run's header; one written before the header named how the one-GPU training was prepared (`single_gpu`)
    gets it from its sustained load's recorded settings (`prepared_in_load`)."""
    if "single_gpu" in run.run:
        return run.run
    return dict(run.run, single_gpu=SINGLE_GPU_PREPARED_IN_LOAD) if prepared_in_load(run.measurements) else run.run


def prepared_in_load(measurements) -> bool:
    """Whether a run's sustained load prepared the one-GPU training in its shadow: its recorded settings name the
    aside where the load ran it."""
    return any(((m.get("details") or {}).get("settings") or {}).get("aside") for m in measurements
               if m.get("kind") == "gpu_sustained")
