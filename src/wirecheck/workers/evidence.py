"""What failed ranks leave behind for the failure message: how a process ended, the tail of its log
(stderr), and a Python stack dump asked of a rank that does not reply.

Each rank's faulthandler writes its stacks to its log on SIGUSR1 (worker.main), so a dump is read
from the log, from where it stood before the signal.
"""

from __future__ import annotations

import os
import signal
import time

from wirecheck.workers.spawn import RankProcesses

STDERR_TAIL_LINES = 40
STACK_DUMP_LINES = 60


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    hint = " (also what the kernel's OOM killer sends: check dmesg)" if -returncode == signal.SIGKILL else ""
    return f"killed by {name}{hint}"


def tail(path: str, lines: int, start: int = 0) -> str:
    """The last `lines` lines of a log, from byte `start` on."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            begin = max(start, end - 256 * 1024)
            f.seek(begin)
            data = f.read()
    except OSError as exc:
        return f"<log {path} unreadable: {exc}>"
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def dump_stacks(ranks: RankProcesses, which: list[int], wait_s: float) -> dict[int, str]:
    """SIGUSR1 -> faulthandler writes each rank's Python stacks to its log; return what was written."""
    sizes: dict[int, int] = {}
    for rank in which:
        proc = ranks.procs[rank]
        try:
            sizes[rank] = os.path.getsize(ranks.log_paths[rank])
        except OSError:
            sizes[rank] = 0
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
    # Wait until every log has grown and then stopped growing, at most wait_s.
    deadline = time.monotonic() + wait_s
    last: dict[int, int] = {}
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = {r: os.path.getsize(ranks.log_paths[r]) for r in which}
        if all(now[r] > sizes[r] for r in which) and now == last:
            break
        last = now
    stacks = {}
    for rank in which:
        dump = tail(ranks.log_paths[rank], STACK_DUMP_LINES, start=sizes[rank])
        if not dump.strip():
            dump = ("<no stack dump written; last lines of its log:>\n"
                    + tail(ranks.log_paths[rank], STDERR_TAIL_LINES))
        stacks[rank] = dump
    return stacks
