"""One GPU run per node: an exclusive lock that a second run waits for, bounded, or stops on.

Two runs on one node measure each other: a nightly cron run starting while an acceptance run holds
the GPUs would record wrong numbers in both, and neither would know. The lock is a `flock` on a
file: the kernel drops it when the holder's process ends, however it ends (SIGKILL included), so a
crashed run never leaves the node locked.

Acceptance runs as root, so the lock file must not be something another local user can steer
(docs/running-as-root.md): a symbolic link planted at its name would have root truncate and chmod the file it
points to, and a file another user made and holds would keep every run waiting.
- The default lock is /run/wirecheck/node.lock, in a directory only root can write: root makes it
  (0755, then the file 0644) and every user's run takes the same lock through a read-only
  descriptor (flock needs no write access). scripts/tmpfiles.d/wirecheck.conf makes it at boot.
- Where root has not made it yet, an unprivileged run falls back to /tmp/wirecheck-node.lock, which
  unprivileged runs share; root never takes that one.
- The file is opened with O_NOFOLLOW (a link is refused), must be a regular file, and is written
  (the holder's name), truncated or chmod-ed only by its owner and only with a single name. A root
  run refuses a lock file another user owns, naming the owner and the fix.
- Who holds the lock: the holder's own record in the file where it could write one, otherwise
  the kernel's: /proc/locks gives the holder's pid, /proc/PID its command, user and start time.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import getpass
import json
import os
import platform
import stat
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from wirecheck.core.safefs import describe, path_problem, user_name

DEFAULT_PATH = Path("/run/wirecheck/node.lock")
# Unprivileged runs where root has not made DEFAULT_PATH (the lock versions before the root-safe one took).
FALLBACK_PATH = Path("/tmp/wirecheck-node.lock")
TMPFILES_CONF = "scripts/tmpfiles.d/wirecheck.conf"
POLL_S = 0.5
HOLDER_BYTES = 4096  # a holder's record is one short JSON line; more is not one


@dataclass(frozen=True)
class Holder:
    """Who holds the node, as the holder wrote it (or as /proc tells it)."""

    pid: int
    command: str
    since: str  # ISO time, UTC
    host: str
    user: str

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}), user {self.user}, since {self.since}"


class NodeBusy(RuntimeError):
    """Another run held the node for longer than this one was willing to wait."""

    def __init__(self, message: str, *, holder: Holder | None, waited_s: float, path: Path):
        super().__init__(message)
        self.holder = holder
        self.waited_s = waited_s
        self.path = path


def _parse_holder(data: bytes) -> Holder | None:
    try:
        obj = json.loads(data.decode("utf-8") or "null")
        return Holder(**obj) if isinstance(obj, dict) else None
    except (ValueError, TypeError, RecursionError):
        return None


def read_holder(path: str | os.PathLike) -> Holder | None:
    """The holder recorded in the lock file; None when unreadable or empty (between two runs).
    Never through a symbolic link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _parse_holder(os.pread(fd, HOLDER_BYTES, 0)) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def this_process(command: list[str] | None = None) -> Holder:
    argv = command if command is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return Holder(
        pid=os.getpid(),
        command=" ".join(argv)[:300],
        since=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        host=platform.node(),
        user=user,
    )


