"""Installing wirecheck as a user would: install.sh layered over an environment that holds torch,
and the built wheel validating from an empty directory without the checkout.

Nothing here may download: install.sh runs with an empty --wheels directory (no index), the
wheel is built without build isolation and installed with --no-index, and every venv is
layered over the environment running these tests (which holds torch and the stack).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
FAKE_GPU = "#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)'\n"
NO_GPU = "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n"


def copy_checkout(dest: Path) -> Path:
    """The checkout's files, without its venv, git data, build outputs or the self-tests."""
    def ignore(directory, names):
        top = Path(directory) == PROJECT
        return {n for n in names if n == "__pycache__" or n.endswith(".egg-info")
                or (top and (n.startswith(".") or n in {"build", "dist", "selftests"}))}
    shutil.copytree(PROJECT, dest, ignore=ignore)
    return dest


def offline_env() -> dict:
    """This environment with pip's configuration and extra wheel folders switched off: with
    --no-index nothing can be found that is not named on the command line."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "WIRECHECK_WHEELS", "VIRTUAL_ENV") and not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip reads no configuration file at all
    return env


def env_with_nvidia_smi(tmp_path: Path, script: str, python: str) -> dict:
    """install.sh's environment: PYTHON, and an nvidia-smi that says GPU or no GPU, whatever this machine has."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi").write_text(script)
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = offline_env()
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHON=python)
    return env


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


def torch_file() -> str:
    return os.path.realpath(importlib.util.find_spec("torch").origin)


def test_install_sh_layers_the_venv_over_the_environment_that_holds_torch(tmp_path):
    """No GPU, torch in PYTHON, offline (an empty wheel directory): .venv uses PYTHON's torch and stack."""
    project = copy_checkout(tmp_path / "checkout")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    env = env_with_nvidia_smi(tmp_path, NO_GPU, sys.executable)
    for attempt in ("first", "second"):  # the second run on the existing .venv only checks
        result = run(["bash", project / "install.sh", "--wheels", wheels], env=env, cwd=tmp_path)
        assert result.returncode == 0, f"{attempt} run:\n{result.stdout}\n{result.stderr}"
        assert "layered over the packages of" in result.stderr
        assert "run .venv/bin/wirecheck validate" in result.stderr.splitlines()[-1]
    venv_python = project / ".venv" / "bin" / "python"
    where = run([venv_python, "-c", "import os, torch, wirecheck; "
                 "print(os.path.realpath(torch.__file__)); print(wirecheck.__file__)"], cwd=tmp_path)
    torch_at, wirecheck_at = where.stdout.split()
    assert torch_at == torch_file()  # the environment's own torch, not a new one
    assert not list((project / ".venv").glob("lib/python*/site-packages/torch"))
    assert Path(wirecheck_at).is_relative_to(project / "src")  # editable install of this checkout
    assert (project / ".venv" / "bin" / "wirecheck").exists()
    # An activated .venv runs its own pytest, with this checkout's plugin (not the one underneath).
    plugins = run([project / ".venv" / "bin" / "pytest", "-VV"], cwd=tmp_path)
    options = project / "fixtures" / "pytest_wirecheck" / "options.py"
    assert f"wirecheck-0.1.0 at {options}" in plugins.stdout + plugins.stderr, plugins.stdout


def test_layered_venv_follows_the_environments_own_pth_files(tmp_path):
    """A package the environment reaches only through a .pth of its own (an editable or develop
    install, a venv layered the same way) is seen in the layered venv too."""
    node = tmp_path / "node"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(node)], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "wirecheck_probe.py").write_text("WHERE = 'elsewhere'\n")
    (node_site,) = node.glob("lib/python*/site-packages")
    (node_site / "develop.pth").write_text(f"{elsewhere}\n")
    layered = run([node / "bin" / "python", PROJECT / "scripts" / "layered_venv.py", tmp_path / "venv"])
    assert layered.returncode == 0, layered.stderr
    probe = run([tmp_path / "venv" / "bin" / "python", "-c", "import wirecheck_probe; print(wirecheck_probe.WHERE)"])
    assert probe.stdout.strip() == "elsewhere", probe.stderr


