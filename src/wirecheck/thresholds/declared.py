"""The limits a check declares it reads (`@check(..., limits=(...))`), by kind, and the registry the
thresholds loader reads them from, so that a new check's limit is data in thresholds.yaml and not
code in a parser.

Kinds (each names its key in the file as a dotted path):
- `Floor("gpu_health.floors.<model>.FIGURE", unit=..., label=..., peak=None)`: a per-GPU figure's floor,
  keyed by GPU model, with `gpu_health.simulated_floors.FIGURE` and, where the figure has a `peak`
  ("memory", or a math dtype of wirecheck.node.hardware), `gpu_health.derived_floors.FIGURE`. `unit`
  is how the figure shows (the report, messages) and gives its quantity kind (wirecheck.core.quantity).
- `Value("gpu_health.SECTION.FIELD", unit=...)`: one value with its source, `SECTION: {FIELD: ..., source: ...}`,
  read as a `ShareRule(value, source, yaml_path)` at `thresholds.gpu_health.SECTION`.
- `Section("gpu_health.SECTION", parse=fn, example=...)`: a section of a shape of its own, read by `fn(at)`.

The checks register their declarations when their package is imported; a thresholds file can
only be read against them, so `declarations()` loads, once, every package of checks installed under
the entry-point group `wirecheck.checks` before the loader reads. wirecheck's own checks are its
entry point `builtin = "wirecheck.checks"` (pyproject.toml); a site's own package of checks adds
one of its own and its limits are read like the shipped ones. Found by entry point, not by name:
the thresholds floor imports nothing above it, and knows no package of checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable

from wirecheck.core.quantity import UNITS
from wirecheck.thresholds.yaml_reader import ThresholdsError

# The entry-point group a package of checks registers under (pyproject.toml
# `[project.entry-points."wirecheck.checks"]`); each entry point names the package to import.
GROUP = "wirecheck.checks"
INSTALL_FIX = "install wirecheck into this Python's environment: `bash install.sh` (or `pip install -e .`) in the checkout"

_MODEL = "<model>"


def _kind_of(unit: str, key: str) -> tuple[str, float]:
    """(quantity kind, display units per base unit) of `unit`."""
    for kind, units in UNITS.items():
        if unit in units:
            return kind, 1.0 / units[unit]
    known = sorted({u for units in UNITS.values() for u in units})
    raise ValueError(f"limit {key}: unit {unit!r} is not one of wirecheck.core.quantity's ({', '.join(known)})")


def _parts(key: str, prefix: tuple[str, ...], n: int, shape: str) -> tuple[str, ...]:
    parts = tuple(key.split("."))
    if parts[:len(prefix)] != prefix or len(parts) != len(prefix) + n or not all(parts):
        raise ValueError(f"limit key {key!r}: write it as {shape}")
    return parts[len(prefix):]


@dataclass(frozen=True)
class Floor:
    key: str  # "gpu_health.floors.<model>.sustained_util"
    unit: str  # "GB/s", "TFLOP/s", "%": how the figure shows; its quantity kind follows
    label: str = ""  # how the report's GPU section names it; default the figure's name
    peak: str | None = None  # "memory", "bf16", "fp8": a derived floor from the GPU's own peak is allowed

    def __post_init__(self):
        _parts(self.key, ("gpu_health", "floors", _MODEL), 1, "gpu_health.floors.<model>.FIGURE")
        _kind_of(self.unit, self.key)

    @property
    def figure(self) -> str:
        return self.key.rsplit(".", 1)[1]

    @property
    def kind(self) -> str:
        return _kind_of(self.unit, self.key)[0]

    @property
    def scale(self) -> float:
        """Display units per base unit (1e-9 for GB/s)."""
        return _kind_of(self.unit, self.key)[1]


@dataclass(frozen=True)
class Value:
    key: str  # "gpu_health.power.min_share_of_limit"
    unit: str  # "%", "°C", ...: its quantity kind follows; "%" is at most 100 %

    def __post_init__(self):
        _parts(self.key, ("gpu_health",), 2, "gpu_health.SECTION.FIELD")
        _kind_of(self.unit, self.key)

    @property
    def section(self) -> str:
        return self.key.split(".")[1]

    @property
    def field(self) -> str:
        return self.key.split(".")[2]

    @property
    def kind(self) -> str:
        return _kind_of(self.unit, self.key)[0]


@dataclass(frozen=True)
class Section:
    key: str  # "gpu_health.clocks"
    parse: Callable[[Any], Any]  # (the section's yaml_reader._At) -> what thresholds.gpu_health.SECTION holds
    example: str  # the section as the fix of an error shows it: '{allowed: [], wait: "0.5 s", source: ...}'

    def __post_init__(self):
        _parts(self.key, ("gpu_health",), 1, "gpu_health.SECTION")

    @property
    def section(self) -> str:
        return self.key.split(".")[1]


KINDS = (Floor, Value, Section)
# key -> (the check that declares it, the declaration)
DECLARED: dict[str, tuple[str, Any]] = {}


def declare(check: str, limits) -> None:
    """Register `check`'s limits; a key another check declares differently is refused."""
    for limit in limits:
        if not isinstance(limit, KINDS):
            raise ValueError(f"check {check!r}: limit {limit!r} is none of {', '.join(k.__name__ for k in KINDS)}")
        section = getattr(limit, "section", None)
        for key, (owner, other) in DECLARED.items():
            clash = key == limit.key or (section is not None and getattr(other, "section", None) == section)
            if clash and other != limit:  # two checks may read one limit, declared alike
                raise ValueError(f"check {check!r} declares {limit.key} as {limit!r}; check {owner!r} declares "
                                 f"{key} as {other!r}")
        DECLARED.setdefault(limit.key, (check, limit))


