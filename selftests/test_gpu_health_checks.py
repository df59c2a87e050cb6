"""The GPU health checks on plain inputs: each passes a healthy GPU and fails what it should
(a slowdown reason seen by a fake NVML, a GPU below its peers though above its floor, a wrong
GEMM element, a memory word read back wrong, an XID, a pending row remap), with a message that
says where, the limit and what to do; every verdict can be judged again from its record."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from wirecheck.checks import gpu_health as C
from wirecheck.checks import rejudge
from wirecheck.checks.words import WORDS
from wirecheck.core.verdict import Verdict
from wirecheck.gpu import inputs
from wirecheck.gpu.load import SUSTAINED, GpuRun, Phase
from wirecheck.node.gpu_sampling import LoadSampler
from wirecheck.thresholds.file import load_thresholds

try:  # selftests/ may or may not be a package
    from selftests import fake_pynvml as fake
except ModuleNotFoundError:
    import fake_pynvml as fake

TH = load_thresholds(Path(__file__).resolve().parents[1] / "thresholds.yaml")
H200 = "NVIDIA H200"
BUS = "00000000:19:00.0"


def _again(verdict: Verdict) -> Verdict:
    """The verdict judged again from its record, as `wirecheck judge` does."""
    return rejudge(Verdict.from_record(json.loads(json.dumps(verdict.as_record()))), TH)


def _figure(check, **kw):
    v = check(TH, **kw)
    assert _again(v).outcome == v.outcome
    return v


# -- figures: floor and peers -----------------------------------------------------------------


def _sustained(value, peers, **kw):
    return _figure(C.sustained_throughput, gpu=3, bus_id=BUS, gpu_model=H200, flops_per_s=value, windows=None,
                   peers=peers, simulated=False, **kw)


PEERS = {f"GPU{g}": v * 1e12 for g, v in zip((0, 1, 2, 4, 5, 6, 7), (715, 720, 722, 718, 725, 719, 721))}


def test_a_gpu_20_percent_below_its_peers_fails_though_above_its_floor():
    v = _sustained(0.8 * 720e12, PEERS)
    assert v.outcome == "fail" and v.details["failed_by"] == ["peers"]
    assert v.measured > TH.gpu_health.floor("sustained_bf16", H200, False).min * 1e-12  # above the floor
    assert f"GPU3 ({BUS})" in v.message and "20.0 % below the median 720.0 TFLOP/s of its 7 peer(s)" in v.message
    assert v.message.endswith("(peers limit)")  # the rule that failed it, in the line
    # where the limit is written and where its number comes from: the verdict's fields, said once per limit
    # on the page and with -v, never in the line; what to do: the check's words (the failure block)
    assert v.yaml_path == "thresholds.yaml: gpu_health.peers.hardware" and "gpu-fryer" in v.source
    assert "gpu-fryer" not in v.message and "thresholds.yaml" not in v.message
    assert "cooling" in WORDS["sustained_throughput"].todo


def test_ordinary_spread_among_peers_names_nobody():
    assert _sustained(0.97 * 720e12, PEERS).outcome == "pass"
    # two GPUs: the other one is the whole reference
    assert _sustained(600e12, {"GPU0": 700e12}).outcome == "fail"
    assert _sustained(680e12, {"GPU0": 700e12}).outcome == "pass"


def test_below_the_floor_fails_whatever_the_peers():
    v = _figure(C.hbm_bandwidth, gpu=0, bus_id=BUS, gpu_model=H200, kind="copy", bytes_per_s=3500e9,
                peers={"GPU1": 3510e9}, simulated=False)
    assert v.outcome == "fail" and v.details["failed_by"] == ["floor"]
    assert "measured 3500.0 GB/s < floor 3821.0 GB/s; " in v.message and v.message.endswith("(measured limit)")
    assert v.yaml_path == "thresholds.yaml: gpu_health.floors.NVIDIA H200.hbm_copy"
    assert "fixtures/reference/h200-1/" in v.source and "reseat or replace the GPU" in WORDS["hbm_bandwidth"].todo


def test_a_model_without_floors_is_judged_by_its_peers_alone_and_skips_alone():
    v = _figure(C.gemm_throughput, gpu=1, bus_id=BUS, gpu_model="NVIDIA H200 NVL", dtype="bf16", flops_per_s=500e12,
                peers={"GPU0": 700e12, "GPU2": 705e12}, simulated=False)
    assert v.outcome == "fail" and "no gemm_bf16 floor for 'NVIDIA H200 NVL'" in v.message
    alone = C.gemm_throughput(TH, gpu=1, bus_id=BUS, gpu_model="NVIDIA H200 NVL", dtype="bf16", flops_per_s=500e12,
                              peers={}, simulated=False)
    assert alone.outcome == "skip" and "no other GPU of that model" in alone.message


def test_fp8_where_the_gpu_has_none_skips_with_the_reason():
    v = C.gemm_throughput(TH, gpu=0, bus_id=BUS, gpu_model="NVIDIA A100-SXM4-80GB", dtype="fp8", flops_per_s=None,
                          peers={}, simulated=False, unsupported="fp8 tensor cores need compute capability >= 8.9")
    assert v.outcome == "skip" and "8.9" in v.message


def test_figures_measured_beside_another_process_fail_naming_it():
    v = C.gemm_throughput(TH, gpu=0, bus_id=BUS, gpu_model=H200, dtype="bf16", flops_per_s=400e12, peers={},
                          simulated=False, foreign_processes=[[4242, "python", 2**30]])
    assert v.outcome == "fail" and "pid 4242 (python)" in v.message and "invalid" in v.message


def test_a_failed_measurement_fails_every_figure():
    v = C.hbm_bandwidth(TH, gpu=0, bus_id=BUS, gpu_model=H200, kind="read", bytes_per_s=None, peers={},
                        simulated=False, error="GPU health figures on gpu-health did not finish within 300s")
    assert v.outcome == "fail" and "not measured: GPU health figures" in v.message


# -- math -------------------------------------------------------------------------------------

CLEAN = {"checked": 20, "mismatched_results": 0, "mismatched_elements": 0, "first": None, "reference_nonfinite": 0,
         "reference_digest": "abc"}


def test_one_wrong_element_fails_with_the_count_and_the_first_index():
    wrong = {**CLEAN, "mismatched_results": 20, "mismatched_elements": 20,
             "first": {"result": 1, "index": 5, "row": 0, "col": 5}}
    v = _figure(C.gemm_matches_reference, gpu=1, bus_id=BUS, phases={"figures": wrong, "sustained": CLEAN})
    assert v.outcome == "fail"
    assert "figures: 20 of 20 results differ from the reference, 20 elements in all; first: result 1, element 5 " \
           "(row 0, col 5)" in v.message
    assert "silent data corruption" in WORDS["gemm_matches_reference"].means and v.measured == {"figures": 20, "sustained": 0}


def test_a_reference_that_changed_between_phases_fails():
    v = C.gemm_matches_reference(TH, gpu=0, bus_id=BUS, phases={"figures": CLEAN,
                                                                "sustained": {**CLEAN, "reference_digest": "abd"}})
    assert v.outcome == "fail" and "differs from the first one" in v.message
    ok = C.gemm_matches_reference(TH, gpu=0, bus_id=BUS, phases={"figures": CLEAN, "sustained": CLEAN})
    assert ok.outcome == "pass" and "all 40 compared products bit-identical" in ok.message


# -- the sustained load beside a fake NVML ------------------------------------------------------


@pytest.fixture
def sampled(monkeypatch):
    """Inputs of the NVML checks for a GPU whose fake NVML says `reasons` during a short load."""

    def _sampled(reasons: int = 0x4, power_mw: int = 690_000, temperature: int = 60, thermal_ns: int = 0):
        scenario = fake.nvswitch(1, links=0)
        g = scenario.gpus[0]
        g.clocks_event_reasons, g.power_mw, g.temperature = reasons, power_mw, temperature
        monkeypatch.setitem(sys.modules, "pynvml", fake.build(scenario))
        sampler = LoadSampler([0], interval_s=0.01).start()
        t0 = time.time()
        g.violation_ns[1] = thermal_ns
        time.sleep(0.06)
        window = {"t0": t0, "t1": time.time(), "seconds": 0.05, "flops_per_s": 7e14, "products": 8, "checked": 1,
                  "mismatched_results": 0, "mismatched_elements": 0}
        phase = Phase(SUSTAINED, (0,), {0: {"windows": [window], "window_s": 0.05}}, sampling=sampler.stop())
        run = GpuRun((0,), False, {0: H200}, {0: BUS})
        return run, phase

    return _sampled


@pytest.mark.parametrize("bit, name", [(0x8, "HW slowdown"), (0x20, "SW thermal slowdown"), (0x40, "HW thermal slowdown"),
                                       (0x80, "HW power brake")])
def test_each_slowdown_reason_under_load_fails(sampled, bit, name):
    v = _figure(C.sustained_clocks, **inputs.clocks(*sampled(reasons=0x4 | bit), 0))
    assert v.outcome == "fail"
    assert f"{name} (0x{bit:x}) in " in v.message and f"on GPU0 ({BUS})" in v.message
    assert v.yaml_path == "thresholds.yaml: gpu_health.clocks" and "thermal" in WORDS["sustained_clocks"].todo


def test_sw_power_cap_under_load_is_normal(sampled):
    v = C.sustained_clocks(TH, **inputs.clocks(*sampled(reasons=0x4), 0))
    assert v.outcome == "pass" and "SW power cap (0x4) in" in v.message and "normal under GEMM" in v.message


def test_thermal_throttle_time_between_samples_fails(sampled):
    v = C.sustained_clocks(TH, **inputs.clocks(*sampled(reasons=0x0, thermal_ns=20_000_000), 0))
    assert v.outcome == "fail" and "20 ms of thermal throttling" in v.message


def test_power_that_never_reaches_its_share_of_the_limit_fails(sampled):
    run, phase = sampled(power_mw=300_000)
    v = _figure(C.sustained_power, **inputs.power(run, phase, 0))
    # the share in the check's own format (percent), in the message and in the failure block alike
    assert v.outcome == "fail" and "measured 42.9 % < floor 75 % of the power limit" in v.message
    assert "peak 300.0 W of its 700 W limit" in v.message
    assert C.sustained_power(TH, **inputs.power(*sampled(), 0)).outcome == "pass"


def test_a_gpu_near_its_slowdown_temperature_fails(sampled):
    v = _figure(C.sustained_temperature, **inputs.temperature(*sampled(temperature=86), 0))
    assert v.outcome == "fail" and "measured 86 °C > ceiling 84 °C" in v.message
    assert "NVML's slowdown threshold 89 °C less the margin 5 °C" in v.message
    assert C.sustained_temperature(TH, **inputs.temperature(*sampled(temperature=60), 0)).outcome == "pass"


def test_simulation_skips_the_nvml_checks():
    run = GpuRun((0,), True, {0: None}, {0: None})
    phase = Phase(SUSTAINED, (0,), {0: {"windows": [], "window_s": 0.5}})
    for check, build in ((C.sustained_clocks, inputs.clocks), (C.sustained_power, inputs.power),
                         (C.sustained_temperature, inputs.temperature)):
        assert check(TH, **build(run, phase, 0)).outcome == "skip"


# -- memory test, XIDs, memory errors ---------------------------------------------------------


def _memory(mismatched=0, covered=None, free=1000 * 2**20):
    patterns = [{"pass": 1, "pattern": p, "mismatched_words": 0, "first_bad_offset": None, "seconds": 0.1}
                for p in ("0xAA", "0x55", "zeros", "ones", "address")]
    if mismatched:
        patterns[4].update(mismatched_words=mismatched, first_bad_offset=8 * 12345)
    covered = int(0.9 * free) if covered is None else covered
    return {"free_bytes": free, "total_bytes": free, "target_bytes": covered, "bytes_covered": covered, "passes": 1,
            "patterns": patterns, "allocation_error": None, "wall_s": 0.6}


def test_a_word_read_back_wrong_fails_with_its_offset():
    v = _figure(C.memory_pattern, gpu=0, bus_id=BUS, result=_memory(mismatched=3), simulated=False)
    assert v.outcome == "fail" and "pattern address (pass 1): 3 8-byte words read back wrong; first bad byte offset 98760" in v.message
    assert C.memory_pattern(TH, gpu=0, bus_id=BUS, result=_memory(), simulated=False).outcome == "pass"


def test_too_little_memory_covered_fails():
    v = C.memory_pattern(TH, gpu=0, bus_id=BUS, result=_memory(covered=500 * 2**20), simulated=False)
    assert v.outcome == "fail" and "50.0 % of 1000 MiB free < required 90 %" in v.message


XID = {"time": 1_800_000_000.0, "gpu": 1, "bus_id": BUS, "kind": "xid", "code": 79}


def test_an_xid_fails_naming_it_and_its_gpu():
    v = _figure(C.no_xid, events=[XID], watched=[0, 1], unwatched={}, error=None, simulated=False,
                during="tests/test_x.py::test_y (call)")
    assert v.outcome == "fail" and v.where == "GPU1"
    assert f"XID 79 (the GPU has fallen off the bus) on GPU1 ({BUS}) at " in v.message
    assert "during tests/test_x.py::test_y (call)" in v.message


def test_allowed_xids_and_corrected_errors_are_recorded_not_failed():
    sbe = {**XID, "kind": "ecc_sbe", "code": 0}
    v = C.no_xid(TH, events=[sbe], watched=[0, 1], unwatched={"GPU2": "NotSupported"}, error=None, simulated=False)
    assert v.outcome == "pass" and "single-bit" in v.message and "GPU2: NotSupported" in v.message
    quiet = C.no_xid(TH, events=[], watched=[], unwatched={"GPU0": "no critical XID events"}, error=None, simulated=False)
    assert quiet.outcome == "skip" and "no GPU could be watched" in quiet.message


ROWS = {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0}
CLEAN_ERRORS = {"volatile_sbe": 0, "volatile_dbe": 0, "remapped_rows": ROWS}


def test_a_row_remap_pending_after_the_run_fails():
    after = {**CLEAN_ERRORS, "remapped_rows": {**ROWS, "uncorrectable": 1, "pending": 1}}
    v = _figure(C.ecc_row_remap_growth, gpu=0, bus_id=BUS, before=CLEAN_ERRORS, after=after, seconds=120.0,
                simulated=False)
    assert v.outcome == "fail" and "a row remap is pending" in v.message and "remapped rows grew by 1" in v.message
    assert "reset the GPU" in v.message and v.yaml_path == "thresholds.yaml: gpu_health.memory_errors"


def test_ecc_growth_fails_and_unreadable_counters_skip():
    v = C.ecc_row_remap_growth(TH, gpu=0, bus_id=BUS, before=CLEAN_ERRORS, after={**CLEAN_ERRORS, "volatile_sbe": 2},
                               seconds=60.0, simulated=False)
    assert v.outcome == "fail" and "single-bit (corrected) ECC errors grew by 2 (0 -> 2; allowed 0)" in v.message
    assert C.ecc_row_remap_growth(TH, gpu=0, bus_id=BUS, before=CLEAN_ERRORS, after=CLEAN_ERRORS, seconds=60.0,
                                  simulated=False).outcome == "pass"
    na = {"unsupported": "NotSupported"}
    blind = {"volatile_sbe": na, "volatile_dbe": na, "remapped_rows": na}
    assert C.ecc_row_remap_growth(TH, gpu=0, bus_id=BUS, before=blind, after=blind, seconds=60.0,
                                  simulated=False).outcome == "skip"
