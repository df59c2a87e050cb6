"""The run's record file: JSON lines, written and flushed the moment each thing exists.

A crash, a hung rank or Ctrl-C loses nothing already measured. Line types:
- `run`: the first line: host, node, versions, simulation, thresholds file, placements;
- `measurement`: raw figures as the workers reported them (a collective size, a strategy run);
- `verdict`: one checked thing (wirecheck.core.verdict.Verdict, with the inputs it was judged on);
- `end`: the last line: complete or interrupted, test and verdict counts, wall time.
A file without an `end` line was cut short (killed, out of disk): readers say so.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import wirecheck
from wirecheck.core import harness, jsondata
from wirecheck.core.safefs import UnsafePath, create_new, make_dirs, open_append
from wirecheck.core.verdict import Verdict

SCHEMA = 2

# Environment switches that change what NCCL does; recorded with every run.
ENV_SWITCHES = (
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_IB_DISABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_NET_GDR_LEVEL",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
    "CUDA_VISIBLE_DEVICES",
)


def env_switches(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The NCCL-relevant environment as a worker of a placement sees it."""
    env = {k: os.environ[k] for k in ENV_SWITCHES if k in os.environ}
    env.update(extra or {})
    return env


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Measurement:
    """Raw figures of one measurement (not a verdict): what, where, the value and everything behind it."""

    kind: str  # "collective", "strategy", ...
    placement: str | None
    what: str  # e.g. "all_reduce at 1 GiB"
    value: Any = None
    unit: str | None = None
    details: dict = field(default_factory=dict)
    time: str = field(default_factory=now)


class RecordFileError(ValueError):
    """A record file that cannot be written or read. `taken`: a new file's name was already there;
    `other_schema`: a record of another schema than this wirecheck reads (not a damaged one); `lost`: a
    record file whose content the disk lost (zeros from its first byte), a record all the same."""

    def __init__(self, message: str, taken: bool = False, other_schema: bool = False, lost: bool = False):
        super().__init__(message)
        self.taken = taken
        self.other_schema = other_schema
        self.lost = lost


