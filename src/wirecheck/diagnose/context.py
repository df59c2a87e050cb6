"""Where the probes run: the node as the record describes it, the thresholds the run judged against,
simulated or not, which worker functions measure (self-tests swap them to inject faults), and the
command's worker pool (wirecheck.workers.pool) with the GPU sets it groups (`ProbeSet`).

In simulation (a simulated record) the GPUs are CPU ranks on gloo, and the topology is the one the
record's header lists (its NV# matrix and PCIe paths); on a node, NVML's. NVML's counters are read
wherever NVML answers (a self-test's fake NVML answers in simulation too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.gpu.load import WORKERS as GPU_WORKERS
from wirecheck.node import nvml
from wirecheck.node.topology import FABRICS, Gpu, Topology
from wirecheck.records.file import RunRecord

# The probes' worker module and its function, named here so that the parent never imports it (it
# imports torch at the top, as every module only workers import).
WORKERS = "wirecheck.diagnose.worker"
MEASURE = "measure"


@dataclass(frozen=True)
class ProbeSet:
    """GPUs the probes run on together, as the worker pool takes a placement (id, gpus, env): a suspect's
    placement (`diagnose-4.5.6.7`), a pair inside it (`pair-5.6`) or every GPU of the node (the GPU load).
    Labelled by its GPUs: a fault-injecting worker reads from the label which GPU each rank stands for."""

    id: str
    gpus: tuple[int, ...]
    env: dict = field(default_factory=dict, compare=False, hash=False)  # none: the probes run as the node is

    @property
    def n_gpus(self) -> int:
        return len(self.gpus)


def gpus_set(gpus) -> ProbeSet:
    return ProbeSet(f"diagnose-{'.'.join(map(str, gpus))}", tuple(gpus))


def pair_set(a: int, b: int) -> ProbeSet:
    return ProbeSet(f"pair-{a}.{b}", (a, b))


def topology_from_header(header: dict) -> Topology | None:
    """The topology a record's header lists (gpus, matrix, fabric); None when it lists none."""
    gpus = [g for g in header.get("gpus") or [] if isinstance(g, dict) and isinstance(g.get("index"), int)]
    matrix = header.get("matrix") or []
    if not gpus or len(matrix) != len(gpus) or any(len(row) != len(gpus) for row in matrix):
        return None
    nv, pcie = [], []
    for i, row in enumerate(matrix):
        nv.append(tuple(int(m.group(1)) if (m := re.fullmatch(r"NV(\d+)", str(c))) and i != j else 0
                        for j, c in enumerate(row)))
        pcie.append(tuple(None if i == j or str(c).startswith("NV") else str(c) for j, c in enumerate(row)))
    try:
        return Topology(tuple(Gpu(g["index"], g.get("name"), g.get("bus_id"), memory_bytes=g.get("memory_bytes"))
                              for g in gpus), tuple(nv), tuple(pcie), source="the record's header",
                        declared_fabric=header.get("fabric") if header.get("fabric") in FABRICS else None)
    except ValueError:
        return None


@dataclass
class Context:
    thresholds: object  # wirecheck.thresholds.file.Thresholds
    simulated: bool
    topology: Topology | None
    log_dir: Path | None = None
    collective_workers: str = WORKERS  # a module with `measure`
    gpu_workers: str = GPU_WORKERS  # a module with the GPU load's `figures`, `sustained`, `memory`
    pool: Any = None  # the command's wirecheck.workers.pool.WorkerPool (diagnose.command makes and closes it)

    @property
    def backend(self) -> str:
        return "gloo" if self.simulated else "nccl"

    def nv(self, a: int, b: int) -> int | None:
        try:
            return self.topology.nv_between(a, b) if self.topology else None
        except (KeyError, ValueError, IndexError):
            return None

    def path(self, a: int, b: int) -> str:
        """The path NCCL takes between two GPUs as the topology has it: NV# or the PCIe path code."""
        nv = self.nv(a, b)
        if nv:
            return f"NV{nv}"
        if self.topology is None:
            return "path unknown"
        try:
            code = self.topology.pcie_paths[self.topology.position(a)][self.topology.position(b)]
        except (KeyError, ValueError, IndexError):
            code = None
        return code or "path unknown"

    def gpu_name(self, g: int) -> str | None:
        try:
            return self.topology.gpu(g).name if self.topology else None
        except (KeyError, ValueError, IndexError):
            return None

    def bus_id(self, g: int) -> str | None:
        try:
            return self.topology.gpu(g).bus_id if self.topology else None
        except (KeyError, ValueError, IndexError):
            return None


def read_counters() -> tuple[dict[int, nvml.GpuHealth], str | None]:
    """Every GPU's NVML health reading ({index: GpuHealth}), or the reason there is none."""
    try:
        return {h.index: h for h in nvml.read_health()}, None
    except nvml.NvmlUnavailable as exc:
        return {}, nvml.without_simulate_hint(exc)


def context_for(run: RunRecord, thresholds, *, topology: Topology | None = None, **kw) -> Context:
    """The probes' context for a record: simulated as the record was; the node's own topology when given
    (NVML's, on the node), else the header's."""
    return Context(thresholds, bool(run.simulated), topology or topology_from_header(run.run), **kw)
