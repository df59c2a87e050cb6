"""Limits for any node: table entries apply only to the hardware they were measured on, the rest is
derived from what NVML reports (links x speed, the PCIe link, HBM and math peaks), every limit names
its rule, and limits no node could meet are refused at load.

The nodes are fake NVML readings (selftests/fake_pynvml.py) of an HGX A100, an HGX B200 and an 8x
L40S (PCIe only), and the shipped profiles (`wirecheck limits --profile NAME --json`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from wirecheck import checks
from wirecheck.cli.main import main
from wirecheck.core import exit_codes, gpu_arch
from wirecheck.core.verdict import FAIL, PASS, RULES, SKIP
from wirecheck.node import hardware as node_hardware
from wirecheck.node import nvml
from wirecheck.node.placement import enumerate_placements, link_ceiling
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

try:  # selftests/ may or may not be a package
    from selftests import fake_pynvml as fake
except ModuleNotFoundError:
    import fake_pynvml as fake

SHIPPED = Path(__file__).resolve().parent.parent / "thresholds.yaml"
GB, TF = 1e9, 1e12


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(SHIPPED)


def _read(monkeypatch, scenario):
    monkeypatch.setitem(sys.modules, "pynvml", fake.build(scenario))
    topology = nvml.read_topology()
    return topology, node_hardware.from_topology(topology)


def _placement(topology, klass, n):
    return next(p for p in enumerate_placements(topology) if p.klass == klass and p.n_gpus == n)


def _busbw(th, topology, hw, placement, busbw, op="all_reduce"):
    return checks.collectives.busbw(
        th, op=op, placement=placement.id, placement_class=placement.klass, n_gpus=placement.n_gpus, simulated=False,
        busbw_bytes_per_s=busbw, size_bytes=2**30, link_ceiling_bytes_per_s=link_ceiling(topology, placement),
        hardware=hw.as_dict())


# -- what NVML reports -> the node's peaks ----------------------------------------------------


@pytest.mark.parametrize("scenario, model, memory_gbs, bf16_tflops, links", [
    (fake.a100_sxm, "NVIDIA A100-SXM4-80GB", 2039, 311.9, (3, 12)),
    (fake.b200, "NVIDIA B200", 7999, 2382.4, (5, 18)),
    (fake.l40s, "NVIDIA L40S", 864, 366.4, (None, 0)),
])
def test_peaks_come_from_the_nvml_reading(monkeypatch, scenario, model, memory_gbs, bf16_tflops, links):
    _, hw = _read(monkeypatch, scenario())
    assert hw.gpu_model == model and (hw.nvlink_gen, hw.nvlinks_per_gpu) == links
    assert hw.memory_peak()[0] / GB == pytest.approx(memory_gbs, abs=1)
    assert hw.math_peak("bf16")[0] / TF == pytest.approx(bf16_tflops, abs=0.1)


def test_the_sm_count_is_cuda_cores_over_the_architectures_cores_per_sm():
    assert gpu_arch.sm_count("8.0", 6912) == 108 and gpu_arch.sm_count("9.0", 16896) == 132
    assert gpu_arch.sm_count("7.5", 4608) is None  # an architecture the table lacks: no SM count, said so
    peak, why = gpu_arch.math_peak("8.0", 108, 1410, "fp8")
    assert peak is None and "sm_80 has no fp8" in why


# -- busbw: an H200 entry never judges another NVLink generation -------------------------------


def test_a_healthy_a100_node_passes_on_the_derived_floor(shipped, monkeypatch):
    topology, hw = _read(monkeypatch, fake.a100_sxm())
    eight = _placement(topology, "nvswitch", 8)
    healthy = _busbw(shipped, topology, hw, eight, 230 * GB)  # public nccl-tests all_reduce on 8x A100 SXM
    assert healthy.outcome == PASS and healthy.rule == "derived", healthy.message
    assert "collectives.floors.nvswitch.all_reduce.8 was measured on NVLink 4 x 18" in healthy.source
    assert "NVLink generation is 3" in healthy.source and healthy.message.endswith("(derived limit)")
    # The H200 table floor (310 GB/s) would have failed it; the derived one still fails a slow A100.
    assert shipped.busbw_limit("nvswitch", "all_reduce", 8, False).min == 310 * GB
    slow = _busbw(shipped, topology, hw, eight, 150 * GB)
    assert slow.outcome == FAIL and slow.rule == "derived"


def test_a_b200_at_55_percent_of_its_link_peak_fails(shipped, monkeypatch):
    topology, hw = _read(monkeypatch, fake.b200())
    eight = _placement(topology, "nvswitch", 8)
    peak = 18 * 53.125 * GB
    assert link_ceiling(topology, eight) == pytest.approx(peak)
    slow = _busbw(shipped, topology, hw, eight, 0.55 * peak)  # would pass the H200's 310 GB/s floor
    assert slow.outcome == FAIL and slow.rule == "derived", slow.message
    assert _busbw(shipped, topology, hw, eight, 0.75 * peak).outcome == PASS


def test_the_h200_entry_still_judges_an_h200(shipped, monkeypatch):
    topology, hw = _read(monkeypatch, fake.from_reference(
        SHIPPED.parent / "fixtures" / "reference" / "h200-sxm-2" / "nvml.json", remote_type=2))
    pair = _placement(topology, "nvswitch", 2)
    verdict = _busbw(shipped, topology, hw, pair, 327.5 * GB)
    assert verdict.outcome == PASS and verdict.rule == "measured"
    assert verdict.yaml_path == "thresholds.yaml: collectives.floors.nvswitch.all_reduce.2"


def test_a_pcie_only_node_is_held_to_its_own_pcie_link(shipped, monkeypatch):
    topology, hw = _read(monkeypatch, fake.l40s())
    pcie = _placement(topology, "pcie", 2)
    gen4 = 16 * 1.969 * GB
    limit = shipped.busbw_limit("pcie", "all_reduce", 2, False, None, hw)
    assert limit.rule == "derived" and limit.min == pytest.approx(gen4 * shipped.derived_floor.pcie[0])
    assert _busbw(shipped, topology, hw, pcie, 12 * GB).outcome == PASS
    assert _busbw(shipped, topology, hw, pcie, 3 * GB).outcome == FAIL
    # Without a PCIe reading nothing is derived, and the skip says why (never a silent pass).
    none = shipped.busbw_rule("pcie", "all_reduce", 2, False, None, node_hardware.Hardware(gpu_model="NVIDIA L40S"))
    assert none[0] is None and "NVML gave no PCIe generation" in none[1]


# -- the GPU figures: derived from the GPU's own peak -----------------------------------------


def _hbm(th, hw, value, peers):
    return checks.gpu_health.hbm_bandwidth(th, gpu=0, bus_id=None, gpu_model=hw.gpu_model, kind="copy",
                                           bytes_per_s=value, peers=peers, simulated=False, hardware=hw.as_dict())


def test_an_a100_node_whose_gpus_are_all_slow_fails(shipped, monkeypatch):
    _, hw = _read(monkeypatch, fake.a100_sxm())
    healthy = 1.75e12  # of 2039 GB/s
    ok = _hbm(shipped, hw, healthy, {f"GPU{g}": healthy for g in range(1, 8)})
    assert ok.outcome == PASS and ok.rule == "derived" and "gpu_health.derived_floors.hbm_copy" in ok.yaml_path
    # Every GPU at half speed: the peers agree with each other, the derived floor does not.
    half = healthy / 2
    slow = _hbm(shipped, hw, half, {f"GPU{g}": half for g in range(1, 8)})
    assert slow.outcome == FAIL and slow.details["failed_by"] == ["floor"] and slow.rule == "derived"


def test_a_field_nvml_lacks_leaves_the_peer_rule_and_says_so(shipped, monkeypatch):
    scenario = fake.a100_sxm()
    for g in scenario.gpus:
        g.not_supported.add("nvmlDeviceGetMemoryBusWidth")
    _, hw = _read(monkeypatch, scenario)
    assert hw.mem_bus_width is None
    alone = _hbm(shipped, hw, 1.75e12, {})
    assert alone.outcome == SKIP and "NVML gave no memory bus width" in alone.message
    with_peers = _hbm(shipped, hw, 1.0e12, {f"GPU{g}": 1.75e12 for g in range(1, 8)})
    assert with_peers.outcome == FAIL and with_peers.rule == "peers"
    assert "NVML gave no memory bus width" in with_peers.message


def test_the_h200_table_floor_wins_over_the_derived_one(shipped):
    h200 = node_hardware.from_profile(shipped.profile("h200-sxm-2"))
    for figure in ("hbm_copy", "hbm_read", "gemm_bf16", "gemm_fp8", "sustained_bf16"):
        floor = shipped.gpu_health.floor(figure, "NVIDIA H200", False, h200)
        assert floor.rule == "measured" and "gpu_health.floors.NVIDIA H200" in floor.yaml_path
        # ... and the derived rule, on the H200's own peak, lands just under it (the efficiencies are its own).
        derived = shipped.gpu_health.floor(figure, "NVIDIA H200 (no entry)", False, h200)
        assert derived.rule == "derived" and 0.95 * floor.min <= derived.min <= 1.02 * floor.min, figure


# -- wirecheck limits over every profile ------------------------------------------------------


def _limits(capsys, *args):
    assert main(["limits", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_profiles_limits_name_their_rule_and_source_and_fit_its_hardware(shipped, capsys):
    for name in shipped.profile_names:
        out = _limits(capsys, "--profile", name, "--json")
        hw = node_hardware.Hardware.from_dict(out["hardware"])
        assert out["limits"], name
        for row in out["limits"]:
            where = (name, row["check"], row["where"])
            assert row["source"], where
            if not row["judged"]:
                continue
            assert row["rule"] in RULES and row["yaml_path"], where
            if row["rule"] == "measured" and row["source"].startswith(("measured", "article")):
                # taken from a measurement: only on the hardware it was measured on
                assert row["measured_on"], where
            if row["measured_on"]:
                assert hw.matches(row["measured_on"])[0], where


@pytest.mark.parametrize("name", ["a100-sxm-8", "b200-8", "l40s-8", "h100-pcie-8"])
def test_other_generations_take_no_h200_measurement(capsys, name):
    out = _limits(capsys, "--profile", name, "--json")
    judged = [r for r in out["limits"] if r["judged"]]
    assert not [r for r in judged if r["measured_on"]], name
    assert not [r for r in judged if "H200" in (r["yaml_path"] or "")], name
    rules = {r["check"].split(" ")[0]: r["rule"] for r in judged}
    assert rules["busbw"] == "derived" and rules["hbm_bandwidth"] == "derived"


def test_the_limits_table_for_people(capsys):
    assert main(["limits", "--profile", "b200-8", "--level", "quick"]) == 0
    text = capsys.readouterr().out
    assert "NVIDIA B200, NVLink 5 x 18" in text and "busbw all_reduce" in text and "derived" in text
    assert "small_message_latency" not in text  # the quick level runs no latency check
    assert main(["limits", "--profile", "b200"]) == exit_codes.BAD_INPUT
    assert "no profile 'b200'" in capsys.readouterr().err


# -- limits nobody could meet are refused at load ---------------------------------------------


@pytest.mark.parametrize("old, new, words", [
    ('2: {min: "295 GB/s"', '2: {min: "29500 GB/s"', ["collectives.floors.nvswitch.all_reduce.2.min", "956.2 GB/s",
                                                      "NVLink 4 x 18", "write the floor below"]),
    ('2: {min: "295 GB/s"', '2: {min: "1e12 GB/s"', ["collectives.floors.nvswitch.all_reduce.2.min", "956.2 GB/s"]),
    ('hbm_copy: {min: "3821 GB/s"', 'hbm_copy: {min: "38210 GB/s"', ["gpu_health.floors.NVIDIA H200.hbm_copy.min",
                                                                    "4814.3 GB/s"]),
    ('peer: {min: "355 GB/s"', 'peer: {min: "3550 GB/s"', ["copy_bandwidth.floors.nvswitch.peer.min", "478.1 GB/s"]),
    ('2: {max: "12 µs"', '2: {max: "0.012 µs"', ["collectives.latency.ceilings.nvswitch.all_reduce.2.max",
                                                 "below any reading"]),
    # Each floor against the wire of the placement it judges: an H200 NVL pair is NV6 (159 GB/s one way), not the
    # 18 x NVLink 5 (956 GB/s) these floors were held against; a quad's GPU has 3 x NV6 into it; across quads and
    # on the forced host path the traffic rides PCIe Gen5 x16.
    ('2: {min: "97 GB/s"', '2: {min: "500 GB/s"', ["collectives.floors.nvl_pair.all_reduce.2.min", "159.4 GB/s",
                                                  "6 x NVLink 4 links (26.562 GB/s each) into nvl_pair-2gpu-0.1",
                                                  "profile h200-nvl-8", "write the floor below 159.4 GB/s"]),
    ('2: {min: "97 GB/s"', '2: {min: "200 GB/s"', ["collectives.floors.nvl_pair.all_reduce.2.min", "159.4 GB/s"]),
    ('4: {min: "274 GB/s"', '4: {min: "600 GB/s"', ["collectives.floors.nvl_quad.all_reduce.4.min", "478.1 GB/s",
                                                   "18 x NVLink 4 links", "nvl_quad-4gpu-0.1.2.3"]),
    ('2: {min: "24 GB/s", max: "64 GB/s"', '2: {min: "70 GB/s", max: "80 GB/s"',
     ["collectives.floors.cross_quad.all_reduce.2.min", "63.0 GB/s", "PCIe Gen5 x16 one way, the host path of "
                                                                      "cross_quad-2gpu-0.4"]),
    ('2: {min: "24.8 GB/s", max: "64 GB/s"', '2: {min: "70 GB/s", max: "80 GB/s"', ["collectives.floors.forced_pcie.all_reduce.2.min", "63.0 GB/s",
                                                   "forced_pcie-2gpu-0.1, on profile h200-sxm-2"]),
])
def test_a_limit_no_node_could_meet_is_refused(old, new, words):
    text = SHIPPED.read_text()
    assert old in text
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(SHIPPED, text.replace(old, new, 1).encode())
    message = str(info.value)
    assert all(w in message for w in words), message
    assert "(line " in message
    load_thresholds(SHIPPED, text.encode())  # the shipped values load


def test_a_floor_above_its_wire_is_refused_by_limits_and_at_validates_start(tmp_path, capsys, pytester):
    """The same file stops `wirecheck limits --profile h200-nvl-8` (exit 2) and the suite's start (exit 4),
    naming the file, the key and its line, the wire's peak and how it was reached, and the fix."""
    from e2e import make_project

    lines = SHIPPED.read_text().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines, 1) if line.lstrip().startswith("all_reduce: {2: {min: \"97 GB/s\""))
    lines[number - 1] = lines[number - 1].replace('{min: "97 GB/s"', '{min: "500 GB/s"')
    path = tmp_path / "p.yaml"
    path.write_text("".join(lines))
    words = [f"{path}: collectives.floors.nvl_pair.all_reduce.2.min", f"(line {number})", "159.4 GB/s",
             "6 x NVLink 4 links", "write the floor below 159.4 GB/s"]
    assert main(["limits", "--profile", "h200-nvl-8", "--thresholds", str(path)]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    root = make_project(pytester)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "--simulate=profile:h200-nvl-8",
                                          f"--thresholds={path}", "tests/test_inventory.py")
    text = "\n".join(result.outlines + result.errlines)
    assert result.ret == exit_codes.USAGE_ERROR and all(w in text for w in words), text
    assert not (Path(root) / ".wirecheck").exists()


