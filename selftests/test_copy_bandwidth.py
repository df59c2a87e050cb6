"""Copy bandwidth without NCCL: the floors in thresholds.yaml and the checks that apply them.

Each check passes on the figures the 2x H200 machine gave (shared/research: ~53 GB/s H2D,
~55 D2H, ~393 GB/s peer) and fails, with the GPU or pair and the cause, on a degraded one.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from e2e import PROJECT
from wirecheck import checks
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.checks.copy_bandwidth import pcie_ceiling
from wirecheck.core.verdict import Verdict

SHIPPED = PROJECT / "thresholds.yaml"
TH = load_thresholds(SHIPPED)
GB = 1e9
GEN5_X16 = {"gen": 5, "width": 16, "gen_max": 5, "width_max": 16, "under_load": True, "error": None}
GEN4_X16 = {**GEN5_X16, "gen": 4}


def host(bps, pcie=GEN5_X16, fabric="nvswitch", direction="h2d", simulated=False, hardware=None):
    return checks.copy_bandwidth.host_copy(TH, gpu=1, direction=direction, fabric=fabric, bytes_per_s=bps, pcie=pcie,
                                           simulated=simulated, hardware=hardware)


def peer(directions, fabric="nvswitch", nv=18, simulated=False):
    return checks.copy_bandwidth.peer_copy(TH, pair="pair-0.1", fabric=fabric, nv=nv, link_speed_bytes_per_s=26.562 * GB,
                                           directions=directions, simulated=simulated)


def test_pcie_ceiling():
    assert pcie_ceiling(5, 16) == pytest.approx(63.0 * GB, rel=1e-3)
    assert pcie_ceiling(4, 16) == pytest.approx(31.5 * GB, rel=1e-3)
    assert pcie_ceiling(None, 16) is None and pcie_ceiling(9, 16) is None


H2D_FLOOR = TH.copy_bandwidth.limit("nvswitch", "h2d", None).min  # the file's floor, not a copy of it


def test_host_copy_at_the_machines_speed_passes():
    v = host(55.3 * GB)  # what the 2x H200 machine's pinned copies read (README)
    assert v.outcome == "pass" and v.measured == pytest.approx(55.3) and v.limit["min"] == pytest.approx(H2D_FLOOR / GB)
    assert "copy_bandwidth.floors.nvswitch.h2d" in v.yaml_path and "copy_bandwidth" not in v.message


def test_slow_host_copy_names_the_gpu_and_the_link_it_ran_on():
    v = host(24.0 * GB, pcie=GEN4_X16)
    assert v.outcome == "fail"
    assert v.message.startswith(f"host->device copy bandwidth on GPU1: measured 24.0 GB/s < floor {H2D_FLOOR / GB:.1f} GB/s")
    assert "the copy ran on PCIe Gen4 x16 (capable of Gen5 x16)" in v.message
    assert v.details["pcie"]["gen"] == 4


def test_a_node_with_its_hardware_reading_is_judged_by_the_link_it_copied_on():
    """What a GPU node's run passes (the NVML reading in its header): the PCIe reading during the copies
    names the link the table entry must have been measured on; a Gen4 node is not held to a Gen5 figure."""
    h200 = {"gpu_model": "NVIDIA H200", "pcie_gen": 5, "pcie_width": 16}
    assert host(55.3 * GB, hardware=h200).outcome == "pass"
    assert host(24.0 * GB, hardware=h200).outcome == "fail"
    gen4 = host(25 * GB, pcie={**GEN4_X16, "gen_max": 4}, hardware=h200)
    assert gen4.outcome == "pass" and gen4.rule == "derived" and "31.5 GB/s" in gen4.source
    assert gen4.message.endswith("(derived limit)")


def test_a_fabric_without_figures_is_judged_against_its_own_pcie_link():
    ok = host(25 * GB, pcie={**GEN4_X16, "gen_max": 4}, fabric="pcie", direction="d2h")
    assert ok.outcome == "pass" and "derived: 70 % of the PCIe link 31.5 GB/s" in ok.source
    slow = host(15 * GB, pcie={**GEN4_X16, "gen_max": 4}, fabric="pcie", direction="d2h")
    assert slow.outcome == "fail" and "floor 22.1 GB/s" in slow.message
    assert host(15 * GB, pcie=None, fabric="pcie").outcome == "skip"


def test_pcie_link_under_load():
    judge = checks.copy_bandwidth.pcie_link_under_load
    assert judge(TH, gpu=0, pcie=GEN5_X16, simulated=False).outcome == "pass"
    v = judge(TH, gpu=0, pcie=GEN4_X16, simulated=False)
    assert v.outcome == "fail" and "GPU0: Gen4 x16 while copying, capable of Gen5 x16: the link trained down" in v.message
    narrow = judge(TH, gpu=0, pcie={**GEN5_X16, "width": 8}, simulated=False)
    assert narrow.outcome == "fail" and "Gen5 x8" in narrow.message
    idle = judge(TH, gpu=0, pcie={**GEN4_X16, "under_load": False}, simulated=False)
    assert idle.outcome == "skip" and "after the copies had ended" in idle.message
    assert judge(TH, gpu=0, pcie={"error": "NVML gone"}, simulated=False).outcome == "skip"
    assert judge(TH, gpu=0, pcie=None, simulated=True).outcome == "skip"


FAST = [{"src": 0, "dst": 1, "bytes_per_s": 392.6 * GB, "peer_access": True},
        {"src": 1, "dst": 0, "bytes_per_s": 393.4 * GB, "peer_access": True}]


def test_peer_copy_on_nvswitch():
    v = peer(FAST)
    assert v.outcome == "pass" and v.measured == pytest.approx(392.6)
    slow = peer([FAST[0], {**FAST[1], "bytes_per_s": 250 * GB}])
    assert slow.outcome == "fail"
    assert "slower direction GPU1->GPU0" in slow.message and "suspect the NVLinks of GPU1 or GPU0" in slow.message
    assert "GPU0->GPU1 392.6 GB/s" in slow.message


def test_peer_copy_on_a_bridge_scales_with_its_links():
    nv6 = [{**d, "bytes_per_s": 120 * GB} for d in FAST]
    v = peer(nv6, fabric="bridged", nv=6)
    assert v.outcome == "pass" and "60 % of NV# x per-link speed 159.4 GB/s" in v.source
    assert peer([{**d, "bytes_per_s": 80 * GB} for d in FAST], fabric="bridged", nv=6).outcome == "fail"


def test_peer_copy_without_peer_access_fails_and_simulation_skips():
    v = peer([{**FAST[0], "peer_access": False}, FAST[1]])
    assert v.outcome == "fail" and "GPU0 cannot access GPU1's memory directly" in v.message
    assert peer(None, simulated=True).outcome == "skip"
    assert peer(None).outcome == "fail"


def test_copy_verdicts_are_judged_again_from_the_record():
    v = host(24.0 * GB, pcie=GEN4_X16)
    again = checks.rejudge(Verdict.from_record(v.as_record()), TH)
    assert (again.outcome, again.message) == (v.outcome, v.message)


# --- the thresholds section ------------------------------------------------------------------


def _broken(tmp_path: Path, edit) -> str:
    data = yaml.safe_load(SHIPPED.read_text())
    data = copy.deepcopy(data)
    edit(data["copy_bandwidth"])
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    return str(info.value)


def test_copy_floors_need_units_sources_and_known_keys(tmp_path):
    def wrong_unit(c):
        c["floors"]["nvswitch"]["h2d"]["min"] = "48 GiB"

    assert "copy_bandwidth.floors.nvswitch.h2d.min" in _broken(tmp_path, wrong_unit)

    def no_source(c):
        del c["floors"]["nvswitch"]["peer"]["source"]

    assert "missing required key 'source'" in _broken(tmp_path, no_source)

    def typo(c):
        c["floors"]["nvswitch"]["h2D"] = c["floors"]["nvswitch"].pop("h2d")

    assert "did you mean 'h2d'" in _broken(tmp_path, typo)

    def too_efficient(c):
        c["derived_floor"]["peer_efficiency"] = "120 %"

    assert "copy_bandwidth.derived_floor.peer_efficiency: is above 100 %" in _broken(tmp_path, too_efficient)
