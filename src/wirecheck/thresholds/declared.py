"""The limits a check declares it reads (`@check(..., limits=(...))`), by kind, and the registry the
thresholds loader reads them from: every limit in thresholds.yaml is read because a check declares it.

Kinds (each names its place in the file as a dotted path):
- `Table(key, axes, entry, ...)` (wirecheck.thresholds.limits): a floor and/or ceiling keyed by placement
  class, op, strategy, fabric, copy direction, GPU model and GPU count, with its simulated table, the rule
  that derives a limit where it has none, and the names it must cover;
- `Floor("gpu_health.floors.<model>.FIGURE", unit=..., label=..., peak=None)`: a per-GPU figure's floor,
  keyed by GPU model, with `gpu_health.simulated_floors.FIGURE` and, where the figure has a `peak`
  ("memory", or a math dtype of wirecheck.node.hardware), `gpu_health.derived_floors.FIGURE`. `unit` is how
  the figure shows (the report, messages) and gives its quantity kind (wirecheck.core.quantity);
- `Rule(key, read, example)`: one section, read as a typed model (wirecheck.thresholds.fields) or by a
  function of the cursor: a value with its source, a share of a physical peak, the median rule, a section
  of its own shape; `Value("SECTION.FIELD", unit=...)`, one value with its source read as a
  `ShareRule(value, source, yaml_path)`, and `Section(key, parse, example)` are its short forms.

The checks register their declarations when their package is imported; a thresholds file can only be read
against them, so `declarations()` loads, once, every package of checks installed under the entry-point
group `wirecheck.checks` before the loader reads. wirecheck's own checks are its entry point
`builtin = "wirecheck.checks"` (pyproject.toml); a site's own package of checks adds one of its own and its
limits are read like the shipped ones. Found by entry point, not by name: the thresholds floor imports
nothing above it, and knows no package of checks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable

from wirecheck.core.quantity import EXAMPLES, UNITS
from wirecheck.thresholds.fields import Qty, Share, Source, per_mode, spec, valued
from wirecheck.thresholds.fields import read as read_model
from wirecheck.thresholds.limits import Axis, Entry, Limit, Table
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, ThresholdsError, _At

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
    if parts[:len(prefix)] != prefix or len(parts) < len(prefix) + n or (n == 1 and len(parts) != len(prefix) + n) \
            or not all(parts):
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

    place = "gpu_health.floors"

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
class Rule:
    key: str  # its place in the file: "collectives.wire_check"
    read: Any  # a typed model (a dataclass of wirecheck.thresholds.fields), or a function of the cursor
    example: str = "{...}"  # the section as the fix of an error shows it
    optional: bool = False  # a file may leave it out (older files: a command that needs it says so)

    @property
    def place(self) -> str:
        return self.key

    @property
    def section(self) -> str:
        return self.place.split(".")[-1]

    def value(self, at: _At) -> Any:
        return read_model(self.read, at) if isinstance(self.read, type) else self.read(at)


class Section(Rule):
    """A section of a shape of its own, read by `parse(at)`."""

    def __init__(self, key: str, parse: Callable[[Any], Any], example: str):
        _parts(key, (), 2, "SECTION.NAME")
        super().__init__(key, parse, example)

    parse = property(lambda self: self.read)


@dataclass(frozen=True)
class Value:
    """`SECTION: {FIELD: ..., source: ...}`: one value with its source, read as `.value`, `.source`, `.yaml_path`."""

    key: str  # "gpu_health.power.min_share_of_limit"
    unit: str  # "%", "°C", ...: its quantity kind follows; "%" is at most 100 %
    optional = False

    def __post_init__(self):
        _parts(self.key, (), 3, "SECTION.NAME.FIELD")
        _kind_of(self.unit, self.key)

    place = property(lambda self: self.key.rsplit(".", 1)[0])
    section = property(lambda self: self.place.split(".")[-1])
    field = property(lambda self: self.key.rsplit(".", 1)[1])
    kind = property(lambda self: _kind_of(self.unit, self.key)[0])
    example = property(lambda self: f'{{{self.field}: "{EXAMPLES.get(self.kind, "1")}", source: ...}}')

    def value(self, at: _At) -> Any:
        return read_model(_share_rule(self.field, self.kind), at)


@functools.lru_cache(maxsize=None)
def _share_rule(field: str, kind: str) -> type:
    example = f'"{EXAMPLES.get(kind, "1")}"'
    return valued("ShareRule", field, Share(example) if kind == "percent" else Qty(example, kind), attribute="value")


# --- what the Floors declare together ---------------------------------------------------------------------


@dataclass(frozen=True)
class PeerRule:
    """A GPU is named when it is below its node's other GPUs' median by more than `max_below_median` AND by
    more than `mad_k` scaled MADs (wirecheck.core.peer_stats)."""

    WHAT = "below-its-peers rule"
    max_below_median: float = spec(Share('"10 %"', "no GPU could ever be named; write less than 100 %", positive=False,
                                         below_one=True))
    mad_k: float = spec(Qty('"3 x"', "ratio"))
    source: str = spec(Source())
    yaml_path: str


FIGURE = Axis("figure", lambda: tuple(floors()), "GPU figure",
              "floors are keyed by the figures the checks declare (@check(..., limits=(Floor(...),)))")
MODEL = Axis("model", None, "GPU model")


def _floor_entry(names: tuple) -> Entry:
    figure = names[-1]
    return Entry(floors()[figure].kind, ("min",), ("min",), f"a {figure} floor", positive=True, hardware=False)


def _derived_floor(th, names: tuple, n_gpus, hardware, unmatched: str, **_) -> tuple[Limit | None, str]:
    """A model without a floor of its own: a share of the GPU's own peak (wirecheck.node.hardware, from NVML)."""
    model, figure = names
    none = f"no {figure} floor for {model or None!r} in {th.cites['gpu_health.floors']}"
    derived = th.values.get("gpu_health.derived_floors") or {}
    if figure not in derived:
        return None, f"{none} and no gpu_health.derived_floors.{figure} to derive one"
    if hardware is None:
        return None, f"{none} and the GPU's hardware is unknown (no peak to derive one from)"
    floor = floors()[figure]
    peak, how = hardware.memory_peak() if floor.peak == "memory" else hardware.math_peak(floor.peak)
    if peak is None:
        return None, f"{none}; {how}"
    eff, why, cited = derived[figure]
    return Limit(min=peak * eff, max=None, kind=floor.kind, rule="derived", yaml_path=cited,
                 source=f"derived: {eff * 100:g} % of the peak {how} (no entry for {model or None!r}; efficiency: {why})"), ""


