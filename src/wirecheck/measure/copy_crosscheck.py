"""The suite's copy figures beside nvbandwidth's matrices for the same copies, with the ratio, as the
nccl-tests cross-check sets the suite's collectives beside nccl-tests' (wirecheck.nccl.crosscheck).

The suite's copies (wirecheck.measure.copy_bandwidth, recorded as a `copy_bandwidth` measurement) are
copy-engine copies: pinned host->device and device->host per GPU, and device->device pushed from the source GPU
over NVLink, so each is set beside nvbandwidth's host_to_device_memcpy_ce, device_to_host_memcpy_ce and
device_to_device_memcpy_write_ce (row: the source, column: the destination). The ratio is suite / nvbandwidth
(1.0 is parity); it is reported, not judged: the suite's own copy checks judge the node.
"""

from __future__ import annotations

from typing import Sequence

from wirecheck.node import nvbandwidth as nvb

PARITY_BAND = 0.95  # the suite within 5 % of NVIDIA's own tool, or better


def ordinals(reading: nvb.Reading, gpus: Sequence[dict]) -> dict[int, int | None]:
    """NVML index -> nvbandwidth's device ordinal: by bus id where both name one, else the same number (it runs in
    PCI bus order, as NVML counts); None for a GPU nvbandwidth did not see (it ran on fewer GPUs). ValueError where
    no GPU's bus id is one of nvbandwidth's: it ran on another node, and by number its figures would stand beside
    another node's."""
    by_bus = {d["bus_id"]: d["ordinal"] for d in reading.devices}
    out: dict[int, int | None] = {}
    unseen = []
    for g in gpus:
        bus = str(g.get("bus_id") or "").upper()
        match = next((o for b, o in by_bus.items() if bus.startswith(b)), None) if bus else None
        if match is not None:
            out[g["index"]] = match
        elif bus and by_bus:  # both name bus ids, and nvbandwidth's are not this GPU's
            out[g["index"]] = None
            unseen.append(f"GPU{g['index']} {bus}")
        else:
            out[g["index"]] = g["index"]
    if unseen and len(unseen) == len(gpus):
        raise ValueError(f"no GPU's bus id ({'; '.join(unseen)}) is one of nvbandwidth's ({', '.join(by_bus)}): "
                         "nvbandwidth ran on another node; give its output from the node of the suite's figures")
    return out


def _cell(reading: nvb.Reading, testcase: str, row: int, col: int) -> tuple[float | None, str | None]:
    case = reading.testcases.get(testcase)
    if case is None:
        return None, "not run"
    if case.status != "Passed":
        return None, case.status.lower() or "no status"
    try:
        return case.matrix[row][col], None
    except IndexError:
        return None, "not in its matrix"


def side_by_side(suite: dict, reading: nvb.Reading, gpus: Sequence[dict]) -> list[dict]:
    """One row per suite copy figure: {"copy", "gpu", "peer", "suite_GBps", "nvbandwidth_GBps", "ratio",
    "testcase", "note"}. `suite`: the copy_bandwidth measurement's details (host, peer); `gpus`: {index, bus_id}."""
    known = list(gpus) or [{"index": h["gpu"]} for h in suite.get("host") or []]
    where = ordinals(reading, known)
    rows = []

    def add(copy: str, gpu: int, peer: int | None, bytes_per_s: float | None, testcase: str, r: int | None,
            c: int | None) -> None:
        theirs, note = _cell(reading, testcase, r, c) if r is not None and c is not None else (
            None, "a GPU nvbandwidth did not run on")
        ours = bytes_per_s / 1e9 if bytes_per_s else None
        rows.append({"copy": copy, "gpu": gpu, "peer": peer, "suite_GBps": ours, "nvbandwidth_GBps": theirs,
                     "ratio": ours / theirs if ours and theirs else None, "testcase": testcase, "note": note})

    for h in suite.get("host") or []:
        g = h["gpu"]
        add("h2d", g, None, h.get("h2d_bytes_per_s"), nvb.H2D, 0, where.get(g, g))
        add("d2h", g, None, h.get("d2h_bytes_per_s"), nvb.D2H, 0, where.get(g, g))
    for p in suite.get("peer") or []:
        src, dst = p["src"], p["dst"]
        add("peer", src, dst, p.get("bytes_per_s"), nvb.PEER, where.get(src, src), where.get(dst, dst))
    return rows


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_matrix(case: nvb.Testcase) -> list[str]:
    lines = [f"# nvbandwidth {case.name} ({case.status}): {case.description or ''}"]
    for i, row in enumerate(case.matrix):
        lines.append(f"  {i:>3} " + " ".join(f"{_f(v, '.2f'):>9}" for v in row))
    return lines


def format_side_by_side(rows: Sequence[dict], reading: nvb.Reading) -> str:
    """nvbandwidth's matrices, then each suite copy beside nvbandwidth's with the ratio; '<' below 95 %."""
    lines = [f"# nvbandwidth {reading.version or '?'} (driver {reading.driver or '?'}, CUDA runtime "
             f"{reading.cuda_runtime or '?'}), {reading.source}"]
    for name in nvb.COMPARED:
        if name in reading.testcases:
            lines += format_matrix(reading.testcases[name])
    lines += ["# the suite's copies beside nvbandwidth's (GB/s = 1e9 B/s; ratio = suite / nvbandwidth)",
              f"#{'copy':>5} {'GPU':>4} {'peer':>5} {'suite':>9} {'nvbandwidth':>12} {'ratio':>7}  testcase"]
    for r in rows:
        mark = " <" if r["ratio"] is not None and r["ratio"] < PARITY_BAND else ""
        said = f"{r['testcase']}" + (f" ({r['note']})" if r["note"] else "")
        lines.append(f" {r['copy']:>5} {r['gpu']:>4} {'-' if r['peer'] is None else r['peer']:>5} "
                     f"{_f(r['suite_GBps'], '.2f'):>9} {_f(r['nvbandwidth_GBps'], '.2f'):>12} {_f(r['ratio'], '.3f'):>7}"
                     f"{mark}  {said}")
    compared = [r for r in rows if r["ratio"] is not None]
    below = [r for r in compared if r["ratio"] < PARITY_BAND]
    lines.append(f"# {len(compared) - len(below)} of {len(compared)} copies within 5 % of nvbandwidth or better"
                 + (f"; {len(rows) - len(compared)} without a counterpart" if len(rows) > len(compared) else ""))
    return "\n".join(lines)


COPY_WORKER = "wirecheck.measure.copy_bandwidth:measure"


def measure_suite(gpus: Sequence[int], pairs: Sequence[Sequence[int]], settings) -> tuple[dict | None, str | None]:
    """The suite's copies measured now, as tests/test_copy_bandwidth.py measures them (one worker that sees
    every GPU, in NVML's order; `settings`: the thresholds' copy_bandwidth settings): (its result, or None
    with the worker group's error)."""
    from wirecheck.workers.launcher import WorkerError, WorkerGroup

    try:
        with WorkerGroup(label="copy-bandwidth", world_size=1, backend="nccl", gpus=None,
                         env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))},
                         join_process_group=False) as group:
            (result,) = group.run(COPY_WORKER, {"gpus": list(gpus), "pairs": [list(p) for p in pairs],
                                                "size": settings.size, "warmup_iters": settings.warmup_iters,
                                                "iters": settings.iters},
                                  timeout_s=settings.timeout_s, what="copy bandwidth")
        return result, None
    except WorkerError as exc:
        return None, str(exc)
