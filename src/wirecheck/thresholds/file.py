"""thresholds.yaml, read against the limits the checks declare, and every lookup answered by one resolver.

The file is the contract between the people who set limits and the tests that apply them, so a mistake in it
must stop the run at session start with the file, the YAML path and the fix, never surface as a wrong verdict
hours later. The file's sections are laid out from the declarations (wirecheck.thresholds.declared: each
check's Tables, Floors and Rules; the run settings of wirecheck.thresholds.settings); a key no declaration
names is refused with the keys that are, each declared key is read once (its typed model, its table), and
`Thresholds.limit` resolves any table alike: the simulated table in simulation, else the entry (exact GPU
count, then `any`) measured on this node's hardware, else the rule the table declares to derive one.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from wirecheck.core.paths import suite_paths
from wirecheck.thresholds import declared
from wirecheck.thresholds.baselines import CalibrationRule
from wirecheck.thresholds.declared import Floor, Rule
from wirecheck.thresholds.extends import read_layered
from wirecheck.thresholds.fields import read
from wirecheck.thresholds.limits import Limit, Table, check_name
from wirecheck.thresholds.settings import (CollectiveSettings, CopySettings, GpuHealthSettings, Profile,  # noqa: F401
                                           TrainingSettings, WorkerSettings, collective_settings)
from wirecheck.thresholds.yaml_reader import ThresholdsError, _At, _suggest

__all__ = ["CollectiveSettings", "Limit", "Profile", "Thresholds", "ThresholdsError", "load_thresholds"]


def _raw(at: _At) -> Any:
    return at.value


def _gpu_settings(simulated: bool):
    return lambda at: read(GpuHealthSettings, at, simulated=simulated)


# What the thresholds package reads itself: the run settings (no check reads them), the calibration rule
# (`wirecheck calibrate`), and the drain hooks' and the prolog's sections (read as written: wirecheck.records
# checks them).
OWN = (
    Rule("collectives.hardware", collective_settings(False), "{sweeps: {quick: {...}, full: {...}}, floor_size: ..., ...}"),
    Rule("collectives.simulated", collective_settings(True), "{sweeps: {quick: {...}, full: {...}}, floor_size: ..., ...}"),
    Rule("training.hardware", TrainingSettings, "{model: {...}, micro_batch: 8, ...}"),
    Rule("training.simulated", TrainingSettings, "{model: {...}, micro_batch: 2, ...}"),
    Rule("workers", WorkerSettings, '{deadlines: {hardware: {...}, simulated: {...}}, node_lock: {wait: "30 s", source: ...}}'),
    Rule("copy_bandwidth.settings", CopySettings, '{size: "1 GiB", warmup_iters: 2, iters: 10, timeout: "120 s"}'),
    Rule("gpu_health.hardware", _gpu_settings(False),
         "{hbm: {...}, gemm: {...}, memory_pattern: {...}, sustained: {...}, timeout: ...}"),
    Rule("gpu_health.simulated", _gpu_settings(True),
         "{hbm: {...}, gemm: {...}, memory_pattern: {...}, sustained: {...}, timeout: ...}"),
    Rule("calibration", CalibrationRule, '{min_runs: 3, tight_runs: 10, mad_k: "3 x", min_margin: "3 %", '
         'max_below_median: "10 %", source: ...}', optional=True),
    Rule("drain", _raw, '{flaky_max: 3, flaky_window: "24 h", guard_share: "50 %", guard_window: "5 min", '
                        'replace_after: 3, replace_window: "7 d", source: ...}', optional=True),
    Rule("prolog", _raw, '{trust_window: "6 h", source: ...}', optional=True),
)


# --- the layout --------------------------------------------------------------------------------------------

# The file's sections that hold others: what an error calls each and the order its keys are listed in (keys a
# declaration adds beyond these follow in the order declared); `open`: a section the checks add keys to,
# whose error names each added key's check.
GROUPS = {
    "": ("top-level sections", ("profiles", "collectives", "training", "health", "workers", "copy_bandwidth", "network",
                                "fleet", "gpu_health", "burn_in", "calibration", "history", "drain", "prolog"), False),
    "collectives": ("collectives sections", ("hardware", "simulated", "floors", "simulated_floors", "derived_floor",
                                             "wire_check", "pair_spread", "group_scaling", "latency", "half_peak",
                                             "axes_floor"), False),
    "collectives.latency": ("small-message latency checks", ("up_to", "ceilings", "simulated_ceilings"), False),
    "collectives.half_peak": ("n½ checks", ("fraction", "ceilings", "simulated_ceilings"), False),
    "training": ("training sections", ("hardware", "simulated", "agreement", "model_state", "peak_memory",
                                       "throughput_floors", "simulated_throughput_floors", "slow_wire", "capacity",
                                       "peak_flops", "single_gpu_throughput_floors",
                                       "simulated_single_gpu_throughput_floor"), False),
    "copy_bandwidth": ("copy-bandwidth sections", ("settings", "floors", "derived_floor"), False),
    "gpu_health": ("gpu_health sections", ("hardware", "simulated", "floors", "simulated_floors", "peers",
                                           "derived_floors"), True),
}
# A section's example where an error asks for it whole.
EXAMPLES = {
    "collectives": "{hardware: {...}, floors: {...}, ...}",
    "collectives.latency": '{up_to: "64 KiB", ceilings: {...}, simulated_ceilings: {...}}',
    "collectives.half_peak": '{fraction: "50 %", ceilings: {...}, simulated_ceilings: {...}}',
    "training": "{hardware: {...}, ...}",
    "copy_bandwidth": '{settings: {...}, floors: {nvswitch: {h2d: {min: "48 GB/s", source: ...}}}, derived_floor: {...}}',
    "gpu_health": "{hardware: {...}, simulated: {...}, floors: {...}, ...}",
}


def _declared() -> dict[str, tuple[str, Any]]:
    """place -> (owner, declaration): the thresholds package's own, the checks', the Floors' tables."""
    places = {d.place: ("wirecheck.thresholds", d) for d in OWN}
    for place, (owner, d) in declared.places().items():
        if isinstance(d, Floor):
            for table in declared.floor_tables():
                places.setdefault(table.place, (owner, table))
        else:
            places.setdefault(place, (owner, d))
    return places


