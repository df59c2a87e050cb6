"""Another local user, for the self-tests of what a run as root must not let them do (issue 24).

CI runs the self-tests as root; there the tests that need another user always run (setpriv takes
any uid, with or without a passwd entry, so `nobody` need not exist). Elsewhere they skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from e2e import pythonpath
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


def python_env() -> dict:
    """Environment for this checkout's Python as another user: the package importable, no bytecode
    written into a checkout that user cannot write anyway."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",)}
    env.update(PYTHONPATH=pythonpath(), PYTHONDONTWRITEBYTECODE="1", HOME="/")
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
