"""Compiled bytecode for the workers where the node's Python cannot keep its own.

Every measurement runs in fresh worker processes, and each one imports torch (and for the
strategies torch._dynamo, FSDP, DeepSpeed, Accelerate, transformers). Python normally keeps the
compiled bytecode (.pyc) beside the sources. Where it cannot, every process compiles those
packages from source again:
- images that set PYTHONDONTWRITEBYTECODE=1 and ship without .pyc: the lent 2x H200 machines
  (torch's 2141 modules, not one .pyc): `import torch` took 3.1-3.5 s and torch + dynamo +
  FSDP + transformers 8.5-10.3 s in every process, and compiling was 2.8 s of FSDP's and 4.9 s
  of ZeRO-3's set-up (cProfile, 2026-12-01);
- environments whose site-packages are read-only for the user (a shared conda or module tree).

The remedy leaves the environment as it is: bytecode goes to a cache of wirecheck's own,
compiled once by `prepare` (an explicit compile, as pip does at install) and read by the
workers through PYTHONPYCACHEPREFIX. Python checks each cached file against its source's
mtime and size, so an upgraded package is never run from stale bytecode. A prefix the user set
is theirs: nothing here changes it.

    python -m wirecheck.workers.bytecode      # what install.sh runs; prints what it did
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"
CACHE_ENV = "WIRECHECK_PYCACHE"  # where the cache lives (default ~/.cache/wirecheck/pycache); "off": no cache
# What the workers import, eagerly or later in a run: the warm-up imports them so that the
# packages they live in are found and compiled whole (lazy imports included).
WORKER_IMPORTS = (
    "torch", "torch.distributed", "torch._dynamo", "torch.distributed.fsdp", "torch.distributed.tensor",
    "torch.profiler", "accelerate", "deepspeed", "wirecheck.workers.worker", "wirecheck.training.runner",
)
PROBE_PACKAGE = "torch"  # the package whose bytecode says whether workers compile from source


def cache_dir(env=None) -> Path:
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "wirecheck" / "pycache"


def needs_cache(package: str = PROBE_PACKAGE, env=None) -> str | None:
    """Why workers would compile `package` from source in every process, or None when they
    would not (its .pyc is there, Python can write it, or the user set a prefix of their own)."""
    env = os.environ if env is None else env
    if env.get(PREFIX_ENV) or env.get(CACHE_ENV) == "off":
        return None
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    source = Path(spec.origin)
    compiled = Path(importlib.util.cache_from_source(str(source)))
    if sys.pycache_prefix:  # this process has a prefix the environment did not give the workers
        compiled = source.parent / "__pycache__" / compiled.name
    if compiled.exists():
        return None
    if env.get("PYTHONDONTWRITEBYTECODE"):
        return f"{package} has no .pyc and PYTHONDONTWRITEBYTECODE is set"
    if not os.access(source.parent, os.W_OK):
        return f"{package} has no .pyc and {source.parent} is read-only"
    return None


@dataclass(frozen=True)
class Prepared:
    cache: Path
    reason: str  # why the cache is needed
    compiled: bool  # False: the cache was already up to date
    seconds: float
    packages: tuple[str, ...]
    problem: str | None = None  # set when the cache could not be built (workers compile as before)

    def describe(self) -> str:
        if self.problem:
            return f"bytecode cache not built ({self.reason}): {self.problem}; workers compile from source"
        did = f"compiled {len(self.packages)} packages in {self.seconds:.0f} s" if self.compiled else "up to date"
        return f"bytecode cache {self.cache}: {did} ({self.reason}; workers read it through {PREFIX_ENV})"


def _marker_path(cache: Path) -> Path:
    """One marker per interpreter: a layered venv and the environment under it share the cache
    (bytecode is filed by source path and Python version) but each has its own packages."""
    return cache / f"ready-{hashlib.sha1(sys.executable.encode()).hexdigest()[:12]}.json"


def _marker(cache: Path) -> dict | None:
    try:
        return json.loads(_marker_path(cache).read_text())
    except (OSError, ValueError):
        return None


def _roots_unchanged(marker: dict) -> bool:
    """The packages compiled last time are still the same directories (an upgrade replaces files
    and so changes the directory's mtime)."""
    try:
        return all(os.stat(root).st_mtime_ns == mtime for root, mtime in marker["roots"].items())
    except (OSError, KeyError, AttributeError):
        return False


def ready(env=None, package: str = PROBE_PACKAGE) -> Path | None:
    """The cache the workers should read, or None (not needed, or not built for this Python)."""
    env = os.environ if env is None else env
    if needs_cache(package, env) is None:
        return None
    cache = cache_dir(env)
    marker = _marker(cache)
    if marker is None or marker.get("python") != sys.executable:
        return None
    return cache


def worker_env(env: dict, package: str = PROBE_PACKAGE) -> dict:
    """`env` with the cache prefix added where the workers need it and it is built."""
    cache = ready(env, package)
    return env if cache is None else {**env, PREFIX_ENV: str(cache)}


# Runs in a child process whose Python writes bytecode into the cache: it imports what the workers
# import, then compiles every package (outside the standard library) that those imports loaded.
_WARM = r"""
import compileall, importlib, json, os, sys, sysconfig
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:  # an optional package (DeepSpeed) may be missing: compile what is there
        pass
stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
roots = set()
for module_name, module in list(sys.modules.items()):
    top = sys.modules.get(module_name.partition(".")[0])
    path = next(iter(getattr(top, "__path__", None) or [getattr(top, "__file__", None)]), None) if top else None
    if path and os.path.exists(path) and not os.path.realpath(path).startswith(stdlib):
        roots.add(os.path.realpath(path))
for root in sorted(roots):
    if os.path.isdir(root):
        compileall.compile_dir(root, quiet=2, workers=0)
    elif root.endswith(".py"):
        compileall.compile_file(root, quiet=2)
print(json.dumps({"roots": {r: os.stat(r).st_mtime_ns for r in sorted(roots)}}))
"""


def prepare(env=None, imports=WORKER_IMPORTS, package: str = PROBE_PACKAGE, timeout_s: float = 900.0) -> Prepared | None:
    """Build (or confirm) the cache where workers need one; None where they do not.

    Never raises for a cache that cannot be built: the workers then compile as they always did,
    and the returned `problem` says why.
    """
    env = dict(os.environ if env is None else env)
    reason = needs_cache(package, env)
    if reason is None:
        return None
    cache = cache_dir(env)
    start = time.monotonic()
    marker = _marker(cache)
    if marker and marker.get("python") == sys.executable and _roots_unchanged(marker):
        return Prepared(cache, reason, False, 0.0, tuple(marker["roots"]))
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return Prepared(cache, reason, False, 0.0, (), f"cannot create {cache} ({exc}); set {CACHE_ENV} to a writable folder")
    child = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}  # this child only: it writes the cache
    child[PREFIX_ENV] = str(cache)
    child["CUDA_VISIBLE_DEVICES"] = ""  # importing must not touch a GPU another run may hold
    try:
        done = subprocess.run([sys.executable, "-c", _WARM, *imports], env=child, capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Prepared(cache, reason, False, time.monotonic() - start, (), f"compiling took over {timeout_s:.0f} s")
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip()[-400:]
        return Prepared(cache, reason, False, time.monotonic() - start, (), f"the compile step failed (exit {done.returncode}): {tail}")
    _marker_path(cache).write_text(json.dumps({"python": sys.executable, "roots": result["roots"]}, indent=1))
    return Prepared(cache, reason, True, time.monotonic() - start, tuple(result["roots"]))


def main() -> int:
    """Silent where nothing is needed; says what it did, or why it could not, otherwise."""
    prepared = prepare()
    if prepared is not None:
        print(f"wirecheck: {prepared.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
