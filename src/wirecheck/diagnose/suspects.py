"""A record's failures as suspects: what failed, where (placement, GPUs, op), and which kind of probe
localizes it. Plain data from the record's failed verdicts and failed worker groups; no probe runs here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.records.file import RunRecord

# Kinds of suspect, each with its own probes (wirecheck.diagnose.plan).
COLLECTIVE = "collective"  # a collective slow on k GPUs: every pair inside, the links' counters
WRONG_COLLECTIVE = "wrong_collective"  # a collective returned wrong data: which rank, which link
HOST_COPY = "host_copy"  # a host<->device copy or its PCIe link: the GPUs behind one switch
SLOW_GPU = "slow_gpu"  # a GPU figure, its clocks, power or heat: alone and with every other GPU loaded
WRONG_GPU = "wrong_gpu"  # a GPU computed or kept wrong values: the GPU repeated alone
HANG = "hang"  # a rank hung or died: which rank, op and step, from the record and its logs
OTHER = "other"  # no probe localizes it (an inventory or training check): named, not localized
KINDS = (COLLECTIVE, WRONG_COLLECTIVE, HOST_COPY, SLOW_GPU, WRONG_GPU, HANG, OTHER)

_BY_CHECK = {
    "busbw": COLLECTIVE, "pair_spread": COLLECTIVE, "group_scaling": COLLECTIVE, "wire_check": COLLECTIVE,
    "small_message_latency": COLLECTIVE, "half_peak_size": COLLECTIVE, "counter_growth": COLLECTIVE,
    "collective_correct": WRONG_COLLECTIVE,
    "host_copy": HOST_COPY, "pcie_link_under_load": HOST_COPY,
    "hbm_bandwidth": SLOW_GPU, "gemm_throughput": SLOW_GPU, "sustained_throughput": SLOW_GPU,
    "sustained_clocks": SLOW_GPU, "sustained_power": SLOW_GPU, "sustained_temperature": SLOW_GPU,
    "gemm_matches_reference": WRONG_GPU, "memory_pattern": WRONG_GPU,
}


@dataclass(frozen=True)
class Suspect:
    kind: str
    check: str  # the failed check (or the failed measurement's kind)
    where: str  # a placement id, "GPU3", or "node"
    gpus: tuple[int, ...]  # the GPUs it names, by NVML index
    op: str = "all_reduce"
    failed: str = ""  # the failure as the record says it (the verdict's message, first line)
    verdict: dict = field(default_factory=dict, hash=False, compare=False)  # the failed verdict or measurement
    failure: dict | None = field(default=None, hash=False, compare=False)  # a worker group's failure, for HANG

    @property
    def label(self) -> str:
        return f"{self.check} on {self.where}"


def placement_gpus(run: RunRecord, placement_id: str | None) -> tuple[int, ...]:
    """The GPUs of a placement: from the header's list, else from the id (`nvl_quad-4gpu-4.5.6.7`)."""
    if not placement_id:
        return ()
    for p in run.run.get("placements") or []:
        if isinstance(p, dict) and p.get("id") == placement_id:
            return tuple(int(g) for g in p.get("gpus") or ())
    tail = placement_id.rsplit("-", 1)[-1]
    try:
        return tuple(int(g) for g in tail.split("."))
    except ValueError:
        return ()


def _gpu_of(where: str | None) -> tuple[int, ...]:
    if where and where.startswith("GPU") and where[3:].isdigit():
        return (int(where[3:]),)
    return ()


def _with_nvlink_peers(run: RunRecord, gpus: tuple[int, ...]) -> tuple[int, ...]:
    """One GPU and the GPUs it has NVLink to, from the header's matrix (`NV#` cells); the GPU alone without one."""
    if len(gpus) != 1:
        return gpus
    indices = [g.get("index") for g in run.run.get("gpus") or [] if isinstance(g, dict)]
    matrix = run.run.get("matrix") or []
    if gpus[0] not in indices or len(matrix) != len(indices):
        return gpus
    row = matrix[indices.index(gpus[0])]
    peers = [indices[j] for j, cell in enumerate(row) if str(cell).startswith("NV")]
    return tuple(sorted({gpus[0], *peers}))


def _first_line(text) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def _from_verdict(run: RunRecord, v: dict) -> Suspect:
    check = str(v.get("check") or v.get("what") or "check")
    inputs = v.get("inputs") if isinstance(v.get("inputs"), dict) else {}
    where = str(v.get("where") or inputs.get("placement") or "node")
    kind = _BY_CHECK.get(check, OTHER)
    if kind in (COLLECTIVE, WRONG_COLLECTIVE):
        placement = inputs.get("placement") or where
        gpus = placement_gpus(run, placement)
        if len(gpus) < 2:  # one GPU's counters grew: its pairs with every GPU it has NVLink to
            gpus = _with_nvlink_peers(run, gpus or _gpu_of(where))
        return Suspect(kind, check, placement, gpus, str(inputs.get("op") or "all_reduce"), _first_line(v.get("message")), v)
    gpu = inputs.get("gpu")
    gpus = (int(gpu),) if isinstance(gpu, int) else _gpu_of(where)
    return Suspect(kind, check, where, gpus, failed=_first_line(v.get("message")), verdict=v)


def _from_failed_group(run: RunRecord, m: dict) -> Suspect | None:
    details = m.get("details") if isinstance(m.get("details"), dict) else {}
    failure = details.get("failure")
    if not isinstance(failure, dict):
        return None
    placement = failure.get("label") or m.get("placement") or "node"
    gpus = placement_gpus(run, placement)
    return Suspect(HANG, str(failure.get("kind") or "failed"), placement, gpus, str(details.get("op") or ""),
                   f"{failure.get('kind')} {placement} {failure.get('what') or m.get('what')}", m, failure)


def suspects(run: RunRecord) -> list[Suspect]:
    """Each failure of the run once: failed verdicts (a hang's `measurement_completed` verdict is taken from
    its failed measurement, which keeps the rank and the logs), then failed worker groups that no verdict named."""
    out: list[Suspect] = []
    seen = set()
    hangs = [s for s in (_from_failed_group(run, m) for m in run.measurements) if s is not None]
    for v in run.verdicts:
        if v.get("outcome") != "fail" or v.get("check") == "measurement_completed":
            continue
        if v.get("check") == "collective_correct" and not v.get("measured"):
            continue  # no element was wrong: the sweep hung or crashed, and its failed group says where
        s = _from_verdict(run, v)
        key = (s.kind, s.where, s.op, s.check)
        if key not in seen:
            seen.add(key)
            out.append(s)
    for s in hangs:
        key = (s.kind, s.where, s.failure.get("what"))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out
