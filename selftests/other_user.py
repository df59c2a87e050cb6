"""Another local user, for the self-tests of what a run as root must not let them do (docs/running-as-root.md).

CI runs the self-tests as root; there the tests that need another user always run (setpriv takes
any uid, with or without a passwd entry, so `nobody` need not exist). Elsewhere they skip.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from e2e import PROJECT, pythonpath
from wirecheck.core.safefs import user_name

NOBODY = 65534
OTHER = 12345  # a second unprivileged user, with no passwd entry


def need_root() -> None:
    """Skip where the tests cannot act as root and as another user; never skip as root."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the planted files are made as another user (CI runs the self-tests as root)")
    if shutil.which("setpriv") is None:
        pytest.fail("running as root, but setpriv (util-linux) is missing: the tests that plant files as another "
                    "user cannot run (Debian: apt-get install util-linux)")


def name(uid: int) -> str:
    return user_name(uid)


def as_user(uid: int, argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


def run_as(uid: int, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(as_user(uid, argv), capture_output=True, text=True, timeout=60, **kwargs)


def _others_can_enter(path: Path) -> bool:
    """Whether a user who is neither owner nor in the group can reach `path` (every folder on the way
    has the others' search bit)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


@functools.lru_cache(maxsize=None)
def _readable_package() -> str | None:
    """A copy of the package another user can read, when this checkout is out of their reach (a fresh
    clone in `mktemp -d`, mode 0700, is one): made once under /tmp, 0755 folders and 0644 files, removed
    at exit. None when the checkout itself is reachable."""
    src = PROJECT / "src"
    if _others_can_enter(src):
        return None
    copy = Path(tempfile.mkdtemp(prefix="wirecheck-selftest-src-", dir="/tmp"))
    atexit.register(shutil.rmtree, copy, True)
    shutil.copytree(src / "wirecheck", copy / "wirecheck", ignore=shutil.ignore_patterns("__pycache__"))
    for folder, _dirs, files in os.walk(copy):
        os.chmod(folder, 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)
    return str(copy)


def python_env() -> dict:
    """Environment for this checkout's Python as another user: the package importable (from a copy they
    can read when the checkout is out of their reach), no bytecode written into a checkout that user
    cannot write anyway."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",)}
    paths = [p for p in (_readable_package(), pythonpath()) if p]
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1", HOME="/")
    return env


def python_as(uid: int, code: str, *args: str, **kwargs) -> subprocess.Popen:
    """`python -c code args` as `uid`, stdout piped (the caller waits for its first line)."""
    return subprocess.Popen(as_user(uid, [sys.executable, "-c", code, *args]), env=python_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", **kwargs)


def sticky_dir() -> Path:
    """A fresh /tmp-like directory (1777): every user can plant in it, none can touch another's entries."""
    path = Path(tempfile.mkdtemp(prefix="wirecheck-selftest-", dir="/tmp"))
    os.chmod(path, 0o1777)
    return path
