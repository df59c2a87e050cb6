"""thresholds.yaml: the shipped file loads and answers every lookup; broken files stop with the
file, the YAML path and the fix."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from wirecheck.node.hardware import Hardware
from wirecheck.vocab.placements import CLASSES, COLLECTIVE_CLASSES, NVLINK_CLASSES, TRAINING_CLASSES
from wirecheck.core.quantity import parse_quantity
from wirecheck.vocab.ops import FURTHER_AXES, OPS
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.vocab.strategies import NAMES

SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"
GB = 1e9
GiB = 2**30


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(SHIPPED)


@pytest.fixture(scope="module")
def shipped_data():
    """The shipped file as plain data, for tests that break one thing in it."""
    return yaml.load(SHIPPED.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# --- the shipped file -----------------------------------------------------------------------


def test_shipped_file_knows_its_path(shipped):
    assert shipped.path == SHIPPED


def test_profiles(shipped):
    assert set(shipped.profile_names) == {"h200-sxm-2", "h200-sxm-8", "h200-nvl-8", "h100-sxm-8", "a100-sxm-8", "b200-8",
                                          "h100-pcie-8", "l40s-8"}
    sxm = shipped.profile("h200-sxm-2")
    assert (sxm.gpu_count, sxm.gpu_model, sxm.fabric) == (2, "NVIDIA H200", "nvswitch")
    assert sxm.nvlinks_per_gpu == 18 and sxm.nvlinks_per_peer is None and sxm.group_size is None
    assert sxm.nvlink_speed == pytest.approx(26.562 * GB)
    assert (sxm.pcie_gen, sxm.pcie_width) == (5, 16)
    nvl = shipped.profile("h200-nvl-8")
    assert (nvl.gpu_model, nvl.fabric, nvl.nvlinks_per_peer, nvl.group_size) == ("NVIDIA H200 NVL", "bridged", 6, 4)
    assert shipped.profile("h100-sxm-8").gpu_model == "NVIDIA H100 80GB HBM3"
    # NVML reports 143771 MiB on an H200: the nominal size must not exceed it.
    assert nvl.gpu_memory <= 143771 * 2**20


def test_unknown_profile_lists_the_known_ones(shipped):
    with pytest.raises(ThresholdsError) as info:
        shipped.profile("h200-sxm-4")
    message = str(info.value)
    assert str(SHIPPED) in message and "--profile" in message
    for name in shipped.profile_names:
        assert name in message


def test_a_profile_written_in_capitals_is_suggested_as_the_file_writes_it(shipped):
    """The suggestion every --profile shows (advise, limits, plan) ignores case: difflib alone found 'b200-8'."""
    with pytest.raises(ThresholdsError) as info:
        shipped.profile("H200-SXM-8")
    assert "(did you mean 'h200-sxm-8'?)" in str(info.value)


def _q(text: str, kind: str) -> float:
    """A value of the shipped file as the loader must read it (the file, not a copy, is the truth)."""
    return parse_quantity(text, kind, "selftest")


def test_collective_settings(shipped, shipped_data):
    for simulated, key in ((False, "hardware"), (True, "simulated")):
        raw, got = shipped_data["collectives"][key], shipped.collective_settings(simulated=simulated)
        assert got.floor_size == _q(raw["floor_size"], "size") and got.floor_size in got.sizes
        assert (got.warmup_iters, got.iters, got.benchmark_rounds) == (raw["warmup_iters"], raw["iters"], raw["benchmark_rounds"])
        assert got.timeout_s == _q(raw["timeout"], "time")
    hw = shipped.collective_settings(simulated=False)
    full = hw.sizes_for("full")
    assert set(hw.sizes) <= set(full) and hw.floor_size in full  # quick is a subset of the full sweep
    assert hw.sweep("full").nccl_tests_args()[:2] == ["-b", str(full[0])]
    sim = shipped.collective_settings(simulated=True)
    assert max(sim.sizes) <= 16 * 2**20  # CPU ranks on a 2-core CI machine
    assert sim.graph_up_to is None and sim.graph_replays == 1  # gloo: no CUDA graphs
    assert hw.graph_replays == shipped_data["collectives"]["hardware"]["graph_replays"] > 1
    with pytest.raises(ValueError, match="unknown sweep 'fast'"):
        hw.sizes_for("fast")


def test_latency_ceilings(shipped):
    rule = shipped.latency
    assert rule.up_to == 64 * 2**10 and rule.yaml_path == "thresholds.yaml: collectives.latency.up_to"
    two = shipped.latency_limit("nvswitch", "all_reduce", 2, simulated=False)
    # measured: 5.2-5.8 us graph-replayed on 2x H200 SXM (NCCL_GRAPH_MIXING_SUPPORT=0); nccl-tests'
    # eager launches take 18-21 us there: a node whose replays are that slow must fail
    assert 6e-6 < two.max < 18e-6 and two.min is None and two.kind == "time"
    assert two.yaml_path == "thresholds.yaml: collectives.latency.ceilings.nvswitch.all_reduce.2"
    eight = shipped.latency_limit("nvswitch", "all_reduce", 8, simulated=False)
    assert eight.yaml_path.endswith(".all_reduce.any") and eight.max > two.max
    assert shipped.latency_limit("nvl_group", "all_reduce", 3, simulated=False) is None  # {}: not judged
    assert shipped.latency_limit("pair", "all_reduce", 2, simulated=False) is None
    sim = shipped.latency_limit("forced_pcie", "all_to_all", 2, simulated=True)
    assert sim.yaml_path == "thresholds.yaml: collectives.latency.simulated_ceilings.all_to_all.any"
    with pytest.raises(ValueError, match="unknown op"):
        shipped.latency_limit("nvswitch", "allreduce", 2, simulated=False)


def test_half_peak_ceilings(shipped):
    assert shipped.half_peak.fraction == pytest.approx(0.5)
    two = shipped.half_peak_limit("nvswitch", "all_reduce", 2, simulated=False)
    # nccl-tests reached half its peak busbw by 8 MiB on 2x H200 SXM: the ceiling must let that pass
    assert two.max >= 8 * 2**20 and two.kind == "size"
    assert shipped.half_peak_limit("forced_pcie", "all_reduce", 2, simulated=False).max < two.max
    assert shipped.half_peak_limit("nvswitch", "all_reduce", 2, simulated=True) is None  # {} in simulation


def test_curve_ceilings_name_their_source_and_guesses_say_so(shipped):
    for klass in CLASSES:
        if klass == "single":
            continue
        for op in OPS:
            for n in (2, 4, 8):
                for limit in (shipped.latency_limit(klass, op, n, False), shipped.half_peak_limit(klass, op, n, False)):
                    if limit is not None:
                        assert limit.source.startswith(("measured", "guess:")), limit.yaml_path
                        assert limit.max is not None and limit.min is None, limit.yaml_path


def test_floors_sit_below_the_2x_h200_measurements(shipped):
    # torch.distributed busbw at 1 GiB on 2x H200 SXM (fixtures/reference/h200-sxm-2).
    measured = {"all_reduce": 327.5, "all_gather": 265.0, "reduce_scatter": 275.1}
    for op, value in measured.items():
        limit = shipped.busbw_limit("nvswitch", op, 2, simulated=False)
        assert 0.8 * value * GB < limit.min < value * GB, op
        assert limit.yaml_path == f"thresholds.yaml: collectives.floors.nvswitch.{op}.2"
        assert "measured" in limit.source
    forced = {"all_reduce": 27.6, "all_gather": 25.2, "reduce_scatter": 25.5}
    for op, value in forced.items():
        limit = shipped.busbw_limit("forced_pcie", op, 2, simulated=False)
        assert limit.min < value * GB < limit.max, op


def test_busbw_lookup_order(shipped):
    exact = shipped.busbw_limit("nvswitch", "all_gather", 2, simulated=False)
    assert exact.yaml_path.endswith(".all_gather.2")
    fallback = shipped.busbw_limit("nvswitch", "all_gather", 8, simulated=False)
    assert fallback.yaml_path.endswith(".all_gather.any")
    derived = shipped.busbw_limit("pair", "all_reduce", 2, simulated=False, link_ceiling_bytes_per_s=6 * 26.562 * GB)
    efficiency, _, path = shipped.derived_floor.for_op("all_reduce")
    assert derived.min == pytest.approx(6 * 26.562 * GB * efficiency) and derived.rule == "derived"
    assert derived.source.startswith("derived:")
    assert derived.yaml_path == "thresholds.yaml: collectives.derived_floor.ops.all_reduce"
    assert shipped.busbw_limit("pair", "all_reduce", 2, simulated=False) is None
    assert shipped.busbw_limit("nvl_pair", "all_reduce", 4, simulated=False) is None  # no entry, no ceiling


def test_cross_quad_floors_follow_the_article_and_stay_in_pcie_territory(shipped):
    for n, article in ((2, 28), (4, 35), (8, 39)):
        limit = shipped.busbw_limit("cross_quad", "all_reduce", n, simulated=False)
        assert limit.min < article * GB < limit.max <= 64 * GB


def test_simulated_floors_ignore_the_class(shipped):
    for klass in ("nvswitch", "cross_quad", "forced_pcie"):
        limit = shipped.busbw_limit(klass, "all_to_all", 4, simulated=True)
        assert limit.min == pytest.approx(0.005 * GB) and limit.max is None


def test_every_hardware_class_and_op_is_judged_somehow(shipped):
    ceiling = 18 * 26.562 * GB  # NVLink classes may be judged by the derived floor (a share of the link)
    for klass in NVLINK_CLASSES:
        for op in OPS:
            assert shipped.busbw_limit(klass, op, 4, False, ceiling) is not None, (klass, op)
    gen5 = Hardware(pcie_gen=5, pcie_width=16)
    for klass in (c for c in COLLECTIVE_CLASSES if c not in NVLINK_CLASSES):
        for op in OPS:
            assert shipped.busbw_limit(klass, op, 2, False, ceiling, hardware=gen5) is not None, (klass, op)
    # and every further dtype and reduction of each, by collectives.axes_floor
    for klass in COLLECTIVE_CLASSES:
        for a in FURTHER_AXES:
            assert shipped.busbw_limit(klass, a.op, 2, False, ceiling, gen5, a) is not None, (klass, a)


def test_an_ops_floor_judges_its_further_dtypes_and_reductions_as_axes_floor_says(shipped, shipped_data, tmp_path):
    """The shipped rule: the op's floor applies to every dtype and reduction (collectives.axes_floor says
    why); its ceiling (a PCIe path's link) stays what it is; a file with another share scales the floor."""
    assert shipped.axes_floor.share == 1 and shipped.axes_floor.yaml_path == "thresholds.yaml: collectives.axes_floor"
    assert "rule, not a measurement" in shipped.axes_floor.source
    for klass, n in (("nvswitch", 2), ("forced_pcie", 2), ("cross_quad", 4)):
        for a in FURTHER_AXES:
            own = shipped.busbw_limit(klass, a.op, n, False, 478e9, Hardware(pcie_gen=5, pcie_width=16))
            limit = shipped.busbw_limit(klass, a.op, n, False, 478e9, Hardware(pcie_gen=5, pcie_width=16), a)
            if own is None:  # a class the op has no limit on: none for its dtypes and reductions either
                assert limit is None, (klass, a)
                continue
            assert (limit.min, limit.max, limit.yaml_path, limit.rule) == (own.min, own.max, own.yaml_path, own.rule)
            assert limit.source == f"{own.source}; {a.words}: the {a.op} floor, by thresholds.yaml: collectives.axes_floor"
    data = copy.deepcopy(shipped_data)
    data["collectives"]["axes_floor"]["share"] = "90 %"
    (a,) = [a for a in FURTHER_AXES if a.id == "all_reduce-bf16-avg"]
    nine = load_thresholds(_write(tmp_path, data)).busbw_limit("nvswitch", "all_reduce", 2, False, axes=a)
    assert nine.min == pytest.approx(0.9 * shipped.busbw_limit("nvswitch", "all_reduce", 2, False).min)
    assert "all_reduce bf16 avg: 90 % of the all_reduce floor" in nine.source


def test_a_file_older_than_the_axes_loads_and_judges_none_of_them(shipped_data, tmp_path):
    """A record's own thresholds, written before the axes, must still load (judge reads them); a further
    dtype or reduction is then not judged, and the reason names the key to copy."""
    data = copy.deepcopy(shipped_data)
    data["collectives"].pop("axes_floor")
    old = load_thresholds(_write(tmp_path, data))
    assert old.axes_floor is None and old.busbw_limit("nvswitch", "all_reduce", 2, False) is not None
    (a,) = [a for a in FURTHER_AXES if a.id == "all_reduce-fp16-min"]
    limit, why = old.busbw_rule("nvswitch", "all_reduce", 2, False, axes=a)
    assert limit is None and "no collectives.axes_floor" in why and "copy it from the shipped thresholds.yaml" in why


def test_unknown_names_in_lookups_are_caller_bugs(shipped):
    with pytest.raises(ValueError, match="unknown op"):
        shipped.busbw_limit("nvswitch", "allreduce", 2, simulated=False)
    with pytest.raises(ValueError, match="unknown placement class"):
        shipped.busbw_limit("nvl_octet", "all_reduce", 2, simulated=False)
    with pytest.raises(ValueError, match="unknown strategy"):
        shipped.training_limits(False).throughput_floor("nvswitch", "zero4", 2)


def test_ratio_checks(shipped, shipped_data):
    raw = shipped_data["collectives"]
    assert shipped.wire_check.min_ratio == _q(raw["wire_check"]["min_ratio"], "ratio")
    assert shipped.wire_check.min_ratio < 327.5 / 27.6  # the 2x H200 SXM measurement passes
    assert shipped.pair_spread.max_below_median == pytest.approx(_q(raw["pair_spread"]["max_below_median"], "percent"))
    assert 1.0 < shipped.group_scaling.quad_over_pair_min < 322 / 114  # the article's quad passes
    for check in (shipped.wire_check, shipped.pair_spread, shipped.group_scaling):
        assert check.source and check.yaml_path.startswith("thresholds.yaml: collectives.")


def test_training_settings(shipped, shipped_data):
    for simulated, key in ((False, "hardware"), (True, "simulated")):
        raw, got = shipped_data["training"][key], shipped.training_settings(simulated=simulated)
        assert dataclasses.asdict(got.model) == raw["model"]
        assert (got.micro_batch, got.precision) == (raw["micro_batch"], raw["precision"])
        assert got.timeout_s == _q(raw["timeout"], "time")
        assert (got.warmup_steps, got.min_steps, got.max_steps) == (raw["warmup_steps"], raw["steps"]["min"], raw["steps"]["max"])
        assert got.median_ci.confidence == pytest.approx(_q(raw["median_ci"]["confidence"], "percent"))
        assert got.median_ci.max_halfwidth == pytest.approx(_q(raw["median_ci"]["max_halfwidth"], "percent"))
        assert got.median_ci.yaml_path == f"thresholds.yaml: training.{key}.median_ci" and got.median_ci.source
        assert got.gc_freq == raw["gc_freq"] > 0
    sim = shipped.training_settings(simulated=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sim.micro_batch = 100


def test_training_limits(shipped, shipped_data):
    hw = shipped.training_limits(simulated=False)
    raw = shipped_data["training"]
    assert hw.agreement.max_rel_diff == pytest.approx(_q(raw["agreement"]["hardware"]["first_loss_max_rel_diff"], "percent"))
    assert hw.agreement.yaml_path == "thresholds.yaml: training.agreement.hardware.first_loss_max_rel_diff"
    assert shipped.training_limits(simulated=True).agreement.max_rel_diff == pytest.approx(
        _q(raw["agreement"]["simulated"]["first_loss_max_rel_diff"], "percent"))
    assert hw.model_state.max_rel_diff_from_model == pytest.approx(_q(raw["model_state"]["max_rel_diff_from_model"], "percent"))
    for strategy in NAMES:
        assert hw.slow_wire.min_slowdown(strategy) == pytest.approx(_q(raw["slow_wire"]["min_slowdown"][strategy], "ratio"))
    assert hw.slow_wire.max_spread_ratio >= 1.0
    with pytest.raises(ValueError, match="strategy"):
        hw.slow_wire.min_slowdown("zero4")
    assert hw.capacity.model_state_target > 1.0  # DDP must not fit
    # Peak ceilings fit an H200; they need not form a staircase (ZeRO-3's gathered layers and
    # prefetch put its peak above ZeRO-2's on the measured 1e9-parameter model).
    peaks = [hw.peak_memory("nvswitch", s).max for s in ("ddp", "zero1", "zero2", "zero3", "fsdp")]
    assert max(peaks) == peaks[0] <= 141e9
    floor = hw.throughput_floor("nvswitch", "ddp", 2)
    assert floor.min == _q(raw["throughput_floors"]["nvswitch"]["ddp"][2]["min"], "throughput")
    assert floor.kind == "throughput" and "measured" in floor.source
    assert "guess" in hw.throughput_floor("nvswitch", "ddp", 8).source


def test_training_limits_in_simulation(shipped):
    sim = shipped.training_limits(simulated=True)
    assert sim.peak_memory("nvswitch", "ddp") is None  # no CUDA memory on the CPU path
    for strategy in NAMES:
        assert sim.throughput_floor("nvl_quad", strategy, 4).min <= 10


def test_every_training_class_and_strategy_has_a_floor(shipped):
    hw = shipped.training_limits(simulated=False)
    for klass in TRAINING_CLASSES:
        for strategy in NAMES:
            assert hw.throughput_floor(klass, strategy, 2) is not None, (klass, strategy)


def test_every_limit_names_its_source(shipped):
    limits = [shipped.busbw_limit(c, op, n, False) for c in CLASSES if c != "single" for op in OPS for n in (2, 4, 8)]
    assert all(limit.source.strip() for limit in limits if limit is not None)


# --- broken files ---------------------------------------------------------------------------


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "thresholds.yaml"
    # libyaml's dumper when present: the pure-Python one would make these tests slow.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(data if isinstance(data, str) else yaml.dump(data, Dumper=dumper, sort_keys=False))
    return path


def _error(path: Path) -> str:
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    message = str(info.value)
    assert str(path) in message  # every message names the file
    return message


def _floor(data):
    return data["collectives"]["floors"]["nvswitch"]["all_reduce"]


def _set(value):
    def mutate(data):
        _floor(data)[2]["min"] = value

    return mutate


BROKEN = {
    # 10**20 iterations would wait out every call's ceiling, read as hangs: a typo that drains the node
    "a count no run can make": (
        lambda d: d["collectives"]["hardware"].update(iters=10**20),
        ["collectives.hardware.iters: 100000000000000000000 is above 10,000,000", "write the count meant"],
    ),
    "unknown top-level key": (
        lambda d: d.update(collective_floors={}),
        ["collective_floors: unknown key 'collective_floors'", "expected one of: profiles, collectives, training"],
    ),
    "unknown key deep inside": (
        lambda d: _floor(d)[2].update(mni="1 GB/s"),
        ["collectives.floors.nvswitch.all_reduce.2.mni: unknown key", "did you mean 'min'?", "expected one of: source, min, max"],
    ),
    "string where a mapping is expected": (
        lambda d: d["collectives"].update(floors="fast"),
        ['collectives.floors: expected a mapping of placement class entries, got the string "fast"', "key: value"],
    ),
    "missing placement class": (
        lambda d: d["collectives"]["floors"].pop("nvl_quad"),
        ["collectives.floors: missing placement class 'nvl_quad'", "add a nvl_quad: section", "nvl_quad: {}"],
    ),
    "missing source": (
        lambda d: _floor(d)[2].pop("source"),
        ["collectives.floors.nvswitch.all_reduce.2: missing required key 'source'", "add source:"],
    ),
    "negative value": (
        _set("-295 GB/s"),
        ['collectives.floors.nvswitch.all_reduce.2.min: "-295 GB/s" is negative', '"295 GB/s"'],
    ),
    "unit-less string": (
        _set("290"),
        ['collectives.floors.nvswitch.all_reduce.2.min: "290" has no unit;', 'most likely GB/s', 'write "290 GB/s"'],
    ),
    "unit-less number": (
        _set(290),
        ['collectives.floors.nvswitch.all_reduce.2.min: "290" has no unit;', 'write "290 GB/s"'],
    ),
    "wrong unit": (
        _set("1 GiB"),
        ['collectives.floors.nvswitch.all_reduce.2.min: "1 GiB" is a size, not a bandwidth', '"290 GB/s"'],
    ),
    "unknown op": (
        lambda d: d["collectives"]["floors"]["nvswitch"].update(all_reduc={}),
        ["collectives.floors.nvswitch.all_reduc: unknown op 'all_reduc'", "did you mean 'all_reduce'?", "all_gather"],
    ),
    "non-integer GPU count key": (
        lambda d: _floor(d).update(two=_floor(d)[2]),
        ["collectives.floors.nvswitch.all_reduce.two: GPU count key 'two'", "(2, 4, 8, ...) or `any`"],
    ),
    "profile missing gpu_count": (
        lambda d: d["profiles"]["h200-sxm-2"].pop("gpu_count"),
        ["profiles.h200-sxm-2: missing required key 'gpu_count'", "add gpu_count: 8"],
    ),
    "old sizes list instead of sweeps": (
        lambda d: d["collectives"]["hardware"].update(sizes=["1 MiB", "1 GiB"]),
        ["collectives.hardware.sizes: a list of sizes is no longer read; the sizes come from sweeps",
         'write sweeps: {quick: {from: "8 B"'],
    ),
    "sweep missing": (
        lambda d: d["collectives"]["hardware"]["sweeps"].pop("full"),
        ["collectives.hardware.sweeps: missing required key 'full'", "add full: {from:"],
    ),
    # The old fix, "4194304 GiB", would have made 4 MiB into 4 PiB.
    "floor_size in bytes without unit": (
        lambda d: d["collectives"]["hardware"].update(floor_size=4194304),
        ['collectives.hardware.floor_size: "4194304" has no unit;', 'most likely bytes: write "4 MiB"',
         '"4194304 B"'],
    ),
    "efficiency as a bare fraction": (
        lambda d: d["collectives"]["derived_floor"].update(efficiency=0.5),
        ['collectives.derived_floor.efficiency: "0.5" has no unit;', 'most likely a fraction: write "50 %"'],
    ),
    # The runners train in bf16 or fp32 only: fp16 must stop the run here, not inside the workers.
    "fp16 precision": (
        lambda d: d["training"]["hardware"].update(precision="fp16"),
        ["training.hardware.precision: fp16 is not supported by the training runners", "loss scaler",
         "write precision: bf16 or fp32", "(line "],
    ),
    "sweep size without unit": (
        lambda d: d["collectives"]["hardware"]["sweeps"]["quick"].update({"from": 8}),
        ['collectives.hardware.sweeps.quick.from: "8" has no unit; write it with the unit you meant'],
    ),
    "sweep step not a whole factor": (
        lambda d: d["collectives"]["hardware"]["sweeps"]["quick"].update(step="1.5 x"),
        ['collectives.hardware.sweeps.quick.step: "1.5 x" is not a whole factor of at least 2', "nccl-tests -f"],
    ),
    "sweep end off the grid": (
        lambda d: d["collectives"]["hardware"]["sweeps"]["quick"].update(to="1000 MiB"),
        ["collectives.hardware.sweeps.quick.to: is not from x step^k: the sweep would stop at 134217728 B",
         "write to: 134217728 B or 1073741824 B"],
    ),
    "sweep end below its start": (
        lambda d: d["collectives"]["hardware"]["sweeps"]["full"].update(to="4 B"),
        ['collectives.hardware.sweeps.full.to: "4 B" is below from "8 B"'],
    ),
    "floor_size not in the quick sweep": (
        lambda d: d["collectives"]["hardware"].update(floor_size="2 GiB"),
        ['collectives.hardware.floor_size: "2 GiB" is not one of the sizes the quick sweep measures',
         "make sweeps.quick pass through it"],
    ),
    "graph replay in simulation": (
        lambda d: d["collectives"]["simulated"].update(graph_up_to="1 MiB"),
        ["collectives.simulated.graph_up_to: simulation runs on gloo, which has no CUDA graphs", "remove graph_up_to"],
    ),
    "graph replays in simulation": (
        lambda d: d["collectives"]["simulated"].update(graph_replays=5),
        ["collectives.simulated.graph_replays: simulation runs on gloo, which has no CUDA graphs", "remove graph_replays"],
    ),
    "no timed replay": (
        lambda d: d["collectives"]["hardware"].update(graph_replays=0),
        ["collectives.hardware.graph_replays"],
    ),
    "latency ceiling as a bandwidth": (
        lambda d: d["collectives"]["latency"]["ceilings"]["nvswitch"]["all_reduce"][2].update(max="30 GB/s"),
        ['collectives.latency.ceilings.nvswitch.all_reduce.2.max: "30 GB/s" is a bandwidth, not a duration', 'units: us, µs'],
    ),
    "latency ceiling without source": (
        lambda d: d["collectives"]["latency"]["ceilings"]["nvswitch"]["all_reduce"][2].pop("source"),
        ["collectives.latency.ceilings.nvswitch.all_reduce.2: missing required key 'source'"],
    ),
    "latency floor instead of ceiling": (
        lambda d: d["collectives"]["latency"]["ceilings"]["nvswitch"]["all_reduce"][2].update(min="1 µs"),
        ["collectives.latency.ceilings.nvswitch.all_reduce.2.min: unknown key 'min'", "expected one of: source, max"],
    ),
    "latency class missing": (
        lambda d: d["collectives"]["latency"]["ceilings"].pop("forced_pcie"),
        ["collectives.latency.ceilings: missing placement class 'forced_pcie'", "forced_pcie: {} to leave it unjudged"],
    ),
    "latency bound missing": (
        lambda d: d["collectives"]["latency"].pop("up_to"),
        ["collectives.latency: missing required key 'up_to'", 'add up_to: "64 KiB"'],
    ),
    "n½ fraction above 100 %": (
        lambda d: d["collectives"]["half_peak"].update(fraction="150 %"),
        ["collectives.half_peak.fraction: is above 100 %"],
    ),
    "n½ ceiling as a duration": (
        lambda d: d["collectives"]["half_peak"]["ceilings"]["nvswitch"]["all_reduce"][2].update(max="30 µs"),
        ['collectives.half_peak.ceilings.nvswitch.all_reduce.2.max: "30 µs" is a duration, not a size'],
    ),
    "n½ section missing": (
        lambda d: d["collectives"].pop("half_peak"),
        ["collectives: missing required key 'half_peak'", 'add half_peak: {fraction: "50 %"'],
    ),
    "count with a unit": (
        lambda d: d["collectives"]["hardware"].update(iters="20 x"),
        ["collectives.hardware.iters: expected a count (a plain whole number)", "e.g. 20"],
    ),
    "negative count": (
        lambda d: d["training"]["hardware"]["steps"].update(min=-3),
        ["training.hardware.steps.min: -3 is negative", "at least 1"],
    ),
    "timeout without unit": (
        lambda d: d["collectives"]["simulated"].update(timeout=60),
        ['collectives.simulated.timeout: "60" has no unit;', 'most likely seconds: write "60 s"'],
    ),
    "bridged profile without group_size": (
        lambda d: d["profiles"]["h200-nvl-8"].pop("group_size"),
        ["profiles.h200-nvl-8: a bridged profile needs 'group_size'", "add group_size: 4"],
    ),
    "unknown fabric": (
        lambda d: d["profiles"]["h200-sxm-2"].update(fabric="nvswich"),
        ["profiles.h200-sxm-2.fabric:", "did you mean 'nvswitch'?", "nvswitch, bridged, pcie"],
    ),
    "floor above its ceiling": (
        lambda d: d["collectives"]["floors"]["forced_pcie"]["all_reduce"][2].update(min="70 GB/s"),
        ["collectives.floors.forced_pcie.all_reduce.2: min 70 GB/s is above max 64 GB/s"],
    ),
    "entry with neither bound": (
        lambda d: _floor(d)[2].pop("min"),
        ["collectives.floors.nvswitch.all_reduce.2: has neither min nor max", "add min:"],
    ),
    "unknown strategy": (
        lambda d: d["training"]["throughput_floors"]["nvswitch"].update(zero4={}),
        ["training.throughput_floors.nvswitch.zero4: unknown strategy 'zero4'", ", ".join(NAMES)],
    ),
    "peak memory in bandwidth": (
        lambda d: d["training"]["peak_memory"]["any"]["ddp"].update(max="60 GB/s"),
        ['training.peak_memory.any.ddp.max: "60 GB/s" is a bandwidth, not a size'],
    ),
    "heads do not divide d_model": (
        lambda d: d["training"]["hardware"]["model"].update(n_head=15),
        ["training.hardware.model.n_head: d_model 2048 does not split into 15 heads"],
    ),
    "axes floor above the op's": (
        lambda d: d["collectives"]["axes_floor"].update(share="120 %"),
        ["collectives.axes_floor.share: is above 100 %", "a floor cannot exceed the op's floor"],
    ),
    "axes floor without its source": (
        lambda d: d["collectives"]["axes_floor"].pop("source"),
        ["collectives.axes_floor: missing required key 'source'"],
    ),
    "missing training section": (
        lambda d: d["training"].pop("slow_wire"),
        ["training: missing required key 'slow_wire'", "add slow_wire:"],
    ),
}


@pytest.mark.parametrize("mutate, fragments", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_file_names_path_and_fix(tmp_path, shipped_data, mutate, fragments):
    data = copy.deepcopy(shipped_data)
    mutate(data)
    message = _error(_write(tmp_path, data))
    for fragment in fragments:
        assert fragment in message, message


def test_error_is_a_value_error():
    assert issubclass(ThresholdsError, ValueError)


def test_empty_file(tmp_path):
    message = _error(_write(tmp_path, "# nothing here yet\n"))
    assert "the file is empty" in message and "profiles, collectives and training" in message


def test_not_a_mapping_at_top(tmp_path):
    message = _error(_write(tmp_path, "- profiles\n- collectives\n"))
    assert "expected a mapping of top-level sections, got a list" in message


def test_yaml_syntax_error_gives_the_line(tmp_path):
    text = SHIPPED.read_text().splitlines()
    line = next(i for i, t in enumerate(text) if t.strip() == "check_every: 8")
    text[line] = text[line].replace("check_every: 8", "check_every: 8: 4")
    message = _error(_write(tmp_path, "\n".join(text) + "\n"))
    assert f"not valid YAML at line {line + 1}, column" in message
    assert "mapping values are not allowed" in message and "fix the file there" in message


def test_bad_indentation_gives_the_line(tmp_path):
    path = _write(tmp_path, "profiles:\n  a: 1\n b: 2\n")
    assert "not valid YAML at line 3" in _error(path)


def test_duplicate_key_is_refused_with_both_lines(tmp_path):
    text = SHIPPED.read_text()
    entry = '      all_reduce: {2: {min: "295 GB/s"'
    assert entry in text
    text = text.replace(entry, '      all_reduce: {2: {min: "1 GB/s", source: "x"},\n        2: {min: "295 GB/s"', 1)
    message = _error(_write(tmp_path, text))
    assert "duplicate key 2 (first at line" in message and "remove one of them" in message


def test_semantic_errors_give_the_line(tmp_path):
    text = SHIPPED.read_text().splitlines()
    line = next(i for i, t in enumerate(text) if "warmup_iters: 5" in t)
    text[line] = text[line].replace("warmup_iters: 5", "warmup_iters: five")
    message = _error(_write(tmp_path, "\n".join(text) + "\n"))
    assert "collectives.hardware.warmup_iters:" in message and f"(line {line + 1})" in message