def lock_holders(fd: int) -> list[int] | None:
    """Pids holding a flock on the file open at `fd`, from /proc/locks (None: not readable here).
    A pid of 0 is a holder in another pid namespace (another container)."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    pids = []
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 8019 fe:00:2146558 0 EOF"; a waiter's line has "->" after the number.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            try:
                pids.append(int(fields[4]))
            except ValueError:
                continue
    return pids


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            return next(float(line.split()[1]) for line in fh if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def proc_holder(pid: int) -> Holder | None:
    """A holder as /proc tells it (for one that could not write its name into the lock file):
    its command line, its user, and when it started (the lock was taken at or after that)."""
    base = Path(f"/proc/{pid}")
    try:
        argv = [a for a in (base / "cmdline").read_bytes().decode("utf-8", "replace").split("\0") if a]
        uid = next(int(line.split()[1]) for line in (base / "status").read_text().splitlines()
                   if line.startswith("Uid:"))
        ticks = int((base / "stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    boot = _boot_time()
    since = "unknown"
    if boot is not None:
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
        since = _dt.datetime.fromtimestamp(started, _dt.timezone.utc).isoformat(timespec="seconds") + " (process start)"
    command = " ".join(" ".join([Path(argv[0]).name, *argv[1:]]).split()) if argv else f"pid {pid}"  # one line
    return Holder(pid=pid, command=command[:300], since=since, host=platform.node(), user=user_name(uid))


class UnsafeLock(ValueError):
    """A lock file this run must not use (a planted link, another user's file); says which and the fix."""


class NodeLock:
    """`with NodeLock(path).acquire(wait_s): ...`; release() when done (also on process exit).

    `path` None: the node's shared lock (DEFAULT_PATH), or for an unprivileged run where root has
    not made it, FALLBACK_PATH; `note` then says so, for the caller to show."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.note: str | None = None
        self.explicit = path is not None
        if path is not None:
            self.path = Path(path)
        elif os.geteuid() == 0 or os.path.lexists(DEFAULT_PATH):
            self.path = DEFAULT_PATH
        else:
            self.path = FALLBACK_PATH
            self.note = (f"no shared node lock {DEFAULT_PATH} on this node (root makes it: its first run does, or at "
                         f"boot with {TMPFILES_CONF}); this run takes {FALLBACK_PATH}, which other unprivileged runs "
                         "take too, but runs as root do not")
        self._fd: int | None = None
        self._writable = False  # the holder's name is written only into a file this user owns

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait_s: float | None, on_wait: Callable[[Holder | None], None] | None = None,
                command: list[str] | None = None) -> NodeLock:
        """Take the lock, waiting at most `wait_s` seconds (None: as long as it takes).

        `on_wait(holder)` is called once, when the lock is found taken, so the caller can say
        who it waits for. Raises NodeBusy naming the holder when the wait runs out, and
        ValueError when the lock file cannot be opened or must not be (with the path and the fix).
        """
        if self._fd is not None:
            return self
        fd, writable = self._open()
        start = time.monotonic()
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                waited = time.monotonic() - start
                if not told and on_wait is not None:
                    on_wait(self._holder(fd))
                    told = True
                if wait_s is not None and waited >= wait_s:
                    holder = self._holder(fd)
                    who = holder.describe() if holder else "a process that left no name (see /proc/locks)"
                    raise NodeBusy(
                        f"node busy: another wirecheck run holds the GPUs: {who}; lock {self.path}. "
                        f"Waited {waited:.0f} s. Wait for it with --wait-for-node DURATION (e.g. 2h, or "
                        "'forever'), or run in simulation, which takes no GPU lock",
                        holder=holder, waited_s=waited, path=self.path)
                time.sleep(POLL_S if wait_s is None else max(0.0, min(POLL_S, wait_s - waited)))
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._writable = fd, writable
        self._write(this_process(command))
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        if self._writable:
            try:
                os.ftruncate(self._fd, 0)  # no stale name for the next reader
            except OSError:
                pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> NodeLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ---- opening: never through a link, never someone else's file for writing ----------------------

    def _fix(self) -> str:
        if self.explicit:
            return (f"Remove it (rm {self.path}) if no run of yours is using it, or pass --node-lock with a path in a "
                    f"directory only root can write, or leave --node-lock out for the node's shared lock {DEFAULT_PATH}")
        return f"Remove it (rm {self.path}) and run again"

    def _open(self) -> tuple[int, bool]:
        """(descriptor, whether this run may write the holder's name into it)."""
        if self.path == DEFAULT_PATH and os.geteuid() == 0:
            self._root_directory(self.path.parent)
        elif self.explicit:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)  # the user's umask
            except OSError as exc:
                raise ValueError(f"node lock {self.path}: cannot create it ({exc.strerror or exc}); pass --node-lock "
                                 "PATH in a writable directory") from None
        try:
            # Made here: 0644 whatever the umask, so that every user's run can open it to flock it.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            return self._open_existing()
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and os.path.lexists(self.path):
                return self._open_existing()  # appeared meanwhile, or a directory this user cannot create in
            raise ValueError(f"node lock {self.path}: cannot create it ({exc.strerror or exc}); pass --node-lock PATH "
                             "in a writable directory") from None
        os.fchmod(fd, 0o644)
        return fd, True

    def _open_existing(self) -> tuple[int, bool]:
        # Read-only first: flock needs no more, and opening can have no effect on what is there
        # (O_NONBLOCK: a FIFO planted at the name must not hang the open).
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeLock(self._link_message()) from None
            raise ValueError(f"node lock {self.path}: cannot open it ({exc.strerror or exc}); pass --node-lock PATH "
                             "with a file every user of this node can open") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeLock(f"node lock {self.path}: not a regular file ({describe(st)}). {self._fix()}")
            mine = st.st_uid == os.geteuid()
            if os.geteuid() == 0 and not mine:
                raise UnsafeLock(
                    f"node lock {self.path}: {describe(st)}, not by root: another user made it, and could hold it to "
                    f"keep every run waiting; a run as root takes only a lock file root made. {self._fix()}")
            if os.geteuid() == 0 and st.st_nlink != 1:
                raise UnsafeLock(f"node lock {self.path}: the file has {st.st_nlink} names (hard links), so it may be "
                                 f"another file too. {self._fix()}")
            if not mine or st.st_nlink != 1:
                # Another user's (or root's) lock, taken read-only: this run never writes, truncates or
                # chmods it. Its holder is named from /proc/locks where it cannot write its name.
                return fd, False
            writable = self._reopen_writable(fd, st)
            if writable is None:
                return fd, False
            os.close(fd)
            return writable, True
        except BaseException:
            os.close(fd)
            raise

    def _reopen_writable(self, fd: int, st: os.stat_result) -> int | None:
        """This user's own lock file, opened for writing its name: the same file as `fd` (a file
        swapped in between the two opens is not written), or None."""
        try:
            rw = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        again = os.fstat(rw)
        if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
            os.close(rw)
            return None
        return rw

    def _link_message(self) -> str:
        try:
            target, owner = os.readlink(self.path), user_name(os.lstat(self.path).st_uid)
        except OSError:
            target, owner = "?", "?"
        return (f"node lock {self.path}: a symbolic link to {target}, made by user {owner}; a node lock is never "
                "opened through a link (one planted there would have this run truncate and chmod the file it points "
                f"to). {self._fix()}")

    def _root_directory(self, directory: Path) -> None:
        """Root's lock directory: made here (0755: every user's run must reach the lock) when missing, and
        used only when it is a real directory of root's that no one else can write, nor anything above it."""
        try:
            os.mkdir(directory, 0o755)
            os.chmod(directory, 0o755)  # made just now, by root, in a directory only root writes: umask undone
        except FileExistsError:
            pass
        except OSError as exc:
            raise ValueError(f"node lock {self.path}: cannot create {directory} ({exc.strerror or exc}); pass "
                             "--node-lock PATH in a directory only root can write") from None
        st = os.lstat(directory)
        problem = None
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            problem = f"{directory} is not a directory ({describe(st)})"
        else:
            problem = path_problem(directory)
        if problem:
            raise UnsafeLock(f"node lock {self.path}: {problem}; the node lock's directory must be root's and writable "
                             f"by root only: remove it (rm -r {directory}) and run again, or install {TMPFILES_CONF}")

    # ---- who holds it ---------------------------------------------------------------------------

    def _write(self, holder: Holder) -> None:
        if not self._writable:
            return  # another user's lock: the kernel's record (/proc/locks) names this holder
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(asdict(holder)).encode(), 0)
        except OSError:
            pass  # the lock still holds, only the name is missing

    def _holder(self, fd: int) -> Holder | None:
        return holder_of(fd)


