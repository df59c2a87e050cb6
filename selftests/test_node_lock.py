"""One GPU run per node: a second run waits, bounded, naming who holds the node, or stops clearly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from wirecheck.workers.node_lock import NodeBusy, NodeLock, parse_wait, read_holder

HOLD = """
import sys, time
from wirecheck.workers.node_lock import NodeLock
lock = NodeLock(sys.argv[1]).acquire(0, command=["pytest", "--profile", "h200-sxm-8", "(nightly)"])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


def hold(path, seconds: float) -> subprocess.Popen:
    """Another run holding the node for `seconds`; returns once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_waits_bounded_then_names_the_holder(tmp_path):
    path = tmp_path / "node.lock"
    holder = hold(path, 60)
    try:
        told = []
        t0 = time.monotonic()
        with pytest.raises(NodeBusy) as info:
            NodeLock(path).acquire(1.0, on_wait=told.append)
        waited = time.monotonic() - t0
        assert 1.0 <= waited < 3
        message = str(info.value)
        assert f"pid {holder.pid} (pytest --profile h200-sxm-8 (nightly))" in message
        assert "since 20" in message and str(path) in message and "--wait-for-node" in message
        assert info.value.holder.pid == holder.pid and len(told) == 1 and told[0].pid == holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_waiting_gets_the_node_when_the_holder_finishes(tmp_path):
    path = tmp_path / "node.lock"
    holder = hold(path, 1.5)
    told = []
    t0 = time.monotonic()
    with NodeLock(path).acquire(30, on_wait=told.append) as lock:
        assert 1.0 < time.monotonic() - t0 < 10
        assert lock.held and read_holder(path).pid == os.getpid()
        assert told and told[0].pid == holder.pid
    assert holder.wait(timeout=5) == 0
    assert read_holder(path) is None  # released: no stale name


def test_a_killed_holder_leaves_the_node_free(tmp_path):
    path = tmp_path / "node.lock"
    holder = hold(path, 60)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert read_holder(path).pid == holder.pid  # its name is still in the file...
    with NodeLock(path).acquire(0):  # ...but the kernel dropped its lock: no wait
        assert read_holder(path).pid == os.getpid()


def test_a_lock_file_that_cannot_be_created_says_so(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"node lock .*cannot create it.*--node-lock PATH"):
        NodeLock(tmp_path / "file" / "node.lock").acquire(0)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("10min", 600), ("10m", 600), ("2h", 7200),
                                           ("0", 0), ("forever", None)])
def test_parse_wait(text, seconds):
    assert parse_wait(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-5s", "10 parsecs", "nan", "infinity s"])
def test_parse_wait_refuses_nonsense(text):
    with pytest.raises(ValueError, match="--wait-for-node"):
        parse_wait(text)
