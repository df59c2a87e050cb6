"""`wirecheck diagnose`: a record's failures localized, in simulation, with faults injected on one GPU,
pair or link (selftests/diagnose_faults.py for the workers, selftests/fake_pynvml.py for NVML's counters).
Records are written here through the record writer, with the failed verdict the suite would have written;
the probes run in-process on worker groups of 2-4 CPU ranks.
"""

from __future__ import annotations

import sys

import pytest

from selftests import fake_pynvml
from wirecheck.cli.main import main
from wirecheck.core import exit_codes
from wirecheck.core.paths import suite_paths
from wirecheck.core.verdict import FAIL, Verdict
from wirecheck.diagnose import plan
from wirecheck.diagnose.command import diagnose
from wirecheck.diagnose.context import context_for, topology_from_header
from wirecheck.diagnose.findings import FOUND, NOT_LOCALIZED, NOT_REPRODUCED, Finding, exit_code
from wirecheck.diagnose.suspects import COLLECTIVE, HANG, SLOW_GPU, WRONG_COLLECTIVE, suspects
from wirecheck.node.placement import enumerate_placements
from wirecheck.node.topo_text import load_recorded
from wirecheck.records.culprit import diagnosed_culprit
from wirecheck.records.file import Measurement, read_run
from wirecheck.records.run import COMPLETE, INTERRUPTED, RunWriter, placement_entry, run_header
from wirecheck.thresholds.file import load_thresholds

FAULTS = "selftests.diagnose_faults"
QUAD = "nvl_quad-4gpu-4.5.6.7"


def _record(tmp_path, topology_name: str, verdicts=(), measurements=(), name="run.jsonl", end=COMPLETE):
    """`end`: how the run ended (records.run's status), None for a run cut short (no end line)."""
    paths = suite_paths()
    topo = load_recorded(topology_name, paths.topologies)
    writer = RunWriter(tmp_path / name)
    writer.header(run_header(simulated=True, simulation_source=topology_name, thresholds=paths.thresholds,
                             versions={}, placements=[placement_entry(p) for p in enumerate_placements(topo)],
                             topology=topo))
    for m in measurements:
        writer.measurement(m)
    for v in verdicts:
        writer.verdict(v, "tests/test_x.py::test_x")
    if end is not None:
        writer.end(end, exit_codes.FAILED if end == COMPLETE else exit_codes.TERMINATED,
                   signal=None if end == COMPLETE else "SIGTERM")
    writer.close()
    return read_run(tmp_path / name)


def _quad_busbw_failed(floor_gbps: float) -> Verdict:
    return Verdict("busbw", "all_reduce busbw at 4 MiB", QUAD, FAIL, f"all_reduce busbw at 4 MiB on {QUAD}: measured "
                   f"0.01 GB/s < floor {floor_gbps} GB/s", measured=0.01, unit="GB/s", limit={"min": floor_gbps},
                   inputs={"op": "all_reduce", "placement": QUAD, "placement_class": "nvl_quad", "n_gpus": 4})


def _run(tmp_path, run, **kw):
    ctx = context_for(run, load_thresholds(suite_paths().thresholds), collective_workers=FAULTS, gpu_workers=FAULTS,
                      log_dir=tmp_path / "logs", **kw)
    return diagnose(run, ctx, tmp_path / "diagnosis.jsonl", say=lambda line: None)


# -- record -> suspects -> plan (no probe runs) ---------------------------------------------------


def test_a_quad_failure_plans_every_pair_inside_it_and_a_clean_record_nothing(tmp_path, capsys):
    run = _record(tmp_path, "h200-nvl-8.synthetic", [_quad_busbw_failed(1.0)])
    (s,) = suspects(run)
    assert (s.kind, s.where, s.gpus) == (COLLECTIVE, QUAD, (4, 5, 6, 7))
    text = plan.render([s])
    for pair in ("GPU4-GPU5", "GPU4-GPU6", "GPU4-GPU7", "GPU5-GPU6", "GPU5-GPU7", "GPU6-GPU7"):
        assert pair in text
    assert main(["diagnose", str(run.path)]) == exit_codes.DIAGNOSIS_PLANNED
    clean = _record(tmp_path, "h200-nvl-8.synthetic", name="clean.jsonl")
    assert suspects(clean) == [] and main(["diagnose", str(clean.path), "--run"]) == exit_codes.NOTHING_TO_LOCALIZE
    assert "nothing to localize" in capsys.readouterr().out

    # --json onto the record it diagnoses would make the findings that file's last run, which judge, report and the
    # drain hooks read instead of the validation: refused before any probe runs
    before = run.path.read_bytes()
    assert main(["diagnose", str(run.path), "--run", "--json", str(run.path)]) == exit_codes.BAD_INPUT
    assert "is the record this command reads" in capsys.readouterr().err and run.path.read_bytes() == before


