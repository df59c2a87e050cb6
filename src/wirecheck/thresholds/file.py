"""thresholds.yaml -> frozen dataclasses, validated at load.

The file is the contract between the people who set limits and the tests that apply them, so a
mistake in it must stop the run at session start with the file, the YAML path and the fix, never
surface as a wrong verdict hours later. Everything is checked: unknown keys (typos would otherwise
silently drop a floor), types, units (see wirecheck.core.quantity), signs, required sections (a missing
placement class would silently judge nothing), and that every limit says where it came from.

Values come back in base units: bytes/s, bytes, seconds, fractions, ratios, tokens/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping


from wirecheck.measure.curve import SWEEP_NAMES, SweepSpec, geometric_sizes
from wirecheck.workers.deadlines import DeadlineRule
from wirecheck.vocab.placements import CLASSES, CLASS_CROSS_QUAD, CLASS_FORCED_PCIE, CLASS_NETWORK, CLASS_PCIE
# The vocabulary of the file. Op names follow torch.distributed; strategy names follow the runners.
from wirecheck.core.quantity import format_bw
from wirecheck.node.hardware import from_profile
from wirecheck.thresholds import plausible
from wirecheck.thresholds.copy_limits import CopyBandwidth, parse_copy_bandwidth
from wirecheck.thresholds.baselines import CalibrationRule, HistoryRule, missing, parse_calibration, parse_history
from wirecheck.thresholds.burn_in import BurnInLimits, parse_burn_in
from wirecheck.thresholds.gpu_health import GpuHealthLimits, parse_gpu_health
from wirecheck.thresholds.tables import COLLECTIVE_FLOOR_CLASSES, CountTable, Limit, _ratio_section, median_rule
from wirecheck.thresholds.tables import efficiency as tables_efficiency
from wirecheck.thresholds.tables import _bounds_entry, _by_count, _check_name, _count_table, as_rule, lookup
from wirecheck.thresholds.training import TrainingLimits, TrainingSettings, parse_training
from wirecheck.thresholds.extends import read_layered
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, ThresholdsError, _At, _suggest
from wirecheck.vocab.ops import OPS
from wirecheck.node.topology import BRIDGED, FABRICS, PCIE, PCIE_LEVELS


# Placement classes whose traffic rides PCIe: their derived floor comes from the GPU's PCIe link.
PCIE_CLASSES = (CLASS_PCIE, CLASS_CROSS_QUAD, CLASS_FORCED_PCIE)

# ---------------------------------------------------------------------------------------------
# Result types


@dataclass(frozen=True)
class Profile:
    """An expected node inventory (--profile NAME)."""

    name: str
    gpu_count: int
    gpu_model: str  # as NVML names it
    fabric: str  # nvswitch | bridged | pcie
    nvlinks_per_gpu: int
    nvlink_speed: float | None  # bytes/s per link per direction; None without NVLink
    pcie_gen: int
    pcie_width: int
    gpu_memory: int  # bytes, nominal
    source: str
    yaml_path: str
    nvlinks_per_peer: int | None = None  # bridged only
    group_size: int | None = None  # bridged only
    nic_ports: int | None = None  # InfiniBand/RoCE ports expected (tests/test_network.py); None: not judged
    nic_rate: float | None = None  # bytes/s per port per direction; None: not judged
    # The farthest topo -m path (PIX..SYS) from any GPU to its nearest NIC that this node type is
    # built with; farther fails. None: only network.gpu_nic_path's warning.
    gpu_nic_path: str | None = None
    # A recorded topology (fixtures/topologies NAME) wired as this node type: what a --profile dry run simulates.
    topology: str | None = None
    # What the derived limits need (wirecheck.node.hardware), as NVML would report it on such a node;
    # None: not described (the limits that need it fall back to the next rule and say so).
    compute_capability: str | None = None
    sm_count: int | None = None
    sm_clock_max_mhz: float | None = None
    mem_bus_width: int | None = None  # bits
    mem_clock_max_mhz: float | None = None
    power_limit_w: float | None = None
    nvlink_gen: int | None = None


@dataclass(frozen=True)
class CollectiveSettings:
    sweeps: Mapping[str, SweepSpec]  # "quick" (the default run) and "full" (the whole curve)
    floor_size: int  # bytes; floors are judged at this size only (in every sweep)
    warmup_iters: int
    iters: int
    timeout_s: float
    benchmark_rounds: int
    # Sizes up to this are also timed as CUDA-graph replays (the faster path counts); None: eager
    # only (always so in simulation: gloo has no graphs).
    graph_up_to: int | None = None
    # Replays of the captured calls between the timing events: the first replay's launch (the host
    # submitting the graph while the start event has already passed) is shared by all of them.
    graph_replays: int = 1

    @property
    def sizes(self) -> tuple[int, ...]:
        """The default (quick) sweep, in bytes."""
        return self.sweeps["quick"].sizes

    def sizes_for(self, sweep: str) -> tuple[int, ...]:
        return self.sweep(sweep).sizes

    def sweep(self, name: str) -> SweepSpec:
        _check_name(name, SWEEP_NAMES, "sweep")
        return self.sweeps[name]


@dataclass(frozen=True)
class LatencyRule:
    """Small-message latency: the median time per call over the sweep's sizes up to `up_to`."""

    up_to: int  # bytes
    yaml_path: str


@dataclass(frozen=True)
class HalfPeakRule:
    """n½: the size where busbw first reaches `fraction` of the curve's peak busbw."""

    fraction: float
    yaml_path: str


