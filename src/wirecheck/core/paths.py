"""Where the suite's own files are: the validation tests, the default thresholds, the recorded
topologies, the time model's unit costs, the measured resolution of the limits. Found without importing pytest (the `wirecheck` command needs them too).

Two layouts hold them:
- a checkout (installed editable): the plugin package `pytest_wirecheck` is the folder
  `fixtures/pytest_wirecheck/`, and `tests/` and `thresholds.yaml` sit at the top of the checkout,
  beside `fixtures/`;
- an installed wheel: the build copies `tests/` and `thresholds.yaml` into the package, so
  they sit inside `pytest_wirecheck/` (see setup.py).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

PLUGIN_PACKAGE = "pytest_wirecheck"


@dataclass(frozen=True)
class SuitePaths:
    root: Path  # the directory pytest runs the suite from (its rootdir)
    tests: Path
    thresholds: Path
    topologies: Path
    checkout: bool  # True in a source checkout, False in an installed wheel
    unit_costs: Path | None = None  # the time model's unit costs (wirecheck plan), in the plugin package
    resolution: Path | None = None  # what each rule catches on the recorded noise (wirecheck limits), in the plugin package


def plugin_dir() -> Path:
    spec = importlib.util.find_spec(PLUGIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the package {PLUGIN_PACKAGE} is not installed in this Python ({PLUGIN_PACKAGE} ships with wirecheck): "
            "reinstall wirecheck (./install.sh in a checkout, or pip install wirecheck)"
        )
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def suite_paths() -> SuitePaths:
    plugin = plugin_dir()
    top = plugin.parent.parent  # a checkout's top: the plugin is its fixtures/pytest_wirecheck/
    if (top / "tests").is_dir() and (top / "thresholds.yaml").is_file() and (top / "conftest.py").is_file():
        return SuitePaths(top, top / "tests", top / "thresholds.yaml", plugin / "topologies", checkout=True,
                          unit_costs=plugin / "unit_costs.yaml", resolution=plugin / "resolution.yaml")
    return SuitePaths(plugin / "tests", plugin / "tests", plugin / "thresholds.yaml", plugin / "topologies", checkout=False,
                      unit_costs=plugin / "unit_costs.yaml", resolution=plugin / "resolution.yaml")


# The pytest plugins the suite runs with when wirecheck starts it (`wirecheck validate`, `wirecheck plan`): its
# own options and pytest-benchmark, and no other. A node's Python often carries more (on a 1x H200 node's image:
# hypothesis, jaxtyping, anyio, pytest-mock, -cov and -timeout), which pytest would load at every start: there
# they cost 1.2-1.6 s of pytest's 2.4-2.8-s start to collection (scripts/device/start_end_probe.sh), and a
# plugin that reorders, reruns or times out tests would change what a verdict means. An operator loads another
# with pytest's own `-p MODULE` among the arguments passed on.
SUITE_PLUGINS = ("pytest_wirecheck.options", "pytest_benchmark.plugin")
AUTOLOAD_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


def suite_plugin_args() -> list[str]:
    """pytest's arguments that load the suite's own plugins (with AUTOLOAD_ENV set, the only ones loaded)."""
    return [arg for plugin in SUITE_PLUGINS for arg in ("-p", plugin)]


def suite_pytest_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment pytest runs the suite in: `base` (default this process's) without plugin auto-loading."""
    return {**(os.environ if base is None else base), AUTOLOAD_ENV: "1"}


# `extends: wirecheck` in a thresholds file names the thresholds.yaml shipped with this wirecheck
# (where it sits differs between a checkout and a wheel); any other value is a path, relative to
# the file that says it.
SHIPPED_THRESHOLDS = "wirecheck"


def extends_target(value: str, relative_to: Path) -> Path:
    """The file an `extends: VALUE` line in the thresholds file `relative_to` names, absolute."""
    if value.strip() == SHIPPED_THRESHOLDS:
        return suite_paths().thresholds.resolve()
    target = Path(value.strip()).expanduser()
    if not target.is_absolute():
        target = Path(relative_to).absolute().parent / target
    return Path(os.path.normpath(str(target)))