def default_name(prefix: str = "results", n: int = 1) -> str:
    """`results-<UTC stamp>-<host>-<pid>.jsonl` (`-<n>` before .jsonl from the second on): unique per
    host and process, so two runs started in the same second (on one node, or on nodes sharing a
    folder) never share a record file."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    host = re.sub(r"[^A-Za-z0-9_.-]+", "_", platform.node().split(".")[0] or "host")[:60]
    return f"{prefix}-{stamp}-{host}-{os.getpid()}{'' if n == 1 else f'-{n}'}.jsonl"


class RecordFile:
    """Append-only JSON-lines file: one `run` line, then measurements and verdicts, then `end`.

    `new=True` (a name the run chose itself): the file is created here, exclusively (O_EXCL): a
    file or a link already at the name is refused, never appended to or followed. Otherwise (a
    path the user named: runs may append to it), an existing file is appended to, but never
    through a symbolic link, and only when it is a plain file with one name (safefs.open_append).
    The folders are made with the user's umask; as root, only where no other user can redirect
    them (safefs.make_dirs)."""

    def __init__(self, path: str | Path, *, new: bool = False):
        self.path = Path(path)
        what = "the record file"
        fix = ("pass --wirecheck-json with a path in a folder only root can write (e.g. /var/lib/wirecheck/), or "
               "make that folder root's and not writable by others")
        self.made_folders = _missing_folders(self.path.parent)  # deepest first: discard() removes them again
        try:
            make_dirs(self.path.parent, what=f"{what}'s folder", fix=fix)
        except UnsafePath as exc:
            raise RecordFileError(str(exc)) from None
        except OSError as exc:
            if harness.is_io_fault(exc):  # the disk's fault, not a mistyped path
                raise harness.from_os_error(exc, "the record file's folder", self.path.parent) from None
            raise RecordFileError(f"cannot write the record file {self.path}: cannot make its folder "
                                  f"{self.path.parent} ({exc.strerror or exc})") from None
        try:
            if new:
                try:
                    fd = create_new(self.path, what=what, fix="pass a new path")
                except UnsafePath as exc:
                    raise RecordFileError(str(exc), taken=True) from None
                self.created = True
            else:
                self.created = not os.path.lexists(self.path)
                fd = open_append(self.path, what=what)
            self._fh = os.fdopen(fd, "a", encoding="utf-8")
        except UnsafePath as exc:
            raise RecordFileError(str(exc)) from None
        except OSError as exc:
            if harness.is_io_fault(exc):
                raise harness.from_os_error(exc, "the record file", self.path) from None
            what_failed = "a directory" if os.path.isdir(self.path) else exc.strerror or exc
            raise RecordFileError(f"cannot write the record file {self.path}: {what_failed}") from None
        # Where this run's lines start: a run that measured nothing takes them back (discard).
        self.start_size = os.fstat(self._fh.fileno()).st_size
        self.size = self.start_size  # the end of the last whole line this run wrote
        if self.start_size and not self._ends_a_line():
            # An earlier run was cut mid-line (killed, power lost): this run starts on a line of its own, so the
            # cut line stays one torn line that ends that run, never joined to this run's header.
            self.write_raw(b"\n")
            self.start_size = self.size

    @classmethod
    def fresh(cls, folder: str | Path, prefix: str = "results") -> RecordFile:
        """A new record file named by the run (default_name) in `folder`. Where that name is taken (a
        second record of this process in the same second, or anything planted at a name another
        user guessed), the next one: each is made exclusively, so nothing there is ever written."""
        for n in range(1, 101):
            try:
                return cls(Path(folder) / default_name(prefix, n), new=True)
            except RecordFileError as exc:
                if not exc.taken:
                    raise
        raise RecordFileError(f"cannot make a new record file in {folder}: 100 names taken; pass --wirecheck-json PATH")

    def write(self, obj: dict) -> None:
        """One line, on the disk before this returns. HarnessFault when it cannot be: the disk full, read-only
        or failing, or the file no longer at its path (removed with its folder mid-run). A line cut by the
        fault is taken back, so the file still ends on a whole line (a reader sees every line before it).

        Written with os.write, not through a buffer: a buffer that failed to flush would try again (and
        raise again) at close, and could put half a line before the next one."""
        data = (json.dumps(obj, default=_jsonable) + "\n").encode("utf-8")
        fd = self._fh.fileno()
        try:
            self._still_there(fd)
            self._put(fd, data)
        except harness.HarnessFault:
            raise
        except OSError as exc:
            self._take_back_torn(fd)
            raise harness.from_os_error(exc, "the record file", self.path) from None
        self.size += len(data)

    def _ends_a_line(self) -> bool:
        """Whether the file before this run ends on a newline: read through this very descriptor's file (it was
        opened write-only, never through a link: safefs.open_append), not through the path again."""
        try:
            with open(f"/proc/self/fd/{self._fh.fileno()}", "rb") as same:
                return os.pread(same.fileno(), 1, self.start_size - 1) == b"\n"
        except OSError:
            return True  # no /proc: as before, this run's lines follow whatever is there

    def write_raw(self, data: bytes) -> None:
        fd = self._fh.fileno()
        try:
            self._put(fd, data)
        except OSError as exc:
            raise harness.from_os_error(exc, "the record file", self.path) from None
        self.size += len(data)

    @staticmethod
    def _put(fd: int, data: bytes) -> None:
        """All of `data` on the disk (os.write may take part of it)."""
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)

    def _still_there(self, fd: int) -> None:
        """The path still leads to this file: a record whose folder was removed would otherwise take every
        later line into a file no one can open again."""
        try:
            there = os.stat(self.path)
        except OSError:
            raise harness.removed("the record file", self.path) from None
        if not os.path.samestat(there, os.fstat(fd)):
            raise harness.removed("the record file", self.path)

    def _take_back_torn(self, fd: int) -> None:
        try:
            if os.fstat(fd).st_size > self.size:
                os.ftruncate(fd, self.size)
            os.lseek(fd, self.size, os.SEEK_SET)  # where the descriptor does not append
        except OSError:
            pass  # the disk refuses even that: a reader drops a torn last line

    def header(self, provenance: dict) -> None:
        # Every record says which wirecheck wrote it (a suite run's header adds its code digest beside it).
        versions = {"wirecheck": wirecheck.__version__, **(provenance.get("versions") or {})}
        self.write({"type": "run", "schema": SCHEMA, "host": platform.node(), "started": now(), **provenance,
                    "versions": versions})

    def measurement(self, m: Measurement) -> None:
        self.write({"type": "measurement", **asdict(m)})

    def verdict(self, v: Verdict, test: str | None = None) -> None:
        self.write({"type": "verdict", "test": test, "time": now(), **v.as_record()})

    def end(self, summary: dict) -> None:
        self.write({"type": "end", "finished": now(), **summary})

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def discard(self) -> None:
        """Take back what this run wrote: the file itself where the run made it (a run that measured
        nothing leaves no file behind), else the lines it appended. A file another process put at
        the name since is left alone."""
        if self._fh.closed:
            return
        fd = self._fh.fileno()
        try:
            if self.created:
                try:
                    if os.path.samestat(os.fstat(fd), os.lstat(self.path)):
                        os.unlink(self.path)
                except FileNotFoundError:
                    pass
            else:
                os.ftruncate(fd, self.start_size)
        finally:
            self._fh.close()
        for folder in self.made_folders:
            try:
                os.rmdir(folder)  # only while empty
            except OSError:
                break


def _missing_folders(folder: Path) -> list[Path]:
    missing = []
    folder = Path(os.path.abspath(folder))
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


@dataclass
class RunRecord:
    """A record file read back."""

    path: Path
    run: dict
    measurements: list[dict]
    verdicts: list[dict]
    end: dict | None  # None: the run was cut short before it could write its end
    earlier_runs: int = 0  # runs before this one in the same file (runs append)
    torn_line: int | None = None  # the number of a torn last line that was dropped (killed mid-write)
    skipped: dict[str, int] = field(default_factory=dict)  # read_run's `skip`: this run's lines not parsed, by tag
    damaged: tuple["DamagedLine", ...] = ()  # lines that cannot be read (not UTF-8, not JSON): skipped, their content lost

    def damage(self) -> str | None:
        """The record's damage in one sentence (file, line, byte), or None when every line could be read."""
        if not self.damaged:
            return None
        shown = "; ".join(d.describe() for d in self.damaged[:3]) + ("; ..." if len(self.damaged) > 3 else "")
        return (f"{self.path}: {len(self.damaged)} line(s) unreadable ({shown}), skipped: what they held (a "
                "verdict, a measurement) is lost")

    @property
    def simulated(self) -> bool:
        return bool(self.run.get("simulated"))

    @property
    def complete(self) -> bool:
        return self.end is not None and self.end.get("status") == "complete"


