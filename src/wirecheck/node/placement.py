"""GPU subsets by topology class, with ids that stay the same from run to run.

Nightly history is keyed by these ids, so they depend only on the topology: the class,
the GPU count and the GPU indices (`nvl_quad-4gpu-0.1.2.3`, `pair-0.1`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations
from types import MappingProxyType
from typing import Callable, Iterable, Mapping

from wirecheck.node.topology import BRIDGED, NVSWITCH, PCIE, Topology

# Placement classes. The threshold tables are keyed by these names.
CLASS_NVSWITCH = "nvswitch"
CLASS_NVL_PAIR = "nvl_pair"
CLASS_NVL_QUAD = "nvl_quad"
CLASS_NVL_GROUP = "nvl_group"  # a bridged group that is neither a pair nor a quad
CLASS_CROSS_QUAD = "cross_quad"
CLASS_PCIE = "pcie"
CLASS_FORCED_PCIE = "forced_pcie"
CLASS_SINGLE = "single"
CLASS_PAIR = "pair"  # per-pair link checks, one per NVLink-connected pair
CLASS_NETWORK = "network"  # GPUs of several nodes (wirecheck.fleet.multinode): traffic crosses the NICs


# Extra worker environment of forced_pcie: the same GPUs with NCCL's peer-to-peer transport off,
# so traffic goes through host memory. Only the wire changes, which is what the wire check compares.
FORCED_PCIE_ENV = {"NCCL_P2P_DISABLE": "1"}

# What a class's subsets are taken from, in the order placements are listed: each GPU; each
# NVLink group of a bridged node (group by group, the classes of one group together); the node.
SCOPE_GPU, SCOPE_GROUP, SCOPE_NODE = "gpu", "group", "node"
SCOPES = (SCOPE_GPU, SCOPE_GROUP, SCOPE_NODE)

# (topology, GPU indices of one scope unit) -> the GPU subsets of the class found there.
Subsets = Callable[[Topology, tuple[int, ...]], Iterable[tuple[int, ...]]]


@dataclass(frozen=True)
class PlacementClass:
    """One placement class, defined once: enumeration, ids, tests, thresholds and docs look it up
    here. A new class is one row of CLASS_TABLE (its floor sections in thresholds.yaml are data:
    the loader names any that are missing)."""

    name: str
    description: str
    collectives: bool  # the collective sweep and its checks run on it
    training: bool  # the training strategies run on it
    scope: str = SCOPE_NODE
    # None: never enumerated from one node's topology (network: wirecheck.fleet.multinode)
    subsets: Subsets | None = None
    nvlink: bool = False  # NCCL may use NVLink between every pair of the subset
    env: Mapping[str, str] = field(default_factory=dict)  # extra worker environment
    counted_id: bool = True  # ids read CLASS-NgpuGPU-INDICES; False: CLASS-INDICES (pair-0.1)

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"placement class {self.name}: scope {self.scope!r}; expected one of {SCOPES}")


def _sizes(total: int) -> list[int]:
    """Subset sizes worth measuring: powers of two up to the total, plus the total."""
    sizes, k = [], 2
    while k < total:
        sizes.append(k)
        k *= 2
    if total >= 2:
        sizes.append(total)
    return sizes


def _spread(groups: tuple[tuple[int, ...], ...], size: int) -> tuple[int, ...] | None:
    """`size` GPUs taken round-robin over groups so the subset spans as many as it can."""
    pools = [list(g) for g in groups]
    picked: list[int] = []
    while len(picked) < size and any(pools):
        for pool in pools:
            if pool and len(picked) < size:
                picked.append(pool.pop(0))
    return tuple(sorted(picked)) if len(picked) == size else None


def _positions(topo: Topology) -> dict[int, int]:
    return {g.index: p for p, g in enumerate(topo.gpus)}


def _bridged_groups(topo: Topology) -> tuple[tuple[int, ...], ...]:
    """The NVLink groups of a bridged node as sorted GPU indices, in order; none on other fabrics."""
    if topo.fabric != BRIDGED:
        return ()
    return tuple(sorted(tuple(sorted(group)) for group in topo.index_groups))


def _nvlink_pairs(topo: Topology, gpus: tuple[int, ...]) -> list[tuple[int, int]]:
    pos = _positions(topo)
    return [(a, b) for a, b in combinations(gpus, 2) if topo.nv(pos[a], pos[b]) > 0]


def _the_gpu(topo: Topology, gpu: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [gpu]


def _pairs_in_group(topo: Topology, group: tuple[int, ...]) -> Iterable[tuple[int, ...]]:
    return combinations(group, 2)


def _group_of_four(topo: Topology, group: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [group] if len(group) == 4 else []


def _group_of_other_size(topo: Topology, group: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [group] if len(group) > 2 and len(group) != 4 else []


def _one_per_size_on(fabric: str) -> Subsets:
    # Placement does not matter on a switch (or with no NVLink): one subset per size is enough.
    def subsets(topo: Topology, gpus: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [gpus[:k] for k in _sizes(len(gpus))] if topo.fabric == fabric else []

    return subsets


def _across_groups(topo: Topology, gpus: tuple[int, ...]) -> list[tuple[int, ...]]:
    groups = _bridged_groups(topo)
    if len(groups) < 2:
        return []
    pos = _positions(topo)
    out = []
    for k in _sizes(len(gpus)):
        subset = _spread(groups, k)
        if subset and len({topo.group_of(pos[g]) for g in subset}) >= 2:
            out.append(subset)
    return out


def _first_nvlink_pair(topo: Topology, gpus: tuple[int, ...]) -> list[tuple[int, int]]:
    return _nvlink_pairs(topo, gpus)[:1]


# Placement classes, in the order the threshold tables and the docs list them. The threshold
# tables are keyed by these names; placements are listed scope by scope (SCOPES), table order within.
CLASS_TABLE = (
    PlacementClass(CLASS_NVSWITCH, "NVSwitch node: any subset is equivalent, one per size", True, True,
                   subsets=_one_per_size_on(NVSWITCH), nvlink=True),
    PlacementClass(CLASS_NVL_PAIR, "two GPUs inside one bridged NVLink group", True, True,
                   scope=SCOPE_GROUP, subsets=_pairs_in_group, nvlink=True),
    PlacementClass(CLASS_NVL_QUAD, "a whole 4-GPU bridged group", True, True,
                   scope=SCOPE_GROUP, subsets=_group_of_four, nvlink=True),
    PlacementClass(CLASS_NVL_GROUP, "a bridged group of another size", True, True,
                   scope=SCOPE_GROUP, subsets=_group_of_other_size, nvlink=True),
    PlacementClass(CLASS_CROSS_QUAD, "GPUs spread over bridged groups: traffic crosses PCIe", True, True,
                   subsets=_across_groups),
    PlacementClass(CLASS_PCIE, "no NVLink at all", True, True, subsets=_one_per_size_on(PCIE)),
    # The wire check: the first NVLink pair again with NCCL's P2P path off.
    PlacementClass(CLASS_FORCED_PCIE, "NVLink GPUs with NCCL's peer-to-peer path off: only the wire changes", True, True,
                   subsets=_first_nvlink_pair, env=FORCED_PCIE_ENV),
    PlacementClass(CLASS_SINGLE, "one GPU", False, False, scope=SCOPE_GPU, subsets=_the_gpu),
    PlacementClass(CLASS_PAIR, "every NVLink-connected pair, for per-link checks", False, False,
                   subsets=_nvlink_pairs, nvlink=True, counted_id=False),
    # Never enumerated from one node's topology: wirecheck.fleet.multinode runs it across nodes through
    # torchrun, and its verdicts use the same busbw/correctness checks under this class name.
    PlacementClass(CLASS_NETWORK, "GPUs of several nodes: traffic crosses the nodes' NICs", False, False),
)
CLASS_BY_NAME: Mapping[str, PlacementClass] = MappingProxyType({c.name: c for c in CLASS_TABLE})
CLASSES = tuple(CLASS_BY_NAME)
NODE_CLASSES = tuple(c.name for c in CLASS_TABLE if c.subsets is not None)  # what a test on one node can ask for
COLLECTIVE_CLASSES = tuple(c.name for c in CLASS_TABLE if c.collectives)
TRAINING_CLASSES = tuple(c.name for c in CLASS_TABLE if c.training)
# Classes where NCCL may use NVLink between every pair of the subset.
NVLINK_CLASSES = tuple(c.name for c in CLASS_TABLE if c.nvlink)


@dataclass(frozen=True)
class Placement:
    """A GPU subset to run on. Cheap to build: nothing is spawned until a test asks."""

    klass: str
    gpus: tuple[int, ...]
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self):
        if self.klass not in CLASS_BY_NAME:
            raise ValueError(f"placement {self.gpus}: unknown placement class {self.klass!r}; known: {', '.join(CLASSES)}")

    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    @property
    def id(self) -> str:
        indices = ".".join(str(g) for g in self.gpus)
        if not CLASS_BY_NAME[self.klass].counted_id:
            return f"{self.klass}-{indices}"
        return f"{self.klass}-{self.n_gpus}gpu-{indices}"

    @property
    def nvlink(self) -> bool:
        """True when NCCL may use NVLink between these GPUs."""
        return CLASS_BY_NAME[self.klass].nvlink

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)

    def __str__(self) -> str:
        return self.id


def enumerate_placements(topo: Topology) -> list[Placement]:
    """Every placement worth testing on this topology, in a stable order: each class's subsets,
    scope by scope (each GPU, each bridged group, the node), in table order within a scope."""
    # By GPU index, whatever order the source listed the GPUs in: ids must not depend on it.
    gpus = tuple(sorted(topo.indices))
    units = {SCOPE_GPU: [(g,) for g in gpus], SCOPE_GROUP: _bridged_groups(topo), SCOPE_NODE: [gpus]}
    out: list[Placement] = []
    for scope in SCOPES:
        for unit in units[scope]:
            for c in CLASS_TABLE:
                if c.scope == scope and c.subsets is not None:
                    out += [Placement(c.name, tuple(subset), dict(c.env)) for subset in c.subsets(topo, unit)]
    return out


def nvlink_twin(placements: list[Placement], placement: Placement) -> Placement | None:
    """The NVLink placement on the same GPUs (what forced_pcie is compared against)."""
    for other in placements:
        if other.gpus == placement.gpus and other.klass in NVLINK_CLASSES:
            return other
    return None


def link_ceiling(topology: Topology, placement: Placement, profile_link_speed: float | None = None) -> float | None:
    """min NV# over the placement's pairs x per-link speed (bytes/s), when both are known: what a
    derived busbw floor scales (the per-link speed from NVML, else the profile's `profile_link_speed`)."""
    if not placement.nvlink:
        return None
    speeds = [link.speed_mbps for g in placement.gpus for link in topology.gpu(g).nvlinks
              if link.active and link.speed_mbps]
    per_link = min(speeds) * 1e6 if speeds else profile_link_speed
    if not per_link:
        return None
    return min(topology.nv_between(a, b) for a in placement.gpus for b in placement.gpus if a != b) * per_link


def find_placement(placements: list[Placement], placement_id: str) -> Placement:
    for placement in placements:
        if placement.id == placement_id:
            return placement
    known = ", ".join(p.id for p in placements) or "none"
    raise ValueError(f"unknown placement {placement_id!r}; this topology has: {known}")


def pinning_advice(topo: Topology, n: int) -> str:
    """Which CUDA_VISIBLE_DEVICES keeps an n-GPU job inside one NVLink group."""
    if topo.fabric == NVSWITCH:
        return f"{n} GPUs: any {n} GPUs (NVSwitch: placement does not matter)"
    fitting = [g for g in topo.groups if len(g) >= n]
    if topo.fabric == PCIE or not fitting:
        biggest = max((len(g) for g in topo.groups), default=0)
        return (
            f"{n} GPUs: WARNING no NVLink group holds {n} GPUs (largest: {biggest}); "
            "the job will cross PCIe, expect PCIe-class bandwidth"
        )
    group = fitting[0]
    chosen = ",".join(str(topo.gpus[p].index) for p in group[:n])
    return f"{n} GPUs: CUDA_VISIBLE_DEVICES={chosen} (inside NVLink group {'.'.join(str(topo.gpus[p].index) for p in group)})"


def listing(placements: list[Placement], width: int = 100) -> str:
    """The placements by class, one class per line (wrapped), for messages that list what there is."""
    import textwrap

    by_class: dict[str, list[str]] = {}
    for p in placements:
        by_class.setdefault(p.klass, []).append(p.id)
    lines = []
    for klass, ids in by_class.items():
        lines.extend(textwrap.wrap(" ".join(ids), width=width, initial_indent=f"  {klass}: ",
                                   subsequent_indent=" " * (len(klass) + 4), break_on_hyphens=False))
    return "\n".join(lines)


def did_you_mean(word: str, placements: list[Placement]) -> str:
    """`did you mean nvl_quad?` for a mistyped id or class (`--placement nvl_qaud`), else ""."""
    import difflib

    names = list(dict.fromkeys([p.klass for p in placements] + [p.id for p in placements]))
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else ""


def split_requested(values: list[str], option: str = "--placement") -> list[str]:
    """The placements `--placement` names, its values split at commas and spaces (`--placement nvswitch,` and
    `--placement "nvl_pair, nvl_quad"` are what people type): each id or class once, in order. ValueError
    for a value that names none (`--placement ,`), naming the option and the fix."""
    names: list[str] = []
    for value in values:
        parts = [part for part in re.split(r"[,\s]+", value) if part]
        if not parts:
            raise ValueError(f"{option} {value!r}: names no placement; give an id or a class, e.g. {option} nvswitch "
                             f"(several: {option} nvl_pair,nvl_quad, or {option} once per name; `wirecheck topo` lists them)")
        names += [part for part in parts if part not in names]
    return names