@dataclass(frozen=True)
class DerivedFloor:
    efficiency: float  # fraction of the link ceiling, for ops without their own
    source: str
    yaml_path: str
    ops: Mapping[str, tuple[float, str]] = field(default_factory=dict)  # op -> (efficiency, source)
    pcie: tuple[float, str] | None = None  # PCIe paths: (efficiency of the GPU's PCIe link one way, source)

    def for_op(self, op: str) -> tuple[float, str, str]:
        """(efficiency, its source, its YAML path) for `op`."""
        if op in self.ops:
            eff, why = self.ops[op]
            return eff, why, f"{self.yaml_path}.ops.{op}"
        return self.efficiency, self.source, self.yaml_path


@dataclass(frozen=True)
class AxesFloor:
    """The busbw limit of an op's dtypes and reductions past its first (wirecheck.vocab.ops.Axes): `share`
    of the op's own floor; its ceiling (a PCIe path's link) as it is."""

    share: float  # fraction of the op's floor
    source: str
    yaml_path: str

    def apply(self, limit: Limit, words: str, op: str) -> Limit:
        share = "the" if self.share == 1 else f"{self.share * 100:g} % of the"
        return replace(limit, min=None if limit.min is None else limit.min * self.share,
                       source=f"{limit.source}; {words}: {share} {op} floor, by {self.yaml_path}")


@dataclass(frozen=True)
class NetworkLimits:
    """Multi-node collectives and the node's NICs (wirecheck.fleet.multinode, tests/test_network.py)."""

    efficiency: float  # fraction of the NICs' line rate a multi-node busbw must reach
    efficiency_source: str
    efficiency_yaml_path: str
    gpu_nic_max_path: str  # the farthest topo -m path (PIX..SYS) from a GPU to its nearest NIC without a warning
    gpu_nic_source: str
    gpu_nic_yaml_path: str


@dataclass(frozen=True)
class FleetRule:
    """A node's figure against its peers' median: named when it is below the median by more than
    `mad_k` x the peers' scaled MAD (1.4826 x median absolute deviation) and by more than
    `max_below_median` (a fraction). Both: MAD alone flags noise on a tight fleet, a percentage
    alone flags ordinary noise on a noisy figure."""

    max_below_median: float
    mad_k: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class FleetLimits:
    busbw: FleetRule  # collective busbw per placement/op at floor_size, and NIC line rate
    throughput: FleetRule  # training tokens/s per placement (wire) and strategy
    pairs: FleetRule  # node pairs of the ring schedule against the median pair
    min_nodes: int  # a median needs this many nodes (pairs) with the figure
    gpus: FleetRule  # each GPU's HBM and GEMM figures against the fleet's other GPUs of its model


@dataclass(frozen=True)
class WireCheck:
    min_ratio: float  # NVLink busbw / forced-host-path busbw
    source: str
    yaml_path: str


@dataclass(frozen=True)
class PairSpread:
    max_below_median: float  # fraction
    source: str
    yaml_path: str


@dataclass(frozen=True)
class GroupScaling:
    quad_over_pair_min: float  # ratio
    source: str
    yaml_path: str


@dataclass(frozen=True)
class HealthLimits:
    """How much each error counter may grow over a run (DCGM's health-watch rules)."""

    nvlink_replay: int  # events, over the whole run
    nvlink_recovery: int
    nvlink_crc_rate: float  # CRC flit + data errors per second, per link
    pcie_replay_rate: float  # replays per second, per GPU
    source: str
    yaml_path: str


@dataclass(frozen=True)
class WorkerSettings:
    """workers: per-call deadlines (hardware / simulated) and the per-node lock."""

    _deadlines: Mapping[bool, DeadlineRule]  # keyed by `simulated`
    lock_wait_s: float  # how long a run waits for another run to release the node
    lock_source: str
    lock_yaml_path: str

    def deadline_rule(self, simulated: bool) -> DeadlineRule:
        return self._deadlines[bool(simulated)]


