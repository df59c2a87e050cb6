"""The quick level's GPU settings (thresholds.yaml gpu_health.hardware: gemm.quick, sustained.duration.quick)
still catch what quick is for: a GPU doing half its work, a wrong element, a throttle reason.

The window is shorter than the settled one the floors were measured with, so the figures are held to the
H200's own short-window readings (fixtures/reference/h200-1/gemm-steadiness-2026-12-01): every one of them
passes the floor, and every one halved fails it. A throttle reason that comes halfway through the quick hold
is seen by the sampler at the quick level's sample count. A wrong element: quick compares as many results with
the reference as acceptance does (the figures' compare_iters; test_gemm_matches_reference is a quick test, and
selftests/test_gpu_health_e2e.py fails one wrong element by name). On a GPU: scripts/device/trusted_check.sh.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from selftests import fake_pynvml
from wirecheck.checks import gpu_health as C
from wirecheck.gpu import inputs
from wirecheck.gpu.load import FIGURES, SUSTAINED, GpuLoad, GpuRun, Phase
from wirecheck.node.gpu_sampling import LoadSampler
from wirecheck.thresholds.file import load_thresholds

ROOT = Path(__file__).resolve().parents[1]
TH = load_thresholds(ROOT / "thresholds.yaml")
HW = TH.gpu_health.settings(simulated=False)
H200, BUS = "NVIDIA H200", "00000000:19:00.0"
STEADINESS = ROOT / "fixtures/reference/h200-1/gemm-steadiness-2026-12-01/gemm_steadiness.json"


def test_quick_times_fewer_products_and_a_shorter_hold_than_acceptance():
    run = GpuRun((0,), False, {0: H200}, {0: BUS})
    quick, acceptance = GpuLoad(run, HW, "quick"), GpuLoad(run, HW, "acceptance")
    q, a = quick.kwargs(FIGURES)["gemm"], acceptance.kwargs(FIGURES)["gemm"]
    assert (q["warmup_iters"], q["iters"]) == HW.gemm_quick and q["iters"] < a["iters"] == HW.gemm_iters
    assert q["compare_iters"] == a["compare_iters"]  # as many results compared with the reference
    hold = quick.kwargs(SUSTAINED)["duration_s"]
    assert hold < acceptance.kwargs(SUSTAINED)["duration_s"] and hold / HW.sample_interval_s >= 4


def _short_windows() -> list[float]:
    """Every GEMM reading of the H200 in a window shorter than the settled one (50 products)."""
    ways = json.loads(STEADINESS.read_text())["ways"]
    readings = [r["per_s"] for w in ways if w["name"].startswith("gemm 50 calls") for r in w["repeats"]]
    assert len(readings) >= 24, "the evidence the quick window rests on"
    return readings


def _gemm(flops_per_s: float):
    return C.gemm_throughput(TH, gpu=0, bus_id=BUS, gpu_model=H200, dtype="bf16", flops_per_s=flops_per_s, peers={},
                             simulated=False)


def test_every_short_window_passes_the_floor_and_half_of_it_fails():
    for reading in _short_windows():
        assert _gemm(reading).outcome == "pass", reading / 1e12
        half = _gemm(reading / 2)  # the same window on a GPU doing half its work
        assert half.outcome == "fail" and "597" in half.message, half.message


def test_a_throttle_reason_halfway_through_the_quick_hold_fails(monkeypatch):
    # The quick hold and its sampling at a tenth of their length: the samples taken are what count.
    scale = 0.1
    hold, interval = HW.sustained_duration_s("quick") * scale, HW.sample_interval_s * scale
    scenario = fake_pynvml.nvswitch(1, links=0)
    gpu = scenario.gpus[0]
    gpu.clocks_event_reasons = 0x4  # SW power cap: normal under GEMM
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.build(scenario))
    sampler = LoadSampler([0], interval_s=interval).start()
    t0 = time.time()
    time.sleep(hold / 2)
    gpu.clocks_event_reasons = 0x4 | 0x8  # HW slowdown, halfway through
    # The hold ends once the sampler has seen it (its thread runs late on a loaded machine), and not before
    # the hold's own length: a fixed sleep could end the window before any sample of the slowdown.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(s.reasons == 0x4 | 0x8 for s in list(sampler.result.samples)):
        time.sleep(interval)
    time.sleep(max(0.0, t0 + hold - time.time()))
    t1 = time.time()
    window = {"t0": t0, "t1": t1, "seconds": t1 - t0, "flops_per_s": 6.5e14, "products": 8, "checked": 1,
              "mismatched_results": 0, "mismatched_elements": 0}
    phase = Phase(SUSTAINED, (0,), {0: {"windows": [window], "window_s": t1 - t0}}, sampling=sampler.stop())
    v = C.sustained_clocks(TH, **inputs.clocks(GpuRun((0,), False, {0: H200}, {0: BUS}), phase, 0))
    assert v.outcome == "fail" and "HW slowdown (0x8) in " in v.message, v.message
