"""Compiled bytecode for the workers where the node's Python cannot keep its own.

Every measurement runs in fresh worker processes, and each one imports torch (and for the
strategies torch._dynamo, FSDP, DeepSpeed, Accelerate, transformers). Python normally keeps the
compiled bytecode (.pyc) beside the sources. Where it cannot, every process compiles those
packages from source again:
- images that set PYTHONDONTWRITEBYTECODE=1 and ship without .pyc: the 2x H200 node images the suite was measured on
  (torch's 2141 modules, not one .pyc): `import torch` took 3.1-3.5 s and torch + dynamo +
  FSDP + transformers 8.5-10.3 s in every process, and compiling was 2.8 s of FSDP's and 4.9 s
  of ZeRO-3's set-up (cProfile, 2026-12-01);
- environments whose site-packages are read-only for the user (a shared conda or module tree).

The remedy leaves the environment as it is: bytecode goes to a cache of wirecheck's own,
compiled once by `prepare` (an explicit compile, as pip does at install) and read by the
workers through PYTHONPYCACHEPREFIX. Python checks each cached file against its source's
mtime and size, so an upgraded package is never run from stale bytecode. A prefix the user set
is theirs: nothing here changes it, except that workers never get one that fails the check below.

Bytecode is code: whoever can write the cache chooses what every worker runs, and acceptance runs
as root (a local user must not be able to steer a root run: docs/running-as-root.md). So before the cache is read or built, it is checked as ssh checks its keys
(`cache_problem`): the cache and every directory above it belong to this user or root and no one
else can write them (a sticky /tmp is allowed above it, never as the cache itself), and so does
every file and folder in it, none a symbolic link. A cache that fails is not used; the run says
why in one line (the path, its owner and mode, the fix) and the workers compile from source:
slower, never wrong. The same check applies to a PYTHONPYCACHEPREFIX the user set: one that fails
is left out of the workers' environment, and said.

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

from wirecheck.core.safefs import path_problem, tree_problem, umask, write_atomically

PREFIX_ENV = "PYTHONPYCACHEPREFIX"
CACHE_ENV = "WIRECHECK_PYCACHE"  # where the cache lives (default ~/.cache/wirecheck/pycache); "off": no cache
# What the workers import, eagerly or later in a run: the warm-up imports them so that the
# packages they live in are found and compiled whole (lazy imports included).
WORKER_IMPORTS = (
    "torch", "torch.distributed", "torch._dynamo", "torch.distributed.fsdp", "torch.distributed.tensor",
    "torch.profiler", "accelerate", "deepspeed", "wirecheck.workers.worker", "wirecheck.training.runner",
    "wirecheck.measure.collective_worker",
)
# What the command itself and the pytest process it starts import (`wirecheck validate`, `wirecheck plan`): without
# bytecode they compiled pytest, its plugins and wirecheck from source at every start (a 1x H200 node: `wirecheck
# --help` 0.87-0.95 s, pytest's start and collection 1.1-1.3 s; fixtures/reference/h200-1/start-end-2026-12-04).
SUITE_IMPORTS = ("pytest", "pytest_benchmark.plugin", "pytest_wirecheck.plugin", "yaml", "pynvml", "wirecheck.cli.main")
PROBE_PACKAGE = "torch"  # the package whose bytecode says whether workers compile from source


def cache_dir(env=None) -> Path:
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "wirecheck" / "pycache"


def users_prefix(env) -> str | None:
    """The bytecode prefix the user set in `env`, None where there is none or it is this cache (which wirecheck
    hands on to the processes it starts: the pytest process, and from there the workers)."""
    own = env.get(PREFIX_ENV)
    return own if own and os.path.abspath(own) != os.path.abspath(cache_dir(env)) else None


def needs_cache(package: str = PROBE_PACKAGE, env=None) -> str | None:
    """Why workers would compile `package` from source in every process, or None when they
    would not (its .pyc is there, Python can write it, or the user set a prefix of their own)."""
    env = os.environ if env is None else env
    if users_prefix(env) or env.get(CACHE_ENV) == "off":
        return None
    try:
        spec = importlib.util.find_spec(package)
    except ImportError:  # a finder that refuses the name (a command's self-test that bars torch): not found
        return None
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


# Caches found clean in this process, by (path, device, inode, ctime, mtime): the workers' environment
# is built once per rank, and a clean cache stays clean (no one else can write into it).
_CLEAN: set[tuple] = set()

UNTRUSTED_FIX = (f"fix what it names (chown to you, chmod go-w), or set {CACHE_ENV} to a folder only you can write "
                 "(wirecheck builds it), or remove the cache for wirecheck to build it again")


def cache_problem(cache: str | os.PathLike) -> str | None:
    """Why workers must not read bytecode from `cache` (another user could have written some); None
    when only this user or root can have. A cache that does not exist yet is checked as far as it
    does: this user will make the rest."""
    cache = Path(cache)
    problem = path_problem(cache)  # sticky_ok_here False: in a 1777 cache anyone plants a package's folder
    if problem:
        return problem
    try:
        st = os.stat(cache)
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing there to read (making it fails, and says so)
    key = (str(cache), st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
    if key in _CLEAN:
        return None
    problem = tree_problem(cache)
    if problem is None:
        _CLEAN.add(key)
    return problem


def _make_cache(cache: Path) -> None:
    """The cache's folders, 0755 at most (the umask may narrow it further), never wider: a umask of
    002 or 000 would otherwise make a cache that fails cache_problem."""
    missing = []
    for folder in (cache, *cache.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o755)
        except FileExistsError:
            pass


@dataclass(frozen=True)
class Prepared:
    cache: Path
    reason: str  # why the cache is needed
    compiled: bool  # False: the cache was already up to date
    seconds: float
    packages: tuple[str, ...]
    problem: str | None = None  # set when the cache could not be built (workers compile as before)
    untrusted: str | None = None  # set when the cache is not used: another user could have written it
    suite_problem: str | None = None  # why the suite's test modules are not in it (compiled at each start)

    def describe(self) -> str:
        if self.untrusted:
            return (f"bytecode cache {self.cache} not used: {self.untrusted}; workers compile from source (slower, "
                    f"not wrong). To use it: {UNTRUSTED_FIX}")
        if self.problem:
            return f"bytecode cache not built ({self.reason}): {self.problem}; workers compile from source"
        did = f"compiled {len(self.packages)} packages in {self.seconds:.0f} s" if self.compiled else "up to date"
        left = f"; the suite's test modules are not in it: {self.suite_problem}" if self.suite_problem else ""
        return (f"bytecode cache {self.cache}: {did} ({self.reason}; wirecheck's commands, pytest and the workers read "
                f"it through {PREFIX_ENV}){left}")


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
    if cache_problem(cache):
        return None
    marker = _marker(cache)
    if marker is None or marker.get("python") != sys.executable:
        return None
    return cache


def worker_env(env: dict, package: str = PROBE_PACKAGE) -> dict:
    """`env` with the cache prefix added where the processes it starts (workers, the pytest process) need it and
    it is built and clean, and left out otherwise; a prefix the user set is theirs, left out only where it fails
    cache_problem (prepare() says why)."""
    own = users_prefix(env)
    if own:
        return {k: v for k, v in env.items() if k != PREFIX_ENV} if cache_problem(own) else env
    base = {k: v for k, v in env.items() if k != PREFIX_ENV}  # this cache: handed on again only where still ready
    cache = ready(base, package)
    return base if cache is None else {**base, PREFIX_ENV: str(cache)}


def use_here(env=None) -> Path | None:
    """From here on this process reads its imports' bytecode from the cache, where the node's Python cannot keep
    its own and the cache is built and clean (`ready`): the command's own imports (`wirecheck validate` imports
    the CLI, NVML's reader and the record's modules) are not compiled from source at every start. A prefix the
    process was started with is kept. The cache, or None."""
    if sys.pycache_prefix:
        return None
    cache = ready(os.environ if env is None else env)
    if cache is not None:
        sys.pycache_prefix = str(cache)  # importlib reads it at each import
    return cache


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


def prepare(env=None, imports=WORKER_IMPORTS + SUITE_IMPORTS, package: str = PROBE_PACKAGE, timeout_s: float = 900.0,
            suite: bool = True) -> Prepared | None:
    """Build (or confirm) the cache where workers need one; None where they do not. `suite`: also the suite's
    test modules as pytest rewrites them (a collection of the suite in the child: `_collect_suite`).

    Never raises for a cache that cannot be built: the workers then compile as they always did,
    and the returned `problem` says why.
    """
    env = dict(os.environ if env is None else env)
    own = users_prefix(env)
    if own:  # the user's prefix: never built here, but never handed to workers when unsafe
        problem = cache_problem(own)
        return Prepared(Path(own), f"{PREFIX_ENV} is set", False, 0.0, (), untrusted=problem) if problem else None
    reason = needs_cache(package, env)
    if reason is None:
        return None
    cache = cache_dir(env)
    problem = cache_problem(cache)  # before the marker is even read: nothing another user wrote is used
    if problem:
        return Prepared(cache, reason, False, 0.0, (), untrusted=problem)
    start = time.monotonic()
    marker = _marker(cache)
    if (marker and marker.get("python") == sys.executable and marker.get("imports") == list(imports)
            and _roots_unchanged(marker)):
        return Prepared(cache, reason, False, 0.0, tuple(marker["roots"]))
    try:
        _make_cache(cache)
        problem = cache_problem(cache)
        if problem:  # an existing folder above it that the check passed as missing a moment ago
            return Prepared(cache, reason, False, 0.0, (), untrusted=problem)
    except OSError as exc:
        return Prepared(cache, reason, False, 0.0, (), f"cannot create {cache} ({exc}); set {CACHE_ENV} to a writable folder")
    child = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}  # this child only: it writes the cache
    child[PREFIX_ENV] = str(cache)
    child["CUDA_VISIBLE_DEVICES"] = ""  # importing must not touch a GPU another run may hold
    try:
        # umask 022 from the start (the interpreter's own start-up writes bytecode too): what it
        # writes must pass cache_problem, never group- or other-writable.
        done = subprocess.run([sys.executable, "-c", _WARM, *imports], env=child, capture_output=True,
                              text=True, timeout=timeout_s, umask=0o022)
    except subprocess.TimeoutExpired:
        return Prepared(cache, reason, False, time.monotonic() - start, (), f"compiling took over {timeout_s:.0f} s")
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip()[-400:]
        return Prepared(cache, reason, False, time.monotonic() - start, (), f"the compile step failed (exit {done.returncode}): {tail}")
    suite_problem = _collect_suite(child, timeout_s) if suite else None
    # Replaced, never written through (a link there would be followed), and never group-writable.
    write_atomically(_marker_path(cache), json.dumps({"python": sys.executable, "imports": list(imports),
                                                      "roots": result["roots"]}, indent=1), mode=0o644 & ~umask())
    return Prepared(cache, reason, True, time.monotonic() - start, tuple(result["roots"]), suite_problem=suite_problem)


def _collect_suite(child: dict, timeout_s: float) -> str | None:
    """The suite collected once in the cache-writing environment `child` (a dry run's collection: no GPU, no
    record kept), so that the cache holds the test modules as pytest rewrites them (pytest reads its rewritten
    bytecode from the prefix too) and the standard library's modules the pytest process imports (a prefix
    replaces every __pycache__ folder). None, or why the collection failed: those modules are then compiled at
    each start (slower, not wrong)."""
    import tempfile

    from wirecheck.core.exit_codes import SIMULATED
    from wirecheck.core.paths import suite_paths, suite_plugin_args, suite_pytest_env

    try:
        suite = suite_paths()
    except RuntimeError as exc:  # the plugin package is missing: a broken install, which validate says too
        return str(exc)
    # A dry run uses no GPU, and simulates the GPUs CUDA_VISIBLE_DEVICES lists: an empty list would be refused.
    env = suite_pytest_env({k: v for k, v in child.items() if k != "CUDA_VISIBLE_DEVICES"})
    with tempfile.TemporaryDirectory(prefix="wirecheck-bytecode-") as folder:
        cmd = [sys.executable, "-m", "pytest", str(suite.tests), "--rootdir", str(suite.root), "-p", "no:cacheprovider",
               *suite_plugin_args(), "--collect-only", "-q", "--simulate", f"--wirecheck-json={folder}/collected.jsonl"]
        try:
            done = subprocess.run(cmd, env=env, cwd=folder, capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL, umask=0o022)
        except subprocess.TimeoutExpired:
            return f"collecting the suite took over {timeout_s:.0f} s"
    if done.returncode not in (0, SIMULATED):
        said = [line for line in (done.stderr + done.stdout).strip().splitlines() if line.strip()][-1:]
        return f"collecting the suite failed (pytest exit {done.returncode}: {' '.join(said)})"
    return None


def main() -> int:
    """Silent where nothing is needed; says what it did, or why it could not, otherwise."""
    prepared = prepare()
    if prepared is not None:
        print(f"wirecheck: {prepared.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
