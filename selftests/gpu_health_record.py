"""A small synthetic hardware record of the GPU health checks, written as a node writes it: the
workers' results in their own format, NVML samples beside the sustained load, and every verdict
from the suite's own check functions on inputs picked by wirecheck.gpu.inputs. For the report,
Prometheus and fleet self-tests (which need a node of H200s without a GPU).

Figures are a 1x H200 node's, times a factor per (GPU, figure) to make a slow GPU.
"""

from __future__ import annotations

from pathlib import Path

from wirecheck import checks
from wirecheck.gpu import inputs
from wirecheck.gpu.load import FIGURES, MEMORY, SUSTAINED, GpuRun, Phase
from wirecheck.node.gpu_sampling import GpuLimits, Sample, Sampling
from wirecheck.records.file import Measurement, RecordFile
from wirecheck.thresholds.file import load_thresholds

PROJECT = Path(__file__).resolve().parents[1]
TH = load_thresholds(PROJECT / "thresholds.yaml")
H200 = "NVIDIA H200"
# A 1x H200 node's readings: HBM copy and read bytes/s, bf16 and fp8 FLOP/s, sustained FLOP/s.
READINGS = {"hbm_copy": 4271e9, "hbm_read": 4454e9, "gemm_bf16": 738e12, "gemm_fp8": 1399e12, "sustained_bf16": 690e12}
T0 = 1_796_000_000.0  # unix time the sustained load starts
WINDOWS = 6  # 1-s windows of the sustained load
MEMORY_FREE = 140 * 2**30


def _bus(gpu: int) -> str:
    return f"00000000:{0x18 + 0x10 * gpu:02X}:00.0"


def _figures(value) -> dict:
    math = {"checked": 20, "mismatched_results": 0, "mismatched_elements": 0, "first": None,
            "reference_nonfinite": 0, "reference_digest": "d1"}
    return {"hbm": {"copy": {"per_s": value("hbm_copy")}, "read": {"per_s": value("hbm_read")}},
            "gemm_bf16": {"n": 8192, "throughput": {"per_s": value("gemm_bf16")}, "math": math},
            "gemm_fp8": {"n": 8192, "throughput": {"per_s": value("gemm_fp8")}}}


def _sustained(value) -> dict:
    windows = [{"t0": T0 + w, "t1": T0 + w + 1.0, "seconds": 1.0, "products": 600,
                "flops_per_s": value("sustained_bf16") * (1.0 - 0.01 * w), "checked": 75, "mismatched_results": 0,
                "mismatched_elements": 0} for w in range(WINDOWS)]
    math = {"checked": 75 * WINDOWS, "mismatched_results": 0, "mismatched_elements": 0, "first": None,
            "reference_nonfinite": 0, "reference_digest": "d1"}
    return {"n": 8192, "duration_s": float(WINDOWS), "window_s": 1.0, "check_every": 8, "began": T0,
            "windows": windows, "math": math}


def _memory(mismatched: int) -> dict:
    patterns = [{"pass": 1, "pattern": p, "mismatched_words": mismatched if p == "address" else 0,
                 "first_bad_offset": 4096 if mismatched and p == "address" else None, "seconds": 1.0}
                for p in ("0xAA", "0x55", "zeros", "ones", "address")]
    covered = int(0.92 * MEMORY_FREE) // 8 * 8
    return {"free_bytes": MEMORY_FREE, "total_bytes": 141 * 2**30, "target_bytes": covered, "bytes_covered": covered,
            "coverage": 0.9, "passes": 1, "patterns": patterns, "allocation_error": None, "wall_s": 5.0}