@pytest.mark.parametrize("end, said", [(None, "the run was cut short (no end record)"),
                                       (INTERRUPTED, "the run was interrupted: not every check ran")])
def test_a_run_that_did_not_finish_is_no_clean_record(tmp_path, capsys, end, said):
    """A run cut short or interrupted with no failure recorded exited 0, "the record has no failure", which only a
    clean record may: a check it did not reach may fail. Said as judge says it, not localized, with or without --run;
    its failures recorded are planned as any, the state said above them."""
    passed = Verdict("busbw", "all_reduce busbw at 4 MiB", QUAD, "pass", "all_reduce busbw at 4 MiB: fine")
    run = _record(tmp_path, "h200-nvl-8.synthetic", [passed], end=end)
    for extra in ([], ["--run"]):
        assert main(["diagnose", str(run.path), *extra]) == exit_codes.DIAGNOSIS_NOT_LOCALIZED
        out = capsys.readouterr().out
        assert f"wirecheck diagnose: {run.path}: {said}" in out and "the record has no failure" not in out, out
        assert "run the level again (`wirecheck validate`)" in out
    failed = _record(tmp_path, "h200-nvl-8.synthetic", [_quad_busbw_failed(1.0)], name="failed.jsonl", end=end)
    assert main(["diagnose", str(failed.path)]) == exit_codes.DIAGNOSIS_PLANNED
    out = capsys.readouterr().out
    assert out.index(said) < out.index(f"1. busbw on {QUAD}")


def test_a_damaged_record_without_a_failure_read_is_said_damaged(tmp_path, capsys):
    """A record whose failed verdict's line is damaged (a bad byte) read as no failure, exit 0. The lost lines are
    named as judge names them, exit 12 as judge's and report's; a failure that could be read is planned as any."""
    run = _record(tmp_path, "h200-nvl-8.synthetic", [_quad_busbw_failed(1.0)])
    data = run.path.read_bytes().replace(b'"outcome": "fail"', b'"outcome": "fa\xffil"')
    run.path.write_bytes(data)
    for extra in ([], ["--run"]):
        assert main(["diagnose", str(run.path), *extra]) == exit_codes.RECORD_DAMAGED
        out = capsys.readouterr().out
        assert "1 line(s) unreadable (line 2, byte" in out and "a failed verdict may be on a lost one" in out, out
        assert "the record has no failure" not in out
    both = _record(tmp_path, "h200-nvl-8.synthetic", [_quad_busbw_failed(1.0), _quad_busbw_failed(2.0)], name="b.jsonl")
    lines = both.path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"outcome": "fail"', b'"outcome": "fa\xffil"')
    both.path.write_bytes(b"\n".join(lines))
    assert main(["diagnose", str(both.path)]) == exit_codes.DIAGNOSIS_PLANNED
    assert "1 line(s) unreadable" in capsys.readouterr().out


def test_one_gpu_s_grown_counters_are_probed_on_its_pairs_with_its_nvlink_peers(tmp_path):
    grew = Verdict("counter_growth", "error counters", "GPU5", FAIL, "error counters on GPU5: NVLink 11 CRC grew",
                   inputs={"gpu": 5})
    (s,) = suspects(_record(tmp_path, "h200-nvl-8.synthetic", [grew]))
    assert (s.kind, s.gpus) == (COLLECTIVE, (4, 5, 6, 7))


def test_the_header_topology_is_the_recorded_one(tmp_path):
    run = _record(tmp_path, "h200-nvl-8.synthetic")
    topo = topology_from_header(run.run)
    assert topo.n_gpus == 8 and topo.nv_between(5, 6) > 0 and topo.nv_between(3, 4) == 0


