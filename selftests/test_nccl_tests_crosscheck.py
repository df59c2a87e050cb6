"""`wirecheck nccl-tests`: the side-by-side records, and the command end to end on CPU with gloo ranks
and stand-in nccl-tests binaries (scripts that print nccl-tests' table for the sizes they are given)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from wirecheck.cli.nccl_tests import main as nccl_tests_main
from wirecheck.nccl import crosscheck, tests as nccl_tests
from wirecheck.measure.collectives import combine
from wirecheck.measure.curve import SweepSpec
from wirecheck.nccl.tests_output import parse
from wirecheck.node.placement import Placement, enumerate_placements
from wirecheck.thresholds.file import load_thresholds
from wirecheck.vocab.ops import COLLECTIVES, OPS, axes
from wirecheck.node.topo_text import load_recorded

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20


@pytest.fixture(scope="module")
def settings():
    return load_thresholds(ROOT / "thresholds.yaml").collective_settings(simulated=True)


@pytest.fixture(scope="module")
def placements():
    return enumerate_placements(load_recorded("h200-sxm-2", ROOT / "fixtures" / "pytest_wirecheck" / "topologies"))


def test_binary_command_and_environment(placements):
    forced = next(p for p in placements if p.klass == "forced_pcie")
    argv = nccl_tests.binary_argv(Path("/b"), "all_to_all", SweepSpec(8, MiB, 2), 2, 5, 20)
    assert argv == ["/b/alltoall_perf", "-b", "8", "-e", str(MiB), "-f", "2", "-g", "2", "-w", "5", "-n", "20",
                    "-c", "1", "-d", "float"]
    env = nccl_tests.binary_env(forced, {"NCCL_NVLS_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "5"})
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_NVLS_ENABLE"] == "0"  # placement's and parent's
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_like_is_compared_with_like():
    expected = {"all_reduce": "in_place", "all_gather": "out_of_place", "reduce_scatter": "out_of_place",
                "broadcast": "in_place", "all_to_all": "out_of_place", "reduce": "in_place"}
    assert {op: nccl_tests.compared_column(op) for op in expected} == expected
    for op in OPS:  # a new row's column follows from the table
        assert nccl_tests.compared_column(op) == ("in_place" if COLLECTIVES[op].in_place else "out_of_place")


def test_dtypes_and_reductions_become_d_and_o():
    argv = nccl_tests.binary_argv(Path("/b"), "reduce", SweepSpec(8, MiB, 2), 2, 5, 20, axes("reduce", "bf16", "max"))
    assert argv[0] == "/b/reduce_perf" and argv[-4:] == ["-d", "bfloat16", "-o", "max"]
    assert nccl_tests.binary_argv(Path("/b"), "all_gather", SweepSpec(8, MiB, 2), 2, 5, 20,
                                  axes("all_gather", "fp16"))[-2:] == ["-d", "half"]
    # each op at what it has of the asked: all_gather takes no reduction; none asked: the op's first
    assert [a.id for a in nccl_tests.combinations(["all_reduce", "all_gather"], ["bf16"], ["max", "avg"])] == \
        ["all_reduce-bf16-max", "all_reduce-bf16-avg", "all_gather-bf16"]
    assert [a.id for a in nccl_tests.combinations(["all_reduce"])] == ["all_reduce"]
    assert len(nccl_tests.combinations(["all_reduce"], ["all"], ["all"])) == \
        len(COLLECTIVES["all_reduce"].dtypes) * len(COLLECTIVES["all_reduce"].reductions)
    with pytest.raises(ValueError, match="unknown dtype or reduction fp8, prod; dtypes: fp32, bf16, fp16"):
        nccl_tests.combinations(["all_reduce"], ["fp8"], ["prod"])


def test_nccl_version_codes():
    assert nccl_tests.nccl_code("2.28.9") == "22809" and nccl_tests.nccl_code("2.8.4") == "2804"
    assert nccl_tests.nccl_code(None) is None


def test_select_placements(placements):
    assert [p.id for p in nccl_tests.select_placements(placements, [])] == ["nvswitch-2gpu-0.1", "forced_pcie-2gpu-0.1"]
    assert [p.id for p in nccl_tests.select_placements(placements, ["forced_pcie"])] == ["forced_pcie-2gpu-0.1"]
    with pytest.raises(ValueError, match="--placement nvl_quad: no such placement id or class.*nvswitch-2gpu-0.1"):
        nccl_tests.select_placements(placements, ["nvl_quad"])


def _suite_record(rank, sizes, eager_us, graph_us):
    return {"rank": rank, "op": "all_reduce", "world_size": 2, "results": [
        {"bytes": s, "requested_bytes": s, "time_s": e * 1e-6, "graph_time_s": None if g is None else g * 1e-6,
         "wrong": 0, "first_bad": None, "wrong_by_path": {"eager": 0}} for s, e, g in zip(sizes, eager_us, graph_us)]}


def test_side_by_side_on_the_reference_run():
    """The suite's 2x H200 numbers (docs/measurements.md) next to the real nccl-tests run of the same machine."""
    (run, *_) = parse((ROOT / "fixtures" / "reference" / "h200-sxm-2" / "nccl-tests.txt").read_text())
    sizes = [MiB, 8 * MiB, 64 * MiB]
    suite = combine("all_reduce", 2, [_suite_record(r, sizes, [63.0, 52.5, 249.5], [27.3, 62.9, 288.6]) for r in (0, 1)])
    recs = crosscheck.side_by_side("all_reduce", "nvswitch-2gpu-0.1", 2, suite, run.rows, "in_place")
    assert [r["bytes"] for r in recs] == [MiB, 8 * MiB, 64 * MiB, 512 * MiB]
    first = recs[0]
    assert first["suite"]["path"] == "graph" and first["suite"]["time_us"] == pytest.approx(27.3)
    assert first["nccl_tests"]["column"] == "in_place" and first["nccl_tests"]["time_us"] == 18.13
    assert first["nccl_tests"]["out_of_place"]["time_us"] == 17.76
    assert first["busbw_ratio"] == pytest.approx(18.13 / 27.3)
    assert recs[1]["suite"]["path"] == "eager" and recs[1]["busbw_ratio"] == pytest.approx(49.34 / 52.5)
    assert recs[3]["suite"] is None and recs[3]["busbw_ratio"] is None  # nccl-tests only
    table = crosscheck.format_side_by_side("all_reduce", recs).splitlines()
    assert table[3].split() == ["1048576", "27.30", "graph", "38.41", "18.13", "57.84", "0.664", "<"]
    assert table[-1] == "# 1 of 3 sizes within 5 % of nccl-tests or better; below: 1048576, 8388608 B"