def test_limits_of_a_recorded_topology_and_of_a_record(capsys):
    topo = _limits(capsys, "--simulate", "h200-nvl-8.synthetic", "--json", "--level", "quick")
    # A topo -m text knows the links but not the GPUs: the H200 NVL entries cannot be confirmed and say so.
    rows = {(r["check"], r["where"]): r for r in topo["limits"]}
    quad = rows[("busbw all_reduce", "nvl_quad-4gpu-0.1.2.3")]
    assert not quad["judged"] and "GPU model is unknown" in quad["source"]
    record = SHIPPED.parent / "fixtures" / "reference" / "h200-sxm-2" / "wirecheck-2026-12-01" / "run1.jsonl"
    old = _limits(capsys, "--record", str(record), "--json", "--level", "quick")
    # Its header predates the hardware reading: entries apply as `wirecheck judge` applies them.
    pair = next(r for r in old["limits"] if r["where"] == "nvswitch-2gpu-0.1")
    assert pair["rule"] == "measured" and pair["min"] == pytest.approx(295)
    assert "table entries apply as they are" in old["node"]


@pytest.mark.parametrize("old, new, words", [
    ('compute_capability: "8.0",', 'compute_capability: "eight",', ["profiles.a100-sxm-8.compute_capability",
                                                                     "'eight' is not a compute capability"]),
    ('sm_clock_max: "1410 MHz",', 'sm_clock_max: "1410",', ["profiles.a100-sxm-8.sm_clock_max", "MHz"]),
    ('topology: l40s-8.synthetic,', 'topology: l40s-8.synthetic, nvlink_gen: 4,',
     ["profiles.l40s-8.nvlink_gen", "without NVLink"]),
    ('{nvlink: 4, links: 18}}', '{nvlink: 4, lnks: 18}}', ["unknown key 'lnks'", "did you mean"]),
])
def test_bad_hardware_fields_are_refused_with_the_path_and_the_fix(old, new, words):
    text = SHIPPED.read_text()
    assert old in text
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(SHIPPED, text.replace(old, new, 1).encode())
    assert all(w in str(info.value) for w in words), str(info.value)


def test_a_link_down_is_a_fault_not_other_hardware(shipped, monkeypatch):
    topology, hw = _read(monkeypatch, fake.nvswitch(8, down={3: [5]}))
    assert hw.nvlinks_per_gpu == 18 and hw.nvlink_gen == 4
    # The H200/H100 entry still applies (the topology checks name the link); the derived floors use NV17.
    limit = shipped.busbw_limit("nvswitch", "all_reduce", 8, False, link_ceiling(topology, _placement(topology, "nvswitch", 8)), hw)
    assert limit.rule == "measured" and limit.yaml_path.endswith("nvswitch.all_reduce.8")