@dataclass(frozen=True, eq=False)
class Thresholds:
    path: Path
    profiles: Mapping[str, Profile]
    derived_floor: DerivedFloor
    wire_check: WireCheck
    pair_spread: PairSpread
    group_scaling: GroupScaling
    _collective_settings: Mapping[bool, CollectiveSettings]  # keyed by `simulated`
    _floors: Mapping[tuple[str, str], CountTable]
    _simulated_floors: Mapping[str, CountTable]
    latency: LatencyRule
    half_peak: HalfPeakRule
    _latency_ceilings: Mapping[bool, Mapping]  # simulated -> {(class, op) | op: CountTable}
    _half_peak_ceilings: Mapping[bool, Mapping]
    _training_settings: Mapping[bool, TrainingSettings]  # the training section (thresholds_training)
    _training_limits: Mapping[bool, TrainingLimits]
    health: HealthLimits
    workers: WorkerSettings
    copy_bandwidth: CopyBandwidth  # host<->device and peer copies without NCCL (thresholds_copy)
    network: NetworkLimits
    _fleet: Mapping[bool, FleetLimits]  # keyed by `simulated`
    gpu_health: GpuHealthLimits  # each GPU under load (thresholds.gpu_health)
    burn_in: BurnInLimits  # what only a burn-in judges (thresholds.burn_in)
    # wirecheck calibrate's rule and the history rule (thresholds.baselines); None in a file older than them
    calibration_rule: CalibrationRule | None = None
    history_rule: HistoryRule | None = None
    # collectives.axes_floor: how an op's further dtypes and reductions are judged; None in a file older than the axes
    axes_floor: AxesFloor | None = None
    drain: dict | None = None  # the `drain:` section (wirecheck.records.drain_policy), as written
    prolog: dict | None = None  # the `prolog:` section (wirecheck.records.trust.trust_window), as written

    @property
    def calibration(self) -> CalibrationRule:
        if self.calibration_rule is None:
            raise missing(self.path, "calibration")
        return self.calibration_rule

    @property
    def history(self) -> HistoryRule:
        if self.history_rule is None:
            raise missing(self.path, "history")
        return self.history_rule

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(self.profiles)

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(self.profiles)
            raise ThresholdsError(
                f"{self.path}: profiles: no profile {name!r}{_suggest(name, tuple(self.profiles))}; known profiles: {known}. "
                f"Pass one of them as --profile NAME, or add a profiles.{name} entry to the file"
            ) from None

    def collective_settings(self, simulated: bool) -> CollectiveSettings:
        return self._collective_settings[bool(simulated)]

    def busbw_limit(
        self,
        placement_class: str,
        op: str,
        n_gpus: int,
        simulated: bool,
        link_ceiling_bytes_per_s: float | None = None,
        hardware=None,
        axes=None,
    ) -> Limit | None:
        """The busbw floor/ceiling for this placement, op and GPU count, or None (not judged)."""
        return self.busbw_rule(placement_class, op, n_gpus, simulated, link_ceiling_bytes_per_s, hardware, axes)[0]

    def busbw_rule(
        self,
        placement_class: str,
        op: str,
        n_gpus: int,
        simulated: bool,
        link_ceiling_bytes_per_s: float | None = None,
        hardware=None,
        axes=None,
    ) -> tuple[Limit | None, str]:
        """(the limit, "") or (None, why there is none).

        `axes` (a wirecheck.vocab.ops.Axes of `op`; None: its first dtype and reduction): past the op's
        first, the op's limit as `collectives.axes_floor` says (a file without it judges none of them).

        Order: the table entry (exact count, then `any`) measured on this node's hardware (an entry
        with `hardware:` for other hardware falls through, and the derived limit says so), then the
        derived floor: NVLink classes from `link_ceiling_bytes_per_s` (min NV# of the placement x
        per-link speed), the PCIe classes from `hardware`'s PCIe generation and width, the network
        from the NICs' line rate. `hardware`: a wirecheck.node.hardware.Hardware, None when unknown
        (a record written before hardware was recorded: entries apply as they are). Simulation uses
        the gloo sanity floors whatever the class: CPU numbers say nothing about the wires.
        """
        limit, why = self._op_busbw_rule(placement_class, op, n_gpus, simulated, link_ceiling_bytes_per_s, hardware)
        if limit is None or axes is None or axes.first:
            return limit, why
        if self.axes_floor is None:
            return None, (f"no collectives.axes_floor (the rule for {op}'s dtypes and reductions past its first: "
                          "copy it from the shipped thresholds.yaml)")
        return self.axes_floor.apply(limit, axes.words, op), ""

    def _op_busbw_rule(self, placement_class: str, op: str, n_gpus: int, simulated: bool,
                       link_ceiling_bytes_per_s: float | None, hardware) -> tuple[Limit | None, str]:
        _check_name(placement_class, CLASSES, "placement class")
        _check_name(op, OPS, "op")
        if simulated:
            found, _ = lookup(self._simulated_floors.get(op), n_gpus)
            return found, "" if found else f"no simulated busbw floor for {op}"
        found, fell = lookup(self._floors.get((placement_class, op)), n_gpus, hardware)
        if found is not None:
            return found, ""
        unmatched = f" ({fell})" if fell else ""
        if placement_class in PCIE_CLASSES:
            return self._pcie_busbw(placement_class, op, n_gpus, hardware, unmatched)
        if not link_ceiling_bytes_per_s:
            return None, (f"no busbw floor for {placement_class}/{op}/{n_gpus} GPUs{unmatched} and no link ceiling "
                          "to derive one (NVML gave no NV# or per-link speed)")
        if placement_class == CLASS_NETWORK:
            # Across nodes the ceiling is the NICs' line rate, not NVLink: its own efficiency.
            eff, ceiling, why, cited = (self.network.efficiency, "the NICs' line rate",
                                        self.network.efficiency_source, self.network.efficiency_yaml_path)
        else:
            eff, why, cited = self.derived_floor.for_op(op)
            ceiling = "the link ceiling (min NV# x per-link speed)"
        return Limit(
            min=link_ceiling_bytes_per_s * eff,
            max=None,
            source=(
                f"derived: {eff * 100:g} % of {ceiling} {format_bw(link_ceiling_bytes_per_s)} "
                f"(no table entry for {placement_class}/{op}/{n_gpus} GPUs{unmatched}; efficiency: {why})"
            ),
            yaml_path=cited,
            rule="derived",
        ), ""

    def _pcie_busbw(self, placement_class: str, op: str, n_gpus: int, hardware, unmatched: str) -> tuple[Limit | None, str]:
        """A PCIe path (no NVLink, across bridged groups, or NVLink forced off): the GPU's PCIe link one way."""
        peak, how = hardware.pcie_peak() if hardware is not None else (None, "no PCIe peak: the node's hardware is unknown")
        pcie = self.derived_floor.pcie
        if peak is None or pcie is None:
            missing = how if peak is None else f"no {self.derived_floor.yaml_path}.pcie efficiency in the file"
            return None, f"no busbw floor for {placement_class}/{op}/{n_gpus} GPUs{unmatched}; {missing}"
        eff, why = pcie
        # cross_quad and forced_pcie must stay in PCIe territory: above the link, the traffic took NVLink.
        ceiling = peak if placement_class in (CLASS_CROSS_QUAD, CLASS_FORCED_PCIE) else None
        return Limit(
            min=peak * eff, max=ceiling,
            source=(f"derived: {eff * 100:g} % of {how}" + (", at most the link" if ceiling else "")
                    + f" (no table entry for {placement_class}/{op}/{n_gpus} GPUs{unmatched}; efficiency: {why})"),
            yaml_path=f"{self.derived_floor.yaml_path}.pcie", rule="derived"), ""

    def slowest_busbw_floor(self, op: str, simulated: bool) -> Limit | None:
        """The lowest busbw floor any class and GPU count has for `op`: the slowest wire the file
        admits, for estimating a call's time where the placement's own class has no floor."""
        _check_name(op, OPS, "op")
        if simulated:
            tables = [self._simulated_floors.get(op) or {}]
        else:
            tables = [t for (klass, o), t in self._floors.items() if o == op]
        floors = [lim for table in tables for lim in table.values() if lim.min]
        return min(floors, key=lambda lim: lim.min) if floors else None

    def latency_limit(self, placement_class: str, op: str, n_gpus: int, simulated: bool, hardware=None) -> Limit | None:
        """The small-message latency ceiling (seconds) for this placement, op and GPU count, or None.

        Hardware: by class, op, then exact count or `any`, of the entries measured on this node's
        `hardware` (None: unknown, every entry applies). Simulation: by op only (CPU sanity ceilings).
        """
        return self.latency_rule(placement_class, op, n_gpus, simulated, hardware)[0]

    def latency_rule(self, placement_class: str, op: str, n_gpus: int, simulated: bool,
                     hardware=None) -> tuple[Limit | None, str]:
        return self._curve_limit(self._latency_ceilings, placement_class, op, n_gpus, simulated, hardware)

    def half_peak_limit(self, placement_class: str, op: str, n_gpus: int, simulated: bool, hardware=None) -> Limit | None:
        """The n½ ceiling (bytes) for this placement, op and GPU count, or None (not judged)."""
        return self.half_peak_rule(placement_class, op, n_gpus, simulated, hardware)[0]

    def half_peak_rule(self, placement_class: str, op: str, n_gpus: int, simulated: bool,
                       hardware=None) -> tuple[Limit | None, str]:
        return self._curve_limit(self._half_peak_ceilings, placement_class, op, n_gpus, simulated, hardware)

    @staticmethod
    def _curve_limit(tables, placement_class: str, op: str, n_gpus: int, simulated: bool,
                     hardware=None) -> tuple[Limit | None, str]:
        _check_name(placement_class, CLASSES, "placement class")
        _check_name(op, OPS, "op")
        key = op if simulated else (placement_class, op)
        return lookup(tables[bool(simulated)].get(key), n_gpus, None if simulated else hardware)

    def training_settings(self, simulated: bool) -> TrainingSettings:
        return self._training_settings[bool(simulated)]

    def training_limits(self, simulated: bool) -> TrainingLimits:
        return self._training_limits[bool(simulated)]

    def fleet(self, simulated: bool) -> FleetLimits:
        return self._fleet[bool(simulated)]


