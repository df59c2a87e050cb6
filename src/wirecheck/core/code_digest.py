"""Which wirecheck judged a record: its version and a sha256 of its own source.

A run's header keeps both (`versions.wirecheck`, `versions.wirecheck_code`). A fleet report that finds
a node's record judged by the very same code under the very same thresholds takes its verdicts as
recorded instead of judging each again: the check functions are pure functions of (thresholds,
inputs), so judging them again could only give the same verdicts. The version alone would not do:
it stays 0.1.0 across every change of a checkout, so the digest covers every module of the package
(any edit, of a check, of the words or of how thresholds are read, is another digest).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import wirecheck


@functools.lru_cache(maxsize=None)
def code_digest() -> str:
    """sha256 over the package's .py files (relative path and bytes, in path order); read once per process,
    about 200 files and 2 MB: a few milliseconds."""
    root = Path(wirecheck.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def versions() -> dict[str, str]:
    """What a run header records of wirecheck itself."""
    return {"wirecheck": wirecheck.__version__, "wirecheck_code": code_digest()}
