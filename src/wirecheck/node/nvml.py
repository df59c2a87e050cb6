"""Live readings from NVML: topology, health counters, versions, peer-to-peer status.

The only module that imports pynvml (from nvidia-ml-py), and only inside functions, so the
library imports on machines without it. NVML failures become `NvmlUnavailable` with a
message that says what to do. A reading the GPU or driver cannot give is an `Unsupported`
marker carrying the reason: the checks skip on it, they never pass on it.
"""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

from wirecheck.core import gpu_arch
from wirecheck.node.topology import (
    BRIDGED,
    NVSWITCH,
    PCIE,
    Gpu,
    NvLink,
    Topology,
    _norm_bus,
    nvlink_matrix_from_links,
)

# nvml.h values, written out: the nvidia-ml-py constant for P2P READ is the tuple (0,) by a
# typo (trailing comma) and ctypes rejects it, so no P2P constant is taken from the binding.
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}
P2P_STATUS_NAMES = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}
CLOCK_SM, CLOCK_MEM = 1, 2  # nvmlClockType_t
FI_NVLINK_LINK_COUNT = 91
FI_NVLINK_GET_SPEED = 164  # MB/s per direction, scoped to one link
NVLINK_MAX_LINKS = 36
NVLINK_STATE_ACTIVE = 1
REMOTE_TYPE_GPU = 0
REMOTE_TYPE_SWITCH = 2
# What a link reports as its remote when the NVSwitch is not visible (VMs).
INVISIBLE_REMOTE_BUS = "FFFFFFFF:FF:FF.0"
# nvmlDeviceGetTopologyCommonAncestor levels; INTERNAL (0, two GPUs on one board) has no
# code of its own in nvidia-smi and is the nearest PCIe path.
TOPOLOGY_LEVEL_CODES = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
FABRIC_STATE_NOT_SUPPORTED = 0
FABRIC_STATE_COMPLETED = 3
_FABRIC_STATE_NAMES = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}
ECC_CORRECTED = 0
ECC_UNCORRECTED = 1
ECC_VOLATILE = 0
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")  # counter ids 0..3
_AFFINITY_SCOPE_NODE = 0
_FIELD_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
# Errors meaning "this reading does not exist here", as opposed to "the reading failed".
_NOT_AVAILABLE = {
    "NotSupported": "NotSupported on this GPU/driver",
    "FunctionNotFound": "not in this driver's NVML (FunctionNotFound)",
    "NoPermission": "NoPermission (run as root)",
    "ArgumentVersionMismatch": "structure version not accepted by this driver",
}
_SIMULATE_HINT = "for a dry run use --simulate"


class NvmlUnavailable(RuntimeError):
    """NVML cannot answer: no binding, no driver, no GPU, or a call failed outright."""


def without_simulate_hint(exc: Exception) -> str:
    """The message for a command that has no --simulate (`wirecheck nccl-tests`)."""
    return str(exc).replace(f"; {_SIMULATE_HINT}", "").replace(_SIMULATE_HINT, "").rstrip("; ")


class GpuLost(NvmlUnavailable):
    """A GPU fell off the bus (NVMLError_GpuIsLost)."""

    def __init__(self, index: int):
        self.index = index
        super().__init__(
            f"GPU {index} is lost (NVMLError_GpuIsLost): it no longer answers on the PCIe bus; "
            f"check `dmesg` for Xid 79, then reset it (`nvidia-smi -r -i {index}`) or reboot the node"
        )


@dataclass(frozen=True)
class Unsupported:
    """A reading this GPU/driver/binding cannot give. Checks skip with `reason`."""

    reason: str


def is_supported(value: Any) -> bool:
    return not isinstance(value, Unsupported)


class RemappedRows(NamedTuple):
    correctable: int
    uncorrectable: int
    pending: int
    failure: int


class ComputeProcess(NamedTuple):
    pid: int
    name: str | None
    used_bytes: int | None


@dataclass(frozen=True)
class FabricState:
    """NVSwitch fabric registration of a GPU; usable only when completed and status_ok."""

    state: int  # 1 NOT_STARTED, 2 IN_PROGRESS, 3 COMPLETED
    status: int  # an NVML return code, 0 = success

    @property
    def completed(self) -> bool:
        return self.state == FABRIC_STATE_COMPLETED

    @property
    def status_ok(self) -> bool:
        return self.status == 0

    def __str__(self) -> str:
        state = _FABRIC_STATE_NAMES.get(self.state, f"state {self.state}")
        return f"{state}, status {'SUCCESS' if self.status_ok else f'NVML error {self.status}'}"


