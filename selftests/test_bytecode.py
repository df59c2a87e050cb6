"""The workers' bytecode cache: needed only where Python cannot keep its own, built once into
wirecheck's folder (never beside the sources), read by the workers, never stale."""

import inspect
import os
import subprocess
import sys
import textwrap

import pytest

from wirecheck.workers import bytecode


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A package without .pyc on sys.path (as torch is on the H200 node images the suite was measured on)."""
    root = tmp_path / "site"
    pkg = root / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(root))
    return root


def _env(site, tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
    return {**env, "PYTHONPATH": str(site), bytecode.CACHE_ENV: str(tmp_path / "cache"), **extra}


def test_needed_only_where_python_cannot_keep_bytecode(site, tmp_path):
    dont_write = _env(site, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert "PYTHONDONTWRITEBYTECODE" in bytecode.needs_cache("fakepkg", dont_write)
    assert bytecode.needs_cache("fakepkg", _env(site, tmp_path)) is None  # Python writes it itself
    own_prefix = {**dont_write, "PYTHONPYCACHEPREFIX": str(tmp_path / "mine")}
    assert bytecode.needs_cache("fakepkg", own_prefix) is None  # the user's prefix is theirs
    assert bytecode.worker_env(own_prefix, "fakepkg") == own_prefix
    assert bytecode.needs_cache("no_such_package_here", dont_write) is None
    assert bytecode.needs_cache("fakepkg", {**dont_write, bytecode.CACHE_ENV: "off"}) is None  # the operator's off switch


READ_ONLY_CHECK = """
import sys
from wirecheck.workers import bytecode
print(bytecode.needs_cache("fakepkg", {"PYTHONPATH": sys.argv[1]}))
"""


def test_needed_where_site_packages_are_read_only(site, tmp_path):
    if os.geteuid() != 0:
        os.chmod(site / "fakepkg", 0o555)
        try:
            assert "read-only" in bytecode.needs_cache("fakepkg", _env(site, tmp_path))
        finally:
            os.chmod(site / "fakepkg", 0o755)
        return
    # Root writes through a folder's mode bits, so the package is mounted read-only instead (as a
    # shared module tree is), in a mount namespace of the check's own.
    pkg = site / "fakepkg"
    script = (f'mount --bind "{pkg}" "{pkg}" && mount -o remount,bind,ro "{pkg}" && '
              f'exec "{sys.executable}" -c \'{READ_ONLY_CHECK}\' "{site}"')
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          env=_env(site, tmp_path), capture_output=True, text=True, timeout=120)
    if done.returncode and "unshare" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip("root, and no mount namespace to make a read-only folder in")
    assert done.returncode == 0, done.stderr
    assert f"fakepkg has no .pyc and {pkg} is read-only" in done.stdout, done.stdout


def _import_in_worker(env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-v", "-c", "import fakepkg.mod; print(fakepkg.mod.VALUE)"],
                          env=env, capture_output=True, text=True, timeout=120)


def test_built_once_outside_the_sources_and_read_by_workers(site, tmp_path):
    env = _env(site, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert bytecode.worker_env(env, "fakepkg") == env  # not built yet: nothing to read
    first = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg")
    assert first.problem is None and first.compiled, first.describe()
    assert any(p.endswith("fakepkg") for p in first.packages)
    assert not list(site.rglob("__pycache__"))  # the environment is left as it was
    cache = tmp_path / "cache"
    assert list(cache.rglob("mod.cpython-*.pyc"))
    again = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg")
    assert not again.compiled and "up to date" in again.describe()

    worker = bytecode.worker_env(env, "fakepkg")
    assert worker["PYTHONPYCACHEPREFIX"] == str(cache)
    done = _import_in_worker(worker)
    assert done.stdout.strip() == "1"
    assert f"code object from '{cache}" in done.stderr  # loaded from the cache, not compiled

    (site / "fakepkg" / "mod.py").write_text("VALUE = 22  # changed after the cache was built\n")
    done = _import_in_worker(worker)
    assert done.stdout.strip() == "22"  # Python rejects the stale bytecode by the source's mtime and size


def test_a_cache_built_for_other_imports_is_built_again(site, tmp_path):
    """A cache built before wirecheck's commands and pytest read it held the workers' packages only: what it was
    built for is in its marker, and other imports build it again."""
    (site / "otherpkg").mkdir()
    (site / "otherpkg" / "__init__.py").write_text("VALUE = 3\n")
    env = _env(site, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg", suite=False).compiled
    assert not bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg", suite=False).compiled
    again = bytecode.prepare(env, imports=("fakepkg.mod", "otherpkg"), package="fakepkg", suite=False)
    assert again.compiled and any(p.endswith("otherpkg") for p in again.packages), again.describe()
    default = inspect.signature(bytecode.prepare).parameters["imports"].default
    assert set(bytecode.WORKER_IMPORTS) | set(bytecode.SUITE_IMPORTS) == set(default)  # the workers' and the suite's


def test_the_cache_handed_on_is_wirechecks_not_the_users(site, tmp_path):
    """The command hands its cache to the pytest process, which hands it to the workers and may build it again:
    a PYTHONPYCACHEPREFIX that is this cache is not a prefix of the user's, and is handed on only while ready."""
    env = _env(site, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    cache = tmp_path / "cache"
    handed = {**env, "PYTHONPYCACHEPREFIX": str(cache)}
    assert bytecode.users_prefix(handed) is None and bytecode.users_prefix({**env, "PYTHONPYCACHEPREFIX": "/x"}) == "/x"
    assert "PYTHONDONTWRITEBYTECODE" in bytecode.needs_cache("fakepkg", handed)
    assert bytecode.worker_env(handed, "fakepkg") == env  # not built yet: not handed on
    built = bytecode.prepare(handed, imports=("fakepkg.mod",), package="fakepkg", suite=False)
    assert built.compiled, built.describe()
    assert bytecode.worker_env(handed, "fakepkg") == handed


def test_the_command_reads_the_cache_from_its_start(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: None)
    assert bytecode.use_here() is None and sys.pycache_prefix is None
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: tmp_path)
    assert bytecode.use_here() == tmp_path and sys.pycache_prefix == str(tmp_path)
    monkeypatch.setattr(sys, "pycache_prefix", "/mine")  # a prefix the process started with is kept
    assert bytecode.use_here() is None and sys.pycache_prefix == "/mine"


