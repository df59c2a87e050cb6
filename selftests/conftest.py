"""Fixtures that several self-test files share."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
from _pytest.pytester import RunResult

from e2e import HEALTHY_RUNS, finish_run, start_busbw_run

# The runs these self-tests start (pytest on the suite, `wirecheck validate`) are runs of their own: one that
# inherits pytest-xdist's worker variables takes itself for a worker of this run (pytest-benchmark then saves
# nothing). Dropped once, as this process starts its tests, so every child starts clean.
for _name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_name, None)


def pytest_terminal_summary(terminalreporter):
    # Every worker group's rendezvous goes through torch's TCPStore over ::ffff:127.0.0.1, which asks for the
    # address's name on each connect and accept: without a line in /etc/hosts that is a DNS query, and a
    # resolver that drops some stalls those starts 5 s each (.ci/run adds the line). Said at the end, where
    # -q still shows it, because it explains a slow run.
    import shutil
    import subprocess

    if shutil.which("getent") and subprocess.run(["getent", "-s", "files", "hosts", "::ffff:127.0.0.1"], capture_output=True).returncode != 0:
        terminalreporter.write_line("note: ::ffff:127.0.0.1 has no name in /etc/hosts, so worker groups may have stalled "
                                    "5 s on reverse DNS lookups; add '::ffff:127.0.0.1 localhost' there (.ci/run does)")


@pytest.fixture(scope="session", autouse=True)
def forked_workers():
    """Worker groups these self-tests start in this process take their ranks from a zygote's forks, as a run's
    groups do (wirecheck.workers.spares): an interpreter that imports torch costs 3-4 s of CPU on a 2-core
    machine, a fork milliseconds. A rank whose environment a fork cannot take on is a new interpreter."""
    from wirecheck.workers import spares

    stock = spares.SpareStock(0, replenish=False)
    spares.install(stock)
    stock.fill()
    yield stock
    spares.install(None)
    stock.close()


@pytest.fixture(scope="session")
def healthy_busbw_runs(request, tmp_path_factory) -> list:
    """Three runs of the suite in simulation (h200-sxm-2) with `e2e.BUSBW_SELECTION`, no fault, each in
    a project copy of its own and its record in one shared directory, two at a time (two cores):
    [(RunResult, record path)].

    Shared by every self-test file of one pytest run: test_fleet_e2e's three healthy nodes,
    test_report_e2e's three nights of a history and test_records_e2e's record to cut short are all this
    same run, about 5 s each on a 2-core machine. Under pytest-xdist the first worker to ask makes them in the
    run's own temporary folder (its workers' common parent) and the others read them there, under a lock: a
    session fixture is otherwise made once per worker. A test copies a record before it changes or adds files
    next to it."""
    if not hasattr(request.config, "workerinput"):  # not an xdist worker: this process alone
        return _healthy_runs(tmp_path_factory.mktemp("healthy"))
    from filelock import FileLock  # torch's own dependency

    root = tmp_path_factory.getbasetemp().parent / "healthy"
    with FileLock(f"{root}.lock"):
        made = root / "runs.json"
        if not made.exists():
            root.mkdir()
            runs = _healthy_runs(root)
            made.write_text(json.dumps([[r.ret, r.outlines, r.errlines, r.duration, str(path)] for r, path in runs]))
        return [(RunResult(ret, out, err, duration), Path(path))
                for ret, out, err, duration, path in json.loads(made.read_text())]


def _healthy_runs(root: Path) -> list:
    records = root / "records"
    records.mkdir()
    names = [f"run{k}" for k in range(HEALTHY_RUNS)]
    done = []
    for batch in (names[:2], names[2:]):
        started = [start_busbw_run(root / name, records / f"{name}.jsonl") for name in batch]
        done += [finish_run(proc) for proc in started]
    return [(result, records / f"{name}.jsonl") for name, result in zip(names, done)]


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _signal_state() -> tuple:
    """This thread's blocked stop signals and each one's handler: what every later child inherits (a blocked
    or ignored SIGINT in a child pytest means a Ctrl-C that never reaches it)."""
    blocked = frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])) & set(STOP_SIGNALS)
    # the kernel's view too: a library may ignore a signal below Python, where getsignal does not see it
    with open("/proc/thread-self/status", encoding="ascii") as status:
        ignored = int(next(line for line in status if line.startswith("SigIgn:")).split()[1], 16)
    return blocked, tuple(signal.getsignal(s) for s in STOP_SIGNALS), tuple(bool(ignored >> (s - 1) & 1) for s in STOP_SIGNALS)


@pytest.fixture(autouse=True)
def _signals_left_as_found():
    """A test that calls signal-taking code in this process must give the signals back: the self-tests after it
    (in the same worker) press Ctrl-C on commands they start, and those inherit this process's mask."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = _signal_state()
    yield
    after = _signal_state()
    if after != before:
        signal.pthread_sigmask(signal.SIG_SETMASK, set(signal.pthread_sigmask(signal.SIG_BLOCK, [])) - set(STOP_SIGNALS)
                               | set(before[0]))
        for sig, handler in zip(STOP_SIGNALS, before[1]):
            if handler is not None:
                signal.signal(sig, handler)
        pytest.fail(f"this test left the stop signals changed (blocked, handlers): before {before}, after {after}")
