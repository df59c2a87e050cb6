"""thresholds.yaml, training settings added for issue 10: the timed-step rule and the MFU peak table."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.training.timing import median_ci_ranks

SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(SHIPPED)


@pytest.fixture(scope="module")
def shipped_data():
    return yaml.load(SHIPPED.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def test_every_settings_section_can_reach_its_bound(shipped):
    """The ceiling allows enough steps for the interval to exist (else the rule could only hit it)."""
    for simulated in (False, True):
        s = shipped.training_settings(simulated)
        assert median_ci_ranks(s.max_steps, s.median_ci.confidence) is not None
        assert 1 <= s.min_steps <= s.max_steps


def test_peak_table_by_nvml_name(shipped):
    hw = shipped.training_limits(simulated=False)
    h200 = hw.peak_flops("NVIDIA H200", "bf16")
    assert h200.flops == 989e12 and "datasheet" in h200.source and "sparsity" in h200.source
    assert h200.yaml_path == "thresholds.yaml: training.peak_flops.NVIDIA H200.bf16"
    assert hw.peak_flops("NVIDIA H200 NVL", "bf16").flops < h200.flops  # the 600 W card
    # every profile's GPU model has a peak: MFU is reported on each node the suite knows
    for name in shipped.profile_names:
        assert hw.peak_flops(shipped.profile(name).gpu_model, "bf16") is not None, name
    assert hw.peak_flops("NVIDIA GB300", "bf16") is None  # not in the table: MFU stays unreported
    assert hw.peak_flops("NVIDIA H200", "fp32") is None
    with pytest.raises(ValueError, match="precision"):
        hw.peak_flops("NVIDIA H200", "int8")
    assert shipped.training_limits(simulated=True).peak_flops("NVIDIA H200", "bf16") is None  # CPU ranks


def _error(tmp_path, data) -> str:
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    message = str(info.value)
    assert str(path) in message
    return message


def _hw(d):
    return d["training"]["hardware"]


BROKEN = {
    "steps as one count (the old form)": (
        lambda d: _hw(d).update(steps=6),
        ["training.hardware.steps: expected a mapping of timed steps", "key: value"],
    ),
    "max below min": (
        lambda d: _hw(d)["steps"].update(min=12, max=10),
        ["training.hardware.steps: max 10 is below min 12", "make max at least min"],
    ),
    "a ceiling too low for any interval": (
        lambda d: _hw(d)["steps"].update(min=3, max=5),
        ["training.hardware.steps.max: 5 steps can never give a 95% interval", "allow at least 6"],
    ),
    "confidence of 100 %": (
        lambda d: _hw(d)["median_ci"].update(confidence="100 %"),
        ['training.hardware.median_ci.confidence: "100 %" must be below 100 %'],
    ),
    "half-width without unit": (
        lambda d: _hw(d)["median_ci"].update(max_halfwidth=0.02),
        ['training.hardware.median_ci.max_halfwidth: "0.02" has no unit', 'write "2 %"'],
    ),
    "bound without source": (
        lambda d: _hw(d)["median_ci"].pop("source"),
        ["training.hardware.median_ci: missing required key 'source'"],
    ),
    "gc_freq as a duration": (
        lambda d: _hw(d).update(gc_freq="50 s"),
        ["training.hardware.gc_freq"],
    ),
    "peak in the wrong unit": (
        lambda d: d["training"]["peak_flops"]["NVIDIA H200"].update(bf16="989 GB/s"),
        ['training.peak_flops.NVIDIA H200.bf16: "989 GB/s" is a bandwidth, not a compute rate', '"989 TFLOP/s"'],
    ),
    "peak without source": (
        lambda d: d["training"]["peak_flops"]["NVIDIA H200"].pop("source"),
        ["training.peak_flops.NVIDIA H200: missing required key 'source'"],
    ),
    "peak for an unknown precision": (
        lambda d: d["training"]["peak_flops"]["NVIDIA H200"].update(bf61="1 TFLOP/s"),
        ["training.peak_flops.NVIDIA H200.bf61: unknown key", "did you mean 'bf16'?"],
    ),
    "a GPU model with no peak": (
        lambda d: d["training"]["peak_flops"].update({"NVIDIA B200": {"source": "guess"}}),
        ["training.peak_flops.NVIDIA B200: 'NVIDIA B200' gives no peak"],
    ),
    "no peak table": (
        lambda d: d["training"].pop("peak_flops"),
        ["training: missing required key 'peak_flops'"],
    ),
}


@pytest.mark.parametrize("mutate, fragments", list(BROKEN.values()), ids=list(BROKEN))
def test_broken_training_settings_name_path_and_fix(tmp_path, shipped_data, mutate, fragments):
    data = copy.deepcopy(shipped_data)
    mutate(data)
    message = _error(tmp_path, data)
    for fragment in fragments:
        assert fragment in message, message


def _workload(shipped, **change):
    w = shipped.training_settings(False).workload()
    return {**w, **change}


def test_limits_judge_only_their_own_workload(shipped):
    """A record of another model or micro-batch (one taken before the settings changed, judged
    again) is skipped by name, never failed or passed against floors measured on another load."""
    from wirecheck.checks import training

    own = _workload(shipped)
    other = _workload(shipped, micro_batch=own["micro_batch"] // 2)
    low = 1000.0  # under every floor: fails on the thresholds' own workload
    args = dict(placement="nvswitch-2gpu-0.1", placement_class="nvswitch", strategy="ddp", n_gpus=2,
                tokens_per_s=low, simulated=False)
    assert training.throughput(shipped, **args, workload=own).outcome == "fail"
    assert training.throughput(shipped, **args).outcome == "fail"  # older records carry no workload
    skipped = training.throughput(shipped, **args, workload=other)
    assert skipped.outcome == "skip"
    assert f"micro_batch {other['micro_batch']} (thresholds: {own['micro_batch']})" in skipped.message
    assert "training.hardware" in skipped.message and "thresholds it ran under" in skipped.message
    peak = dict(placement="nvswitch-2gpu-0.1", placement_class="nvswitch", strategy="ddp", peak_bytes=200 * 2**30,
                simulated=False)
    assert training.peak_memory(shipped, **peak, workload=own).outcome == "fail"
    assert training.peak_memory(shipped, **peak, workload=_workload(shipped, precision="fp32")).outcome == "skip"
    wire = dict(placement="forced_pcie-2gpu-0.1", nvlink_placement="nvswitch-2gpu-0.1", strategy="ddp",
                nvlink_tokens_per_s=100.0, host_path_tokens_per_s=100.0)
    assert training.slow_wire(shipped, **wire, workload=own).outcome == "fail"
    assert training.slow_wire(shipped, **wire, workload=other).outcome == "skip"
    rates = {"ddp": 100.0, "zero3": 10.0}
    dial = dict(placement="forced_pcie-2gpu-0.1", nvlink_placement="nvswitch-2gpu-0.1",
                nvlink_tokens_per_s={"ddp": 100.0, "zero3": 90.0}, host_path_tokens_per_s=rates)
    assert training.dial_flattens(shipped, **dial, workload=own).outcome == "fail"
    assert training.dial_flattens(shipped, **dial, workload=other).outcome == "skip"


def test_a_failed_floor_says_whether_the_run_was_steady(shipped):
    """The throughput verdict tells a steady shortfall from step times that moved during the run
    (the median's 95 % interval, the timed steps, what stopped them); a pass says neither."""
    from wirecheck.checks import training
    from wirecheck.training.strategy_run import median_of

    args = dict(placement="nvswitch-2gpu-0.1", placement_class="nvswitch", strategy="zero3", n_gpus=2,
                tokens_per_s=1000.0, simulated=False)
    moving = median_of({"step_time_ci_halfwidth": 0.061, "timed_steps": 30, "stop_reason": "ceiling"})
    steady = median_of({"step_time_ci_halfwidth": 0.011, "timed_steps": 8, "stop_reason": "settled"})
    failed = training.throughput(shipped, **args, median=moving)
    assert failed.outcome == "fail"
    assert "had not settled (+-6.1% at 95 % after 30 timed steps" in failed.message and "step_times_s" in failed.message
    failed = training.throughput(shipped, **args, median=steady)
    assert "known to +-1.1% at 95 % after 8 timed steps: a steady shortfall" in failed.message
    assert training.throughput(shipped, **args).message == training.throughput(shipped, **args, median={}).message
    passed = training.throughput(shipped, **{**args, "tokens_per_s": 1e9}, median=moving)
    assert passed.outcome == "pass" and "settled" not in passed.message