@dataclass(frozen=True)
class NvLinkCounters:
    """Error counters of one link; judged as deltas over a run, never as absolutes."""

    link: int
    replay: int | Unsupported
    recovery: int | Unsupported
    crc_flit: int | Unsupported
    crc_data: int | Unsupported


@dataclass(frozen=True)
class GpuHealth:
    index: int
    bus_id: str | None
    persistence_mode: int | Unsupported
    ecc_mode: tuple[int, int] | Unsupported  # (current, pending)
    volatile_uncorrected_ecc: int | Unsupported
    remapped_rows: RemappedRows | Unsupported
    fabric_state: FabricState | Unsupported
    mig_mode: tuple[int, int] | Unsupported  # (current, pending)
    virtualization_mode: int | Unsupported  # 0 bare metal, 1 passthrough, 2 vGPU
    compute_processes: tuple[ComputeProcess, ...] | Unsupported
    nvlink_counters: tuple[NvLinkCounters, ...]
    pcie_replay_counter: int | Unsupported
    clocks_event_reasons: int | Unsupported
    # Single-bit (corrected) errors since the driver loaded: judged as growth over the run
    # (wirecheck.node.memory_errors); a default so readings built by hand need not name it.
    volatile_corrected_ecc: int | Unsupported = Unsupported("not read")


# -- session and error mapping ----------------------------------------------------------


def _import_pynvml():
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(
            f"pynvml is not importable ({exc}): install nvidia-ml-py (`pip install nvidia-ml-py`); {_SIMULATE_HINT}"
        ) from exc
    return pynvml


def _error_kind(exc: BaseException) -> str | None:
    """'NotSupported' for NVMLError_NotSupported (and subclasses), None for non-NVML errors."""
    for cls in type(exc).__mro__:
        if cls.__name__.startswith("NVMLError_"):
            return cls.__name__[len("NVMLError_"):]
    return None


@contextmanager
def _session() -> Iterator[Any]:
    """nvmlInit for one reading and nvmlShutdown after it, whatever happens."""
    nv = _import_pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        kind = _error_kind(exc)
        if kind in ("LibraryNotFound", "DriverNotLoaded"):
            raise NvmlUnavailable(
                f"NVML could not start ({type(exc).__name__}: {exc}): no NVIDIA driver on this machine; {_SIMULATE_HINT}"
            ) from exc
        if kind == "LibRmVersionMismatch":
            raise NvmlUnavailable(
                f"NVML could not start ({exc}): the NVIDIA library and kernel module differ "
                "(driver upgraded without a reboot?); reboot the node or reload the nvidia module"
            ) from exc
        raise NvmlUnavailable(f"NVML could not start ({type(exc).__name__}: {exc}); check `nvidia-smi`") from exc
    try:
        yield nv
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - a failed shutdown must not hide the reading or its error
            pass


def _try(nv: Any, index: int | None, fn_name: str, *args: Any) -> Any:
    """Call nv.<fn_name>(*args); a reading that does not exist here becomes Unsupported."""
    fn = getattr(nv, fn_name, None)
    if fn is None:
        return Unsupported(f"{fn_name}: not in this nvidia-ml-py (upgrade nvidia-ml-py)")
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        kind = _error_kind(exc)
        if kind == "GpuIsLost" and index is not None:
            raise GpuLost(index) from exc
        if kind in _NOT_AVAILABLE:
            return Unsupported(f"{fn_name}: {_NOT_AVAILABLE[kind]}")
        where = f"GPU {index}: " if index is not None else ""
        raise NvmlUnavailable(
            f"{where}{fn_name} failed ({type(exc).__name__}: {exc}); check `nvidia-smi -q` and `dmesg`"
        ) from exc


def _or_none(value: Any) -> Any:
    return None if isinstance(value, Unsupported) else value


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, Unsupported):
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _device_count(nv: Any) -> int:
    count = _try(nv, None, "nvmlDeviceGetCount")
    if isinstance(count, Unsupported) or count == 0:
        raise NvmlUnavailable(
            "NVML sees 0 GPUs: the driver is loaded but no GPU is visible to this process "
            "(check `nvidia-smi`, and the container's GPU access, e.g. --gpus all); " + _SIMULATE_HINT
        )
    return count