def _sampling(gpus: tuple[int, ...]) -> Sampling:
    sampling = Sampling(gpus, 0.5, started=T0 - 0.5, ended=T0 + WINDOWS + 0.5)
    for k in range(2 * WINDOWS + 2):
        t = T0 - 0.5 + 0.5 * k
        for g in gpus:
            sampling.samples.append(Sample(t, g, 1980 - 40 * k, 2619, 660.0 + 2 * k + g, 50 + k // 2, 0x4, 100))
    sampling.limits = {g: GpuLimits(g, 700.0, 700.0, 89, 95, 1980) for g in gpus}
    sampling.violations_ns = {g: {"power": 0, "thermal": 0} for g in gpus}
    return sampling


def write_node(path: Path, *, host: str = "node", gpus: int = 4, slow: dict | None = None, events: list | None = None,
               bad_words: dict | None = None) -> Path:
    """A complete record of `gpus` H200s; `slow`: {(gpu, figure): factor}; `events`: XID event records;
    `bad_words`: {gpu: mismatched words in the memory test}."""
    slow, bad_words = slow or {}, bad_words or {}
    indices = tuple(range(gpus))
    run = GpuRun(indices, False, {g: H200 for g in indices}, {g: _bus(g) for g in indices})
    phases = {
        FIGURES: Phase(FIGURES, indices, {g: _figures(lambda f, g=g: READINGS[f] * slow.get((g, f), 1.0))
                                         for g in indices}),
        SUSTAINED: Phase(SUSTAINED, indices, {g: _sustained(lambda f, g=g: READINGS[f] * slow.get((g, f), 1.0))
                                             for g in indices}, sampling=_sampling(indices)),
        MEMORY: Phase(MEMORY, indices, {g: _memory(bad_words.get(g, 0)) for g in indices}),
    }
    rf = RecordFile(path)
    rf.header({"simulated": False, "host": host, "profile": None, "thresholds": str(TH.path), "versions": {},
               "env": {}, "fabric": "nvswitch", "started": "2026-12-01T10:00:00+00:00",
               "gpus": [{"index": g, "name": H200, "bus_id": _bus(g), "memory_bytes": 141 * 2**30, "nvlinks_active": 18}
                        for g in indices], "groups": [list(indices)], "matrix": [], "placements": []})
    kinds = {FIGURES: ("gpu_figures", "hbm copy", "GB/s"), SUSTAINED: ("gpu_sustained", "sustained bf16", "TFLOP/s"),
             MEMORY: ("gpu_memory", "bytes covered", "B")}
    for name, phase in phases.items():
        kind, what, unit = kinds[name]
        for g in indices:
            result = phase.of(g)
            value = (result["hbm"]["copy"]["per_s"] / 1e9 if name == FIGURES else
                     inputs.sustained(run, phase, g)["flops_per_s"] / 1e12 if name == SUSTAINED else result["bytes_covered"])
            details = {"gpu": g, "bus_id": _bus(g), "gpu_model": H200, "phase": name, "level": "acceptance",
                       "simulated": False, "result": result, "foreign_processes": [], "error": None}
            if phase.sampling is not None:
                details["nvml"] = phase.sampling.as_record(g)
            rf.measurement(Measurement(kind, None, f"GPU{g} {what}", value, unit, details))
    test = "tests/test_gpu_health.py::"
    for g in indices:
        for k in ("copy", "read"):
            rf.verdict(checks.gpu_health.hbm_bandwidth(TH, **inputs.hbm(run, phases[FIGURES], g, kind=k)),
                       f"{test}test_hbm_bandwidth[gpu{g}-{k}]")
        for dtype in ("bf16", "fp8"):
            rf.verdict(checks.gpu_health.gemm_throughput(TH, **inputs.gemm(run, phases[FIGURES], g, dtype=dtype)),
                       f"{test}test_gemm_throughput[gpu{g}-{dtype}]")
        for check, build in (("sustained_throughput", inputs.sustained), ("sustained_clocks", inputs.clocks),
                             ("sustained_power", inputs.power), ("sustained_temperature", inputs.temperature)):
            rf.verdict(getattr(checks.gpu_health, check)(TH, **build(run, phases[SUSTAINED], g)), f"{test}{check}[gpu{g}]")
        rf.verdict(checks.gpu_health.gemm_matches_reference(TH, **inputs.math_check(run, phases, g)),
                   f"{test}test_gemm_matches_reference[gpu{g}]")
        rf.verdict(checks.gpu_health.memory_pattern(TH, **inputs.memory(run, phases[MEMORY], g)),
                   f"{test}test_memory_pattern[gpu{g}]")
    for e in events or []:
        rf.measurement(Measurement("gpu_event", None, f"XID {e.get('code')}", e.get("code"), None, e))
    rf.verdict(checks.gpu_health.no_xid(TH, events=events or [], watched=list(indices), unwatched={}, error=None,
                                        simulated=False), None)
    rf.end({"status": "complete", "exit_status": 0, "simulated": False, "tests": {"passed": 1}, "verdicts": {},
            "wall_s": 60.0})
    rf.close()
    return path
