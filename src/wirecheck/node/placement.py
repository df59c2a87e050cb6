"""GPU subsets by topology class, with ids that stay the same from run to run.

Nightly history is keyed by these ids, so they depend only on the topology: the class,
the GPU count and the GPU indices (`nvl_quad-4gpu-0.1.2.3`, `pair-0.1`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

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



@dataclass(frozen=True)
class PlacementClass:
    """One placement class, defined once: the tests, thresholds and docs look it up here."""

    name: str
    description: str
    collectives: bool  # the collective sweep and its checks run on it
    training: bool  # the training strategies run on it


CLASS_TABLE = (
    PlacementClass(CLASS_NVSWITCH, "NVSwitch node: any subset is equivalent, one per size", True, True),
    PlacementClass(CLASS_NVL_PAIR, "two GPUs inside one bridged NVLink group", True, True),
    PlacementClass(CLASS_NVL_QUAD, "a whole 4-GPU bridged group", True, True),
    PlacementClass(CLASS_NVL_GROUP, "a bridged group of another size", True, True),
    PlacementClass(CLASS_CROSS_QUAD, "GPUs spread over bridged groups: traffic crosses PCIe", True, True),
    PlacementClass(CLASS_PCIE, "no NVLink at all", True, True),
    PlacementClass(CLASS_FORCED_PCIE, "NVLink GPUs with NCCL's peer-to-peer path off: only the wire changes", True, True),
    PlacementClass(CLASS_SINGLE, "one GPU", False, False),
    PlacementClass(CLASS_PAIR, "every NVLink-connected pair, for per-link checks", False, False),
    # Never enumerated from one node's topology: wirecheck.fleet.multinode runs it across nodes through
    # torchrun, and its verdicts use the same busbw/correctness checks under this class name.
    PlacementClass(CLASS_NETWORK, "GPUs of several nodes: traffic crosses the nodes' NICs", False, False),
)
CLASSES = tuple(c.name for c in CLASS_TABLE)
COLLECTIVE_CLASSES = tuple(c.name for c in CLASS_TABLE if c.collectives)
TRAINING_CLASSES = tuple(c.name for c in CLASS_TABLE if c.training)

# The same GPUs with NCCL's peer-to-peer transport off: traffic goes through host memory.
# Only the wire changes, which is what the wire check compares.
FORCED_PCIE_ENV = {"NCCL_P2P_DISABLE": "1"}


@dataclass(frozen=True)
class Placement:
    """A GPU subset to run on. Cheap to build: nothing is spawned until a test asks."""

    klass: str
    gpus: tuple[int, ...]
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def n_gpus(self) -> int:
        return len(self.gpus)

    @property
    def id(self) -> str:
        indices = ".".join(str(g) for g in self.gpus)
        if self.klass == CLASS_PAIR:
            return f"pair-{indices}"
        return f"{self.klass}-{self.n_gpus}gpu-{indices}"

    @property
    def nvlink(self) -> bool:
        """True when NCCL may use NVLink between these GPUs."""
        return self.klass in NVLINK_CLASSES

    @property
    def cuda_visible_devices(self) -> str:
        return ",".join(str(g) for g in self.gpus)

    def __str__(self) -> str:
        return self.id


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


def enumerate_placements(topo: Topology) -> list[Placement]:
    """Every placement worth testing on this topology, in a stable order."""
    # By GPU index, whatever order the source listed the GPUs in: ids must not depend on it.
    gpus = tuple(sorted(topo.indices))
    pos = {g.index: p for p, g in enumerate(topo.gpus)}
    out: list[Placement] = [Placement(CLASS_SINGLE, (g,)) for g in gpus]
    fabric = topo.fabric
    groups = tuple(sorted(tuple(sorted(group)) for group in topo.index_groups))

    if fabric == NVSWITCH:
        # Placement does not matter on a switch: one subset per size is enough.
        out += [Placement(CLASS_NVSWITCH, gpus[:k]) for k in _sizes(len(gpus))]
    elif fabric == BRIDGED:
        for group in groups:
            if len(group) < 2:
                continue
            out += [Placement(CLASS_NVL_PAIR, pair) for pair in combinations(group, 2)]
            if len(group) == 4:
                out.append(Placement(CLASS_NVL_QUAD, group))
            elif len(group) > 2:
                out.append(Placement(CLASS_NVL_GROUP, group))
        multi = [g for g in groups if len(g) >= 1]
        if len(multi) >= 2:
            for k in _sizes(len(gpus)):
                subset = _spread(tuple(multi), k)
                if subset and len({topo.group_of(pos[g]) for g in subset}) >= 2:
                    out.append(Placement(CLASS_CROSS_QUAD, subset))
    elif fabric == PCIE:
        out += [Placement(CLASS_PCIE, gpus[:k]) for k in _sizes(len(gpus))]

    # The wire check: the first NVLink pair again with NCCL's P2P path off.
    nv_pairs = [(a, b) for a, b in combinations(gpus, 2) if topo.nv(pos[a], pos[b]) > 0]
    if nv_pairs:
        out.append(Placement(CLASS_FORCED_PCIE, nv_pairs[0], dict(FORCED_PCIE_ENV)))
    out += [Placement(CLASS_PAIR, pair) for pair in nv_pairs]
    return out


# Classes where NCCL may use NVLink between every pair of the subset.
NVLINK_CLASSES = (CLASS_NVSWITCH, CLASS_NVL_PAIR, CLASS_NVL_QUAD, CLASS_NVL_GROUP, CLASS_PAIR)


def nvlink_twin(placements: list[Placement], placement: Placement) -> Placement | None:
    """The NVLink placement on the same GPUs (what forced_pcie is compared against)."""
    for other in placements:
        if other.gpus == placement.gpus and other.klass in NVLINK_CLASSES:
            return other
    return None


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