def _handle(nv: Any, index: int) -> Any:
    handle = _try(nv, index, "nvmlDeviceGetHandleByIndex", index)
    if isinstance(handle, Unsupported):
        raise NvmlUnavailable(f"GPU {index}: no handle ({handle.reason})")
    return handle


def _handles(nv: Any) -> list[Any]:
    return [_handle(nv, i) for i in range(_device_count(nv))]


# -- topology ---------------------------------------------------------------------------


def read_topology() -> Topology:
    """The node's GPUs, links, NV# matrix (min rule) and PCIe paths, read from NVML."""
    with _session() as nv:
        handles = _handles(nv)
        bus_ids = [_bus_id(nv, i, h) for i, h in enumerate(handles)]
        known = {_norm_bus(b) for b in bus_ids if b}
        gpus = tuple(_read_gpu(nv, i, h, bus_ids[i], known) for i, h in enumerate(handles))
        pcie = _pcie_paths(nv, handles)
        versions = _read_versions(nv)
    return Topology(
        gpus=gpus,
        nvlinks=nvlink_matrix_from_links(gpus),
        pcie_paths=pcie,
        source="nvml",
        driver_version=versions["driver"],
        cuda_driver_version=versions["cuda_driver"],
        declared_fabric=_declared_fabric(gpus),
    )


def _bus_id(nv: Any, i: int, h: Any) -> str | None:
    pci = _try(nv, i, "nvmlDeviceGetPciInfo", h)
    return None if isinstance(pci, Unsupported) else _text(pci.busId)


def _read_gpu(nv: Any, i: int, h: Any, bus_id: str | None, known_buses: set[str]) -> Gpu:
    memory = _or_none(_try(nv, i, "nvmlDeviceGetMemoryInfo", h))
    return Gpu(
        index=i,
        name=_text(_try(nv, i, "nvmlDeviceGetName", h)),
        bus_id=bus_id,
        uuid=_text(_try(nv, i, "nvmlDeviceGetUUID", h)),
        serial=_serial(nv, i, h),
        memory_bytes=getattr(memory, "total", None),
        nvlinks=_read_links(nv, i, h, known_buses),
        pcie_gen=_or_none(_try(nv, i, "nvmlDeviceGetCurrPcieLinkGeneration", h)),
        pcie_gen_max=_or_none(_try(nv, i, "nvmlDeviceGetMaxPcieLinkGeneration", h)),
        pcie_width=_or_none(_try(nv, i, "nvmlDeviceGetCurrPcieLinkWidth", h)),
        pcie_width_max=_or_none(_try(nv, i, "nvmlDeviceGetMaxPcieLinkWidth", h)),
        cpu_affinity=_cpu_affinity(nv, i, h),
        numa_affinity=_mask_ranges(_or_none(_try(nv, i, "nvmlDeviceGetMemoryAffinity", h, 1, _AFFINITY_SCOPE_NODE))),
        **_physics(nv, i, h),
    )


def _serial(nv: Any, i: int, h: Any) -> str | None:
    """The board's serial, or None: it only names the GPU for its history (the UUID does too), so a
    driver that cannot answer it (consumer boards, some VMs) never stops a run."""
    try:
        return _text(_try(nv, i, "nvmlDeviceGetSerial", h))
    except GpuLost:
        raise
    except NvmlUnavailable:
        return None


def _physics(nv: Any, i: int, h: Any) -> dict[str, Any]:
    """What the derived limits need: compute capability, SMs, max clocks, memory bus width, power limit."""
    cc = _or_none(_try(nv, i, "nvmlDeviceGetCudaComputeCapability", h))
    capability = f"{cc[0]}.{cc[1]}" if isinstance(cc, (tuple, list)) and len(cc) == 2 else None
    # A whole GPU has no SM count in NVML (nvmlDeviceGetAttributes answers for MIG instances only):
    # CUDA cores / cores per SM of the architecture.
    cores = _or_none(_try(nv, i, "nvmlDeviceGetNumGpuCores", h))
    limit_mw = _or_none(_try(nv, i, "nvmlDeviceGetEnforcedPowerLimit", h))
    return {
        "compute_capability": capability,
        "sm_count": gpu_arch.sm_count(capability, cores if isinstance(cores, int) else None),
        "sm_clock_max_mhz": _or_none(_try(nv, i, "nvmlDeviceGetMaxClockInfo", h, CLOCK_SM)),
        "mem_bus_width": _or_none(_try(nv, i, "nvmlDeviceGetMemoryBusWidth", h)),
        "mem_clock_max_mhz": _or_none(_try(nv, i, "nvmlDeviceGetMaxClockInfo", h, CLOCK_MEM)),
        "power_limit_w": limit_mw / 1000 if isinstance(limit_mw, (int, float)) else None,
    }