# A stand-in for an nccl-tests binary: prints nccl-tests' table (util.cu's layout) for the -b/-e/-f/-g it
# is given, 20 us per call, and writes down its argv and environment. Its size column is 2.19.6's: a split
# buffer (all_gather, reduce_scatter, alltoall) is n chunks of a multiple of 16 bytes, 0 where none fits.
STAND_IN = r'''#!{python}
import json, os, sys
args = sys.argv[1:]
opt = dict(zip(args[::2], args[1::2]))
name = os.path.basename(sys.argv[0])
with open(os.path.join(os.path.dirname(sys.argv[0]), name + ".calls"), "a") as f:
    f.write(json.dumps({{"argv": args, "env": {{k: os.environ.get(k) for k in
        ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_P2P_DISABLE", "NCCL_NVLS_ENABLE")}}}}) + "\n")
if os.environ.get("STAND_IN_FAIL") == name:
    print("vm: Test NCCL failure common.cu:1158 'unhandled system error'")
    sys.exit(1)
n = int(opt["-g"])
print("# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809")
print("# Collective test starting: " + name)
print("# nThread 1 nGpus %d minBytes %s maxBytes %s step: %s(factor) warmup iters: %s iters: %s agg iters: 1 "
      "validation: 1 graph: 0 unalign: 0" % (n, opt["-b"], opt["-e"], opt["-f"], opt["-w"], opt["-n"]))
print("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ")
print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ")
elt = {{"float": 4, "bfloat16": 2, "half": 2}}[opt.get("-d", "float")]
size = int(opt["-b"])
while size <= int(opt["-e"]):
    t = 20.0
    moved = size // elt * elt
    if name in ("all_gather_perf", "reduce_scatter_perf", "alltoall_perf"):
        moved = ((size // elt) // n & ~(16 // elt - 1)) * n * elt
    bw = moved / t / 1e3
    print("%12li  %12li  %8s  %6s  %6i  %7.2f  %6.2f  %6.2f  %6g  %7.2f  %6.2f  %6.2f  %6g"
          % (moved, moved // elt, "float", "sum", -1, t, bw, bw, 0, t, bw, bw, 0))
    size *= int(opt["-f"])
print("# Out of bounds values : 0 OK")
print("# Avg bus bandwidth    : 1 ")
print("#")
print("# Collective test concluded: " + name)
'''