def test_exit_codes_say_found_not_reproduced_not_localized_apart_from_node_verdicts():
    codes = {exit_codes.NOTHING_TO_LOCALIZE, exit_codes.DIAGNOSIS_FOUND, exit_codes.DIAGNOSIS_NOT_REPRODUCED,
             exit_codes.DIAGNOSIS_NOT_LOCALIZED, exit_codes.DIAGNOSIS_PLANNED}
    assert len(codes) == 5 and not codes & {exit_codes.FAILED, exit_codes.SIMULATED, exit_codes.NVML_BROKEN}
    from wirecheck.diagnose.suspects import Suspect
    one = Suspect(COLLECTIVE, "busbw", QUAD, (4, 5, 6, 7))
    assert exit_code([]) == exit_codes.NOTHING_TO_LOCALIZE
    assert exit_code([Finding(one, NOT_REPRODUCED)]) == exit_codes.DIAGNOSIS_NOT_REPRODUCED
    assert exit_code([Finding(one, NOT_REPRODUCED), Finding(one, NOT_LOCALIZED)]) == exit_codes.DIAGNOSIS_NOT_LOCALIZED
    assert exit_code([Finding(one, NOT_LOCALIZED), Finding(one, FOUND, "GPU5", "GPU5 x")]) == exit_codes.DIAGNOSIS_FOUND
    with pytest.raises(ValueError):
        Finding(one, FOUND)  # found names its part


def test_a_hang_names_the_rank_its_gpu_and_the_op_from_the_record(tmp_path):
    log = tmp_path / "rank1.log"
    log.write_text("rank 1: waiting in all_reduce\n")
    failure = {"label": QUAD, "what": "all_reduce at 4 MiB", "phase": "call", "kind": "hung", "deadline_s": 60.0,
               "root": {"rank": 1, "kind": "hung", "summary": "no reply within 60 s", "log": str(log)},
               "ranks": [{"rank": 1, "kind": "hung", "summary": "no reply within 60 s", "log": str(log)}],
               "log_dir": None}
    m = Measurement("collective", QUAD, "all_reduce at 4 MiB", None, "GB/s",
                    {"op": "all_reduce", "bytes": 4 << 20, "error": "hung", "failure": failure})
    run = _record(tmp_path, "h200-nvl-8.synthetic", measurements=[m])
    (s,) = suspects(run)
    assert s.kind == HANG
    findings, path, code = _run(tmp_path, run)
    assert code == exit_codes.DIAGNOSIS_FOUND and findings[0].part == "GPU5"
    assert "waiting in all_reduce" in "\n".join(findings[0].evidence)
    assert diagnosed_culprit(read_run(path)).startswith("GPU5 (rank 1 of nvl_quad-4gpu-4.5.6.7) hung in all_reduce")


# -- --run: each fault named ----------------------------------------------------------------------


def test_a_slow_pair_inside_a_quad_is_named(tmp_path, monkeypatch):
    run = _record(tmp_path, "h200-nvl-8.synthetic", [_quad_busbw_failed(1e-6)])
    monkeypatch.setenv("WIRECHECK_FAULT_SLOW_PAIR", "5,6")
    findings, path, code = _run(tmp_path, run)
    (f,) = findings
    assert (code, f.result, f.part) == (exit_codes.DIAGNOSIS_FOUND, FOUND, "GPU5-GPU6"), f.evidence
    assert diagnosed_culprit(read_run(path)).startswith("GPU5-GPU6 NV")
    assert f.figures["pairs"]["pair-4.5"]["busbw_GBps"] > 2 * f.figures["pairs"]["pair-5.6"]["busbw_GBps"]


def test_a_fault_that_does_not_come_back_is_not_reproduced(tmp_path):
    placement = "nvswitch-2gpu-0.1"
    failed = Verdict("busbw", "all_reduce busbw at 4 MiB", placement, FAIL, "slow", measured=0.01, unit="GB/s",
                     limit={"min": 1e-6}, inputs={"op": "all_reduce", "placement": placement})
    run = _record(tmp_path, "h200-sxm-2", [failed])
    findings, path, code = _run(tmp_path, run)
    assert (code, findings[0].result) == (exit_codes.DIAGNOSIS_NOT_REPRODUCED, NOT_REPRODUCED), findings[0].evidence
    assert "(passes now)" in findings[0].evidence[0]
    assert diagnosed_culprit(read_run(path)) is None and read_run(path).verdicts[0]["outcome"] == "pass"


def test_a_growing_crc_counter_on_one_link_names_the_gpu_and_the_link(tmp_path, monkeypatch):
    scenario = fake_pynvml.nvl_quads(8)
    scenario.gpus[5].links[11].counters = fake_pynvml.GrowingCrc(step=412)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.build(scenario))
    run = _record(tmp_path, "h200-nvl-8.synthetic", [_quad_busbw_failed(1e-6)])
    (f,), path, code = _run(tmp_path, run)
    assert (code, f.part) == (exit_codes.DIAGNOSIS_FOUND, "GPU5 NVLink 11"), f.evidence
    assert f.culprit.startswith("GPU5 NVLink 11 CRC +") and f.culprit.endswith("under pair load")


