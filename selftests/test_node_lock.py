"""One GPU run per node: a second run waits, bounded, naming who holds the node, or stops clearly."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest
from other_user import NOBODY, OTHER, name, need_root, python_as, run_as, sticky_dir

from wirecheck.workers.node_lock import DEFAULT_PATH, NodeBusy, NodeLock, UnsafeLock, parse_wait, read_holder

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
        assert 1.0 <= waited < 20  # the wait asked for, not the holder's 60 s
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
        assert 1.0 < time.monotonic() - t0 < 25  # when the holder let go, not at the end of the 30 s wait
        assert lock.held and read_holder(path).pid == os.getpid()
        assert told and told[0].pid == holder.pid
    assert holder.wait(timeout=60) == 0
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


# ---- run as root: a local user must not be able to steer the lock ---------------------------------

HOLD_AS_USER = """
import sys, time
from wirecheck.workers import node_lock
from wirecheck.workers.node_lock import NodeLock
if len(sys.argv) > 2:  # a node where root has not made the shared lock yet
    node_lock.DEFAULT_PATH = node_lock.Path(sys.argv[2])
    node_lock.FALLBACK_PATH = node_lock.Path(sys.argv[1])
    lock = NodeLock()
else:
    lock = NodeLock(sys.argv[1])
lock.acquire(0, command=["wirecheck", "validate", "(other user)"])
print("held", lock.path, lock.note, flush=True)
time.sleep(60)
"""


@pytest.fixture
def sticky():
    need_root()
    path = sticky_dir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def _hold_as(uid: int, *args) -> subprocess.Popen:
    """Another user's run holding the lock; its first line (`held PATH NOTE`) is in `.held`."""
    proc = python_as(uid, HOLD_AS_USER, *map(str, args))
    line = proc.stdout.readline()
    if not line.startswith("held"):
        proc.kill()
        raise AssertionError(f"the other user's run did not take the lock: {line}{proc.stderr.read()}")
    proc.held = line
    return proc


def _victim(tmp_path):
    victim = tmp_path / "victim.txt"  # root's file in root's directory, as /root/victim.txt in the issue
    victim.write_text("secret\n")
    victim.chmod(0o600)
    return victim


def test_a_link_planted_at_the_lock_path_is_refused_and_its_target_untouched(sticky, tmp_path):
    """The attack docs/running-as-root.md names: nobody links the lock path to root's file; root's run refuses it."""
    os.chmod(tmp_path, 0o755)
    victim = _victim(tmp_path)
    lock_path = sticky / "wirecheck-node.lock"
    planted = run_as(NOBODY, ["ln", "-s", str(victim), str(lock_path)])
    assert planted.returncode == 0, planted.stderr
    t0 = time.monotonic()
    with pytest.raises(UnsafeLock) as info:
        NodeLock(lock_path).acquire(30)
    assert time.monotonic() - t0 < 10  # refused at once, not after the 30 s wait
    message = str(info.value)
    assert str(lock_path) in message and f"symbolic link to {victim}" in message and f"user {name(NOBODY)}" in message
    assert f"rm {lock_path}" in message  # the fix
    assert victim.read_text() == "secret\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert victim.stat().st_uid == 0


def test_another_users_lock_file_is_refused_naming_the_owner_without_waiting(sticky):
    """nobody makes the lock file first and holds it: root's run stops at once, naming nobody and the fix,
    and leaves nobody's file as it was (no chmod, no truncation)."""
    lock_path = sticky / "wirecheck-node.lock"
    holder = _hold_as(NOBODY, lock_path)
    try:
        before = lock_path.read_bytes()
        assert json.loads(before)["pid"] == holder.pid  # its own file: it wrote its name
        mode = stat.S_IMODE(lock_path.stat().st_mode)
        t0 = time.monotonic()
        with pytest.raises(UnsafeLock) as info:
            NodeLock(lock_path).acquire(30)
        assert time.monotonic() - t0 < 10  # no wait (30 s) on a lock root must not use
        message = str(info.value)
        assert str(lock_path) in message and f"owned by {name(NOBODY)} (uid {NOBODY})" in message
        assert "not by root" in message and f"rm {lock_path}" in message
        assert lock_path.read_bytes() == before and stat.S_IMODE(lock_path.stat().st_mode) == mode
        assert lock_path.stat().st_uid == NOBODY
    finally:
        holder.kill()
        holder.wait()