def undeclare(check: str) -> None:
    """Forget `check`'s limits (a self-test's check, removed when it ends)."""
    for key in [k for k, (owner, _) in DECLARED.items() if owner == check]:
        del DECLARED[key]


class DeclarationsError(ThresholdsError):
    """The checks a thresholds file is read against cannot be found or loaded (an install problem, not
    the file's): the message says which entry point, and the fix."""


# The entry points loaded so far ("name = value"); None until the first discovery.
_LOADED: tuple[str, ...] | None = None


def _discover() -> tuple[str, ...]:
    """Import every package of checks of GROUP; each registers its limits as it is imported."""
    found = sorted(entry_points(group=GROUP), key=lambda ep: (ep.name != "builtin", ep.name))
    if not found:
        # Never an empty registry: every limit of every file would then be refused as unknown.
        raise DeclarationsError(f"no package of checks is registered under the entry-point group {GROUP!r}: "
                                "wirecheck is not installed in this Python's environment (only on PYTHONPATH?), "
                                f"so no check has declared the limits a thresholds file holds; {INSTALL_FIX}")
    loaded = []
    for ep in found:
        try:
            ep.load()
        except Exception as exc:  # whatever the package raises on import, said with the entry point that named it
            dist = getattr(ep, "dist", None)
            by = f" (from the distribution {dist.name})" if dist is not None and getattr(dist, "name", None) else ""
            raise DeclarationsError(f"entry point {ep.name} = {ep.value} of the group {GROUP!r}{by} failed to load: "
                                    f"{type(exc).__name__}: {exc}; fix that package, or uninstall it "
                                    f"(for wirecheck's own, {INSTALL_FIX})") from exc
        loaded.append(f"{ep.name} = {ep.value}")
    return tuple(loaded)


def declarations() -> dict[str, tuple[str, Any]]:
    """Every declared limit, the installed packages of checks loaded first."""
    global _LOADED
    if _LOADED is None:
        _LOADED = ()  # a package that reads the declarations as it is imported sees those made so far
        try:
            _LOADED = _discover()
        except BaseException:
            _LOADED = None  # said again on the next read, never an empty registry taken for the checks'
            raise
    return DECLARED


def floors() -> dict[str, Floor]:
    """figure -> its Floor, in declaration order."""
    return {d.figure: d for _, d in declarations().values() if isinstance(d, Floor)}


def floor_checks() -> dict[str, str]:
    """figure -> the check that declares it."""
    return {d.figure: owner for owner, d in declarations().values() if isinstance(d, Floor)}


def sections() -> dict[str, Value | Section]:
    """gpu_health section -> its declaration (a Value or a Section)."""
    return {d.section: d for _, d in declarations().values() if isinstance(d, (Value, Section))}