def _derived_shares(at: _At) -> dict[str, tuple[float, str, str]]:
    """figure -> {efficiency: "78 %", source: ...}: the floor is that share of the GPU's own peak."""
    peaked = tuple(f for f, floor in floors().items() if floor.peak)
    out = {}
    fix = "derived floors are keyed by the figures the checks declare (@check(..., limits=(Floor(...),))) with a peak"
    for figure, entry in at.keyed(peaked, "GPU figure", fix).items():
        e = entry.fields(f"a derived {figure} floor", required={"efficiency": '"78 %"', "source": SOURCE_HINT})
        out[figure] = (Share('"78 %"')(e["efficiency"]), e["source"].source(), entry.cite)
    return out


def _plausible(at: _At, table, values) -> None:
    from wirecheck.node.hardware import from_profile
    from wirecheck.thresholds import plausible
    plausible.check_gpu_floors(at, table, {p.gpu_model: from_profile(p) for p in values["profiles"].values()},
                               {figure: floor.peak for figure, floor in floors().items()})


def floor_tables() -> tuple:
    """What the Floors declare together: the floor table by GPU model (NVML's name), the simulated one, the
    shares of the GPU's own peak, the peer rule."""
    simulated = Table("gpu_health.simulated_floors", (FIGURE,), _floor_entry, "floor", rule="simulated",
                      example='{hbm_copy: {min: "0.01 GB/s", source: ...}, ...}')
    return (Table("gpu_health.floors", (MODEL, FIGURE), _floor_entry, "floor", simulated=simulated,
                  none_simulated="no simulated {figure} floor", derived=_derived_floor, match_hardware=False,
                  plausible=_plausible, example='{"NVIDIA H200": {hbm_copy: {min: "3840 GB/s", source: ...}, ...}}'),
            simulated,
            Rule("gpu_health.peers", per_mode(PeerRule, "peer rules"),
                 '{hardware: {max_below_median: "10 %", mad_k: "3 x", source: ...}, simulated: {...}}'),
            Rule("gpu_health.derived_floors", _derived_shares, '{hbm_copy: {efficiency: "78 %", source: ...}, ...}  (of '
                 "the GPU's own peak, for models without floors)", optional=True))


KINDS = (Table, Floor, Rule, Value)
# key -> (the check that declares it, the declaration)
DECLARED: dict[str, tuple[str, Any]] = {}


def declare(check: str, limits) -> None:
    """Register `check`'s limits; a key another check declares differently is refused. A check declaring again
    replaces its own declaration: its module imported anew (pytester restores sys.modules after an in-process
    run, and the next import makes new reader classes) is the same check, not a clash."""
    for limit in limits:
        if not isinstance(limit, KINDS):
            raise ValueError(f"check {check!r}: limit {limit!r} is none of {', '.join(k.__name__ for k in KINDS)}")
        place = None if isinstance(limit, Floor) else limit.place
        for key, (owner, other) in DECLARED.items():
            clash = key == limit.key or (place is not None and getattr(other, "place", None) == place)
            if clash and other != limit and owner != check:  # two checks may read one limit, declared alike
                raise ValueError(f"check {check!r} declares {limit.key} as {limit!r}; check {owner!r} declares "
                                 f"{key} as {other!r}")
        if DECLARED.get(limit.key, (check,))[0] == check:
            DECLARED[limit.key] = (check, limit)


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


def sections() -> dict[str, Value | Rule]:
    """gpu_health section -> its declaration (a Value or a Rule)."""
    return {d.section: d for _, d in declarations().values()
            if isinstance(d, (Value, Rule)) and d.place.startswith("gpu_health.")}


def places() -> dict[str, tuple[str, Any]]:
    """Every place in the file a declaration reads (Floors as their three tables) -> (owner, declaration)."""
    out: dict[str, tuple[str, Any]] = {}
    for owner, d in declarations().values():
        out.setdefault(d.place, (owner, d))
    return out