def test_a_wrong_element_from_one_rank_names_its_gpu(tmp_path, monkeypatch):
    wrong = Verdict("collective_correct", "all_reduce result", QUAD, FAIL, f"all_reduce on {QUAD} returned wrong data",
                    measured=1, unit="wrong elements", inputs={"op": "all_reduce", "placement": QUAD})
    run = _record(tmp_path, "h200-nvl-8.synthetic", [wrong])
    assert suspects(run)[0].kind == WRONG_COLLECTIVE
    monkeypatch.setenv("WIRECHECK_FAULT_WRONG_GPU", "6")
    (f,), path, code = _run(tmp_path, run)
    assert (code, f.part) == (exit_codes.DIAGNOSIS_FOUND, "GPU6"), f.evidence
    assert "wrong output on GPU6 (rank 2)" in f.evidence


def test_a_gpu_slow_only_with_its_neighbours_loaded_points_at_the_chassis(tmp_path, monkeypatch):
    slow = Verdict("gemm_throughput", "GEMM bf16 throughput", "GPU1", FAIL, "GEMM bf16 throughput on GPU1: slow",
                   inputs={"gpu": 1, "dtype": "bf16"})
    run = _record(tmp_path, "h200-sxm-2", [slow])
    assert suspects(run)[0].kind == SLOW_GPU
    monkeypatch.setenv("WIRECHECK_FAULT_NEIGHBOUR_SLOW_GPU", "1")
    (f,), path, code = _run(tmp_path, run)
    assert (code, f.part) == (exit_codes.DIAGNOSIS_FOUND, "the slot of GPU1"), f.evidence
    assert "only with its neighbours loaded" in f.culprit and "chassis" in f.culprit


def test_the_command_runs_and_says_the_culprit_last(tmp_path, capsys):
    failure = {"label": QUAD, "what": "all_reduce at 4 MiB", "kind": "died", "log_dir": None,
               "root": {"rank": 3, "kind": "died", "summary": "killed by SIGKILL"}, "ranks": []}
    m = Measurement("collective", QUAD, "all_reduce at 4 MiB", None, "GB/s", {"op": "all_reduce", "failure": failure})
    run = _record(tmp_path, "h200-nvl-8.synthetic", measurements=[m])
    out = tmp_path / "d.jsonl"
    code = main(["diagnose", str(run.path), "--run", "--json", str(out), "--collective-workers", FAULTS])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == exit_codes.DIAGNOSIS_FOUND and lines[-1].startswith("culprit: GPU7 (rank 3 of"), lines
    assert read_run(out).run["kind"] == "diagnosis"


def test_bad_input_is_named_without_a_traceback(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "missing.jsonl")]) == exit_codes.BAD_INPUT
    assert "missing.jsonl" in capsys.readouterr().err


def test_the_report_shows_the_diagnosis_and_a_run_without_one_says_how(tmp_path):
    from wirecheck.report.diagnosis import diagnosis_section
    from wirecheck.report.model import RunView

    failure = {"label": QUAD, "what": "all_reduce at 4 MiB", "kind": "died", "log_dir": None,
               "root": {"rank": 0, "kind": "died", "summary": "killed by SIGKILL"}, "ranks": []}
    m = Measurement("collective", QUAD, "all_reduce at 4 MiB", None, "GB/s", {"op": "all_reduce", "failure": failure})
    run = _record(tmp_path, "h200-nvl-8.synthetic", measurements=[m])
    _, path, _ = _run(tmp_path, run)
    shown = diagnosis_section(RunView.of(read_run(path))).html()
    assert "GPU4 (rank 0 of" in shown and "found" in shown
    empty = diagnosis_section(RunView.of(run))
    assert not empty.body and "No diagnosis in this record" in empty.folded  # one line: the title and why


def _copy_result(gpu: int, gbps: float, gen: int = 5, width: int = 16) -> dict:
    return {"gpu": gpu, "h2d_bytes_per_s": gbps * 1e9, "d2h_bytes_per_s": gbps * 1e9,
            "pcie": {"link": {"gen": gen, "width": width, "gen_max": 5, "width_max": 16}, "under_load": True, "error": None}}


