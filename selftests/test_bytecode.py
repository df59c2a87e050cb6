"""The workers' bytecode cache: needed only where Python cannot keep its own, built once into
wirecheck's folder (never beside the sources), read by the workers, never stale."""

import os
import subprocess
import sys
import textwrap

import pytest

from wirecheck.workers import bytecode


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A package without .pyc on sys.path (as torch is on the lent GPU machines)."""
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
    from wirecheck.fleet import launch

    built = bytecode.Prepared(tmp_path, "test", True, 1.0, ())
    monkeypatch.setattr(bytecode, "prepare", lambda: built)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: tmp_path)
    seen = {}

    class Torchrun:
        def __init__(self, cmd, env, **kwargs):
            seen.update(cmd=cmd, env=env)
            self.stderr = iter(())

        def wait(self):
            return 0

    monkeypatch.setattr(launch.subprocess, "Popen", Torchrun)
    code = launch.main(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", "node1:29400",
                        "--rdzv-id", "7", "--", "--simulate"])
    assert code == 0 and seen["env"]["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    assert "wirecheck.fleet.multinode" in seen["cmd"] and "bytecode cache" in capsys.readouterr().err
    # Where no cache is needed, torchrun gets the environment as it is.
    monkeypatch.setattr(bytecode, "prepare", lambda: None)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: None)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    launch.main(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", "node1:29400", "--rdzv-id", "7"])
    assert "PYTHONPYCACHEPREFIX" not in seen["env"]
