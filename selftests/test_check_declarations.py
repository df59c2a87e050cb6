"""What a check declares about itself is what the plugin and the report read: its inputs' builder,
its report section and figure. A declaration the rest of the suite could not use is refused at
registration, as a second check of a name is."""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.checks import SECTION_GPU, SPECS, check
from wirecheck.core.verdict import no_problems
from wirecheck.gpu.inputs import FromPhase
from wirecheck.report import gpus


def test_the_report_shows_the_checks_that_declare_its_gpu_section():
    declared = {name for name, spec in SPECS.items() if spec.section == SECTION_GPU}
    assert set(gpus.GPU_HEALTH_CHECKS) == declared
    assert {"hbm_bandwidth", "sustained_power", "no_xid"} <= declared and "busbw" not in declared
    # the figure a verdict is about comes from its inputs, as the declaration says
    assert SPECS["hbm_bandwidth"].figure({"kind": "read"}) == "hbm_read"
    assert SPECS["gemm_throughput"].figure({"dtype": "fp8"}) == "gemm_fp8"


def test_every_gpu_load_check_declares_how_its_inputs_are_built():
    from wirecheck.vocab.work import FIGURES, MEMORY, SUSTAINED

    load = {name: spec for name, spec in SPECS.items() if isinstance(spec.inputs, FromPhase)}
    assert {"hbm_bandwidth", "sustained_power", "memory_pattern"} <= set(load)
    for name, spec in load.items():
        assert spec.inputs.phase in (FIGURES, SUSTAINED, MEMORY) and callable(spec.inputs.build), name
        assert spec.section == SECTION_GPU, name


def test_every_gpu_health_check_declares_its_words_and_the_limits_it_reads():
    """A declared check's words are what the faces read by its name, and the gpu_health sections and
    floors the loader reads are the ones the declarations name."""
    from wirecheck.checks.words import words_for
    from wirecheck.thresholds import declared

    gpu = {name: spec for name, spec in SPECS.items() if spec.section == SECTION_GPU}
    for name, spec in gpu.items():
        assert spec.words is not None and words_for(name) == spec.words, name
    assert set(declared.floors()) >= {"hbm_copy", "hbm_read", "gemm_bf16", "gemm_fp8", "sustained_bf16"}
    assert set(declared.sections()) >= {"clocks", "power", "temperature", "memory_errors", "xid"}
    owners = declared.floor_checks()
    assert all(figure in [lim.key.rsplit(".", 1)[1] for lim in SPECS[owners[figure]].limits] for figure in owners)


def test_a_declared_gpu_check_reaches_the_report_without_another_edit():
    @check("selftest_declared_gpu_figure", section=SECTION_GPU, figure=lambda inputs: "hbm_copy")
    def declared(thresholds, *, gpu: int):
        return no_problems("a declared figure", f"GPU{gpu}", [])

    try:
        points: dict = {}
        verdict = {"check": "selftest_declared_gpu_figure", "outcome": "pass", "measured": 4200.0,  # GB/s, as shown
                   "inputs": {"gpu": 0, "bus_id": "0000:01:00.0", "gpu_model": "NVIDIA H200"}, "limit": {}}
        gpus.add_verdict(points, verdict)
        assert points[0].figures["hbm_copy"] == pytest.approx(4.2e12)  # bytes/s
        gpus.add_verdict(points := {}, {**verdict, "check": "busbw"})  # not declared in the GPU section
        assert points == {}
    finally:
        checks.forget("selftest_declared_gpu_figure")


def test_a_declaration_the_suite_cannot_use_is_refused():
    with pytest.raises(ValueError, match="section 'gpus'; report sections are"):
        check("selftest_bad_section", section="gpus")
    with pytest.raises(ValueError, match="a figure is shown in a section; add section="):
        check("selftest_figure_alone", figure=lambda inputs: "hbm_copy")
    with pytest.raises(ValueError, match="check 'busbw' is registered twice"):
        check("busbw")(lambda thresholds: None)
