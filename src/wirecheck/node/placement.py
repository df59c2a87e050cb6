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

# The classes themselves are data (wirecheck.vocab.placements); this module finds their subsets.
from wirecheck.vocab.placements import (  # noqa: E402,F401  the names node code and tests read here
    CLASS_BY_NAME, CLASS_CROSS_QUAD, CLASS_FORCED_PCIE, CLASS_NETWORK, CLASS_NVL_GROUP, CLASS_NVL_PAIR, CLASS_NVL_QUAD,
    CLASS_NVSWITCH, CLASS_PAIR, CLASS_PCIE, CLASS_SINGLE, CLASS_TABLE, CLASSES, COLLECTIVE_CLASSES, FORCED_PCIE_ENV,
    NVLINK_CLASSES, SCOPE_GPU, SCOPE_GROUP, SCOPE_NODE, SCOPES, TRAINING_CLASSES, PlacementClass,
)

# (topology, GPU indices of one scope unit) -> the GPU subsets of the class found there.
Subsets = Callable[[Topology, tuple[int, ...]], Iterable[tuple[int, ...]]]


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


# How each class's subsets are found on one node's topology, by class name. A class of the vocabulary
# without a rule is never enumerated from one node (network: wirecheck.fleet.multinode).
SUBSETS: Mapping[str, Subsets] = MappingProxyType({
    CLASS_NVSWITCH: _one_per_size_on(NVSWITCH),
    CLASS_NVL_PAIR: _pairs_in_group,
    CLASS_NVL_QUAD: _group_of_four,
    CLASS_NVL_GROUP: _group_of_other_size,
    CLASS_CROSS_QUAD: _across_groups,
    CLASS_PCIE: _one_per_size_on(PCIE),
    CLASS_FORCED_PCIE: _first_nvlink_pair,
    CLASS_SINGLE: _the_gpu,
    CLASS_PAIR: _nvlink_pairs,
})
_UNKNOWN = [name for name in SUBSETS if name not in CLASS_BY_NAME]
if _UNKNOWN:
    raise ImportError(f"subsets rules for {_UNKNOWN}: not placement classes of wirecheck.vocab.placements")
NODE_CLASSES = tuple(c.name for c in CLASS_TABLE if c.name in SUBSETS)  # what a test on one node can ask for


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
                if c.scope == scope and c.name in SUBSETS:
                    out += [Placement(c.name, tuple(subset), dict(c.env)) for subset in SUBSETS[c.name](topo, unit)]
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
