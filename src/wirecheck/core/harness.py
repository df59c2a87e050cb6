"""A fault of the harness, never a verdict on the node: wirecheck could not write its record, a log or a
cache (no space, a read-only filesystem, the folder removed while the run wrote in it, an I/O error).

Such a run ends with exit code exit_codes.HARNESS_FAULT (74), a last line naming the path and the cause,
and what was measured before it kept (in the record while it can still be written, else on the screen).
A scheduler's hook reads that code as "unknown" (`wirecheck node-state`): a full disk must never drain
a healthy node, as a failed check does.

`HarnessFault` carries the path, the cause and the fix as data; `from_os_error` makes one from the
OSError of a write, `is_io_fault` tells an error of the disk under the harness from anything else.
"""

from __future__ import annotations

import errno as _errno
from pathlib import Path

# The errors of a disk or filesystem under what the harness writes; none of them says anything of a GPU.
IO_ERRNOS = {
    _errno.ENOSPC: "ENOSPC",
    _errno.EDQUOT: "EDQUOT",
    _errno.EROFS: "EROFS",
    _errno.EIO: "EIO",
    _errno.EFBIG: "EFBIG",
}
REMOVED = "removed"  # the cause's code for a file or folder taken away while the run wrote it

# Where `wirecheck validate` listens for the fault's line (a pipe it passes to pytest), so that its own
# last line names the path and the cause too.
WRAPPER_FD_ENV = "WIRECHECK_FAULT_FD"


def _fix(code: str, option: str) -> str:
    elsewhere = f"pass {option} PATH on another disk" if option else "write it on another disk"
    return {
        "ENOSPC": f"free space there, or {elsewhere}",
        "EDQUOT": f"free space within the quota there, or {elsewhere}",
        "EFBIG": f"the file is at its size limit (ulimit -f, the filesystem's): {elsewhere}",
        "EROFS": f"the filesystem is read-only (remounted after errors?): {elsewhere}",
        "EIO": f"the disk reports I/O errors (see dmesg): {elsewhere}",
        REMOVED: f"something removed it while the run wrote it (a cleanup job?): keep it out of that job's way, or "
                 f"{elsewhere}",
    }.get(code, elsewhere)


class HarnessFault(OSError):
    """wirecheck could not write `what` at `path`: `cause` (the system's words), `code` (ENOSPC, EROFS, EIO,
    removed, ...), and the fix. An OSError, so that code which handles a failed write as one still does."""

    def __init__(self, what: str, path: str | Path, cause: str, code: str = "", option: str = "--wirecheck-json"):
        self.what, self.path, self.cause, self.code = what, str(path), cause, code
        self.fix = _fix(code, option)
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"cannot write {self.what} {self.path}: {self.cause}"

    def line(self) -> str:
        """The one line that ends the run: what, where, why, and the fix."""
        return f"{self}; {self.fix}"

    def as_dict(self) -> dict:
        return {"what": self.what, "path": self.path, "cause": self.cause, "code": self.code, "fix": self.fix}


def is_io_fault(exc: BaseException) -> bool:
    """An OSError of the disk under a file the harness writes (no space, read-only, I/O error)."""
    return isinstance(exc, OSError) and exc.errno in IO_ERRNOS


def from_os_error(exc: OSError, what: str, path: str | Path | None = None, option: str = "--wirecheck-json") -> HarnessFault:
    """The fault of a write that raised `exc`; the path is the one the error names where none is given."""
    code = IO_ERRNOS.get(exc.errno, _errno.errorcode.get(exc.errno or 0, ""))
    cause = f"{exc.strerror or exc} ({code})" if code else str(exc.strerror or exc)
    return HarnessFault(what, path if path is not None else (exc.filename or "?"), cause, code, option)


def removed(what: str, path: str | Path, option: str = "--wirecheck-json") -> HarnessFault:
    """The fault of a file whose path no longer leads to it: deleted, or its folder removed, mid-run."""
    path = Path(path)
    gone = f"its folder {path.parent} is gone" if not path.parent.exists() else "the file is gone or was replaced"
    return HarnessFault(what, path, f"removed while the run wrote it ({gone})", REMOVED, option)