@dataclass(frozen=True)
class DamagedLine:
    """A line of a record that cannot be read: one that does not decode as UTF-8 (a bad byte on the disk or in a
    copy), or one inside a run that is not JSON (a block of NUL bytes a crash left, a line cut in the middle)."""

    line: int  # 1-based
    byte: int  # the first bad byte's offset in the file (the line's start, for a line that is not JSON)
    column: int  # ... and in its line, from 0
    reason: str = "not UTF-8 text"

    def describe(self) -> str:
        return f"line {self.line}, byte {self.byte}: {self.reason}"


# How every run header line begins (json.dumps of a dict whose first key is "type"): read_run's `skip`
# never sees one, so that a reader that skips lines still finds every run of the file.
_RUN_PREFIX = '{"type": "run"'


def starts_a_run(path: Path) -> bool:
    """Whether the file's first line is a run header: a record file, however damaged its other lines (only the
    first line is read). Its keys in another order (a record passed through jq) are a header too."""
    try:
        with open(path, "rb") as fh:
            line = fh.readline(1 << 22)  # a header with its thresholds' bytes is ~30 kB
    except OSError:
        return False
    if line.startswith(_RUN_PREFIX.encode()):
        return True
    try:
        obj = json.loads(line)
    except ValueError:  # not UTF-8 or not JSON (an HTML page): no record
        return False
    return isinstance(obj, dict) and obj.get("type") == "run"


def _record_line(line: str, guarded: bool = True) -> dict:
    """One line of a record file as data: JSONDecodeError for a line that is not JSON (a torn last
    line), ValueError for JSON that is no record line (jsondata's limits, or not an object).
    `guarded=False`: the file holds no integer too long (jsondata.no_long_digits)."""
    obj = jsondata.loads(line, guarded)
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON {type(obj).__name__}, where each line is an object with a `type`")
    return obj


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file: a FIFO or a device planted among the records (a results folder
    is shared) is refused instead of hanging the reader or reading forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordFileError(f"{path}: not a regular file: not a wirecheck record file")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)