def test_a_hard_link_or_a_fifo_at_the_lock_path_is_refused(sticky, tmp_path):
    victim = _victim(tmp_path)
    linked = sticky / "linked.lock"
    os.link(victim, linked)  # what a user could do to a root file where fs.protected_hardlinks is 0
    with pytest.raises(UnsafeLock, match=r"2 names \(hard links\)"):
        NodeLock(linked).acquire(0)
    assert victim.read_text() == "secret\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    fifo = sticky / "fifo.lock"
    assert run_as(NOBODY, ["mkfifo", str(fifo)]).returncode == 0
    t0 = time.monotonic()
    with pytest.raises(UnsafeLock, match="not a regular file"):
        NodeLock(fifo).acquire(0)
    assert time.monotonic() - t0 < 10  # the open did not hang on the FIFO


def test_the_default_lock_is_roots_shared_read_only_and_cannot_be_planted(sticky):
    """Root's default lock lives in a directory only root can write; another user's run takes the same
    lock read-only (flock needs no more) and is named from /proc when root's run has to wait."""
    need_root()
    lock = NodeLock()
    assert lock.path == DEFAULT_PATH and lock.note is None
    with lock.acquire(60):
        pass
    directory = os.lstat(DEFAULT_PATH.parent)
    assert stat.S_ISDIR(directory.st_mode) and directory.st_uid == 0
    assert stat.S_IMODE(directory.st_mode) & 0o022 == 0
    made = os.lstat(DEFAULT_PATH)
    assert stat.S_ISREG(made.st_mode) and made.st_uid == 0 and stat.S_IMODE(made.st_mode) & 0o022 == 0
    for plant in (["ln", "-s", "/etc/passwd", str(DEFAULT_PATH.parent / "planted")],
                  ["touch", str(DEFAULT_PATH.parent / "planted")],
                  ["mv", "-f", str(DEFAULT_PATH), str(sticky / "moved")]):
        done = run_as(NOBODY, plant)
        assert done.returncode != 0, f"{plant}: {done.stdout}{done.stderr}"
    assert not os.path.lexists(DEFAULT_PATH.parent / "planted") and os.path.lexists(DEFAULT_PATH)
    holder = _hold_as(NOBODY, DEFAULT_PATH)  # an unprivileged run on the shared lock
    try:
        content = DEFAULT_PATH.read_bytes()
        with pytest.raises(NodeBusy) as info:
            NodeLock().acquire(1)
        assert info.value.holder.pid == holder.pid and info.value.holder.user == name(NOBODY)
        assert info.value.holder.command.startswith("python -c import sys, time")  # its command line, from /proc
        assert DEFAULT_PATH.read_bytes() == content  # it wrote nothing into root's file
        assert os.lstat(DEFAULT_PATH).st_uid == 0 and stat.S_IMODE(os.lstat(DEFAULT_PATH).st_mode) == 0o644
    finally:
        holder.kill()
        holder.wait()
    with NodeLock().acquire(5):  # and once it is gone, root's run takes it
        assert read_holder(DEFAULT_PATH).pid == os.getpid()


def test_unprivileged_runs_share_the_fallback_without_writing_each_others_file(sticky):
    """Where root has not made the shared lock, unprivileged runs share FALLBACK_PATH and say so: the
    second user waits on the first user's file, takes it read-only and never writes it."""
    fallback, missing = sticky / "wirecheck-node.lock", sticky / "run" / "node.lock"
    first = _hold_as(NOBODY, fallback, missing)
    try:
        assert first.held.startswith(f"held {fallback} no shared node lock {missing}"), first.held
        assert fallback.stat().st_uid == NOBODY and stat.S_IMODE(fallback.stat().st_mode) == 0o644
        content = fallback.read_bytes()
        assert json.loads(content)["pid"] == first.pid
        second = python_as(OTHER, HOLD_AS_USER.replace("acquire(0", "acquire(1"), str(fallback), str(missing))
        out, err = second.communicate(timeout=30)
        assert second.returncode != 0 and "node busy" in err and f"pid {first.pid}" in err, out + err
        assert fallback.read_bytes() == content and fallback.stat().st_uid == NOBODY
    finally:
        first.kill()
        first.wait()
    second = _hold_as(OTHER, fallback, missing)  # free now (the kernel dropped nobody's lock)
    try:
        assert second.held.startswith(f"held {fallback}")
        # Read-only: the other user left nobody's stale name and mode as they were.
        assert fallback.read_bytes() == content and stat.S_IMODE(fallback.stat().st_mode) == 0o644
        # A third run is told who holds it from /proc (the other user's pid and name), not from the stale name.
        third = python_as(NOBODY, HOLD_AS_USER.replace("acquire(0", "acquire(0.5"), str(fallback), str(missing))
        out, err = third.communicate(timeout=30)
        assert f"pid {second.pid} (python -c import sys" in err and f"user {name(OTHER)}," in err, out + err
    finally:
        second.kill()
        second.wait()
