"""The placement classes as data: name, what it is, what runs on it, its scope and its extra worker
environment. The threshold tables are keyed by these names, placements' ids start with them, and
the docs list them in this order.

How a class's GPU subsets are found on a node's topology is wirecheck.node.placement's (`SUBSETS`,
by class name); a class without a rule there is never enumerated from one node's topology (network:
wirecheck.fleet.multinode runs it across nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from wirecheck.vocab.table import by_name

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


@dataclass(frozen=True)
class PlacementClass:
    """One placement class, defined once: enumeration, ids, tests, thresholds and docs look it up
    here. A new class is one row of CLASS_TABLE and its subsets rule in wirecheck.node.placement (its
    floor sections in thresholds.yaml are data: the loader names any that are missing)."""

    name: str
    description: str
    collectives: bool  # the collective sweep and its checks run on it
    training: bool  # the training strategies run on it
    scope: str = SCOPE_NODE
    nvlink: bool = False  # NCCL may use NVLink between every pair of the subset
    env: Mapping[str, str] = field(default_factory=dict)  # extra worker environment
    counted_id: bool = True  # ids read CLASS-NgpuGPU-INDICES; False: CLASS-INDICES (pair-0.1)

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"placement class {self.name}: scope {self.scope!r}; expected one of {SCOPES}")


# Placement classes, in the order the threshold tables and the docs list them; placements are
# listed scope by scope (SCOPES), table order within.
CLASS_TABLE = (
    PlacementClass(CLASS_NVSWITCH, "NVSwitch node: any subset is equivalent, one per size", True, True, nvlink=True),
    PlacementClass(CLASS_NVL_PAIR, "two GPUs inside one bridged NVLink group", True, True,
                   scope=SCOPE_GROUP, nvlink=True),
    PlacementClass(CLASS_NVL_QUAD, "a whole 4-GPU bridged group", True, True, scope=SCOPE_GROUP, nvlink=True),
    PlacementClass(CLASS_NVL_GROUP, "a bridged group of another size", True, True, scope=SCOPE_GROUP, nvlink=True),
    PlacementClass(CLASS_CROSS_QUAD, "GPUs spread over bridged groups: traffic crosses PCIe", True, True),
    PlacementClass(CLASS_PCIE, "no NVLink at all", True, True),
    # The wire check: the first NVLink pair again with NCCL's P2P path off.
    PlacementClass(CLASS_FORCED_PCIE, "NVLink GPUs with NCCL's peer-to-peer path off: only the wire changes", True, True,
                   env=FORCED_PCIE_ENV),
    PlacementClass(CLASS_SINGLE, "one GPU", False, False, scope=SCOPE_GPU),
    PlacementClass(CLASS_PAIR, "every NVLink-connected pair, for per-link checks", False, False,
                   nvlink=True, counted_id=False),
    # Never enumerated from one node's topology: wirecheck.fleet.multinode runs it across nodes through
    # torchrun, and its verdicts use the same busbw/correctness checks under this class name.
    PlacementClass(CLASS_NETWORK, "GPUs of several nodes: traffic crosses the nodes' NICs", False, False),
)
CLASS_BY_NAME: Mapping[str, PlacementClass] = by_name(CLASS_TABLE, "placement class")
CLASSES = tuple(CLASS_BY_NAME)
COLLECTIVE_CLASSES = tuple(c.name for c in CLASS_TABLE if c.collectives)
TRAINING_CLASSES = tuple(c.name for c in CLASS_TABLE if c.training)
# Classes where NCCL may use NVLink between every pair of the subset.
NVLINK_CLASSES = tuple(c.name for c in CLASS_TABLE if c.nvlink)