def fake_distribution(site_dir: Path, name: str, requires: list[str], top: str) -> None:
    """An installed distribution as pip leaves one: its package folder and a dist-info with METADATA and RECORD."""
    (site_dir / top).mkdir()
    (site_dir / top / "__init__.py").write_text(f"NAME = {name!r}\n")
    info = site_dir / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: 1.0\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    (info / "RECORD").write_text(f"{top}/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


def test_layered_venv_leaves_out_or_keeps_only_the_distributions_named(tmp_path):
    """--without NAME drops one distribution (a checkout's editable wirecheck); --only NAME keeps it and what it
    requires, transitively, and nothing else (a venv without torch); an extra's requirement is not followed."""
    node = tmp_path / "node"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(node)], check=True)
    (site_dir,) = node.glob("lib/python*/site-packages")
    fake_distribution(site_dir, "report-lib", ["plot-lib>=1", "gpu-lib; extra == 'gpu'"], "report_lib")
    fake_distribution(site_dir, "plot-lib", ['plain-lib; python_version >= "3"'], "plot_lib")
    fake_distribution(site_dir, "plain-lib", [], "plain_lib")
    fake_distribution(site_dir, "gpu-lib", [], "gpu_lib")
    probe = "import importlib.util as u; print(' '.join(m for m in ('report_lib', 'plot_lib', 'plain_lib', 'gpu_lib') if u.find_spec(m)))"
    seen = {}
    for case, options in (("all", []), ("without", ["--without", "gpu-lib"]), ("only", ["--only", "report_lib"])):
        made = run([node / "bin" / "python", PROJECT / "scripts" / "layered_venv.py", tmp_path / case, *options])
        assert made.returncode == 0, made.stderr
        seen[case] = run([tmp_path / case / "bin" / "python", "-c", probe]).stdout.split()
    assert seen == {"all": ["report_lib", "plot_lib", "plain_lib", "gpu_lib"],
                    "without": ["report_lib", "plot_lib", "plain_lib"],
                    "only": ["report_lib", "plot_lib", "plain_lib"]}, seen
    only = run([node / "bin" / "python", PROJECT / "scripts" / "layered_venv.py", tmp_path / "plain", "--only", "plain-lib"])
    assert only.returncode == 0, only.stderr
    assert run([tmp_path / "plain" / "bin" / "python", "-c", probe]).stdout.split() == ["plain_lib"]


def python_without_torch(tmp_path: Path) -> str:
    """A bare venv: the Python of a node whose torch lives elsewhere."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    return str(bare / "bin" / "python")


@pytest.mark.parametrize("case", ["gpu_without_torch", "wheels_dir_missing", "unknown_argument", "python_missing"])
def test_install_sh_refuses_with_one_clear_message(tmp_path, case):
    project = tmp_path / "checkout"
    project.mkdir()
    shutil.copy(PROJECT / "install.sh", project / "install.sh")
    args, python, gpu = [], sys.executable, NO_GPU
    if case == "gpu_without_torch":
        python, gpu, expected = python_without_torch(tmp_path), FAKE_GPU, "has no torch, and a node's CUDA torch is never downloaded here: set PYTHON to"
    elif case == "wheels_dir_missing":
        args, expected = ["--wheels", str(tmp_path / "nowhere")], "--wheels " + str(tmp_path / "nowhere") + ": no such directory"
    elif case == "unknown_argument":
        args, expected = ["--wheel", "x"], "unknown argument '--wheel' (usage: ./install.sh [--wheels DIR])"
    else:
        python, expected = str(tmp_path / "no-python"), "PYTHON=" + str(tmp_path / "no-python") + ": no such interpreter"
    result = run(["bash", project / "install.sh", *args], env=env_with_nvidia_smi(tmp_path, gpu, python), cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("install.sh: ") and expected in lines[0], result.stderr
    assert not (project / ".venv").exists()  # refused before anything was made or downloaded


def test_install_sh_refuses_a_cpu_torch_on_a_gpu_node(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.version.cuda:
        pytest.skip("this environment's torch is a CUDA build")
    project = tmp_path / "checkout"
    project.mkdir()
    shutil.copy(PROJECT / "install.sh", project / "install.sh")
    result = run(["bash", project / "install.sh"], env=env_with_nvidia_smi(tmp_path, FAKE_GPU, sys.executable), cwd=tmp_path)
    assert result.returncode == 1 and "is a CPU build: set PYTHON to" in result.stderr, result.stderr
    assert not (project / ".venv").exists()


def build_wheel(tmp_path: Path) -> Path:
    source = copy_checkout(tmp_path / "source")
    dist = tmp_path / "dist"
    result = run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                  source, "-w", dist], env=offline_env())
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = dist.glob("wirecheck-*.whl")
    return wheel


def tree_files(folder: Path) -> set[str]:
    """Every file under `folder` (relative, posix), less bytecode."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def expected_wheel_files() -> set[str]:
    """What the wheel must hold, read from the tree: the library and the plugin package whole (modules and
    every data file: topologies, unit costs, advise's profiles...), and the suite the build copies into the
    plugin. fixtures/reference (the node records behind the docs, read by nothing the tool runs) sits
    beside the plugin package, in no package, and so is not in the wheel."""
    files = {f"wirecheck/{f}" for f in tree_files(PROJECT / "src" / "wirecheck")}
    files |= {f"pytest_wirecheck/{f}" for f in tree_files(PROJECT / "fixtures" / "pytest_wirecheck")}
    files |= {f"pytest_wirecheck/tests/{f}" for f in tree_files(PROJECT / "tests")}
    files |= {"pytest_wirecheck/tests/conftest.py", "pytest_wirecheck/thresholds.yaml",
              "pytest_wirecheck/thresholds.schema.json"}
    return files