@pytest.fixture
def build_dir(tmp_path):
    for binary in (op.binary for op in COLLECTIVES.values()):
        path = tmp_path / binary
        path.write_text(STAND_IN.format(python=sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def _calls(build_dir, binary):
    return [json.loads(line) for line in (build_dir / f"{binary}.calls").read_text().splitlines()]


def test_the_command_end_to_end_on_gloo(build_dir, tmp_path, settings, placements, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    out, lines = tmp_path / "x.jsonl", []
    spec = SweepSpec(1024, 4096, 2)
    chosen = nccl_tests.select_placements(placements, [])
    status = nccl_tests.crosscheck_placements(build_dir, chosen, ["all_reduce", "all_gather"], spec, settings, out,
                                              backend="gloo", raw_dir=tmp_path / "raw", echo=lines.append)
    text = "\n".join(lines)
    assert status == 0, text
    # both placements, both ops, the same sweep on both sides
    calls = _calls(build_dir, "all_reduce_perf")
    assert [c["env"]["CUDA_VISIBLE_DEVICES"] for c in calls] == ["0,1", "0,1"]
    assert [c["env"]["NCCL_P2P_DISABLE"] for c in calls] == [None, "1"]  # forced_pcie's environment
    assert all(c["env"]["NCCL_NVLS_ENABLE"] == "0" for c in calls)  # the parent's passes through
    assert calls[0]["argv"] == ["-b", "1024", "-e", "4096", "-f", "2", "-g", "2", "-w", str(settings.warmup_iters),
                                "-n", str(settings.iters), "-c", "1", "-d", "float", "-o", "sum"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["type"] == "run" and records[0]["placements"] == ["nvswitch-2gpu-0.1", "forced_pcie-2gpu-0.1"]
    rows = [r for r in records if r.get("kind") == "nccl_tests"]
    assert len(rows) == 2 * 2 * 3  # placements x ops x sizes
    for r in rows:
        d = r["details"]
        assert d["suite"]["path"] == "eager" and d["suite"]["wrong"] == 0 and d["nccl_tests"]["time_us"] == 20.0
        assert r["value"] == pytest.approx(20.0 / d["suite"]["time_us"]) and d["nccl_tests_library"] == "22809"
    assert {r["details"]["nccl_tests"]["column"] for r in rows if r["details"]["op"] == "all_reduce"} == {"in_place"}
    assert "all_gather on forced_pcie-2gpu-0.1 (2 GPUs): wirecheck vs nccl-tests 2.19.6 (out-of-place column)" in text
    assert (tmp_path / "raw" / "nvswitch-2gpu-0.1-all_reduce.txt").read_text().startswith(f"$ {build_dir}/all_reduce_perf -b 1024")


@pytest.mark.parametrize("ops", [["all_gather", "reduce_scatter"], ["all_to_all"]])
def test_every_size_pairs_with_nccl_tests_on_three_gpus(build_dir, tmp_path, settings, ops):
    """On 3 GPUs nccl-tests moves n chunks of a multiple of 16 bytes (1 KiB: 1008 B, not 1020): the suite
    splits alike, so every size it measures has nccl-tests' row beside it, and a size too small to split
    (nccl-tests' 0-byte rows) is left out on both sides."""
    out, lines = tmp_path / "x.jsonl", []
    three = [Placement("nvswitch", (0, 1, 2))]
    status = nccl_tests.crosscheck_placements(build_dir, three, ops, SweepSpec(8, 4096, 2), settings, out,
                                              backend="gloo", echo=lines.append)
    assert status == 0, "\n".join(lines)
    rows = [r["details"] for r in map(json.loads, out.read_text().splitlines()) if r.get("kind") == "nccl_tests"]
    assert {r["op"] for r in rows} == set(ops)
    for r in rows:
        assert r["suite"] is not None and r["nccl_tests"] is not None, r
        assert r["suite"]["wrong"] == 0
    assert sorted({r["bytes"] for r in rows}) == [48, 96, 240, 480, 1008, 2016, 4080]


def test_a_failing_binary_fails_the_command_by_name(build_dir, tmp_path, settings, placements, monkeypatch):
    monkeypatch.setenv("STAND_IN_FAIL", "all_gather_perf")
    lines = []
    status = nccl_tests.crosscheck_placements(build_dir, nccl_tests.select_placements(placements, ["nvswitch"]), ["all_gather"],
                                              SweepSpec(1024, 2048, 2), settings, tmp_path / "x.jsonl",
                                              backend="gloo", echo=lines.append)
    assert status == 1
    assert any(line.startswith("ERROR: nccl-tests all_gather_perf on") and "exit code 1" in line
               and "Test NCCL failure" in line for line in lines), lines


def test_missing_binaries_are_a_usage_error(tmp_path, settings, placements):
    lines = []
    status = nccl_tests.crosscheck_placements(tmp_path, placements[:1], ["all_reduce"], SweepSpec(8, 16, 2), settings,
                                              tmp_path / "x.jsonl", backend="gloo", echo=lines.append)
    assert status == 2 and "has no executable all_reduce_perf" in lines[0]


def test_the_command_runs_each_dtype_and_reduction_on_both_sides(build_dir, tmp_path, settings, placements):
    out, lines = tmp_path / "x.jsonl", []
    chosen = nccl_tests.select_placements(placements, ["nvswitch"])
    combos = nccl_tests.combinations(["reduce", "all_gather"], ["bf16"], ["max"])
    status = nccl_tests.crosscheck_placements(build_dir, chosen, combos, SweepSpec(1024, 2048, 2), settings, out,
                                              backend="gloo", raw_dir=tmp_path / "raw", echo=lines.append)
    text = "\n".join(lines)
    assert status == 0, text
    assert _calls(build_dir, "reduce_perf")[0]["argv"][-4:] == ["-d", "bfloat16", "-o", "max"]
    assert _calls(build_dir, "all_gather_perf")[0]["argv"][-2:] == ["-d", "bfloat16"]
    rows = [json.loads(line) for line in out.read_text().splitlines()][1:]
    measured = {(r["details"]["op"], r["details"]["dtype"], r["details"]["reduction"]) for r in rows if "details" in r}
    assert measured == {("reduce", "bf16", "max"), ("all_gather", "bf16", None)}
    assert all(r["details"]["suite"]["wrong"] == 0 for r in rows if "details" in r)  # reduce: its root, checked
    assert "reduce bf16 max on nvswitch-2gpu-0.1 (2 GPUs): wirecheck vs nccl-tests" in text
    assert (tmp_path / "raw" / "nvswitch-2gpu-0.1-reduce-bf16-max.txt").exists()


def test_main_refuses_bad_arguments(capsys):
    assert nccl_tests_main(["--build-dir", "/nowhere", "--ops", "allreduce"]) == 2
    assert "--ops allreduce: unknown allreduce" in capsys.readouterr().err
    assert nccl_tests_main(["--build-dir", "/nowhere", "--sizes", "8B:1000MiB:2"]) == 2
    assert "TO is not FROM x STEP^k" in capsys.readouterr().err
    assert nccl_tests_main(["--build-dir", "/nowhere", "--dtypes", "bf17"]) == 2
    assert "--dtypes bf17 --reductions -: unknown dtype or reduction bf17" in capsys.readouterr().err


def test_as_root_binaries_another_user_can_change_are_not_run(tmp_path, settings, placements):
    """Root runs nccl-tests' binaries: in a build folder another user can write, they choose what root runs."""
    from other_user import need_root, sticky_dir

    need_root()
    build = sticky_dir() / "build"
    try:
        build.mkdir()
        build.chmod(0o777)
        ran = build / "ran"
        (build / "all_reduce_perf").write_text(f"#!/bin/sh\ntouch {ran}\n")
        (build / "all_reduce_perf").chmod(0o755)
        lines = []
        status = nccl_tests.crosscheck_placements(build, placements[:1], ["all_reduce"], SweepSpec(8, 16, 2), settings,
                                                  tmp_path / "x.jsonl", backend="gloo", echo=lines.append)
        assert status == 2 and f"running as root, and {build} is owned by root (uid 0), mode 0777" in lines[0], lines
        assert not ran.exists() and not (tmp_path / "x.jsonl").exists()
    finally:
        subprocess.run(["rm", "-rf", str(build.parent)], check=False)