@pytest.mark.parametrize("alone, together, link, part", [
    (50.0, 24.0, (5, 16), "the PCIe switch of GPU0+GPU1"),  # a shared uplink halves each
    (50.0, 49.0, (4, 16), "GPU1 PCIe link"),  # trained down under load
    (50.0, 49.0, (5, 16), None),  # fine alone and together: not reproduced
])
def test_a_host_copy_names_the_switch_uplink_or_the_link(monkeypatch, alone, together, link, part):
    from wirecheck.diagnose import copy_probe
    from wirecheck.diagnose.context import Context
    from wirecheck.diagnose.suspects import HOST_COPY, Suspect
    from wirecheck.node.topology import Gpu, Topology

    topo = Topology((Gpu(0, "NVIDIA H200"), Gpu(1, "NVIDIA H200")), ((0, 0), (0, 0)), ((None, "PIX"), ("PIX", None)))
    ctx = Context(load_thresholds(suite_paths().thresholds), False, topo)
    s = Suspect(HOST_COPY, "host_copy", "GPU1", (1,), verdict={"inputs": {"gpu": 1, "direction": "h2d"}})

    def copies(self, gpus):
        return {g: _copy_result(g, alone if len(gpus) == 1 else together, *link) for g in gpus}

    monkeypatch.setattr(copy_probe._Probe, "_copies", copies)
    f = copy_probe.diagnose(ctx, s)
    assert (f.result, f.part) == ((FOUND, part) if part else (NOT_REPRODUCED, None)), f.evidence
    sim = copy_probe.diagnose(Context(ctx.thresholds, True, topo), s)
    assert sim.result == NOT_LOCALIZED and "need GPUs" in sim.evidence[0]


def test_judge_and_the_trend_leave_a_diagnosis_record_alone(tmp_path, capsys):
    from wirecheck.report.model import load_history

    failure = {"label": QUAD, "what": "all_reduce at 4 MiB", "kind": "died", "log_dir": None,
               "root": {"rank": 2, "kind": "died", "summary": "killed by SIGKILL"}, "ranks": []}
    m = Measurement("collective", QUAD, "all_reduce at 4 MiB", None, "GB/s", {"op": "all_reduce", "failure": failure})
    run = _record(tmp_path, "h200-nvl-8.synthetic", measurements=[m])
    _, path, _ = _run(tmp_path, run)
    assert main(["judge", str(path)]) == exit_codes.BAD_INPUT
    assert "a diagnosis record" in capsys.readouterr().err
    views, skipped = load_history(tmp_path)
    assert [v.run.path.name for v in views] == ["run.jsonl"] and "diagnosis record" in skipped[0][1]


def test_a_diagnosis_record_is_refused_as_judge_refuses_it(tmp_path, capsys):
    """`diagnose` on its own findings planned a diagnosis of the diagnosis (exit 23) where judge refuses the file:
    refused the same way, naming the record it diagnosed."""
    failure = {"label": QUAD, "what": "all_reduce at 4 MiB", "kind": "died", "log_dir": None,
               "root": {"rank": 2, "kind": "died", "summary": "killed by SIGKILL"}, "ranks": []}
    m = Measurement("collective", QUAD, "all_reduce at 4 MiB", None, "GB/s", {"op": "all_reduce", "failure": failure})
    run = _record(tmp_path, "h200-nvl-8.synthetic", measurements=[m])
    _, path, _ = _run(tmp_path, run)
    for extra in ([], ["--run"]):
        assert main(["diagnose", str(path), *extra]) == exit_codes.BAD_INPUT
        captured = capsys.readouterr()
        assert "a diagnosis record (wirecheck diagnose --run)" in captured.err and not captured.out
        assert f"`wirecheck diagnose {run.path}`" in captured.err and "Traceback" not in captured.err


def test_a_failure_no_probe_localizes_says_what_to_do_not_to_run_probes(tmp_path, capsys):
    """A GPU slower than its own history has no probe: the plan said so and still said "run them: ... --run". Each
    such failure's step is its check's own `to do` (a GPU matter for history), and no probe is offered."""
    from wirecheck.checks.words import WORDS

    slow = Verdict("history", "hbm_copy against its own history", "GPU0", FAIL, "hbm_copy on GPU0: 10.1 % below its "
                   "own median", measured=3840.4, unit="GB/s", limit={"min": 4144.7}, inputs={"gpu": 0})
    run = _record(tmp_path, "h200-nvl-8.synthetic", [slow])
    assert main(["diagnose", str(run.path)]) == exit_codes.DIAGNOSIS_PLANNED
    out = capsys.readouterr().out
    assert f"no probe localizes history; to do: {WORDS['history'].todo}" in out and "replace the GPU" in out
    assert "--run" not in out and "no probe to run: act on each failure as its `to do` above says" in out
    # beside a failure a probe localizes, the probes are offered
    both = _record(tmp_path, "h200-nvl-8.synthetic", [slow, _quad_busbw_failed(1.0)], name="both.jsonl")
    assert main(["diagnose", str(both.path)]) == exit_codes.DIAGNOSIS_PLANNED
    out = capsys.readouterr().out
    assert f"run them: wirecheck diagnose {both.path} --run" in out and WORDS["history"].todo in out