def test_the_suites_tests_are_compiled_as_pytest_rewrites_them(tmp_path):
    """The suite collected once into the cache (a dry run: it must not be refused for an empty
    CUDA_VISIBLE_DEVICES, which the cache's build sets so that importing touches no GPU), so that pytest reads its
    rewritten test modules from there; a collection that fails says why."""
    cache = tmp_path / "cache"
    child = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    child.update({"PYTHONPYCACHEPREFIX": str(cache), "CUDA_VISIBLE_DEVICES": ""})
    assert bytecode._collect_suite(child, 300) is None
    rewritten = {p.name.split(".")[0] for p in cache.rglob("test_*.cpython-*-pytest-*.pyc")}
    assert {"test_collectives", "test_strategies", "test_gpu_health"} <= rewritten, sorted(rewritten)
    assert "took over" in bytecode._collect_suite(child, 0.01)


def test_a_cache_that_cannot_be_built_is_said_and_harmless(site, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    env = _env(site, tmp_path, PYTHONDONTWRITEBYTECODE="1", **{bytecode.CACHE_ENV: str(blocker / "cache")})
    prepared = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg")
    assert prepared.problem and bytecode.CACHE_ENV in prepared.problem
    assert "workers compile from source" in prepared.describe()
    assert bytecode.worker_env(env, "fakepkg") == env


def test_the_launcher_gives_workers_the_cache(monkeypatch, tmp_path):
    from wirecheck.workers import spawn  # the launcher's rank environment builder

    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: tmp_path)
    assert spawn.rank_env(0, world_size=1, gpus=None, extra={})["PYTHONPYCACHEPREFIX"] == str(tmp_path)


