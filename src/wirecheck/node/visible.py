"""CUDA_VISIBLE_DEVICES, honoured: the GPUs of the node a run may use.

NVML sees every GPU of the node whatever CUDA_VISIBLE_DEVICES says (vLLM met the same mismatch,
vllm-project/vllm#4233), and the workers set it per placement. Without this, a run given 4 GPUs of 8 (a Slurm job on a shared node without device
cgroups, or `CUDA_VISIBLE_DEVICES=2,3 pytest` while debugging) would measure all 8, other jobs'
GPUs included. So a set CUDA_VISIBLE_DEVICES narrows the node's topology to the GPUs it names,
before placements are made; every id and record then says which GPUs ran.

Entries are GPU indices or GPU UUIDs (`GPU-...`, a unique prefix is enough), as CUDA takes them.
Indices are NVML's, which follow PCI bus order: CUDA counts the same way when CUDA_DEVICE_ORDER is
PCI_BUS_ID, and on a node of one GPU model also by default (Slurm numbers GPUs in that order too).
On a node of mixed models CUDA's default order is fastest first, so there an index is ambiguous
and only UUIDs or CUDA_DEVICE_ORDER=PCI_BUS_ID are taken. MIG instances are not whole GPUs: refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from wirecheck.node.topology import Gpu, Topology

ENV = "CUDA_VISIBLE_DEVICES"
ORDER_ENV = "CUDA_DEVICE_ORDER"
FIX = f"list whole GPUs by index or UUID (`wirecheck topo` shows them), or unset {ENV} to validate every GPU"


class VisibleDevicesError(ValueError):
    """CUDA_VISIBLE_DEVICES cannot be used; the message names the entry and the fix."""


class NoVisibleGpu(VisibleDevicesError):
    """CUDA_VISIBLE_DEVICES hides every GPU (empty, or -1 as some schedulers write)."""


def _index(entry: str, gpus: tuple[Gpu, ...], spec: str, mixed_order: bool) -> int:
    indices = [g.index for g in gpus]
    if entry.lstrip("-").isdigit():
        if mixed_order:
            models = ", ".join(sorted({g.name or "?" for g in gpus}))
            raise VisibleDevicesError(
                f"{ENV}={spec}: GPU {entry} is ambiguous on a node of mixed models ({models}): CUDA counts fastest "
                f"first unless {ORDER_ENV}=PCI_BUS_ID; set {ORDER_ENV}=PCI_BUS_ID or name the GPUs by UUID")
        if int(entry) not in indices:
            raise VisibleDevicesError(f"{ENV}={spec}: there is no GPU {entry} on this node (GPUs "
                                      f"{', '.join(map(str, indices))}); {FIX}")
        return int(entry)
    if entry.startswith("MIG-"):
        raise VisibleDevicesError(f"{ENV}={spec}: {entry} is a MIG instance; wirecheck validates whole GPUs and "
                                  f"their links: {FIX}")
    if entry.startswith("GPU-"):
        found = [g.index for g in gpus if g.uuid and g.uuid.startswith(entry)]
        if len(found) == 1:
            return found[0]
        what = "no GPU" if not found else f"{len(found)} GPUs ({', '.join(map(str, found))})"
        raise VisibleDevicesError(f"{ENV}={spec}: {entry} matches {what} of this node; {FIX}")
    raise VisibleDevicesError(f"{ENV}={spec}: {entry!r} is neither a GPU index nor a GPU UUID; {FIX}")


def visible_indices(spec: str, gpus: tuple[Gpu, ...], device_order: str | None = None) -> tuple[int, ...]:
    """The NVML indices `spec` (a CUDA_VISIBLE_DEVICES value) names, in its order."""
    entries = [e.strip() for e in spec.split(",")]
    if spec.strip() in ("", "-1") or entries[0] == "-1":
        raise NoVisibleGpu(f"{ENV}={spec!r} hides every GPU from this process: nothing can be validated; {FIX}")
    if "" in entries:
        raise VisibleDevicesError(f"{ENV}={spec}: an empty entry; {FIX}")
    mixed_order = len({g.name for g in gpus}) > 1 and (device_order or "").upper() != "PCI_BUS_ID"
    chosen = [_index(e, gpus, spec, mixed_order) for e in entries]
    twice = sorted({i for i in chosen if chosen.count(i) > 1})
    if twice:
        raise VisibleDevicesError(f"{ENV}={spec}: GPU {', '.join(map(str, twice))} listed twice; {FIX}")
    return tuple(chosen)


def restrict(topology: Topology, spec: str | None, device_order: str | None = None) -> Topology:
    """`topology` as a process with CUDA_VISIBLE_DEVICES=`spec` may use it (unchanged when unset,
    or when it names every GPU)."""
    if spec is None:
        return topology
    chosen = visible_indices(spec, topology.gpus, device_order)
    if sorted(chosen) == sorted(topology.indices):
        return topology
    return topology.only(chosen, f"{ENV}={spec}: GPUs {','.join(map(str, sorted(chosen)))} of {topology.n_gpus}")


def from_environment(topology: Topology, environ: Mapping[str, str] | None = None) -> Topology:
    """`restrict` with this process's CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER."""
    env = os.environ if environ is None else environ
    return restrict(topology, env.get(ENV), env.get(ORDER_ENV))
