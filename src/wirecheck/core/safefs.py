"""Files a run writes and reads back to execute, made so another local user cannot steer them.

Acceptance runs as root (a Slurm prolog, HealthCheckProgram, a provisioning pipeline). Anything root
opens by a name in a directory another user can write is that user's to redirect: a symbolic link
planted at the name turns "create my record" into "truncate /etc/shadow", and bytecode or modules
another user can write are code root runs. So, as ssh treats its keys:

- `path_problem`: a path can only lead where its owner wants when it and every directory above it
  belong to this user or root and no one else can write them (a sticky world-writable directory such
  as /tmp is allowed above the path, and where the caller says so as the path itself: in a sticky
  directory no one can rename or remove what another user made);
- `make_dirs`: directories made with the user's umask (never widened); as root, refused where
  another user could redirect them;
- `create_new` / `open_append`: files opened never through a symbolic link, a new file only where
  nothing is there yet (O_EXCL), an existing one only when it is a plain file with one name;
- `write_atomically`: whole files (reports) written beside the target and renamed over it, which
  replaces a planted link instead of following it.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
import tempfile
from pathlib import Path

# A file in an untrusted place never gets these, and a trusted one never has them.
GROUP_OTHER_WRITE = stat.S_IWGRP | stat.S_IWOTH


class UnsafePath(ValueError):
    """A path another user could redirect or write; the message names it, its owner and the fix."""


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def describe(st: os.stat_result) -> str:
    """`owned by nobody (uid 65534), mode 0777`: what a message needs to say about a file."""
    return f"owned by {user_name(st.st_uid)} (uid {st.st_uid}), mode {stat.S_IMODE(st.st_mode):04o}"


def _trusted_owner(st: os.stat_result) -> bool:
    return st.st_uid in (0, os.geteuid())


def _stat_problem(path: str, st: os.stat_result, *, sticky_ok: bool) -> str | None:
    if not _trusted_owner(st):
        return f"{path} is {describe(st)}: another user owns it"
    if stat.S_IMODE(st.st_mode) & GROUP_OTHER_WRITE:
        sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
        if not (sticky_ok and sticky_dir):
            return f"{path} is {describe(st)}: writable by {_who_writes(st)}"
    return None


def _who_writes(st: os.stat_result) -> str:
    mode = stat.S_IMODE(st.st_mode)
    if mode & stat.S_IWOTH:
        return "every user"
    try:
        import grp

        return f"group {grp.getgrgid(st.st_gid).gr_name}"
    except (ImportError, KeyError):
        return f"group {st.st_gid}"


def path_problem(path: str | os.PathLike, *, sticky_ok_here: bool = False) -> str | None:
    """Why another user (not this one, not root) could change what `path` is or holds; None when
    no one could. Every directory the path passes through (following its symbolic links, each of
    which must itself belong to this user or root) and the path itself are checked: owner, and not
    writable by group or others. A sticky directory (/tmp) is allowed above the path, and as the
    path itself where `sticky_ok_here`. A path that does not exist yet is checked as far as it does
    (the rest would be made by this user)."""
    path = os.path.abspath(os.fspath(path))
    parts = [p for p in path.split(os.sep) if p]
    prefix = os.sep
    for i, name in enumerate(parts + [""]):
        here = name == ""
        real = os.path.realpath(prefix)
        try:
            st = os.stat(real)
        except OSError as exc:
            return f"{real}: cannot check it ({exc.strerror or exc})"
        problem = _stat_problem(real, st, sticky_ok=(not here) or sticky_ok_here)
        if problem:
            return problem
        if here:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None  # nothing can be below a file: using the path fails, with its own error
        step = os.path.join(prefix, name)
        try:
            lst = os.lstat(step)
        except FileNotFoundError:
            return None  # from here on nothing exists: this user will make it
        except OSError as exc:
            return f"{step}: cannot check it ({exc.strerror or exc})"
        if stat.S_ISLNK(lst.st_mode) and not _trusted_owner(lst):
            return f"{step} is a symbolic link {describe(lst)}: another user chose where it leads"
        prefix = step
    return None


def umask() -> int:
    """This process's umask, without changing it (Linux 4.7+ shows it in /proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def is_root() -> bool:
    return os.geteuid() == 0