def read_run(path: str | Path, lines_of: Callable[[dict], Callable[[str], str | None] | None] | None = None) -> RunRecord:
    """Read the last run of a record file.

    Runs append (a second nightly run of a day into the same file keeps the first): the file is
    read as runs, each from its `run` header on, and the last one is returned with the number of
    earlier ones. A torn line (killed mid-write) is dropped where it ends a run, and its number kept
    (`torn_line`) where it ends the file, so that readers say what they skipped. A line inside a run that
    is not JSON (NUL bytes a crash left, a line cut mid-file) or not UTF-8 text is damage: named in
    `damaged` and skipped, so one bad line costs that line, never the record. A file whose first line is
    no run header, or a line that is JSON but no record line, raises RecordFileError naming the file and line.

    `lines_of(header)`, for a reader that needs only some lines of a run (a fleet report reads
    thousands of records): given each run header, a `skip(line)` for the lines of that run, or None
    to parse them all. `skip` gives a tag for a line the reader need not have parsed (counted by tag in
    the run's `skipped`, never parsed), or None to parse it. It never sees a run header nor the last
    line (a torn last line is dropped, never counted); a skipped line after a torn one is refused as a
    full read takes it."""
    path = Path(path)
    try:
        data = _read_regular(path)
    except OSError as exc:
        raise RecordFileError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if data[:1] == b"\x00":  # a crash before the file's blocks were written back: the disk kept zeros
        raise RecordFileError(f"{path}: NUL bytes from its first byte: the disk lost this record (a crash before it "
                              "was written back); nothing in it can be read", lost=True)
    guarded = not jsondata.no_long_digits(data)  # a fleet report reads thousands: integers parsed in C
    lines, damaged = _decoded_lines(data)
    if damaged and damaged[0].line == 1:
        raise RecordFileError(f"{path}:1: the run header is not UTF-8 text (line 1, byte {damaged[0].byte}): not a "
                              "wirecheck record file, or one whose header is damaged")
    objs, torn, skip = [], None, None
    skipped: list[tuple[int, str]] = []  # (how many lines were parsed before it, its tag)
    last = next((i for i in range(len(lines), 0, -1) if lines[i - 1].strip()), 0)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        tag = skip(line) if skip is not None and number != last and not line.startswith(_RUN_PREFIX) else None
        if tag is not None:
            if torn is not None:  # a run's line after it: it ended no run
                damaged.append(_not_json(data, torn))
                torn = None
            skipped.append((len(objs), tag))
            continue
        try:
            obj = _record_line(line, guarded)
        except json.JSONDecodeError as exc:
            torn = (number, exc.msg)
            continue
        except ValueError as exc:  # records come from other nodes: data, never a traceback
            raise RecordFileError(f"{path}:{number}: {exc}; not a wirecheck record file") from None
        if torn is not None and obj.get("type") != "run":
            if not objs:  # before any run header: no record file, or one whose header is lost
                raise RecordFileError(f"{path}:{torn[0]}: not JSON ({torn[1]}); is this a wirecheck record file?")
            damaged.append(_not_json(data, torn))
        torn = None
        objs.append(obj)
        if lines_of is not None and obj.get("type") == "run":
            skip = lines_of(obj)
    if not objs or objs[0].get("type") != "run":
        raise RecordFileError(f"{path}: no `run` header on the first line: not a wirecheck record file "
                              "(pytest --wirecheck-json writes them)")
    starts = [i for i, obj in enumerate(objs) if obj.get("type") == "run"]
    run = objs[starts[-1]]
    if run.get("schema") != SCHEMA:
        raise RecordFileError(f"{path}: record schema {run.get('schema')!r}; this wirecheck reads schema {SCHEMA}",
                              other_schema=True)
    by_type: dict[str, list[dict]] = {"measurement": [], "verdict": [], "end": []}
    for obj in objs[starts[-1] + 1:]:
        by_type.setdefault(obj.get("type"), []).append(obj)
    ends = by_type["end"]
    counted: dict[str, int] = {}
    for parsed_before, tag in skipped:
        if parsed_before > starts[-1]:  # after the last run's header
            counted[tag] = counted.get(tag, 0) + 1
    return RunRecord(path, run, by_type["measurement"], by_type["verdict"], ends[-1] if ends else None,
                     earlier_runs=len(starts) - 1, torn_line=torn[0] if torn else None, skipped=counted,
                     damaged=tuple(sorted(damaged, key=lambda d: d.line)))


def _not_json(data: bytes, torn: tuple[int, str]) -> DamagedLine:
    """A line inside a run that is not JSON, as damage: where it starts in the file (counted only here, for the
    rare damaged file), and why."""
    number, why = torn
    start = sum(len(raw) + 1 for raw in data.split(b"\n", number - 1)[:number - 1])
    return DamagedLine(number, start, 0, f"not JSON ({why})")


def _decoded_lines(data: bytes) -> tuple[list[str], list[DamagedLine]]:
    """The file's lines as text, one at a time: a line that is not UTF-8 becomes an empty line (skipped as
    blank ones are, its number kept for the others) and is named, so one bad byte costs its line, never the
    record. Where the whole file decodes (every record but a damaged one) it is decoded at once."""
    try:
        return data.decode("utf-8").splitlines(), []
    except UnicodeDecodeError:
        pass
    lines, damaged, offset = [], [], 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            lines.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            damaged.append(DamagedLine(number, offset + exc.start, exc.start))
            lines.append("")
        offset += len(raw) + 1
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line, as splitlines() reads it
    return lines, damaged


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return repr(obj)