def test_fleet_multinode_gives_torchrun_ranks_the_cache(monkeypatch, tmp_path, capsys):
    """torchrun's workers import torch like the suite's: `wirecheck fleet multinode` builds the cache
    first and hands the prefix to torchrun, whose workers inherit its environment."""
    from wirecheck.cli.fleet.multinode import main as multinode
    from wirecheck.fleet import launch

    built = bytecode.Prepared(tmp_path, "test", True, 1.0, ())
    monkeypatch.setattr(bytecode, "prepare", lambda: built)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: tmp_path)
    seen = {}

    class Torchrun:
        def __init__(self, cmd, env, **kwargs):
            seen.update(cmd=cmd, env=env)
            self.stderr = iter(())

        pid = 0

        def poll(self):  # the rendezvous watch's: a torchrun that has exited
            return 0

        def wait(self):
            return 0

    monkeypatch.setattr(launch.subprocess, "Popen", Torchrun)
    code = multinode(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", "node1:29400",
                      "--rdzv-id", "7", "--", "--simulate"])
    assert code == 0 and seen["env"]["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert "wirecheck.fleet.multinode" in seen["cmd"] and "bytecode cache" in capsys.readouterr().err
    # Where no cache is needed, torchrun gets the environment as it is.
    monkeypatch.setattr(bytecode, "prepare", lambda: None)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: None)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    multinode(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", "node1:29400", "--rdzv-id", "7"])
    assert "PYTHONPYCACHEPREFIX" not in seen["env"]


# ---- bytecode root runs comes only from places only root can write --------------------------------

PLANT = r"""
import importlib.util, os, py_compile, sys
source, fake = sys.argv[1], sys.argv[2]
target = importlib.util.cache_from_source(source)  # where the workers look, under PYTHONPYCACHEPREFIX
first = os.path.join(sys.pycache_prefix, os.path.relpath(target, sys.pycache_prefix).split(os.sep)[0])
if os.path.exists(first):
    os.rename(first, first + ".moved")  # the cache is writable by this user: its entries are theirs to move
os.makedirs(os.path.dirname(target))
with open(fake, "w") as f:
    f.write("VALUE = 6\n")  # the same size as the real source...
st = os.stat(source)
os.utime(fake, ns=(st.st_atime_ns, st.st_mtime_ns))  # ...and mtime: Python's staleness check passes
py_compile.compile(fake, cfile=target, doraise=True)
print("planted", target)
"""


@pytest.fixture
def shared_site(monkeypatch):
    """A package and a cache in a sticky directory another user can reach (tmp_path is root's only)."""
    from other_user import need_root, sticky_dir

    need_root()
    base = sticky_dir()
    pkg = base / "site" / "fakepkg"
    pkg.mkdir(parents=True)
    for folder in (base / "site", pkg):
        folder.chmod(0o755)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(base / "site"))
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.mark.parametrize("made_writable", ["mode 0777", "owned by nobody"])
def test_a_cache_another_user_can_write_is_not_used_and_the_run_says_why(shared_site, made_writable):
    from other_user import NOBODY, as_user, name, python_env

    site, cache = shared_site / "site", shared_site / "cache"
    env = _env(site, shared_site, PYTHONDONTWRITEBYTECODE="1")
    built = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg")
    assert built.untrusted is None and built.problem is None and built.compiled, built.describe()
    assert bytecode.worker_env(env, "fakepkg")["PYTHONPYCACHEPREFIX"] == str(cache)  # clean: used
    if made_writable == "mode 0777":
        cache.chmod(0o777)  # as a careless `chmod a+w` leaves it
    else:
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(cache)], check=True)
    planted = subprocess.run(as_user(NOBODY, [sys.executable, "-c", PLANT, str(site / "fakepkg" / "mod.py"),
                                              str(shared_site / "evil.py")]),
                             env={**python_env(), "PYTHONPYCACHEPREFIX": str(cache)}, capture_output=True, text=True,
                             timeout=60)
    assert planted.returncode == 0, planted.stderr
    # The plant works: a worker given this cache runs nobody's bytecode (what happened before the cache was checked).
    assert _import_in_worker({**env, "PYTHONPYCACHEPREFIX": str(cache)}).stdout.strip() == "6"

    again = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg")
    said = again.describe()
    assert again.untrusted and f"bytecode cache {cache} not used" in said, said
    if made_writable == "mode 0777":
        assert f"{cache} is owned by root (uid 0), mode 0777: writable by every user" in said, said
    else:
        assert f"owned by {name(NOBODY)} (uid {NOBODY})" in said and "another user owns it" in said, said
    assert "workers compile from source" in said and "chmod go-w" in said and bytecode.CACHE_ENV in said
    worker = bytecode.worker_env(env, "fakepkg")
    assert "PYTHONPYCACHEPREFIX" not in worker and bytecode.ready(env, "fakepkg") is None
    done = _import_in_worker(worker)
    assert done.stdout.strip() == "1" and str(cache) not in done.stderr  # from the source, not the cache

    # The same cache as a PYTHONPYCACHEPREFIX of the user's own: said, and kept from the workers.
    own = {**env, "PYTHONPYCACHEPREFIX": str(cache)}
    mine = bytecode.prepare(own, imports=("fakepkg.mod",), package="fakepkg")
    assert mine.untrusted and f"bytecode cache {cache} not used" in mine.describe()
    assert "PYTHONPYCACHEPREFIX" not in bytecode.worker_env(own, "fakepkg")