def _field_values(nv: Any, i: int, h: Any, ids: list[Any]) -> list[Any]:
    """Values of NVML fields (id or (id, scope)); None where the field has no answer."""
    if not ids:
        return []
    values = _try(nv, i, "nvmlDeviceGetFieldValues", h, ids)
    if isinstance(values, Unsupported):
        return [None] * len(ids)
    out = []
    for v in values:
        attr = _FIELD_VALUE_ATTR.get(v.valueType)
        out.append(getattr(v.value, attr) if v.nvmlReturn == 0 and attr else None)
    return out


def _link_count(nv: Any, i: int, h: Any) -> int:
    # Field 91 first: looping to NVML_NVLINK_MAX_LINKS (36) costs 18+ failing calls per GPU.
    (count,) = _field_values(nv, i, h, [FI_NVLINK_LINK_COUNT])
    if count is not None:
        return min(int(count), NVLINK_MAX_LINKS)
    n = 0
    fn = getattr(nv, "nvmlDeviceGetNvLinkState", None)
    while fn is not None and n < NVLINK_MAX_LINKS:
        try:
            fn(h, n)
        except nv.NVMLError as exc:
            kind = _error_kind(exc)
            if kind == "GpuIsLost":
                raise GpuLost(i) from exc
            if kind in ("InvalidArgument", "NotSupported", "FunctionNotFound"):
                break
            raise NvmlUnavailable(f"GPU {i}: nvmlDeviceGetNvLinkState({n}) failed ({type(exc).__name__}: {exc})") from exc
        n += 1
    return n