def test_nccl_s_path_per_pair_is_read_from_its_log():
    from pathlib import Path

    from wirecheck.diagnose.collective_probe import nccl_transport

    data = Path(__file__).parent / "data" / "nccl"
    nvlink = [(data / f"composed-nvswitch-2gpu-0.1.rank{r}.log").read_text() for r in (0, 1)]
    host = [(data / f"composed-forced_pcie-2gpu-0.1.rank{r}.log").read_text() for r in (0, 1)]
    assert "P2P/" in nccl_transport(nvlink) and "path NVL" in nccl_transport(nvlink)
    assert "P2P/" not in nccl_transport(host)
    assert nccl_transport([None, None]) is None and nccl_transport(["nothing NCCL said"]).startswith("NCCL logged no")


def test_a_hot_gpu_in_simulation_is_not_localized_without_nvml_samples(tmp_path):
    hot = Verdict("sustained_temperature", "temperature under load", "GPU1", FAIL, "hot", inputs={"gpu": 1})
    run = _record(tmp_path, "h200-sxm-2", [hot])
    (f,), _, code = _run(tmp_path, run)
    assert (code, f.result) == (exit_codes.DIAGNOSIS_NOT_LOCALIZED, NOT_LOCALIZED), f.evidence
    assert "no NVML beside the CPU ranks" in f.evidence[0]


@pytest.mark.parametrize("tflops, result", [(345.0, FOUND), (690.0, NOT_REPRODUCED)])
def test_a_node_of_one_gpu_judges_it_alone_against_its_floor(monkeypatch, tflops, result):
    from types import SimpleNamespace

    from wirecheck.diagnose import gpu_probe
    from wirecheck.diagnose.context import Context
    from wirecheck.diagnose.suspects import Suspect
    from wirecheck.node.topology import Gpu, Topology

    topo = Topology((Gpu(0, "NVIDIA H200"),), ((0,),), ((None,),))
    ctx = Context(load_thresholds(suite_paths().thresholds), False, topo)
    s = Suspect(SLOW_GPU, "gemm_throughput", "GPU0", (0,), verdict={"inputs": {"gpu": 0, "dtype": "bf16"}})
    runs = []

    def phase(self, gpus, name):
        runs.append(gpus)
        return None, SimpleNamespace(error=None, of=lambda g: {"gemm_bf16": {"throughput": {"per_s": tflops * 1e12}}})

    monkeypatch.setattr(gpu_probe._Probe, "_phase", phase)
    f = gpu_probe.diagnose_slow(ctx, s)
    assert f.result == result and runs == [(0,)], f.evidence  # alone only: no neighbours to load
    assert "no other GPU on the node" in f.evidence[1]
    if result == FOUND:
        floor = ctx.thresholds.gpu_health.floor("gemm_bf16", "NVIDIA H200", False).min / 1e12  # the file's own
        assert f.culprit.startswith(f"GPU0 gemm_bf16 345 TFLOP/s alone, below the floor {floor:.0f} TFLOP/s")


def test_a_gpu_record_is_probed_only_on_the_node_that_wrote_it(tmp_path, capsys):
    writer = RunWriter(tmp_path / "gpu.jsonl")
    writer.header({"simulated": False, "host": "gpu-node-17", "gpus": [], "placements": []})
    writer.verdict(_quad_busbw_failed(300.0), "tests/test_collectives.py::test_busbw")
    writer.end(COMPLETE, exit_codes.FAILED)
    writer.close()
    assert main(["diagnose", str(tmp_path / "gpu.jsonl"), "--run"]) == exit_codes.BAD_INPUT
    assert "recorded on gpu-node-17" in capsys.readouterr().err
    assert main(["diagnose", str(tmp_path / "gpu.jsonl")]) == exit_codes.DIAGNOSIS_PLANNED  # the plan prints anywhere