# ---------------------------------------------------------------------------------------------
# Sections


def _profile(at: _At, name: str) -> Profile:
    f = at.fields(
        "profile fields",
        required={
            "gpu_count": "8",
            "gpu_model": "NVIDIA H200  (the name NVML reports)",
            "fabric": "nvswitch  (or bridged, pcie)",
            "nvlinks_per_gpu": "18",
            "pcie_gen": "5",
            "pcie_width": "16",
            "gpu_memory": '"141 GB"',
            "source": SOURCE_HINT,
        },
        optional={"nvlink_speed": '"26.562 GB/s"', "nvlinks_per_peer": "6", "group_size": "4",
                  "nic_ports": "8", "nic_rate": '"50 GB/s"  (400 Gb/s NDR, per port per direction)',
                  "gpu_nic_path": "PIX  (a NIC under each GPU's own PCIe switch)",
                  "topology": "h100-sxm-8-nics  (a recorded topology, wired as this node: what a --profile dry run simulates)",
                  **_PROFILE_HARDWARE},
    )
    fabric = f["fabric"].choice(FABRICS)
    gpu_count = f["gpu_count"].count(minimum=1)
    links = f["nvlinks_per_gpu"].count()
    speed = None
    if "nvlink_speed" in f:
        speed = f["nvlink_speed"].quantity("bandwidth", positive=True)
    elif links > 0:
        raise at.error(
            f"nvlinks_per_gpu is {links} but nvlink_speed is missing",
            'add nvlink_speed: "26.562 GB/s" (per link, per direction)',
        )
    per_peer = group = None
    if fabric == BRIDGED:
        for key, example in (("nvlinks_per_peer", "6"), ("group_size", "4")):
            if key not in f:
                raise at.error(f"a bridged profile needs {key!r}", f"add {key}: {example}")
        per_peer = f["nvlinks_per_peer"].count(minimum=1)
        group = f["group_size"].count(minimum=2)
        if gpu_count % group:
            raise f["group_size"].error(f"{gpu_count} GPUs do not split into groups of {group}", "fix gpu_count or group_size")
        if per_peer * (group - 1) > links:
            raise f["nvlinks_per_peer"].error(
                f"{per_peer} links to each of {group - 1} peers exceed nvlinks_per_gpu {links}",
                "fix nvlinks_per_peer, group_size or nvlinks_per_gpu",
            )
    else:
        for key in ("nvlinks_per_peer", "group_size"):
            if key in f:
                raise f[key].error(f"only bridged (NVL) fabrics have {key}, this one is {fabric}", f"remove {key} or set fabric: bridged")
    if fabric == PCIE and links:
        raise f["nvlinks_per_gpu"].error(f"a pcie fabric has no NVLink but nvlinks_per_gpu is {links}", "write 0 or fix fabric")
    return Profile(
        name=name,
        gpu_count=gpu_count,
        gpu_model=f["gpu_model"].text(),
        fabric=fabric,
        nvlinks_per_gpu=links,
        nvlink_speed=speed,
        pcie_gen=f["pcie_gen"].count(minimum=1),
        pcie_width=f["pcie_width"].count(minimum=1),
        gpu_memory=int(f["gpu_memory"].quantity("memory", positive=True)),
        source=f["source"].source(),
        yaml_path=at.cite,
        nvlinks_per_peer=per_peer,
        group_size=group,
        nic_ports=f["nic_ports"].count() if "nic_ports" in f else None,
        nic_rate=f["nic_rate"].quantity("bandwidth", positive=True) if "nic_rate" in f else None,
        gpu_nic_path=f["gpu_nic_path"].choice(PCIE_LEVELS) if "gpu_nic_path" in f else None,
        topology=f["topology"].text() if "topology" in f else None,
        **_profile_hardware(f, links),
    )


