"""The NVIDIA driver's Xid lines in the kernel log since a moment, for `validate --trust-recent`.

NVML hands out an XID event only to a process that was registered for it when it came
(wirecheck.node.xid_events): one that came between two runs is lost to NVML. The driver also logs every
XID to the kernel log (`NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus`), and that
log can be read after the fact: /dev/kmsg gives each line with its time since boot (CLOCK_MONOTONIC,
in microseconds). Reading it needs root where `kernel.dmesg_restrict` is 1, and a container may have no
/dev/kmsg: then the lines are not read and the caller says so. The ring buffer keeps only its last
lines (about 1 MiB): on a chatty kernel an old XID may have scrolled out, which is said too.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass

KMSG = "/dev/kmsg"
XID_LINE = re.compile(r"NVRM: Xid \((?P<where>[^)]*)\): (?P<xid>\d+)")
MAX_LINES = 200_000  # a bound on one read of the ring buffer (it holds far fewer)


@dataclass(frozen=True)
class XidLine:
    at: float  # seconds since the epoch (from the line's time since boot)
    where: str  # "PCI:0000:18:00"
    xid: int
    text: str

    def as_record(self) -> dict:
        return {"at": self.at, "where": self.where, "xid": self.xid, "text": self.text[:300]}


@dataclass(frozen=True)
class KernelXids:
    lines: tuple[XidLine, ...]  # the Xid lines at or after `since`
    unreadable: str | None = None  # why the kernel log could not be read (then `lines` is empty)
    oldest_at: float | None = None  # the oldest line the log still holds: after `since`, lines may be lost


def parse_kmsg(records: list[str], boot_at: float, since: float) -> KernelXids:
    """The Xid lines among /dev/kmsg records (`PRI,SEQ,USEC,FLAGS;TEXT`) at or after `since` (epoch s);
    `boot_at`: the epoch second the monotonic clock started (time.time() - CLOCK_MONOTONIC)."""
    found, oldest = [], None
    for record in records:
        head, sep, text = record.partition(";")
        fields = head.split(",")
        if not sep or len(fields) < 3 or not fields[2].isdigit():
            continue  # a continuation line (" KEY=VALUE") or a damaged one
        at = boot_at + int(fields[2]) / 1e6
        oldest = at if oldest is None else min(oldest, at)
        match = XID_LINE.search(text)
        if match and at >= since:
            found.append(XidLine(at=at, where=match["where"], xid=int(match["xid"]), text=text.strip()))
    return KernelXids(tuple(found), oldest_at=oldest)


def read_since(since: float, path: str | None = None) -> KernelXids:
    """The kernel log's Xid lines at or after `since` (seconds since the epoch)."""
    path = path or KMSG
    boot_at = time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return KernelXids((), unreadable=f"{path}: {exc.strerror or exc}")
    records = []
    try:
        while len(records) < MAX_LINES:
            try:
                chunk = os.read(fd, 8192)  # one record per read
            except BlockingIOError:
                break  # the end of the buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the buffer wrapped under us: read on from the oldest kept
                    continue
                return KernelXids((), unreadable=f"{path}: {exc.strerror or exc}")
            if not chunk:
                break
            # /dev/kmsg hands one record per read; a saved copy of it (a file) comes in blocks of lines
            records += chunk.decode("utf-8", "replace").splitlines()
    finally:
        os.close(fd)
    return parse_kmsg(records, boot_at, since)