def holder_of(fd: int) -> Holder | None:
    """Who holds the lock on the file open at `fd`: its own record in the file, or the kernel's."""
    # The holder writes its name right after taking the lock: give it a moment. A name in the
    # file counts only while the kernel says that process holds the lock: a holder that could
    # not write (another user's run on root's lock) leaves an earlier, stale name there.
    holders: list[int] | None = None
    for _ in range(5):
        holders = lock_holders(fd)
        try:
            written = _parse_holder(os.pread(fd, HOLDER_BYTES, 0))
        except OSError:
            written = None
        if written is not None and (holders is None or written.pid in holders):
            return written
        time.sleep(0.05)
    for pid in holders or ():  # no name of its own: the kernel's
        found = proc_holder(pid) if pid > 0 and pid != os.getpid() else None
        if found is not None:
            return found
    return None


def current_holder(path: str | os.PathLike) -> Holder | None:
    """Who holds the node lock at `path` now; None when no one does (or it cannot be read). For a
    run that stopped busy, to name the holder after the fact; never through a link, never written."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or lock_holders(fd) == []:
            return None
        return holder_of(fd)
    finally:
        os.close(fd)


def parse_wait(text: str) -> float | None:
    """--wait-for-node: '90', '90s', '10min', '2h' -> seconds; 'forever' -> None."""
    value = text.strip().lower()
    if value in ("forever", "inf", "none"):
        return None
    units = (("min", 60.0), ("h", 3600.0), ("s", 1.0), ("m", 60.0))
    factor = 1.0
    for suffix, f in units:
        if value.endswith(suffix):
            value, factor = value[: -len(suffix)].strip(), f
            break
    try:
        seconds = float(value) * factor
    except ValueError:
        raise ValueError(f"--wait-for-node {text!r}: expected a duration like 90s, 10min, 2h, or 'forever'") from None
    if seconds != seconds or seconds == float("inf"):  # "nan", "infinity": float() takes them
        raise ValueError(f"--wait-for-node {text!r}: expected a duration like 90s, 10min, 2h, or 'forever'")
    if seconds < 0:
        raise ValueError(f"--wait-for-node {text!r}: a wait cannot be negative; write 0 to fail at once")
    return seconds


def take(path: str | os.PathLike | None, wait_s: float | None, say: Callable[[str], None]) -> NodeLock:
    """The node lock at `path` (None: the node's, NodeLock), taken before any worker touches a GPU, waiting
    at most `wait_s` seconds (None: as long as it takes) and saying why it waits and for whom (`say`, one
    line each). NodeBusy when the wait runs out; ValueError for a lock that cannot be opened, or must not be."""
    lock = NodeLock(path)
    if lock.note:
        say(f"wirecheck: {lock.note}")

    def say_who(holder: Holder | None) -> None:
        who = holder.describe() if holder else "another run (it left no name)"
        limit = "as long as it takes" if wait_s is None else f"up to {wait_s:g} s"
        say(f"wirecheck: node busy: GPUs held by {who}; waiting {limit} (lock {lock.path})")

    return lock.acquire(wait_s, on_wait=say_who)