def _children(path: str, places: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """The keys under `path`, in the layout's order: a declaration, or None for a section holding others."""
    prefix = f"{path}." if path else ""
    found: dict[str, Any] = {}
    for place, (_, d) in places.items():
        if place.startswith(prefix):
            rest = place[len(prefix):].split(".")
            if len(rest) == 1:
                found[rest[0]] = d
            else:
                found.setdefault(rest[0], None)
    order = GROUPS.get(path, ("", (), False))[1]
    return {k: found[k] for k in order if k in found} | {k: v for k, v in found.items() if k not in order}


def _optional(path: str, d: Any, places: Mapping) -> bool:
    if d is not None:
        return bool(getattr(d, "optional", False))
    return all(getattr(x, "optional", False) for p, (_, x) in places.items() if p.startswith(path + "."))


class _Reader:
    """Reads the file's tree from the declarations into `values` (place -> what it holds) and `cites`."""

    def __init__(self, places: Mapping[str, tuple[str, Any]], recorded: bool = False):
        self.places, self.values, self.cites, self.recorded = places, {}, {}, recorded

    def group(self, at: _At, path: str) -> None:
        what, _, is_open = GROUPS.get(path, (f"{path.rsplit('.', 1)[-1]} sections", (), False))
        children = _children(path, self.places)
        required, optional = {}, {}
        for key, d in children.items():
            place = f"{path}.{key}" if path else key
            example = EXAMPLES.get(place) or (d.example if d is not None else "{...}")
            (optional if _optional(place, d, self.places) else required)[key] = example
        if is_open:
            fixed = [k for k in GROUPS[path][1] if k in children]
            owners = {k: self.places.get(f"{path}.{k}", ("a check",))[0] for k in children if k not in fixed}
            for key in at.mapping(f"{path} sections"):
                if key not in children:
                    raise at.child(key).error(
                        f"unknown key {str(key)!r} in {what}{_suggest(key, tuple(children))}",
                        f"expected one of: {', '.join(fixed)} or a section a check declares: "
                        + ", ".join(f"{name} ({owner})" for name, owner in owners.items()))
        f = at.fields(what, required, optional)
        for key, d in children.items():
            if key in f:
                place = f"{path}.{key}" if path else key
                self.cites[place] = f[key].cite
                if d is None:
                    self.group(f[key], place)
                else:
                    self.values[place] = (d.read(f[key], self.values, cover=not self.recorded) if isinstance(d, Table)
                                          else d.value(f[key]))


# --- the thresholds ----------------------------------------------------------------------------------------

# The names the rest of the suite reads a section by (None where an optional section is left out).
ATTRIBUTES = {"profiles": "profiles", "derived_floor": "collectives.derived_floor", "wire_check": "collectives.wire_check",
              "pair_spread": "collectives.pair_spread", "group_scaling": "collectives.group_scaling",
              "axes_floor": "collectives.axes_floor", "latency": "collectives.latency.up_to", "half_peak": "collectives.half_peak.fraction", "health": "health",
              "network": "network", "workers": "workers", "burn_in": "burn_in", "calibration_rule": "calibration",
              "history_rule": "history", "drain": "drain", "prolog": "prolog"}


class Thresholds:
    """A thresholds file, read: `values` (place -> what it holds), `tables` (place -> its declared Table),
    and the lookups the suite makes."""

    def __init__(self, path: Path, values: Mapping[str, Any], cites: Mapping[str, str], tables: Mapping[str, Table]):
        self.path, self.values, self.cites, self.tables = path, MappingProxyType(values), cites, tables
        self.gpu_health = GpuHealthLimits(self)
        self.copy_bandwidth = CopyBandwidth(self)

    def __getattr__(self, name: str) -> Any:
        if name in ATTRIBUTES and "values" in self.__dict__:
            return self.__dict__["values"].get(ATTRIBUTES[name])
        raise AttributeError(name)

    def limit(self, key: str, names: tuple, n_gpus: int | None = None, simulated: bool = False, hardware=None,
              **physics: Any) -> tuple[Limit | None, str]:
        """(the limit of the table at `key` for `names` and `n_gpus`, "") or (None, why there is none)."""
        return self.tables[key].resolve(self, names, n_gpus, simulated, hardware, **physics)

    # The collectives' and training's lookups, as the suite calls them.
    def busbw_rule(self, placement_class: str, op: str, n_gpus: int, simulated: bool,
                   link_ceiling_bytes_per_s: float | None = None, hardware=None, axes=None) -> tuple[Limit | None, str]:
        """`axes` (a wirecheck.vocab.ops.Axes of `op`; None: its first dtype and reduction): past the op's first,
        the op's limit as `collectives.axes_floor` says (a file without it judges none of them)."""
        limit, why = self.limit("collectives.floors", (placement_class, op), n_gpus, simulated, hardware,
                                ceiling=link_ceiling_bytes_per_s)
        if limit is None or axes is None or axes.first:
            return limit, why
        if self.axes_floor is None:
            return None, (f"no collectives.axes_floor (the rule for {op}'s dtypes and reductions past its first: "
                          "copy it from the shipped thresholds.yaml)")
        return self.axes_floor.apply(limit, axes.words, op), ""

    def busbw_limit(self, *args, **kwargs) -> Limit | None:
        return self.busbw_rule(*args, **kwargs)[0]

    def latency_rule(self, placement_class: str, op: str, n_gpus: int, simulated: bool, hardware=None):
        return self.limit("collectives.latency.ceilings", (placement_class, op), n_gpus, simulated, hardware)

    def latency_limit(self, *args, **kwargs) -> Limit | None:
        return self.latency_rule(*args, **kwargs)[0]

    def half_peak_rule(self, placement_class: str, op: str, n_gpus: int, simulated: bool, hardware=None):
        return self.limit("collectives.half_peak.ceilings", (placement_class, op), n_gpus, simulated, hardware)

    def half_peak_limit(self, *args, **kwargs) -> Limit | None:
        return self.half_peak_rule(*args, **kwargs)[0]

    def slowest_busbw_floor(self, op: str, simulated: bool) -> Limit | None:
        """The lowest busbw floor any class and GPU count has for `op`: the slowest wire the file admits, for
        estimating a call's time where the placement's own class has no floor."""
        table = self.tables["collectives.floors"]
        table.check(("nvswitch", op))
        tables = [table.simulated.key] if simulated else [table.key]
        floors = [lim for key in tables for names, counts in self.values[key].items() if names[-1] == op
                  for lim in counts.values() if lim.min]
        return min(floors, key=lambda lim: lim.min) if floors else None

    def collective_settings(self, simulated: bool) -> CollectiveSettings:
        return self.values["collectives.simulated" if simulated else "collectives.hardware"]

    def training_settings(self, simulated: bool) -> TrainingSettings:
        return self.values["training.simulated" if simulated else "training.hardware"]

    def training_limits(self, simulated: bool) -> "TrainingLimits":
        return TrainingLimits(self, bool(simulated))

    def fleet(self, simulated: bool):
        return self.values["fleet"].modes(bool(simulated))

    @property
    def calibration(self):
        return self._required("calibration")

    @property
    def history(self):
        return self._required("history")

    def _required(self, section: str) -> Any:
        if section not in self.values:
            raise ThresholdsError(f"{self.path}: has no `{section}:` section (a file older than that rule); copy it from "
                                  "the thresholds.yaml shipped with wirecheck, or start the file with `extends: wirecheck`")
        return self.values[section]

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(self.profiles)

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(self.profiles)
            # The shipped file is replaced by the next install: a site's own node type belongs in a site file.
            where = (f"a site file that starts `extends: wirecheck` and pass it as --thresholds FILE"
                     if Path(self.path).resolve() == suite_paths().thresholds.resolve() else str(self.path))
            raise ThresholdsError(
                f"{self.path}: profiles: no profile {name!r}{_suggest(name, tuple(self.profiles))}; known profiles: "
                f"{known}. Pass one of them as --profile NAME, or add a profiles.{name} entry to {where}") from None


class _Part:
    """A part of the file read through its Thresholds."""

    def __init__(self, thresholds: Thresholds, simulated: bool = False):
        self._th, self.simulated = thresholds, simulated


class TrainingLimits(_Part):
    agreement = property(lambda s: s._th.values["training.agreement"][s.simulated])
    model_state = property(lambda s: s._th.values["training.model_state"])
    slow_wire = property(lambda s: s._th.values["training.slow_wire"])
    capacity = property(lambda s: s._th.values["training.capacity"])

    def peak_flops(self, gpu_model: str, precision: str):
        """The dense peak of `gpu_model` in `precision`; None without an entry (MFU then stays unreported)
        and always in simulation (CPU ranks)."""
        from wirecheck.core.precision import NAMES
        check_name(precision, NAMES, "precision")
        return None if self.simulated else self._th.values["training.peak_flops"].get((gpu_model, precision))

    def single_gpu_floor(self, gpu_model: str | None) -> Limit | None:
        """Min tokens/s of one GPU alone for `gpu_model`; the CPU sanity floor in simulation; None without one."""
        return self._th.limit("training.single_gpu_throughput_floors", (gpu_model or "",), simulated=self.simulated)[0]

    def peak_memory(self, placement_class: str, strategy: str) -> Limit | None:
        """Max peak allocated bytes per GPU; None in simulation (no CUDA memory to read)."""
        return self._th.limit("training.peak_memory", (placement_class, strategy), simulated=self.simulated)[0]

    def throughput_rule(self, placement_class: str, strategy: str, n_gpus: int, hardware=None):
        return self._th.limit("training.throughput_floors", (placement_class, strategy), n_gpus, self.simulated, hardware)

    def throughput_floor(self, *args, **kwargs) -> Limit | None:
        return self.throughput_rule(*args, **kwargs)[0]


class GpuHealthLimits(_Part):
    def __getattr__(self, name: str) -> Any:
        if "_th" not in self.__dict__:
            raise AttributeError(name)
        values = self._th.values
        if f"gpu_health.{name}" in values:
            return values[f"gpu_health.{name}"]
        raise AttributeError(f"gpu_health has no {name!r}: no check declares it (sections: "
                             f"{', '.join(declared.sections())})")

    def settings(self, simulated: bool) -> GpuHealthSettings:
        return self._th.values["gpu_health.simulated" if simulated else "gpu_health.hardware"]

    def floor_rule(self, figure: str, gpu_model: str | None, simulated: bool, hardware=None):
        """(the floor of `figure` for this GPU model, or the CPU one, or one derived from the GPU's own peak, "");
        (None, why) where none (the check then judges by the peer rule only, and says why)."""
        return self._th.limit("gpu_health.floors", (gpu_model or "", figure), simulated=simulated, hardware=hardware)

    def floor(self, *args, **kwargs) -> Limit | None:
        return self.floor_rule(*args, **kwargs)[0]

    def peers(self, simulated: bool):
        return self._th.values["gpu_health.peers"][bool(simulated)]

    models = property(lambda s: tuple(sorted({model for model, _ in s._th.values["gpu_health.floors"]})))
    floors_yaml_path = property(lambda s: s._th.cites["gpu_health.floors"])
    _floors = property(lambda s: s._th.values["gpu_health.floors"])
    _simulated_floors = property(lambda s: s._th.values["gpu_health.simulated_floors"])


class CopyBandwidth(_Part):
    settings = property(lambda s: s._th.values["copy_bandwidth.settings"])
    _floors = property(lambda s: s._th.values["copy_bandwidth.floors"])

    derived_floor = property(lambda s: s._th.values["copy_bandwidth.derived_floor"])

    def limit_rule(self, fabric: str, direction: str, link_ceiling_bytes_per_s: float | None, hardware=None):
        """(the floor for a copy in `direction` on a node of `fabric`: the entry measured on this hardware, else
        derived from the link it rides, "") or (None, why there is none)."""
        return self._th.limit("copy_bandwidth.floors", (fabric, direction), hardware=hardware,
                              ceiling=link_ceiling_bytes_per_s)

    def limit(self, *args, **kwargs) -> Limit | None:
        return self.limit_rule(*args, **kwargs)[0]


def load_thresholds(path: str | Path, content: bytes | None = None,
                    bases: Mapping[str, bytes] | None = None) -> Thresholds:
    """Read and validate a thresholds file (`content`: its bytes, kept elsewhere, e.g. in a run's record; `path`
    then names it in messages), laid over the file its `extends:` names (`bases`: absolute path -> bytes of
    those kept elsewhere). Raises ThresholdsError, whose message names the file that holds the mistake.
    A file kept elsewhere (a run's record) is read as that run read it: an op or strategy added to the
    vocabulary since is not asked of it (the run measured none of it), where the suite's own file must
    give each its limit."""
    path = Path(path)
    data, _ = read_layered(path, content, bases)
    if data is None:
        raise ThresholdsError(f"{path}: the file is empty; it must hold the sections profiles, collectives and training "
                              "(start from the thresholds.yaml shipped with wirecheck)")
    places = _declared()
    reader = _Reader(places, recorded=content is not None)
    reader.group(_At(str(path), (), data, 1), "")
    tables = {p: d for p, (_, d) in places.items() if isinstance(d, Table)}
    return Thresholds(path, reader.values, reader.cites, tables)
