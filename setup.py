"""What pyproject.toml cannot say: which packages and data files the wheel carries, found in the tree
rather than listed (a list by hand once left a whole package out), and the validation suite itself.

- Packages: every folder with an `__init__.py` under src/wirecheck, and the plugin folder
  fixtures/pytest_wirecheck/ (installed as `pytest_wirecheck`) with any of its own.
- Package data: every other file under those folders (topologies, unit costs, advise's profiles, ...),
  each given to the nearest package above it, except what is listed in NOT_SHIPPED with its reason.
  The recorded runs in fixtures/reference/ sit beside the plugin folder, under no package root, so
  the wheel never sees them.
- The suite: in a checkout, tests/, conftest.py and thresholds.yaml sit at the top (the layout
  operators know); an installed wheel has no checkout, so the build copies them into the plugin
  package, where wirecheck.core.paths finds them.

selftests/test_install.py builds the wheel and holds its file list to the tree's, both ways.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent

# import name -> its folder in the checkout (pyproject.toml's package-dir maps them for setuptools)
PACKAGE_ROOTS = {"wirecheck": "src/wirecheck", "pytest_wirecheck": "fixtures/pytest_wirecheck"}
# Folders under the package roots that stay out of the wheel, each with why. None today: the GPU nodes'
# records (fixtures/reference/, 10 MB) are a data folder beside the plugin, under no package root.
NOT_SHIPPED: set[str] = set()
# The suite the wheel carries inside the plugin package: source in the checkout -> name under pytest_wirecheck/.
SUITE_FILES = {"thresholds.yaml": "thresholds.yaml",
               "thresholds.schema.json": "thresholds.schema.json"}  # its first line names it
SUITE_TREE = "tests"


def _skipped(rel: str) -> bool:
    parts = rel.split("/")
    return ("__pycache__" in parts or rel.endswith((".pyc", ".pyo"))
            or any(rel == n or rel.startswith(n + "/") for n in NOT_SHIPPED))


def shipped_files() -> dict[str, str]:
    """Every file the package roots ship: its path in the checkout -> its path in the wheel."""
    files = {}
    for name, folder in PACKAGE_ROOTS.items():
        for path in sorted((HERE / folder).rglob("*")):
            rel = path.relative_to(HERE).as_posix()
            if path.is_file() and not _skipped(rel):
                files[rel] = f"{name}/{path.relative_to(HERE / folder).as_posix()}"
    return files


def packages_and_data() -> tuple[list[str], dict[str, list[str]]]:
    """(packages, package_data) for setup(), from shipped_files()."""
    packages = []
    for name, folder in PACKAGE_ROOTS.items():
        for init in sorted((HERE / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(HERE).as_posix()
            if _skipped(rel + "/__init__.py"):
                continue
            packages.append(".".join((name, *init.parent.relative_to(HERE / folder).parts)))
    data: dict[str, list[str]] = {}
    for source, target in shipped_files().items():
        if source.endswith(".py") and Path(target).parent.as_posix().replace("/", ".") in packages:
            continue  # a module of its package
        folder = Path(target).parent
        while folder.as_posix().replace("/", ".") not in packages:  # the nearest package above holds it as data
            folder = folder.parent
        data.setdefault(folder.as_posix().replace("/", "."), []).append(Path(target).relative_to(folder).as_posix())
    return packages, data


class BuildWithSuite(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "pytest_wirecheck"
        for source, name in SUITE_FILES.items():
            shutil.copy(HERE / source, target / name)
        tests = target / SUITE_TREE
        shutil.rmtree(tests, ignore_errors=True)
        shutil.copytree(HERE / SUITE_TREE, tests, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # The suite's conftest in the wheel: what the checkout's root conftest.py does.
        shutil.copy(HERE / "conftest.py", tests / "conftest.py")


packages, package_data = packages_and_data()
setup(packages=packages, package_data=package_data, cmdclass={"build_py": BuildWithSuite})
