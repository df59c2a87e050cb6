"""The run ends with its wrapper: SIGKILL to `wirecheck validate` (a supervisor's or a job step's hard
kill) leaves no process of the run behind, pytest and its workers included, and the record keeps every
line written with an end line. Before, pytest was re-parented to PID 1 and went on (the GPUs and the
node lock held).

Every process of the run is found by a mark in its environment (children inherit it), so a process
re-parented to PID 1 is still found; the parent-death signal itself is also tried on its own, on a
tiny parent and child (wirecheck.workers.parent_death)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from e2e import PROJECT, pythonpath
from wirecheck.workers import parent_death


def _marked(mark: str) -> list[int]:
    """The pids of live processes whose environment holds `mark` (zombies have none left)."""
    found = []
    needle = mark.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry))
        except OSError:  # gone, or a kernel thread
            continue
    return found


def _gone_within(mark: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _start(cmd: list[str], mark: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, WIRECHECK_SELFTEST_MARK=mark, PYTHONPATH=pythonpath())
    return subprocess.Popen(cmd, env=env, start_new_session=True, stdin=subprocess.DEVNULL, **kwargs)


def test_a_child_of_the_main_thread_dies_with_its_parent():
    """The mechanism alone: a parent arms its child (as foreground.py does), is SIGKILLed, the child goes."""
    assert parent_death.prepare(), "Linux has prctl(PR_SET_PDEATHSIG)"
    mark = f"wirecheck-pdeathsig-{uuid.uuid4()}"
    parent = textwrap.dedent("""
        import os, signal, subprocess, sys, time
        from wirecheck.workers import parent_death
        parent_death.prepare()
        me = os.getpid()
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         preexec_fn=lambda: parent_death.arm(signal.SIGTERM, me))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = _start([sys.executable, "-c", parent], mark, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(_marked(mark)) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert _gone_within(mark, 60) == [], "the child outlived its SIGKILLed parent"
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)


def test_sigkill_to_validate_ends_pytest_and_its_workers_and_keeps_the_record(tmp_path):
    mark = f"wirecheck-wrapper-{uuid.uuid4()}"
    record = tmp_path / "r.jsonl"
    cmd = [sys.executable, "-m", "wirecheck.cli.main", "validate", "-p", "no:cacheprovider", "--color=no",
           "--simulate=h200-sxm-2", "-k", "test_busbw", "--wirecheck-json", str(record)]
    log = open(tmp_path / "out.log", "wb")
    validate = _start(cmd, mark, stdout=log, stderr=subprocess.STDOUT, cwd=PROJECT)
    try:
        deadline = time.monotonic() + 240
        while '"type": "verdict"' not in (record.read_text() if record.exists() else ""):
            assert validate.poll() is None and time.monotonic() < deadline, (tmp_path / "out.log").read_text()
            time.sleep(0.2)
        running = _marked(mark)
        assert len(running) >= 3, running  # validate, pytest and a worker group's ranks
        os.kill(validate.pid, signal.SIGKILL)
        validate.wait(10)
        left = _gone_within(mark, 60)
        assert left == [], f"left running after the wrapper died: {left}"
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        log.close()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert lines[0]["type"] == "run" and any(line["type"] == "verdict" for line in lines)
    end = lines[-1]
    assert end["type"] == "end" and end["signal"] == "SIGTERM" and end["exit_status"] == 143, end
