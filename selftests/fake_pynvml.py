"""A fake `pynvml` module built from scenario data, for CPU-only tests of wirecheck.node.nvml.

Names, signatures and error classes follow nvidia-ml-py (13.6xx) so that wirecheck.node.nvml runs
unchanged against it; install it with `monkeypatch.setitem(sys.modules, "pynvml", build(s))`.
Only what wirecheck.node.nvml calls is here. Quirks of the real binding that bit people are kept
on purpose: NVML_P2P_CAPS_INDEX_READ is the tuple (0,) and a tuple index raises the same
ctypes error as the real one.
"""

from __future__ import annotations

import ctypes
import json
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# -- errors: the real module generates NVMLError_<CamelCase> from NVML_ERROR_* -----------

ERROR_CODES = {
    "Uninitialized": 1,
    "InvalidArgument": 2,
    "NotSupported": 3,
    "NoPermission": 4,
    "AlreadyInitialized": 5,
    "NotFound": 6,
    "InsufficientSize": 7,
    "DriverNotLoaded": 9,
    "Timeout": 10,
    "LibraryNotFound": 12,
    "FunctionNotFound": 13,
    "GpuIsLost": 15,
    "LibRmVersionMismatch": 18,
    "ArgumentVersionMismatch": 25,
    "Unknown": 999,
}


class NVMLError(Exception):
    value = ERROR_CODES["Unknown"]

    def __str__(self) -> str:
        return type(self).__name__.replace("NVMLError_", "")


ERRORS: dict[str, type[NVMLError]] = {
    name: type(f"NVMLError_{name}", (NVMLError,), {"value": code, "__module__": "pynvml"})
    for name, code in ERROR_CODES.items()
}


def error(name: str) -> NVMLError:
    return ERRORS[name]()


# -- scenario data ----------------------------------------------------------------------

SWITCH_BUS = "FFFFFFFF:FF:FF.0"
GPU_REMOTE, SWITCH_REMOTE = 0, 2


@dataclass
class FakeLink:
    active: bool = True
    remote_type: int = SWITCH_REMOTE
    remote_bus: str = SWITCH_BUS
    version: int = 6
    speed_mbps: int | None = 26562
    counters: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)  # replay, recovery, crc_flit, crc_data, ecc_data


@dataclass
class FakeGpu:
    bus_id: str
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    memory_total: int = 80 * 2**30
    links: list[FakeLink] = field(default_factory=list)
    link_count_field: bool = True  # field 91 answers
    pcie: tuple[int, int, int, int] = (5, 16, 5, 16)  # current gen, current width, max gen, max width
    lost: bool = False  # nvmlDeviceGetHandleByIndex raises GpuIsLost
    fabric: tuple[int, int] | None = (3, 0)  # (state, status); None: NotSupported
    persistence: int = 1
    ecc: tuple[int, int] = (1, 1)
    volatile_uncorrected: int = 0
    aggregate_uncorrected: int = 0  # since the GPU was made (NVML's aggregate counter)
    serial: str | None = None  # None: nvmlDeviceGetSerial raises NotSupported (consumer boards, some VMs)
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)
    mig: tuple[int, int] = (0, 0)
    virtualization: int = 0
    processes: list[tuple[int, str | None, int | None]] = field(default_factory=list)
    pcie_replay: int = 0
    clocks_event_reasons: int = 1
    volatile_corrected: int = 0
    # Under load, as a 1x H200 node read (scripts/device/gpu_health_probe.py): the sampler's readings.
    sm_mhz: int = 1980
    mem_mhz: int = 3201
    max_sm_mhz: int = 1980
    # What the derived limits read (an H100 SXM's): compute capability, CUDA cores, memory bus and max clock.
    compute_capability: tuple[int, int] = (9, 0)
    cuda_cores: int = 16896  # 132 SMs x 128
    mem_bus_width: int = 5120
    max_mem_mhz: int | None = None  # None: as mem_mhz
    power_mw: int = 690_000
    power_limit_mw: int = 700_000
    default_power_limit_mw: int = 700_000
    temperature: int = 60
    temperature_thresholds: dict[int, int] = field(default_factory=lambda: {0: 95, 1: 89, 2: 95, 3: 87})
    utilization: int = 100
    violation_ns: dict[int, int] = field(default_factory=dict)  # perf policy -> cumulative throttle ns
    supported_events: int = 0xFF9F
    cpu_affinity: tuple[int, ...] = (0xFFFFFFFF,)
    memory_affinity: tuple[int, ...] = (1,)
    not_supported: set[str] = field(default_factory=set)  # function names raising NotSupported here