def make_dirs(path: str | os.PathLike, *, what: str, fix: str) -> Path:
    """`os.makedirs(path, exist_ok=True)` with the user's umask. As root, the directory must then be
    one that no other user can redirect (`path_problem`, a sticky directory allowed as itself):
    raises UnsafePath naming `what`, the path, the owner and `fix`. OSError passes through."""
    path = Path(path)
    root = is_root()
    if root:  # checked before anything is made (as far as the path exists), and again after
        _refuse_for_root(path, what, fix)
    os.makedirs(path, exist_ok=True)
    if root:
        _refuse_for_root(path, what, fix)
    return path


def _refuse_for_root(path: Path, what: str, fix: str) -> None:
    problem = path_problem(path, sticky_ok_here=True)
    if problem:
        raise UnsafePath(f"{what} {path}: running as root, and {problem}, who could redirect what root writes "
                         f"there; {fix}")


def _link_text(path: Path) -> str:
    try:
        target = os.readlink(path)
        owner = user_name(os.lstat(path).st_uid)
    except OSError:
        return "a symbolic link"
    return f"a symbolic link to {target}, made by {owner}"


def create_new(path: str | os.PathLike, mode: int = 0o666, *, what: str, fix: str) -> int:
    """A new file, opened for writing: O_CREAT|O_EXCL|O_NOFOLLOW (mode & ~umask). Something already
    at `path` (a file, a planted link) raises UnsafePath with `fix`; other errors are OSError."""
    path = Path(path)
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        # EEXIST; some kernels answer EACCES for another user's link in a sticky directory.
        if not (isinstance(exc, FileExistsError) or os.path.lexists(path)):
            raise
        kind = _link_text(path) if os.path.islink(path) else "already there"
        raise UnsafePath(f"{what} {path}: {kind}; a new file is never written over or through what is there; "
                         f"{fix}") from None


def open_append(path: str | os.PathLike, mode: int = 0o666, *, what: str) -> int:
    """A file to append to, made when missing: never through a symbolic link, only a plain file
    with one name (a hard link planted at the name would be another file's second name), and as
    root only root's own (a file another user owns would be theirs to rewrite). UnsafePath when not."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        # ELOOP; some kernels answer EACCES for another user's link in a sticky directory.
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise UnsafePath(f"{what} {path}: {_link_text(path)}; wirecheck never writes through a link (one "
                             "planted there would point this run at another file); pass the real path") from None
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads: O_NONBLOCK keeps the open from hanging
            raise UnsafePath(f"{what} {path}: not a regular file (a FIFO); pass the path of a file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{what} {path}: not a regular file; pass the path of a file")
        if st.st_nlink != 1:
            raise UnsafePath(f"{what} {path}: the file has {st.st_nlink} names (hard links), so it may be another "
                             "file's too; pass a new path")
        if is_root() and st.st_uid != 0:
            raise UnsafePath(f"{what} {path}: running as root, and the file is {describe(st)}, who could rewrite "
                             "what root records there; pass a new path (root makes it)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomically(path: str | os.PathLike, text: str, mode: int = 0o644) -> None:
    """Write `text` to a new temporary file beside `path`, then rename it over `path` (atomic on
    POSIX): a reader never sees half a file, and a symbolic link planted at `path` is replaced, never
    followed. `mode` is set on the descriptor (mkstemp's 0600 would hide a report from a collector
    running as another user), so no name is chmod-ed. Raises OSError with the path in it."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent if str(target.parent) else ".")
    except OSError as exc:  # the folder refuses a new file: say so of the file asked for, not of a temporary name
        raise OSError(exc.errno, f"cannot make a file in {target.parent} ({exc.strerror})", str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        try:
            os.replace(tmp, target)
        except OSError as exc:  # a directory at the name, say: of the file asked for, not of the temporary one
            raise OSError(exc.errno, exc.strerror, str(target)) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def tree_problem(root: str | os.PathLike) -> str | None:
    """Why some entry under the directory `root` could hold what another user wrote: a symbolic
    link, or an entry not owned by this user or root, or writable by group or others. None when
    every entry is clean."""
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            entry = os.path.join(top, name)
            try:
                st = os.lstat(entry)
            except FileNotFoundError:
                continue
            except OSError as exc:
                return f"{entry}: cannot check it ({exc.strerror or exc})"
            if stat.S_ISLNK(st.st_mode):
                return f"{entry} is a symbolic link {describe(st)}"
            problem = _stat_problem(entry, st, sticky_ok=False)
            if problem:
                return problem
    return None
