"""thresholds.yaml `gpu_health:`: the shipped section loads with sources, and a broken one stops
the run naming the YAML path and the fix."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from wirecheck.thresholds.file import ThresholdsError, load_thresholds

SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"


@pytest.fixture(scope="module")
def shipped_data():
    return yaml.load(SHIPPED.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def test_shipped_gpu_health():
    g = load_thresholds(SHIPPED).gpu_health
    hw, sim = g.settings(False), g.settings(True)
    assert (hw.hbm_size, hw.gemm_n, hw.sustained_duration_s(), hw.memory_coverage) == (4 * 2**30, 8192, 60.0, 0.9)
    # burn_in is a burn-in's round (held round after round for --duration): at least acceptance's minute
    assert hw.sustained_duration_s("quick") < hw.sustained_duration_s() <= hw.sustained_duration_s("burn_in")
    assert (hw.sustained_duration_s("burn_in"), hw.memory_passes("burn_in")) == (60.0, 1)
    assert sim.memory_cap and sim.sustained_duration_s() <= 5  # CI stays short
    for figure in ("hbm_copy", "hbm_read", "gemm_bf16", "gemm_fp8", "sustained_bf16"):
        h200 = g.floor(figure, "NVIDIA H200", simulated=False)
        assert h200.source.startswith("measured:") and "fixtures/reference/h200-1/" in h200.source, figure
        h100 = g.floor(figure, "NVIDIA H100 80GB HBM3", simulated=False)
        if figure == "gemm_fp8":  # measured on a 1x H100 SXM node, where the guess failed a healthy GPU
            assert h100.source.startswith("measured:") and "fixtures/reference/h100-1/" in h100.source
            assert h100.min == 1097e12 and h100.rule == "measured"
        else:  # no run measured it: its rule says so, as its source does (it was `measured` by default)
            assert h100.source.startswith("guess:") and h100.rule == "guess", figure
        assert h200.rule == "measured", figure
    assert g.floor("hbm_copy", "NVIDIA H200", False).min == 3821e9
    assert g.floor("gemm_fp8", "some other GPU", False) is None
    assert g.floor("gemm_fp8", None, simulated=True) is None  # no fp8 on CPU ranks
    assert g.peers(False).max_below_median == 0.10 and g.peers(True).max_below_median == 0.80
    assert g.clocks.fail_on == ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
    assert (g.power.value, g.temperature.value, g.xid.allowed) == (0.75, 5.0, ())


def _error(tmp_path, data) -> str:
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False, allow_unicode=True))
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    return str(info.value)


def _g(data):
    return data["gpu_health"]


BROKEN = {
    "missing section": (lambda d: d.pop("gpu_health"), ["missing required key 'gpu_health'", "add gpu_health:"]),
    "unknown figure": (lambda d: _g(d)["floors"]["NVIDIA H200"].update(hbm_write={"min": "1 GB/s", "source": "x"}),
                       ["gpu_health.floors.NVIDIA H200.hbm_write: unknown GPU figure 'hbm_write'", "hbm_copy"]),
    "floor in the wrong unit": (lambda d: _g(d)["floors"]["NVIDIA H200"]["gemm_bf16"].update(min="650 GB/s"),
                                ['gpu_health.floors.NVIDIA H200.gemm_bf16.min: "650 GB/s" is a bandwidth, not a compute rate']),
    "floor without source": (lambda d: _g(d)["floors"]["NVIDIA H200"]["hbm_read"].pop("source"),
                             ["gpu_health.floors.NVIDIA H200.hbm_read: missing required key 'source'"]),
    "levels out of order": (lambda d: _g(d)["hardware"]["sustained"]["duration"].update(quick="600 s"),
                            ["gpu_health.hardware.sustained.duration: the levels must grow"]),
    "unknown reason": (lambda d: _g(d)["clocks"].update(fail_on=["hw_slowdown", "thermal"]),
                       ["gpu_health.clocks.fail_on[1]", "write one of: gpu_idle"]),
    "simulation without a cap": (lambda d: _g(d)["simulated"]["memory_pattern"].pop("cap"),
                                 ["gpu_health.simulated.memory_pattern: simulation needs a cap"]),
    "odd GEMM side": (lambda d: _g(d)["hardware"]["gemm"].update(n=8190),
                      ["gpu_health.hardware.gemm.n: 8190 is not a multiple of 16"]),
    "margin without unit": (lambda d: _g(d)["temperature"].update(margin_to_slowdown=5),
                            ['gpu_health.temperature.margin_to_slowdown: "5" has no unit', 'write it in degrees Celsius: "5 °C"']),
    "coverage above 100 %": (lambda d: _g(d)["hardware"]["memory_pattern"].update(coverage="120 %"),
                             ["gpu_health.hardware.memory_pattern.coverage: is above 100 %"]),
}


@pytest.mark.parametrize("mutate, fragments", list(BROKEN.values()), ids=list(BROKEN))
def test_a_broken_gpu_health_section_names_path_and_fix(tmp_path, shipped_data, mutate, fragments):
    data = copy.deepcopy(shipped_data)
    mutate(data)
    message = _error(tmp_path, data)
    assert str(tmp_path / "thresholds.yaml") in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_limit_a_check_declares_is_data_and_an_undeclared_key_is_refused_naming_the_declared(tmp_path, shipped_data):
    """A check's `limits=` is what the gpu_health loader reads: its Floor a figure of the floors
    tables, its Value a section of its own; before the declaration the same keys are refused, the
    message naming file, path, line and the sections the checks declare."""
    from wirecheck import checks
    from wirecheck.core.verdict import no_problems
    from wirecheck.thresholds.declared import Floor, Value

    data = copy.deepcopy(shipped_data)
    _g(data)["floors"]["NVIDIA H200"]["selftest_util"] = {"min": "90 %", "source": "a self-test's floor"}
    _g(data)["selftest_idle"] = {"max_share": "5 %", "source": "a self-test's ceiling"}
    text = _error(tmp_path, data)
    assert "gpu_health.selftest_idle: unknown key 'selftest_idle' in gpu_health sections" in text, text
    assert "or a section a check declares: " in text and "power (sustained_power)" in text and "(line " in text, text
    del _g(data)["selftest_idle"]
    text = _error(tmp_path, data)
    assert "unknown GPU figure 'selftest_util'" in text and "the figures the checks declare" in text, text

    @checks.check("selftest_util_check", limits=(Floor("gpu_health.floors.<model>.selftest_util", unit="%"),
                                                 Value("gpu_health.selftest_idle.max_share", unit="%")))
    def declared_check(thresholds, *, gpu: int):
        return no_problems("a declared limit", f"GPU{gpu}", [])

    try:
        _g(data)["selftest_idle"] = {"max_share": "5 %", "source": "a self-test's ceiling"}
        path = tmp_path / "declared.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        g = load_thresholds(path).gpu_health
        floor = g.floor("selftest_util", "NVIDIA H200", simulated=False)
        assert (floor.min, floor.kind, floor.source) == (0.9, "percent", "a self-test's floor")
        assert g.floor("selftest_util", "NVIDIA H100 80GB HBM3", simulated=False) is None  # no peak to derive from
        assert (g.selftest_idle.value, g.selftest_idle.yaml_path) == (0.05, "declared.yaml: gpu_health.selftest_idle")
        del _g(data)["selftest_idle"]  # a declared section is required, as every limit a check reads
        assert "missing required key 'selftest_idle' in gpu_health sections" in _error(tmp_path, data)
    finally:
        checks.forget("selftest_util_check")
    with pytest.raises(ValueError, match="declares gpu_health.power.min_share_of_limit as"):
        checks.check("selftest_clash", limits=(Value("gpu_health.power.min_share_of_limit", unit="°C"),))(
            lambda thresholds: None)
    assert "selftest_clash" not in checks.SPECS
