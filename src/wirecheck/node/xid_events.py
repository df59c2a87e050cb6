"""XIDs and ECC events while the suite runs: NVML's event set, watched in a thread of the
pytest process from session start to its end.

NVML only delivers events that happen after registration (past XIDs are in the kernel log,
not here), so the set is registered once at session start for every GPU of the run, and
`nvmlEventSetWait_v2` is polled with a short timeout until the session ends. Each event is
kept with the moment it arrived and the GPU it came from; the plugin turns the test that was
running into a failure naming it (fixtures/pytest_wirecheck/gpu_health.py) and the record keeps it. A GPU or
driver that cannot deliver critical XID events is listed with the reason, never taken for a
quiet one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from wirecheck.node import nvml
from wirecheck.node.nvml import NvmlUnavailable, Unsupported
from wirecheck.core.threads import start_helper

# nvmlEventType* bits (nvml.h).
EVENT_SBE, EVENT_DBE, EVENT_XID, EVENT_ROW_REMAP_FAILURE = 0x1, 0x2, 0x8, 0x800
EVENT_KINDS = {EVENT_XID: "xid", EVENT_DBE: "ecc_dbe", EVENT_SBE: "ecc_sbe", EVENT_ROW_REMAP_FAILURE: "row_remap_failure"}
GPU_LOST = "gpu_lost"  # not an NVML event: the wait itself said the GPU fell off the bus

# What an XID means, for the operator reading a failure (NVIDIA's XID catalogue; DCGM's
# BuildXidMappings in DcgmHealthWatch.cpp groups the same numbers).
XID_MEANINGS = {
    13: "graphics engine exception (often a kernel's illegal instruction or address)",
    31: "GPU memory page fault (often a kernel's illegal address)",
    43: "GPU stopped processing (a process hit a fault)",
    45: "preemptive cleanup after earlier errors (a process was killed)",
    48: "double-bit ECC error: uncorrectable memory error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "the GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}


@dataclass(frozen=True)
class GpuEvent:
    """One event as it arrived: unix `time`, the GPU (NVML index; None when NVML could not say)."""

    time: float
    gpu: int | None
    bus_id: str | None
    kind: str  # xid | ecc_dbe | ecc_sbe | row_remap_failure | gpu_lost
    code: int | None  # the XID number for xid events, NVML's event data otherwise

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


def describe(event: dict) -> str:
    """'XID 79 (the GPU has fallen off the bus) on GPU1 (00000000:19:00.0) at 12:03:04' from a recorded event."""
    where = f"GPU{event['gpu']}" if event.get("gpu") is not None else "an unidentified GPU"
    if event.get("bus_id"):
        where += f" ({event['bus_id']})"
    when = time.strftime("%H:%M:%S", time.localtime(event["time"])) if event.get("time") else "?"
    kind, code = event.get("kind"), event.get("code")
    if kind == "xid":
        meaning = XID_MEANINGS.get(code)
        what = f"XID {code}" + (f" ({meaning})" if meaning else "")
    elif kind == "ecc_dbe":
        what = "a double-bit (uncorrectable) ECC error event"
    elif kind == "ecc_sbe":
        what = "a single-bit (corrected) ECC error event"
    elif kind == "row_remap_failure":
        what = "a row-remapping failure event"
    elif kind == GPU_LOST:
        what = "GPU lost (NVML: GpuIsLost)"
    else:
        what = f"event {kind} ({code})"
    return f"{what} on {where} at {when}"


@dataclass
class _State:
    events: list[GpuEvent] = field(default_factory=list)
    watched: dict[int, list[str]] = field(default_factory=dict)  # gpu -> event kinds registered
    unwatched: dict[int, str] = field(default_factory=dict)  # gpu -> why not (no critical XID events)
    error: str | None = None  # NVML failed outright; events after it may be missed


class EventWatch:
    """Registers critical XIDs (and ECC/row-remap events where supported) for `gpus` and
    collects them until stop(). `events` is append-only: a reader keeps its own cursor."""

    wanted = (EVENT_XID, EVENT_DBE, EVENT_SBE, EVENT_ROW_REMAP_FAILURE)

    def __init__(self, gpus: tuple[int, ...] | list[int], wait_s: float = 0.5):
        self.gpus = tuple(gpus)
        self.wait_s = wait_s
        self._state = _State()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wirecheck-xid-watch", daemon=True)

    # -- reading (any thread) --------------------------------------------------------------

    @property
    def events(self) -> list[GpuEvent]:
        with self._lock:
            return list(self._state.events)

    @property
    def watched(self) -> dict[int, list[str]]:
        return dict(self._state.watched)

    @property
    def unwatched(self) -> dict[int, str]:
        return dict(self._state.unwatched)

    @property
    def error(self) -> str | None:
        return self._state.error

    def start(self, timeout_s: float = 30.0) -> "EventWatch":
        """Returns once every GPU is registered (or could not be), so nothing after it is missed."""
        start_helper(self._thread)
        self._ready.wait(timeout_s)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    # -- the thread ------------------------------------------------------------------------

    def _add(self, event: GpuEvent) -> None:
        with self._lock:
            self._state.events.append(event)

    def _run(self) -> None:
        state = self._state
        try:
            with nvml._session() as nv:
                event_set = nvml._try(nv, None, "nvmlEventSetCreate")
                if isinstance(event_set, Unsupported):
                    state.unwatched = {g: event_set.reason for g in self.gpus}
                    return
                try:
                    buses = self._register(nv, event_set)
                    self._ready.set()
                    if state.watched:
                        self._watch(nv, event_set, buses)
                finally:
                    nvml._try(nv, None, "nvmlEventSetFree", event_set)
        except NvmlUnavailable as exc:
            state.error = str(exc)
        finally:
            self._ready.set()

    def _register(self, nv: Any, event_set: Any) -> dict[int, str | None]:
        state = self._state
        buses = {}
        for g in self.gpus:
            h = nvml._handle(nv, g)
            buses[g] = nvml._bus_id(nv, g, h)
            supported = nvml._try(nv, g, "nvmlDeviceGetSupportedEventTypes", h)
            if isinstance(supported, Unsupported):
                state.unwatched[g] = supported.reason
                continue
            mask = 0
            for bit in self.wanted:
                mask |= bit if supported & bit else 0
            if not mask & EVENT_XID:
                state.unwatched[g] = f"this GPU delivers no critical XID events (supported event types 0x{supported:x})"
                continue
            done = nvml._try(nv, g, "nvmlDeviceRegisterEvents", h, mask, event_set)
            if isinstance(done, Unsupported):
                state.unwatched[g] = done.reason
                continue
            state.watched[g] = [EVENT_KINDS[bit] for bit in self.wanted if mask & bit]
        return buses

    def _watch(self, nv: Any, event_set: Any, buses: dict[int, str | None]) -> None:
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or getattr(nv, "nvmlEventSetWait")
        timeout_ms = max(1, int(self.wait_s * 1000))
        lost: set[int | None] = set()
        while not self._stop.is_set():
            try:
                data = wait(event_set, timeout_ms)
            except nv.NVMLError as exc:
                kind = nvml._error_kind(exc)
                if kind == "Timeout":
                    continue
                if kind == "GpuIsLost":
                    if None not in lost:
                        lost.add(None)
                        self._add(GpuEvent(time.time(), None, None, GPU_LOST, None))
                elif self._state.error is None:
                    self._state.error = f"nvmlEventSetWait failed ({type(exc).__name__}: {exc}); later events may be missed"
                self._stop.wait(self.wait_s)
                continue
            self._add(self._event(nv, data, buses))

    @staticmethod
    def _event(nv: Any, data: Any, buses: dict[int, str | None]) -> GpuEvent:
        index = nvml._try(nv, None, "nvmlDeviceGetIndex", data.device)
        gpu = None if isinstance(index, Unsupported) else int(index)
        kind = next((name for bit, name in EVENT_KINDS.items() if int(data.eventType) & bit), f"0x{int(data.eventType):x}")
        return GpuEvent(time.time(), gpu, buses.get(gpu), kind, int(data.eventData))