def test_wheel_installed_without_the_checkout_validates_from_any_directory(tmp_path):
    import wirecheck

    wheel = build_wheel(tmp_path)
    assert wheel.name == f"wirecheck-{wirecheck.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    # The wheel is the tree, both ways: nothing of it left out (a package missing from a list by hand was
    # once), nothing else slipped in (a stale build/ folder's module).
    package_files = {n for n in names if ".dist-info/" not in n}
    expected = expected_wheel_files()
    assert not expected - package_files, f"missing from the wheel: {sorted(expected - package_files)}"
    assert not package_files - expected, f"in the wheel but not in the tree: {sorted(package_files - expected)}"
    assert {"wirecheck/diagnose/__init__.py", "wirecheck/advise/profiles.yaml", "pytest_wirecheck/unit_costs.yaml",
            "pytest_wirecheck/topologies/h200-sxm-2.txt"} <= names  # the ones a list by hand missed or might
    assert not any(n.startswith("pytest_wirecheck/reference/") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    declared = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]" in declared
    # the thresholds loader finds the checks' limit declarations through this entry point
    assert "[wirecheck.checks]\nbuiltin = wirecheck.checks" in declared, declared

    venv_dir = tmp_path / "venv"
    # the stack from this environment, not its wirecheck: an editable install's finder would answer for a
    # module the wheel lacks
    layered = run([sys.executable, PROJECT / "scripts" / "layered_venv.py", venv_dir, "--without", "wirecheck"])
    assert layered.returncode == 0, layered.stderr
    installed = run([venv_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
                    env=offline_env())
    assert installed.returncode == 0, installed.stdout + installed.stderr

    empty = tmp_path / "anywhere"
    empty.mkdir()
    env = offline_env()
    where = run([venv_dir / "bin" / "python", "-c", "import wirecheck, pytest_wirecheck; "
                 "print(wirecheck.__file__); print(pytest_wirecheck.__file__)"], cwd=empty, env=env)
    assert all(Path(f).is_relative_to(venv_dir) for f in where.stdout.split()), where.stdout  # not the checkout

    version = run([venv_dir / "bin" / "wirecheck", "--version"], cwd=empty, env=env)
    assert version.returncode == 0 and version.stdout.startswith(
        f"wirecheck {wirecheck.__version__} from {Path(where.stdout.split()[0]).parent} "), version.stdout + version.stderr

    topo = run([venv_dir / "bin" / "wirecheck", "topo", "--simulate", "h200-nvl-8", "--json"], cwd=empty, env=env)
    assert topo.returncode == 0, topo.stderr
    data = json.loads(topo.stdout)
    assert data["fabric"] == "bridged" and len(data["gpus"]) == 8

    package = Path(where.stdout.split()[1]).parent
    before = {p for p in package.rglob("*") if "__pycache__" not in p.parts}
    validate = run([venv_dir / "bin" / "wirecheck", "validate", "--simulate=h200-sxm-2", "-k", "inventory"],
                   cwd=empty, env=env)
    out = validate.stdout + validate.stderr
    # The suite ran from the installed package (its exit code is validate's own business).
    assert f"-m pytest {package / 'tests'}" in validate.stderr, out
    assert re.search(r"^=+ .*\d+ (passed|failed|skipped).* in [\d.]+s.*=+$", validate.stdout, re.M), out
    assert "test_inventory.py" in validate.stdout, out
    after = {p for p in package.rglob("*") if "__pycache__" not in p.parts}
    assert after == before, f"the run wrote into the installed package: {sorted(map(str, after - before))}"