@dataclass
class Scenario:
    gpus: list[FakeGpu]
    driver: str = "580.159.04"
    cuda: int = 13000
    nvml: str = "13.580.159.04"
    ancestors: dict[frozenset, int] = field(default_factory=dict)
    default_ancestor: int = 50
    p2p: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (i, j, index) -> status
    init_error: str | None = None  # e.g. "LibraryNotFound"
    missing: set[str] = field(default_factory=set)  # not in this binding (AttributeError)
    function_not_found: set[str] = field(default_factory=set)  # not in this driver


# -- the module -------------------------------------------------------------------------


class c_nvmlGpuFabricInfo_v3_t(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
        ("healthMask", ctypes.c_uint32),
        ("healthSummary", ctypes.c_uint8),
    ]


class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    _fields_ = [
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
    ]


@dataclass(frozen=True)
class _Handle:
    index: int


def _field(field_id: int, scope: int, ret: int, value: Any = 0) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        fieldId=field_id,
        scopeId=scope,
        nvmlReturn=ret,
        valueType=1,  # unsigned int
        value=types.SimpleNamespace(uiVal=value, ullVal=value, dVal=float(value)),
    )


def build(scenario: Scenario) -> types.ModuleType:
    """A module object that behaves like `pynvml` on the scenario's node."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError
    for name, cls in ERRORS.items():
        setattr(mod, cls.__name__, cls)
    mod.NVML_P2P_CAPS_INDEX_READ = (0,)  # the real binding's typo
    mod.NVML_FI_DEV_NVLINK_LINK_COUNT = 91
    mod.NVML_FI_DEV_NVLINK_GET_SPEED = 164
    mod.c_nvmlGpuFabricInfo_v3_t = c_nvmlGpuFabricInfo_v3_t
    mod.c_nvmlGpuFabricInfo_t = c_nvmlGpuFabricInfo_t
    mod.calls = []  # (function name, args) in call order, for tests
    state = {"init": 0}

    def export(name: str, fn: Callable) -> None:
        if name in scenario.missing:
            return

        def wrapper(*args: Any) -> Any:
            mod.calls.append((name, args))
            if name in scenario.function_not_found:
                raise error("FunctionNotFound")
            if not name.startswith(("nvmlInit", "nvmlShutdown")) and state["init"] <= 0:
                raise error("Uninitialized")
            if args and isinstance(args[0], _Handle) and name in scenario.gpus[args[0].index].not_supported:
                raise error("NotSupported")
            return fn(*args)

        wrapper.__name__ = name
        setattr(mod, name, wrapper)

    def gpu(h: _Handle) -> FakeGpu:
        return scenario.gpus[h.index]

    def link(h: _Handle, n: int) -> FakeLink:
        links = gpu(h).links
        if not links:
            raise error("NotSupported")
        if not 0 <= n < len(links):
            raise error("InvalidArgument")
        return links[n]

    # system
    def nvmlInit() -> None:
        if scenario.init_error:
            raise error(scenario.init_error)
        state["init"] += 1

    def nvmlShutdown() -> None:
        if state["init"] <= 0:
            raise error("Uninitialized")
        state["init"] -= 1

    mod.init_count = lambda: state["init"]
    export("nvmlInit", nvmlInit)
    export("nvmlShutdown", nvmlShutdown)
    export("nvmlSystemGetDriverVersion", lambda: scenario.driver)
    export("nvmlSystemGetCudaDriverVersion", lambda: scenario.cuda)
    export("nvmlSystemGetNVMLVersion", lambda: scenario.nvml)

    def process_name(pid: int) -> str:
        for g in scenario.gpus:
            for p, name, _ in g.processes:
                if p == pid and name is not None:
                    return name
        raise error("NotFound")

    export("nvmlSystemGetProcessName", process_name)

    # devices
    export("nvmlDeviceGetCount", lambda: len(scenario.gpus))

    def handle_by_index(index: int) -> _Handle:
        if not 0 <= index < len(scenario.gpus):
            raise error("InvalidArgument")
        if scenario.gpus[index].lost:
            raise error("GpuIsLost")
        return _Handle(index)

    export("nvmlDeviceGetHandleByIndex", handle_by_index)
    export("nvmlDeviceGetName", lambda h: gpu(h).name)
    export("nvmlDeviceGetUUID", lambda h: gpu(h).uuid)

    def serial(h: _Handle) -> str:
        if gpu(h).serial is None:
            raise error("NotSupported")
        return gpu(h).serial

    export("nvmlDeviceGetSerial", serial)
    export("nvmlDeviceGetPciInfo", lambda h: types.SimpleNamespace(busId=gpu(h).bus_id))
    export("nvmlDeviceGetMemoryInfo", lambda h: types.SimpleNamespace(total=gpu(h).memory_total, used=0, free=gpu(h).memory_total))
    export("nvmlDeviceGetCurrPcieLinkGeneration", lambda h: gpu(h).pcie[0])
    export("nvmlDeviceGetCurrPcieLinkWidth", lambda h: gpu(h).pcie[1])
    export("nvmlDeviceGetMaxPcieLinkGeneration", lambda h: gpu(h).pcie[2])
    export("nvmlDeviceGetMaxPcieLinkWidth", lambda h: gpu(h).pcie[3])
    export("nvmlDeviceGetCpuAffinity", lambda h, n: list(gpu(h).cpu_affinity[:n]) + [0] * max(0, n - len(gpu(h).cpu_affinity)))
    export("nvmlDeviceGetMemoryAffinity", lambda h, n, scope: list(gpu(h).memory_affinity[:n]))

    def field_values(h: _Handle, ids: list) -> list:
        out = []
        for fid in ids:
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            g = gpu(h)
            if fid == 91:
                out.append(_field(fid, scope, 0, len(g.links)) if g.link_count_field else _field(fid, scope, 3))
            elif fid == 164 and scope < len(g.links) and g.links[scope].active and g.links[scope].speed_mbps:
                out.append(_field(fid, scope, 0, g.links[scope].speed_mbps))
            elif fid == 164:
                out.append(_field(fid, scope, 3))
            else:
                out.append(_field(fid, scope, 2))
        return out

    export("nvmlDeviceGetFieldValues", field_values)
    export("nvmlDeviceGetNvLinkState", lambda h, n: int(link(h, n).active))
    export("nvmlDeviceGetNvLinkVersion", lambda h, n: link(h, n).version)
    export("nvmlDeviceGetNvLinkRemoteDeviceType", lambda h, n: link(h, n).remote_type)
    export("nvmlDeviceGetNvLinkRemotePciInfo", lambda h, n: types.SimpleNamespace(busId=link(h, n).remote_bus))
    export("nvmlDeviceGetNvLinkErrorCounter", lambda h, n, c: link(h, n).counters[c])

    def common_ancestor(h1: _Handle, h2: _Handle) -> int:
        return scenario.ancestors.get(frozenset((h1.index, h2.index)), scenario.default_ancestor)

    export("nvmlDeviceGetTopologyCommonAncestor", common_ancestor)

    def p2p(h1: _Handle, h2: _Handle, index: Any) -> int:
        if not isinstance(index, int):
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        return scenario.p2p.get((h1.index, h2.index, index), 0)

    export("nvmlDeviceGetP2PStatus", p2p)

    # health
    export("nvmlDeviceGetPersistenceMode", lambda h: gpu(h).persistence)
    export("nvmlDeviceGetEccMode", lambda h: list(gpu(h).ecc))
    export("nvmlDeviceGetTotalEccErrors", lambda h, kind, counter: {(1, 0): gpu(h).volatile_uncorrected,
                                                                    (1, 1): gpu(h).aggregate_uncorrected,
                                                                    (0, 0): gpu(h).volatile_corrected}.get((kind, counter), 0))
    export("nvmlDeviceGetRemappedRows", lambda h: tuple(gpu(h).remapped))
    export("nvmlDeviceGetMigMode", lambda h: list(gpu(h).mig))
    export("nvmlDeviceGetVirtualizationMode", lambda h: gpu(h).virtualization)
    export("nvmlDeviceGetPcieReplayCounter", lambda h: gpu(h).pcie_replay)
    export("nvmlDeviceGetCurrentClocksEventReasons", lambda h: gpu(h).clocks_event_reasons)
    export("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: gpu(h).clocks_event_reasons)
    export(
        "nvmlDeviceGetComputeRunningProcesses",
        lambda h: [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, _, used in gpu(h).processes],
    )

    # under load: clocks, power, temperature (wirecheck.node.gpu_sampling)
    export("nvmlDeviceGetClockInfo", lambda h, kind: {1: gpu(h).sm_mhz, 2: gpu(h).mem_mhz}[kind])
    export("nvmlDeviceGetMaxClockInfo", lambda h, kind: {1: gpu(h).max_sm_mhz,
                                                         2: gpu(h).max_mem_mhz or gpu(h).mem_mhz}[kind])
    export("nvmlDeviceGetCudaComputeCapability", lambda h: tuple(gpu(h).compute_capability))
    export("nvmlDeviceGetNumGpuCores", lambda h: gpu(h).cuda_cores)
    export("nvmlDeviceGetMemoryBusWidth", lambda h: gpu(h).mem_bus_width)
    export("nvmlDeviceGetPowerUsage", lambda h: gpu(h).power_mw)
    export("nvmlDeviceGetEnforcedPowerLimit", lambda h: gpu(h).power_limit_mw)
    export("nvmlDeviceGetPowerManagementDefaultLimit", lambda h: gpu(h).default_power_limit_mw)
    export("nvmlDeviceGetTemperature", lambda h, sensor: gpu(h).temperature)

    def temperature_threshold(h: _Handle, which: int) -> int:
        if which not in gpu(h).temperature_thresholds:
            raise error("NotSupported")
        return gpu(h).temperature_thresholds[which]

    export("nvmlDeviceGetTemperatureThreshold", temperature_threshold)
    export("nvmlDeviceGetUtilizationRates", lambda h: types.SimpleNamespace(gpu=gpu(h).utilization, memory=50))
    export("nvmlDeviceGetViolationStatus", lambda h, policy: types.SimpleNamespace(
        referenceTime=0, violationTime=gpu(h).violation_ns.get(policy, 0)))
    export("nvmlDeviceGetIndex", lambda h: h.index)

    # events: an XID or ECC event reaches a registered set when a test calls mod.emit(...)
    event_queue: list = []
    events_arrived = threading.Condition()
    registered: dict[int, int] = {}  # gpu index -> event mask
    mod.registered = registered

    def emit(index: int, event_type: int = 0x8, data: int = 79) -> None:
        """An event on GPU `index` (default: XID 79), delivered if that GPU registered for it."""
        with events_arrived:
            if registered.get(index, 0) & event_type:
                event_queue.append(types.SimpleNamespace(device=_Handle(index), eventType=event_type, eventData=data,
                                                         gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF))
                events_arrived.notify_all()

    mod.emit = emit
    mod.pending_events = lambda: len(event_queue)  # emitted, not yet taken by an event wait
    export("nvmlDeviceGetSupportedEventTypes", lambda h: gpu(h).supported_events)
    export("nvmlEventSetCreate", lambda: types.SimpleNamespace(name="event set"))

    def register_events(h: _Handle, mask: int, event_set: Any) -> None:
        if mask & ~gpu(h).supported_events:
            raise error("NotSupported")
        registered[h.index] = registered.get(h.index, 0) | mask

    export("nvmlDeviceRegisterEvents", register_events)

    def event_wait(event_set: Any, timeout_ms: int) -> Any:
        with events_arrived:
            if not event_queue:
                events_arrived.wait(timeout_ms / 1000)
            if not event_queue:
                raise error("Timeout")
            return event_queue.pop(0)

    export("nvmlEventSetWait_v2", event_wait)
    export("nvmlEventSetFree", lambda event_set: None)

    def fabric_info(h: _Handle, ref: Any) -> int:
        info = ref._obj  # a ctypes byref() of the caller's structure
        if gpu(h).fabric is None:
            raise error("NotSupported")
        info.state, info.status = gpu(h).fabric
        return 0

    export("nvmlDeviceGetGpuFabricInfoV", fabric_info)
    export("nvmlDeviceGetGpuFabricInfo", fabric_info)
    return mod


# -- scenarios --------------------------------------------------------------------------


def bus(n: int) -> str:
    return f"00000000:{0x18 + 0x10 * n:02X}:00.0"


def nvswitch(n_gpus: int = 8, links: int = 18, down: dict[int, list[int]] | None = None, **kw: Any) -> Scenario:
    """HGX-style: every link goes to an NVSwitch; `down` = {gpu: [link, ...]} inactive links."""
    down = down or {}
    gpus = [
        FakeGpu(
            bus_id=bus(g),
            name="NVIDIA H100 80GB HBM3",
            uuid=f"GPU-{g:08d}-0000-0000-0000-000000000000",
            links=[FakeLink(active=link not in down.get(g, [])) for link in range(links)],
        )
        for g in range(n_gpus)
    ]
    return Scenario(gpus=gpus, default_ancestor=50, **kw)


def a100_sxm(n_gpus: int = 8) -> Scenario:
    """HGX A100 80 GB: 12 NVLink 3 links per GPU to the NVSwitches (version enum 4 = NVLink 3.0), PCIe Gen4,
    108 SMs (6912 CUDA cores) at 1410 MHz, 5120-bit HBM2e at 1593 MHz, 400 W (A100 datasheet)."""
    gpus = [
        FakeGpu(bus_id=bus(g), name="NVIDIA A100-SXM4-80GB", uuid=f"GPU-a100{g:04d}-0000-0000-0000-000000000000",
                memory_total=80 * 10**9, links=[FakeLink(version=4, speed_mbps=25781) for _ in range(12)],
                pcie=(4, 16, 4, 16), compute_capability=(8, 0), cuda_cores=6912, mem_bus_width=5120,
                max_mem_mhz=1593, max_sm_mhz=1410, sm_mhz=1410, mem_mhz=1593, power_limit_mw=400_000,
                default_power_limit_mw=400_000)
        for g in range(n_gpus)
    ]
    return Scenario(gpus=gpus, default_ancestor=50)


def b200(n_gpus: int = 8) -> Scenario:
    """HGX B200: 18 NVLink 5 links per GPU (version enum 7), PCIe Gen5, 148 SMs (18944 CUDA cores), 8192-bit
    HBM3e; the clocks are public estimates (1965 MHz SM, 3906 MHz memory: 8 TB/s), 1000 W."""
    gpus = [
        FakeGpu(bus_id=bus(g), name="NVIDIA B200", uuid=f"GPU-b200{g:04d}-0000-0000-0000-000000000000",
                memory_total=180 * 10**9, links=[FakeLink(version=7, speed_mbps=53125) for _ in range(18)],
                compute_capability=(10, 0), cuda_cores=18944, mem_bus_width=8192, max_mem_mhz=3906,
                max_sm_mhz=1965, power_limit_mw=1_000_000, default_power_limit_mw=1_000_000)
        for g in range(n_gpus)
    ]
    return Scenario(gpus=gpus, default_ancestor=50)


def l40s(n_gpus: int = 8) -> Scenario:
    """8x L40S: no NVLink, PCIe Gen4 x16, 142 SMs (18176 CUDA cores) at 2520 MHz, 384-bit GDDR6 at
    9001 MHz (864 GB/s), 350 W (L40S datasheet)."""
    gpus = [
        FakeGpu(bus_id=bus(g), name="NVIDIA L40S", uuid=f"GPU-l40s{g:04d}-0000-0000-0000-000000000000",
                memory_total=48 * 10**9, pcie=(4, 16, 4, 16), fabric=(0, 0), compute_capability=(8, 9),
                cuda_cores=18176, mem_bus_width=384, max_mem_mhz=9001, max_sm_mhz=2520, power_limit_mw=350_000,
                default_power_limit_mw=350_000)
        for g in range(n_gpus)
    ]
    return Scenario(gpus=gpus, default_ancestor=50)


def nvl_quads(n_gpus: int = 8, per_peer: int = 6) -> Scenario:
    """H200 NVL: 4-way bridges, each GPU with `per_peer` links to each of its 3 quad peers."""
    gpus = []
    for g in range(n_gpus):
        quad = range(g // 4 * 4, g // 4 * 4 + 4)
        links = [FakeLink(remote_type=GPU_REMOTE, remote_bus=bus(p)) for p in quad if p != g for _ in range(per_peer)]
        gpus.append(FakeGpu(bus_id=bus(g), name="NVIDIA H200 NVL", links=links, fabric=(0, 0)))
    return Scenario(gpus=gpus, default_ancestor=50)


def pcie_only(n_gpus: int = 4, link_count_field: bool = True) -> Scenario:
    gpus = [
        FakeGpu(bus_id=bus(g), name="NVIDIA GeForce RTX 4090", pcie=(4, 16, 4, 16), fabric=(0, 0), link_count_field=link_count_field)
        for g in range(n_gpus)
    ]
    return Scenario(gpus=gpus, default_ancestor=50)


def from_reference(path: Path, remote_type: int | None = None) -> Scenario:
    """The recorded NVML reading of a real node (fixtures/reference/*/nvml.json).

    The recording has no remote device types: with remote_type=None the fake lacks
    nvmlDeviceGetNvLinkRemoteDeviceType (old binding); pass 2 to replay what the H200 VM
    answered when asked (SWITCH on every link).
    """
    data = json.loads(Path(path).read_text())
    gpus = []
    for g in data["gpus"]:
        links = [
            FakeLink(
                active=bool(link["active"]),
                remote_type=remote_type if remote_type is not None else SWITCH_REMOTE,
                remote_bus=link["remote"],
                version=link["version"],
                speed_mbps=link.get("speed_mbps"),
            )
            for link in g["nvlinks"]
        ]
        gpus.append(
            FakeGpu(
                bus_id=g["pci"],
                name=g["name"],
                memory_total=g["mem_total"],
                links=links,
                pcie=(g["pcie_gen"], g["pcie_width"], g["pcie_gen_max"], g["pcie_width_max"]),
                virtualization=1,
            )
        )
    ancestors = {frozenset((p["i"], p["j"])): p["ancestor"] for p in data.get("pairs", [])}
    missing = {"nvmlDeviceGetNvLinkRemoteDeviceType"} if remote_type is None else set()
    return Scenario(gpus=gpus, driver=data["driver"], ancestors=ancestors, missing=missing)


class GrowingCrc:
    """A link's error counters (replay, recovery, crc_flit, crc_data, ecc_data) whose CRC data count grows by
    `step` at every read: a link that corrupts flits while it carries traffic. Set it as a FakeLink's counters."""

    def __init__(self, step: int):
        self.step, self.crc_data = step, 0

    def __getitem__(self, counter: int) -> int:
        if counter == 3:
            self.crc_data += self.step
            return self.crc_data
        return 0
