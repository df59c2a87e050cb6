"""One GPU run per node: an exclusive lock that a second run waits for, bounded, or stops on.

Two runs on one node measure each other: a nightly cron run starting while an acceptance run holds
the GPUs would record wrong numbers in both, and neither would know. The lock is a `flock` on a
file: the kernel drops it when the holder's process ends, however it ends (SIGKILL included), so a
crashed run never leaves the node locked. The file's content says who holds it (pid, command, since
when, host, user) for the message of the run that has to wait; a stale content is overwritten by the
next holder and never blocks anyone.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import getpass
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

DEFAULT_PATH = Path("/tmp/wirecheck-node.lock")
POLL_S = 0.5


@dataclass(frozen=True)
class Holder:
    """Who holds the node, as the holder wrote it."""

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


def read_holder(path: Path) -> Holder | None:
    """The holder recorded in the lock file; None when unreadable or empty (between two runs)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8") or "null")
        return Holder(**data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


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


class NodeLock:
    """`with NodeLock(path).acquire(wait_s): ...`; release() when done (also on process exit)."""

    def __init__(self, path: str | os.PathLike = DEFAULT_PATH):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait_s: float | None, on_wait: Callable[[Holder | None], None] | None = None,
                command: list[str] | None = None) -> NodeLock:
        """Take the lock, waiting at most `wait_s` seconds (None: as long as it takes).

        `on_wait(holder)` is called once, when the lock is found taken, so the caller can say
        who it waits for. Raises NodeBusy naming the holder when the wait runs out, and
        ValueError when the lock file cannot be opened (with the path and the fix).
        """
        if self._fd is not None:
            return self
        fd = self._open()
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
                    on_wait(self._holder())
                    told = True
                if wait_s is not None and waited >= wait_s:
                    holder = self._holder()
                    who = holder.describe() if holder else "a process that left no name (see the file)"
                    raise NodeBusy(
                        f"node busy: another wirecheck run holds the GPUs: {who}; lock {self.path}. "
                        f"Waited {waited:.0f} s. Wait for it with --wait-for-node DURATION (e.g. 2h, or "
                        "'forever'), or run in simulation, which takes no GPU lock",
                        holder=holder, waited_s=waited, path=self.path)
                time.sleep(POLL_S if wait_s is None else max(0.0, min(POLL_S, wait_s - waited)))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._write(this_process(command))
        return self

    def release(self) -> None:
        if self._fd is None:
            return
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

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:
            try:
                # Created by another user without write access for us: flock works read-only too,
                # we only cannot leave our name in it.
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise ValueError(f"node lock {self.path}: cannot open it ({exc}); pass --node-lock PATH "
                                 "with a file every user of this node can open") from exc
        except OSError as exc:
            raise ValueError(f"node lock {self.path}: cannot create it ({exc}); pass --node-lock PATH "
                             "in a writable directory") from exc
        try:
            os.fchmod(fd, 0o666)  # every user's runs must be able to take it (umask would narrow it)
        except OSError:
            pass
        return fd

    def _write(self, holder: Holder) -> None:
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(asdict(holder)).encode(), 0)
        except OSError:
            pass  # read-only: the lock still holds, only the name is missing

    def _holder(self) -> Holder | None:
        # The holder writes its name right after taking the lock: give it a moment.
        for _ in range(5):
            holder = read_holder(self.path)
            if holder is not None:
                return holder
            time.sleep(0.05)
        return None


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