# The hardware fields a profile may describe (what NVML reports on such a node), for the derived limits.
_PROFILE_HARDWARE = {
    "compute_capability": '"9.0"  (as CUDA names it: 8.0 A100, 8.9 L40S, 9.0 H100/H200, 10.0 B200)',
    "sm_count": "132", "sm_clock_max": '"1980 MHz"', "mem_bus_width": "6144  (bits)", "mem_clock_max": '"3201 MHz"',
    "power_limit": '"700 W"', "nvlink_gen": "4  (NVLink 3 A100, 4 H100/H200, 5 B200)",
}


def _profile_hardware(f: dict[str, _At], links: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "compute_capability" in f:
        value = f["compute_capability"].value
        text = f"{value:.1f}" if isinstance(value, float) else str(value)
        major, _, minor = text.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise f["compute_capability"].error(f"{text!r} is not a compute capability", 'write e.g. "9.0"')
        out["compute_capability"] = f"{int(major)}.{int(minor)}"
    for key, field_name, kind in (("sm_clock_max", "sm_clock_max_mhz", "frequency"),
                                  ("mem_clock_max", "mem_clock_max_mhz", "frequency"),
                                  ("power_limit", "power_limit_w", "power")):
        if key in f:
            value = f[key].quantity(kind, positive=True)
            out[field_name] = value / 1e6 if kind == "frequency" else value
    for key in ("sm_count", "mem_bus_width"):
        if key in f:
            out[key] = f[key].count(minimum=1)
    if "nvlink_gen" in f:
        if not links:
            raise f["nvlink_gen"].error("a node without NVLink has no NVLink generation", "remove nvlink_gen")
        out["nvlink_gen"] = f["nvlink_gen"].count(minimum=1)
    return out


def _profiles(at: _At) -> dict[str, Profile]:
    at.mapping("node profiles (name -> inventory)", allow_empty=False)
    return MappingProxyType({str(name): _profile(at.child(name), str(name)) for name in at.value})


def _whole_bytes(at: _At) -> int:
    value = at.quantity("size", positive=True)
    if value != int(value):
        raise at.error(f'"{at.value}" is not a whole number of bytes', 'write e.g. "8 B" or "1 GiB"')
    return int(value)


def _sweep(at: _At) -> SweepSpec:
    """{from, to, step}: nccl-tests' -b/-e/-f."""
    f = at.fields("a size sweep (nccl-tests -b/-e/-f)", required={"from": '"8 B"', "to": '"1 GiB"', "step": '"2 x"'})
    start, stop = _whole_bytes(f["from"]), _whole_bytes(f["to"])
    step = f["step"].quantity("ratio")
    if step != int(step) or step < 2:
        raise f["step"].error(f'"{f["step"].value}" is not a whole factor of at least 2',
                              'write e.g. "2 x" (nccl-tests -f takes a whole factor)')
    if stop < start:
        raise f["to"].error(f'"{f["to"].value}" is below from "{f["from"].value}"', "swap them")
    sizes = geometric_sizes(start, stop, int(step))
    if sizes[-1] != stop:
        # Silently stopping short could drop the floor size or the top of the curve.
        above = sizes[-1] * int(step)
        raise f["to"].error(f"is not from x step^k: the sweep would stop at {sizes[-1]} B",
                            f"write to: {sizes[-1]} B or {above} B (or change from/step)")
    return SweepSpec(start, stop, int(step))


def _collective_settings(at: _At, simulated: bool) -> CollectiveSettings:
    if isinstance(at.value, dict) and "sizes" in at.value:
        # The list of sizes became geometric sweeps (the whole curve, nccl-tests style).
        raise at.child("sizes").error(
            "a list of sizes is no longer read; the sizes come from sweeps",
            'write sweeps: {quick: {from: "8 B", to: "1 GiB", step: "8 x"}, full: {from: "8 B", to: "4 GiB", step: "2 x"}}',
        )
    f = at.fields(
        "collective run settings",
        required={
            "sweeps": '{quick: {from: "8 B", to: "1 GiB", step: "8 x"}, full: {from: "8 B", to: "4 GiB", step: "2 x"}}',
            "floor_size": '"1 GiB"',
            "warmup_iters": "5",
            "iters": "20",
            "timeout": '"120 s"',
            "benchmark_rounds": "3",
        },
        optional={"graph_up_to": '"64 MiB"', "graph_replays": "5"},
    )
    for key in ("graph_up_to", "graph_replays"):
        if simulated and key in f:
            raise f[key].error("simulation runs on gloo, which has no CUDA graphs", f"remove {key}")
    sweeps_at = f["sweeps"]
    sweeps_at.fields("sweeps", required={name: '{from: "8 B", to: "1 GiB", step: "2 x"}' for name in SWEEP_NAMES})
    sweeps = MappingProxyType({name: _sweep(sweeps_at.child(name)) for name in SWEEP_NAMES})
    floor_size = int(f["floor_size"].quantity("size", positive=True))
    for name, spec in sweeps.items():
        if floor_size not in spec.sizes:
            # Floors are judged only at floor_size: if a sweep never measures it, nothing is judged.
            raise f["floor_size"].error(
                f'"{f["floor_size"].value}" is not one of the sizes the {name} sweep measures',
                f"make sweeps.{name} pass through it (from x step^k) or pick one of its sizes",
            )
    graph_up_to = _whole_bytes(f["graph_up_to"]) if "graph_up_to" in f else None
    return CollectiveSettings(
        sweeps=sweeps,
        floor_size=floor_size,
        warmup_iters=f["warmup_iters"].count(),
        iters=f["iters"].count(minimum=1),
        timeout_s=f["timeout"].quantity("time", positive=True),
        benchmark_rounds=f["benchmark_rounds"].count(minimum=1),
        graph_up_to=graph_up_to,
        graph_replays=f["graph_replays"].count(minimum=1) if "graph_replays" in f else 1,
    )


def _busbw_entry(at: _At) -> Limit:
    return _bounds_entry(at, "bandwidth", ("min", "max"))


def _class_op_tables(at: _At, what: str, entry: Callable[[_At], Limit]) -> dict[tuple[str, str], CountTable]:
    """class -> op -> GPU count -> entry. Every class with collectives must be present (maybe {})."""
    classes = at.keyed(CLASSES, "placement class", f"{what}s are keyed by placement class")
    for klass in COLLECTIVE_FLOOR_CLASSES:
        if klass not in classes:
            raise at.error(
                f"missing placement class {klass!r}",
                f"add a {klass}: section (or {klass}: {{}} to judge it by the derived floor only)"
                if what == "busbw floor" else f"add a {klass}: section (or {klass}: {{}} to leave it unjudged)",
            )
    table: dict[tuple[str, str], CountTable] = {}
    for klass, class_at in classes.items():
        for op, op_at in class_at.keyed(OPS, "op", "ops are").items():
            table[(klass, op)] = _count_table(op_at, what, entry)
    return MappingProxyType(table)


def _op_tables(at: _At, what: str, entry: Callable[[_At], Limit]) -> dict[str, CountTable]:
    ops = at.keyed(OPS, "op", "ops are")
    return MappingProxyType({op: _count_table(op_at, what, entry) for op, op_at in ops.items()})


def _floors(at: _At) -> dict[tuple[str, str], CountTable]:
    return _class_op_tables(at, "busbw floor", _busbw_entry)


def _simulated_floors(at: _At) -> dict[str, CountTable]:
    return as_rule(_op_tables(at, "busbw floor", _busbw_entry), "simulated")


def _latency_entry(at: _At) -> Limit:
    return _bounds_entry(at, "time", ("max",), required=("max",))


def _half_peak_entry(at: _At) -> Limit:
    return _bounds_entry(at, "size", ("max",), required=("max",))


_CEILING_TABLES = {
    "ceilings": "{nvswitch: {all_reduce: {2: {max: ..., source: ...}}}, ...}",
    "simulated_ceilings": "{all_reduce: {any: {max: ..., source: ...}}}  (or {} to judge nothing in simulation)",
}


def _curve_ceilings(f: dict[str, _At], what: str, entry: Callable[[_At], Limit]) -> Mapping[bool, Mapping]:
    """Hardware ceilings by class -> op -> count; simulated ones by op -> count (CPU: the class says nothing)."""
    return MappingProxyType({False: _class_op_tables(f["ceilings"], what, entry),
                             True: as_rule(_op_tables(f["simulated_ceilings"], what, entry), "simulated")})


def _latency(at: _At) -> tuple[LatencyRule, Mapping[bool, Mapping]]:
    f = at.fields("small-message latency checks", required={"up_to": '"64 KiB"', **_CEILING_TABLES})
    rule = LatencyRule(int(f["up_to"].quantity("size", positive=True)), f["up_to"].cite)
    return rule, _curve_ceilings(f, "latency ceiling", _latency_entry)


def _half_peak(at: _At) -> tuple[HalfPeakRule, Mapping[bool, Mapping]]:
    f = at.fields("n½ checks", required={"fraction": '"50 %"', **_CEILING_TABLES})
    fraction = f["fraction"].quantity("percent", positive=True)
    if fraction > 1:
        raise f["fraction"].error("is above 100 %", "n½ is where busbw first reaches a fraction of its peak: write e.g. 50 %")
    return HalfPeakRule(fraction, f["fraction"].cite), _curve_ceilings(f, "n½ ceiling", _half_peak_entry)


def _efficiency(at: _At, what: str) -> tuple[float, str]:
    return _ratio_section(at, "efficiency", "percent", '"60 %"', of=what)


def _derived_floor(at: _At) -> DerivedFloor:
    """{efficiency, source, ops: {op: {efficiency, source}}, pcie: {efficiency, source}}."""
    f = at.fields("the derived busbw floor", required={"efficiency": '"50 %"', "source": SOURCE_HINT},
                  optional={"ops": '{all_reduce: {efficiency: "60 %", source: ...}}',
                            "pcie": '{efficiency: "30 %", source: ...}  (of the GPU\'s PCIe link, one way)'})
    efficiency = tables_efficiency(f["efficiency"], "the link ceiling")
    ops = {}
    if "ops" in f:
        for op, op_at in f["ops"].keyed(OPS, "op", "ops are").items():
            ops[op] = _efficiency(op_at, "the link ceiling")
    pcie = _efficiency(f["pcie"], "the PCIe link") if "pcie" in f else None
    return DerivedFloor(efficiency, f["source"].source(), at.cite, MappingProxyType(ops), pcie)


def _collectives(at: _At, profiles: Mapping[str, Profile]) -> dict[str, Any]:
    f = at.fields(
        "collectives sections",
        required={
            "hardware": "{sweeps: {quick: {...}, full: {...}}, floor_size: ..., ...}",
            "simulated": "{sweeps: {quick: {...}, full: {...}}, floor_size: ..., ...}",
            "floors": "{nvswitch: {...}, ...}",
            "simulated_floors": "{all_reduce: {any: {...}}, ...}",
            "derived_floor": '{efficiency: "50 %", source: ...}',
            "wire_check": '{min_ratio: "8 x", source: ...}',
            "pair_spread": '{max_below_median: "10 %", source: ...}',
            "group_scaling": '{quad_over_pair_min: "2 x", source: ...}',
            "latency": '{up_to: "64 KiB", ceilings: {...}, simulated_ceilings: {...}}',
            "half_peak": '{fraction: "50 %", ceilings: {...}, simulated_ceilings: {...}}',
        },
        optional={"axes_floor": '{share: "100 %", source: ...}  (the floor of an op\'s further dtypes and reductions)'},
    )
    derived_floor = _derived_floor(f["derived_floor"])
    wire, wire_source = _ratio_section(f["wire_check"], "min_ratio", "ratio", '"8 x"')
    spread, spread_source = _ratio_section(f["pair_spread"], "max_below_median", "percent", '"10 %"')
    scaling, scaling_source = _ratio_section(f["group_scaling"], "quad_over_pair_min", "ratio", '"2 x"')
    latency_rule, latency_ceilings = _latency(f["latency"])
    floors = _floors(f["floors"])
    # Limits no node could meet are mistakes in the file: refused here, not found on a node hours later.
    plausible.check_busbw(f["floors"], floors, profiles)  # each floor against the wire it judges
    plausible.check_latency(f["latency"].child("ceilings"), latency_ceilings[False])
    half_peak_rule, half_peak_ceilings = _half_peak(f["half_peak"])
    return dict(
        latency=latency_rule,
        latency_ceilings=latency_ceilings,
        half_peak=half_peak_rule,
        half_peak_ceilings=half_peak_ceilings,
        settings=MappingProxyType(
            {False: _collective_settings(f["hardware"], simulated=False),
             True: _collective_settings(f["simulated"], simulated=True)}
        ),
        floors=floors,
        simulated_floors=_simulated_floors(f["simulated_floors"]),
        derived_floor=derived_floor,
        wire_check=WireCheck(wire, wire_source, f["wire_check"].cite),
        pair_spread=PairSpread(spread, spread_source, f["pair_spread"].cite),
        group_scaling=GroupScaling(scaling, scaling_source, f["group_scaling"].cite),
        axes_floor=_axes_floor(f["axes_floor"]) if "axes_floor" in f else None,
    )


def _axes_floor(at: _At) -> AxesFloor:
    share, source = _ratio_section(at, "share", "percent", '"100 %"', of="the op's floor")
    return AxesFloor(share, source, at.cite)


# ---------------------------------------------------------------------------------------------


def _health(at: _At) -> HealthLimits:
    h = at.fields(
        "error-counter growth limits",
        required={"nvlink_replay": "0", "nvlink_recovery": "0", "nvlink_crc_rate": '"100 /s"',
                  "pcie_replay_rate": '"8 /min"', "source": SOURCE_HINT},
    )
    return HealthLimits(
        h["nvlink_replay"].count(),
        h["nvlink_recovery"].count(),
        h["nvlink_crc_rate"].quantity("rate"),
        h["pcie_replay_rate"].quantity("rate"),
        h["source"].source(),
        at.cite,
    )


def _workers(at: _At) -> WorkerSettings:
    f = at.fields(
        "worker settings",
        required={
            "deadlines": '{hardware: {minimum: "10 s", safety_factor: "10 x", source: ...}, simulated: {...}}',
            "node_lock": '{wait: "30 s", source: ...}',
        },
    )
    d = f["deadlines"].fields(
        "deadline rules",
        required={"hardware": '{minimum: "10 s", safety_factor: "10 x", source: ...}',
                  "simulated": '{minimum: "10 s", safety_factor: "10 x", source: ...}'},
    )
    rules = {}
    for simulated, key in ((False, "hardware"), (True, "simulated")):
        r = d[key].fields("a deadline rule",
                          required={"minimum": '"10 s"', "safety_factor": '"10 x"', "source": SOURCE_HINT})
        minimum = r["minimum"].quantity("time", positive=True)
        factor = r["safety_factor"].quantity("ratio", positive=True)
        if factor < 1:
            raise r["safety_factor"].error(
                f'"{r["safety_factor"].value}" is below 1 x: the deadline would be shorter than the work itself',
                'write at least "1 x" (10 x leaves room for a slow but healthy call)')
        # A minimum above a call's ceiling (its section's `timeout`) is not an error: the ceiling
        # wins, so lowering a timeout alone makes every call shorter.
        rules[simulated] = DeadlineRule(minimum, factor, r["source"].source(), d[key].cite)
    lock = f["node_lock"].fields("node lock settings", required={"wait": '"30 s"', "source": SOURCE_HINT})
    return WorkerSettings(
        _deadlines=MappingProxyType(rules),
        lock_wait_s=lock["wait"].quantity("time"),
        lock_source=lock["source"].source(),
        lock_yaml_path=f["node_lock"].cite,
    )


def _network(at: _At) -> NetworkLimits:
    f = at.fields(
        "network limits",
        required={"derived_floor": '{efficiency: "80 %", source: ...}', "gpu_nic_path": "{max: PXB, source: ...}"},
    )
    efficiency, eff_source = _ratio_section(f["derived_floor"], "efficiency", "percent", '"80 %"')
    if efficiency > 1:
        raise f["derived_floor"].child("efficiency").error("is above 100 %", "a floor cannot exceed the line rate; write at most 100 %")
    path = f["gpu_nic_path"].fields("GPU-to-NIC path limit", required={"max": "PXB", "source": SOURCE_HINT})
    return NetworkLimits(
        efficiency=efficiency,
        efficiency_source=eff_source,
        efficiency_yaml_path=f["derived_floor"].cite,
        gpu_nic_max_path=path["max"].choice(PCIE_LEVELS),
        gpu_nic_source=path["source"].source(),
        gpu_nic_yaml_path=f["gpu_nic_path"].cite,
    )


def _fleet_rule(at: _At) -> FleetRule:
    return FleetRule(*median_rule(at, "fleet rule", '"5 %"', "node"), at.cite)


def _fleet(at: _At) -> dict[bool, FleetLimits]:
    f = at.fields(
        "fleet sections",
        required={"min_nodes": "3", "hardware": "{busbw: {...}, throughput: {...}, pairs: {...}, gpus: {...}}",
                  "simulated": "{busbw: {...}, throughput: {...}, pairs: {...}, gpus: {...}}"},
    )
    # Fewer than 3 values have no meaningful median to stand out from.
    min_nodes = f["min_nodes"].count(minimum=3)
    out = {}
    for simulated, key in ((False, "hardware"), (True, "simulated")):
        rules = f[key].fields("fleet rules per figure", required={k: '{max_below_median: "5 %", mad_k: "3 x", source: ...}'
                                                                 for k in ("busbw", "throughput", "pairs", "gpus")})
        out[simulated] = FleetLimits(_fleet_rule(rules["busbw"]), _fleet_rule(rules["throughput"]),
                                     _fleet_rule(rules["pairs"]), min_nodes, _fleet_rule(rules["gpus"]))
    return MappingProxyType(out)


def load_thresholds(path: str | Path, content: bytes | None = None,
                    bases: Mapping[str, bytes] | None = None) -> Thresholds:
    """Read and validate a thresholds file (`content`: its bytes, kept elsewhere, e.g. in a run's
    record; `path` then names it in messages), laid over the file its `extends:` names (`bases`:
    absolute path -> bytes of those kept elsewhere). Raises ThresholdsError, whose message names the
    file that holds the mistake."""
    path = Path(path)
    data, _ = read_layered(path, content, bases)
    if data is None:
        raise ThresholdsError(
            f"{path}: the file is empty; it must hold the sections profiles, collectives and training "
            "(start from the thresholds.yaml shipped with wirecheck)"
        )
    top = _At(str(path), (), data, 1)
    f = top.fields(
        "top-level sections",
        required={
            "profiles": "{h200-sxm-8: {...}}",
            "collectives": "{hardware: {...}, floors: {...}, ...}",
            "training": "{hardware: {...}, ...}",
            "health": '{nvlink_replay: 0, nvlink_recovery: 0, nvlink_crc_rate: "100 /s", pcie_replay_rate: "8 /min", source: ...}',
            "workers": '{deadlines: {hardware: {...}, simulated: {...}}, node_lock: {wait: "30 s", source: ...}}',
            "copy_bandwidth": '{settings: {...}, floors: {nvswitch: {h2d: {min: "48 GB/s", source: ...}}}, derived_floor: {...}}',
            "network": '{derived_floor: {efficiency: "80 %", source: ...}, gpu_nic_path: {max: PXB, source: ...}}',
            "fleet": "{min_nodes: 3, hardware: {...}, simulated: {...}}",
            "gpu_health": "{hardware: {...}, simulated: {...}, floors: {...}, ...}",
            "burn_in": "{drift: {rounds: 3, hardware: {...}, simulated: {...}}, busbw_spread: {...}}",
        },
        optional={
            "calibration": '{min_runs: 3, tight_runs: 10, mad_k: "3 x", min_margin: "3 %", max_below_median: "10 %", '
                           'source: ...}',
            "history": '{runs: 10, min_runs: 3, mad_k: "3 x", min_margin: "3 %", max_margin: "10 %", figures: [...], '
                       'source: ...}',
            "drain": '{flaky_max: 3, flaky_window: "24 h", guard_share: "50 %", guard_window: "5 min", '
                     'replace_after: 3, replace_window: "7 d", source: ...}',
            "prolog": '{trust_window: "6 h", source: ...}',
        },
    )
    profiles = _profiles(f["profiles"])
    collectives = _collectives(f["collectives"], profiles)
    training = parse_training(f["training"])
    copy_bandwidth = parse_copy_bandwidth(f["copy_bandwidth"])
    plausible.check_copies(f["copy_bandwidth"].child("floors"), copy_bandwidth._floors)
    gpu_health = parse_gpu_health(f["gpu_health"])
    plausible.check_gpu_floors(f["gpu_health"].child("floors"), gpu_health._floors,
                               {p.gpu_model: from_profile(p) for p in profiles.values()})
    return Thresholds(
        path=path,
        profiles=profiles,
        derived_floor=collectives["derived_floor"],
        wire_check=collectives["wire_check"],
        pair_spread=collectives["pair_spread"],
        group_scaling=collectives["group_scaling"],
        _collective_settings=collectives["settings"],
        _floors=collectives["floors"],
        _simulated_floors=collectives["simulated_floors"],
        latency=collectives["latency"],
        half_peak=collectives["half_peak"],
        _latency_ceilings=collectives["latency_ceilings"],
        _half_peak_ceilings=collectives["half_peak_ceilings"],
        _training_settings=training["settings"],
        _training_limits=training["limits"],
        health=_health(f["health"]),
        workers=_workers(f["workers"]),
        copy_bandwidth=copy_bandwidth,
        network=_network(f["network"]),
        _fleet=_fleet(f["fleet"]),
        gpu_health=gpu_health,
        burn_in=parse_burn_in(f["burn_in"]),
        axes_floor=collectives["axes_floor"],
        calibration_rule=parse_calibration(f["calibration"]) if "calibration" in f else None,
        history_rule=parse_history(f["history"]) if "history" in f else None,
        # The drain hooks' keys, read as they are: wirecheck.records.drain_policy.parse_policy checks them.
        drain=f["drain"].value if "drain" in f else None,
        # validate --trust-recent's window, read as it is: wirecheck.records.trust.trust_window checks it.
        prolog=f["prolog"].value if "prolog" in f else None,
    )