def test_a_cache_in_a_group_writable_or_sticky_folder(shared_site):
    """The cache itself may not be sticky world-writable (anyone could make a package's folder in it first),
    nor below a folder group or others can write; a sticky folder above it (as /tmp) is fine."""
    site = shared_site / "site"
    sticky_cache = shared_site / "sticky-cache"
    sticky_cache.mkdir()
    sticky_cache.chmod(0o1777)
    env = _env(site, shared_site, PYTHONDONTWRITEBYTECODE="1", **{bytecode.CACHE_ENV: str(sticky_cache)})
    said = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg").describe()
    assert f"{sticky_cache} is owned by root (uid 0), mode 1777" in said and "not used" in said, said
    assert not list(sticky_cache.iterdir())  # nothing was compiled into it
    group = shared_site / "group"
    group.mkdir()
    group.chmod(0o775)
    env = _env(site, shared_site, PYTHONDONTWRITEBYTECODE="1", **{bytecode.CACHE_ENV: str(group / "cache")})
    said = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg").describe()
    assert f"{group} is owned by root (uid 0), mode 0775: writable by group" in said, said
    assert not (group / "cache").exists()
    below_tmp = _env(site, shared_site, PYTHONDONTWRITEBYTECODE="1")  # shared_site/cache: below a 1777 folder
    built = bytecode.prepare(below_tmp, imports=("fakepkg.mod",), package="fakepkg")
    assert built.untrusted is None and built.compiled, built.describe()


def test_a_cache_built_under_a_loose_umask_passes_its_own_check(site, tmp_path):
    """Built where the umask is 000 or 002, the cache still has no group- or other-writable entry (else
    the next run would refuse the cache it just built)."""
    env = _env(site, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    old = os.umask(0)
    try:
        built = bytecode.prepare(env, imports=("fakepkg.mod",), package="fakepkg")
    finally:
        os.umask(old)
    assert built.untrusted is None and built.compiled, built.describe()
    cache = tmp_path / "cache"
    loose = [p for p in [cache, *cache.rglob("*")] if p.stat().st_mode & 0o022]
    assert not loose, loose
    assert bytecode.cache_problem(cache) is None and bytecode.ready(env, "fakepkg") == cache