def _read_links(nv: Any, i: int, h: Any, known_buses: set[str]) -> tuple[NvLink, ...]:
    count = _link_count(nv, i, h)
    speeds = _field_values(nv, i, h, [(FI_NVLINK_GET_SPEED, link) for link in range(count)])
    links = []
    for link in range(count):
        state = _try(nv, i, "nvmlDeviceGetNvLinkState", h, link)
        if state != NVLINK_STATE_ACTIVE:
            # Down (or, on newer drivers, up with traffic disabled): carries nothing.
            links.append(NvLink(index=link, active=False, remote_type="unknown"))
            continue
        pci = _try(nv, i, "nvmlDeviceGetNvLinkRemotePciInfo", h, link)
        remote_bus = None if isinstance(pci, Unsupported) else _text(pci.busId)
        remote_type = _try(nv, i, "nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
        links.append(
            NvLink(
                index=link,
                active=True,
                remote_type=_remote_kind(remote_type, remote_bus, known_buses),
                remote_bus_id=remote_bus,
                version=_or_none(_try(nv, i, "nvmlDeviceGetNvLinkVersion", h, link)),
                speed_mbps=speeds[link],
            )
        )
    return tuple(links)


def _remote_kind(remote_type: Any, remote_bus: str | None, known_buses: set[str]) -> str:
    if remote_type == REMOTE_TYPE_GPU:
        return "gpu"
    if remote_type == REMOTE_TYPE_SWITCH:
        return "switch"
    if isinstance(remote_type, int) and remote_type != 0xFF:
        return "unknown"  # IBM NPU (POWER CPUs): not a GPU peer
    # No type from the driver: like NCCL, a remote we cannot see or that is none of our
    # GPUs is taken for an NVSwitch.
    norm = _norm_bus(remote_bus)
    if not norm or norm == INVISIBLE_REMOTE_BUS or norm not in known_buses:
        return "switch"
    return "gpu"


def _declared_fabric(gpus: tuple[Gpu, ...]) -> str | None:
    kinds = {link.remote_type for g in gpus for link in g.nvlinks if link.active} & {"gpu", "switch"}
    if kinds == {"switch"}:
        return NVSWITCH
    if kinds == {"gpu"}:
        return BRIDGED
    if not kinds:
        return PCIE
    return None  # both kinds: not a known product layout; let the NV# matrix decide


def _pcie_paths(nv: Any, handles: list[Any]) -> tuple[tuple[str | None, ...], ...]:
    n = len(handles)
    paths: list[list[str | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            level = _try(nv, i, "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            paths[i][j] = paths[j][i] = TOPOLOGY_LEVEL_CODES.get(level) if isinstance(level, int) else None
    return tuple(map(tuple, paths))


def _cpu_affinity(nv: Any, i: int, h: Any) -> str | None:
    words = max(1, -(-(os.cpu_count() or 64) // 64))
    return _mask_ranges(_or_none(_try(nv, i, "nvmlDeviceGetCpuAffinity", h, words)))


def _mask_ranges(words: Any) -> str | None:
    """64-bit mask words -> the `topo -m` style list, e.g. '0-31,64-95'."""
    if words is None:
        return None
    bits = [w * 64 + b for w, word in enumerate(words) for b in range(64) if int(word) >> b & 1]
    if not bits:
        return None
    spans, start, prev = [], bits[0], bits[0]
    for b in bits[1:] + [None]:
        if b is not None and b == prev + 1:
            prev = b
            continue
        spans.append(f"{start}" if start == prev else f"{start}-{prev}")
        if b is not None:
            start = prev = b
    return ",".join(spans)


# -- versions ---------------------------------------------------------------------------


def read_versions() -> dict[str, str | None]:
    """{'driver': '580.159.04', 'cuda_driver': '13.0', 'nvml': '13.580.159.04'}; None where unknown."""
    with _session() as nv:
        return _read_versions(nv)


def _read_versions(nv: Any) -> dict[str, str | None]:
    cuda = _or_none(_try(nv, None, "nvmlSystemGetCudaDriverVersion"))
    return {
        "driver": _text(_try(nv, None, "nvmlSystemGetDriverVersion")),
        # NVML encodes 13.0 as 13000 (major * 1000 + minor * 10).
        "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
        "nvml": _text(_try(nv, None, "nvmlSystemGetNVMLVersion")),
    }


def read_pcie_links(indices: list[int]) -> dict[int, dict[str, int | None]]:
    """{index: {"gen", "gen_max", "width", "width_max"}} now; None where NVML cannot say.

    The link trains down at idle to save power, so the current figures mean something only
    while a copy is running: the copy-bandwidth worker reads them in the middle of one.
    """
    with _session() as nv:
        out = {}
        for i in indices:
            h = _handle(nv, i)
            out[i] = {
                "gen": _or_none(_try(nv, i, "nvmlDeviceGetCurrPcieLinkGeneration", h)),
                "gen_max": _or_none(_try(nv, i, "nvmlDeviceGetMaxPcieLinkGeneration", h)),
                "width": _or_none(_try(nv, i, "nvmlDeviceGetCurrPcieLinkWidth", h)),
                "width_max": _or_none(_try(nv, i, "nvmlDeviceGetMaxPcieLinkWidth", h)),
            }
        return out


# -- peer to peer -----------------------------------------------------------------------


def p2p_status(i: int, j: int) -> dict[str, str | Unsupported]:
    """NVML P2P status name per capability, e.g. {'read': 'OK', ..., 'pci': 'NOT_SUPPORTED'}.

    Keys: read, write, nvlink, atomics, pci. Names as in P2P_STATUS_NAMES (nvidia-smi topo
    -p2p letters OK/CNS/GNS/TNS/DR/NS/U).
    """
    with _session() as nv:
        count = _device_count(nv)
        for k in (i, j):
            if not 0 <= k < count:
                raise ValueError(f"p2p_status: GPU index {k} is out of range; NVML sees GPUs 0..{count - 1}")
        hi, hj = _handle(nv, i), _handle(nv, j)
        return {name: _p2p_name(_try(nv, i, "nvmlDeviceGetP2PStatus", hi, hj, idx)) for name, idx in P2P_CAPS.items()}


def _p2p_name(status: Any) -> str | Unsupported:
    if isinstance(status, Unsupported):
        return status
    return P2P_STATUS_NAMES.get(status, f"STATUS_{status}")


# -- health -----------------------------------------------------------------------------


def read_health() -> list[GpuHealth]:
    """Health readings per GPU. Counters are for deltas: compare two readings, not one."""
    with _session() as nv:
        return [_read_gpu_health(nv, i, h) for i, h in enumerate(_handles(nv))]


def _read_gpu_health(nv: Any, i: int, h: Any) -> GpuHealth:
    rows = _try(nv, i, "nvmlDeviceGetRemappedRows", h)
    clocks = _try(nv, i, "nvmlDeviceGetCurrentClocksEventReasons", h)
    if isinstance(clocks, Unsupported):  # bindings before the 'EventReasons' rename
        clocks = _try(nv, i, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    return GpuHealth(
        index=i,
        bus_id=_bus_id(nv, i, h),
        persistence_mode=_try(nv, i, "nvmlDeviceGetPersistenceMode", h),
        ecc_mode=_pair(_try(nv, i, "nvmlDeviceGetEccMode", h)),
        volatile_uncorrected_ecc=_try(nv, i, "nvmlDeviceGetTotalEccErrors", h, ECC_UNCORRECTED, ECC_VOLATILE),
        volatile_corrected_ecc=_try(nv, i, "nvmlDeviceGetTotalEccErrors", h, ECC_CORRECTED, ECC_VOLATILE),
        remapped_rows=rows if isinstance(rows, Unsupported) else RemappedRows(*rows),
        fabric_state=_fabric_state(nv, i, h),
        mig_mode=_pair(_try(nv, i, "nvmlDeviceGetMigMode", h)),
        virtualization_mode=_try(nv, i, "nvmlDeviceGetVirtualizationMode", h),
        compute_processes=_compute_processes(nv, i, h),
        nvlink_counters=_nvlink_counters(nv, i, h),
        pcie_replay_counter=_try(nv, i, "nvmlDeviceGetPcieReplayCounter", h),
        clocks_event_reasons=clocks,
    )


def _pair(value: Any) -> Any:
    return value if isinstance(value, Unsupported) else (int(value[0]), int(value[1]))


def _fabric_state(nv: Any, i: int, h: Any) -> FabricState | Unsupported:
    # Newest API first; older bindings/drivers only have the unversioned call.
    attempts = (
        ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t"),
        ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v2_t"),
        ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
    )
    result: Any = Unsupported("GPU fabric info: not in this nvidia-ml-py (upgrade nvidia-ml-py)")
    for fn_name, struct_name in attempts:
        struct = getattr(nv, struct_name, None)
        if struct is None or not hasattr(nv, fn_name):
            continue
        info = struct()
        result = _try(nv, i, fn_name, h, ctypes.byref(info))
        if isinstance(result, Unsupported):
            continue
        if info.state == FABRIC_STATE_NOT_SUPPORTED:
            return Unsupported(f"{fn_name}: fabric state NOT_SUPPORTED (this GPU is not on an NVSwitch fabric)")
        return FabricState(state=int(info.state), status=int(info.status))
    return result


def _compute_processes(nv: Any, i: int, h: Any) -> tuple[ComputeProcess, ...] | Unsupported:
    procs = _try(nv, i, "nvmlDeviceGetComputeRunningProcesses", h)
    if isinstance(procs, Unsupported):
        return procs
    out = []
    for p in procs:
        try:  # best effort: the process may be gone, or in another PID namespace
            name = _text(nv.nvmlSystemGetProcessName(p.pid))
        except (nv.NVMLError, AttributeError):
            name = None
        out.append(ComputeProcess(pid=int(p.pid), name=name, used_bytes=getattr(p, "usedGpuMemory", None)))
    return tuple(out)


def _nvlink_counters(nv: Any, i: int, h: Any) -> tuple[NvLinkCounters, ...]:
    # Active links only: a down link carries no traffic (and may refuse the query); that it
    # is down is the topology check's finding.
    out = []
    for link in range(_link_count(nv, i, h)):
        if _try(nv, i, "nvmlDeviceGetNvLinkState", h, link) != NVLINK_STATE_ACTIVE:
            continue
        values = [_try(nv, i, "nvmlDeviceGetNvLinkErrorCounter", h, link, c) for c in range(len(NVLINK_COUNTERS))]
        out.append(NvLinkCounters(link, *values))
    return tuple(out)
