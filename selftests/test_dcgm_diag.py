"""DCGM's diagnostics in the record: `dcgmi diag -j` outputs of two levels (r2 and r3, written from DCGM's own
schema and sources: each sample says which) read into one verdict per test and GPU (Pass passes, Warn warns,
Fail fails, Skip and Not Run are said), with DCGM's error ids, messages and measured values; `wirecheck dcgm`
writes them as a record that node-state, judge and the drain rules read like the suite's own; dcgmi run where it
is installed (a stand-in here), and `--dcgm` in the suite.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import json_schema
from e2e import make_project, records, run_suite
from wirecheck.checks import dcgm as dcgm_check
from wirecheck.cli.main import main
from wirecheck.core import exit_codes
from wirecheck.node import dcgm
from wirecheck.records import drain_policy
from wirecheck.records.file import read_run

DATA = Path(__file__).parent / "data" / "dcgm"
R2, R3, BROKE = DATA / "dcgm-diag-r2.json", DATA / "dcgm-diag-r3.json", DATA / "dcgm-diag-runtime-error.json"
RECORD = Path(__file__).parents[1] / "fixtures" / "reference" / "h200-sxm-2" / "wirecheck-2026-12-01" / "run1.jsonl"
GPUS = [{"index": 0, "serial": "1655123400011", "bus_id": "00000000:19:00.0", "uuid": "GPU-aaaa-0"},
        {"index": 1, "serial": "1655123400012", "bus_id": "00000000:3B:00.0", "uuid": "GPU-aaaa-1"}]


@pytest.mark.parametrize("path", [R2, R3, BROKE], ids=["r2", "r3", "runtime-error"])
def test_the_samples_follow_dcgms_schema(path):
    doc, _ = dcgm.load(path)
    assert json_schema.problems(json_schema.load("dcgm-diag.schema.json"), doc) == []


def test_the_schema_check_is_not_vacuous():
    doc, _ = dcgm.load(R2)
    result = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]
    del result["status"]
    assert json_schema.problems(json_schema.load("dcgm-diag.schema.json"), doc)


def _by(verdicts):
    return {(v.inputs["test"], v.where): v for v in verdicts}


def test_level_2_pass_warn_fail_with_error_ids_and_measured_values():
    _, diag = dcgm.load(R2)
    assert (diag.version, diag.driver) == ("4.6.0", "580.95.05")
    verdicts = _by(dcgm_check.judge(diag, GPUS))
    assert {k: v.outcome for k, v in verdicts.items()} == {
        ("software", "GPU0"): "pass", ("software", "GPU1"): "pass", ("memory", "GPU0"): "pass",
        ("memory", "GPU1"): "fail", ("pcie", "GPU0"): "pass", ("pcie", "GPU1"): "warn"}
    memory = verdicts[("memory", "GPU1")]
    assert memory.code == "WC9011" and memory.details["dcgm_error_ids"] == [58] and memory.details["gpus"] == [1]
    assert "A memory mismatch was detected on GPU 1" in memory.message and "DCGM error id 58" in memory.message
    assert memory.place == "GPU1 (00000000:3B:00.0, serial 1655123400012)" and memory.details["component"] == "MEMORY"
    pcie = verdicts[("pcie", "GPU1")]
    assert pcie.code == "WC9012" and pcie.inputs["measured"]["GPU to Host bandwidth"] == {"value": 54.8, "unit": "GB/s"}
    assert "DCGM measured GPU to Host bandwidth 54.8 GB/s" in pcie.message and pcie.details["component"] == "PCIE"
    assert verdicts[("pcie", "GPU0")].ok and "Host to GPU bandwidth 55.31 GB/s" in verdicts[("pcie", "GPU0")].note


def test_level_3_skips_said_and_an_uncorrectable_memory_fault_replaces_the_gpu():
    _, diag = dcgm.load(R3)
    verdicts = _by(dcgm_check.judge(diag, GPUS))
    assert len(verdicts) == 14
    skipped = verdicts[("targeted_power", "GPU0")]
    assert skipped.outcome == "skip" and "DCGM Skip: The targeted_power test is skipped. (DCGM error id 48" in skipped.message
    assert verdicts[("targeted_stress", "GPU0")].outcome == "warn"
    dbe = verdicts[("diagnostic", "GPU1")]
    assert dbe.outcome == "fail" and dbe.details["hard_memory"] and "DCGM_FR_VOLATILE_DBE_DETECTED" in dbe.message
    records_ = [{**v.as_record()} for v in verdicts.values()]
    assert drain_policy.hard_memory_failure(records_) == "dcgm_diag DCGM diagnostic on GPU1"
    header = {"gpus": dcgm.header_gpus(diag, GPUS)}
    assert drain_policy.failed_gpus(records_, header) == ["1655123400012"]
    escalation = drain_policy.escalate([], ["1655123400012"], records_, 0.0, drain_policy.Policy())
    assert escalation.replace == ["1655123400012"]


@pytest.mark.parametrize(("status", "outcome"), [("Pass", "pass"), ("Warn", "warn"), ("Fail", "fail"),
                                                 ("Skip", "skip"), ("Not Run", "skip"), ("PASS", "pass"),
                                                 ("FAIL", "fail"), ("not run", "skip"), ("Bogus", "fail")])
def test_each_dcgm_status(status, outcome):
    """Each version's spelling (DCGM 3.x writes PASS, FAIL); a status wirecheck cannot read fails, saying so: a
    skip would let the node pass on a test DCGM did not pass."""
    v = dcgm_check.dcgm_diag(None, test="memory", category="Hardware", gpu=0, status=status, warnings=[])
    assert v.outcome == outcome
    if status.lower() == "not run":
        assert "DCGM did not run it" in v.message
    if status == "Bogus":
        assert "DCGM status 'Bogus' is none of Pass, Skip, Warn, Fail, Not Run: read as a failure" in v.message


def test_a_broken_dcgm_run_is_no_verdict_on_the_node(tmp_path, capsys):
    _, diag = dcgm.load(BROKE)
    (only,) = dcgm_check.judge(diag)
    assert only.outcome == "skip" and "nv-hostengine" in only.message and only.check == "dcgm_diag"
    out = tmp_path / "broke.jsonl"
    assert main(["dcgm", str(BROKE), "-o", str(out)]) == exit_codes.OK
    capsys.readouterr()
    assert main(["node-state", "--exit-code", "0", "--record", str(out)]) == 2  # no verdict: never healthy
    assert "no verdict" in capsys.readouterr().out
    main(["judge", str(out)])
    assert "does not have" not in capsys.readouterr().err  # judged as the check it is, not as a damaged line


def test_a_dcgm_run_is_the_node_of_its_record_and_another_nodes_is_refused(tmp_path, capsys):
    """--record names the node DCGM ran on: its host and GPUs go into the record; a DCGM run whose GPU serials are
    none of the record's ran elsewhere, and matching by index would put its failures on other GPUs."""
    record = tmp_path / "node17.jsonl"
    lines = RECORD.read_text().splitlines()
    header = json.loads(lines[0])
    header["host"], header["gpus"] = "gpu-node-17", [{**g, **GPUS[g["index"]]} for g in header["gpus"]]
    record.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    out = tmp_path / "dcgm.jsonl"
    assert main(["dcgm", str(R2), "--record", str(record), "-o", str(out)]) == exit_codes.FAILED
    assert read_run(out).run["host"] == "gpu-node-17"
    header["gpus"] = [{**g, "serial": f"99{g['index']}"} for g in header["gpus"]]
    record.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    capsys.readouterr()
    assert main(["dcgm", str(R2), "--record", str(record), "-o", str(tmp_path / "other.jsonl")]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert "DCGM's GPU serial(s) 1655123400011, 1655123400012 are none of --record" in err and "(serials 990, 991)" in err
    assert not (tmp_path / "other.jsonl").exists()
    # a record of a run on GPU1 alone (CUDA_VISIBLE_DEVICES=1) is the same node: DCGM's GPU0 is one it did not run on
    header["gpus"] = [{**g, **GPUS[1]} for g in header["gpus"][:1]]
    record.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    part = tmp_path / "part.jsonl"
    assert main(["dcgm", str(R2), "--record", str(record), "-o", str(part)]) == exit_codes.FAILED
    named = {g["index"]: g["bus_id"] for g in read_run(part).run["gpus"]}
    assert named == {0: None, 1: GPUS[1]["bus_id"]}  # never GPU1's bus id on DCGM's GPU0


@pytest.mark.parametrize("text", ["", "not json", '{"x": 1}', '{"DCGM Diagnostic": {"test_categories": [{"tests": 3}]}}',
                                  '{"DCGM Diagnostic": {}}'])
def test_bad_input_is_named(tmp_path, text, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(dcgm.DcgmError, match=str(bad)):
        dcgm.load(bad)
    assert main(["dcgm", str(bad), "-o", str(tmp_path / "out.jsonl")]) == exit_codes.BAD_INPUT
    assert str(bad) in capsys.readouterr().err and not (tmp_path / "out.jsonl").exists()


def test_dcgm_3s_layout_is_named_with_the_fix(tmp_path, capsys):
    old = tmp_path / "dcgm3.json"
    old.write_text(json.dumps({"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "Memory", "results": [{"gpu_ids": "1", "status": "FAIL"}]}]}]}}))
    assert main(["dcgm", str(old), "-o", str(tmp_path / "out.jsonl")]) == exit_codes.BAD_INPUT
    assert "DCGM 3's layout" in capsys.readouterr().err and "with DCGM 4 or later" in str(
        pytest.raises(dcgm.DcgmError, dcgm.load, old).value)


def test_a_binary_file_is_named_never_a_traceback(tmp_path, capsys):
    """A crash would exit 1, which for this command says a DCGM test failed."""
    binary = tmp_path / "dcgm.json"
    binary.write_bytes(b"{\xff\xfe}")
    assert main(["dcgm", str(binary), "-o", str(tmp_path / "out.jsonl")]) == exit_codes.BAD_INPUT
    assert f"{binary}: not UTF-8 text (byte 1): not `dcgmi diag -r LEVEL -j` output" in capsys.readouterr().err


def test_out_onto_a_validation_record_is_refused(tmp_path, capsys):
    """-o onto the --record it reads, or any validation record, would hide that run's verdicts from judge, report
    and node-state, which read a file's last run; a file of dcgm runs takes more."""
    validation = tmp_path / "run.jsonl"
    validation.write_bytes(RECORD.read_bytes())
    for args in (["--record", str(validation)], []):
        assert main(["dcgm", str(R2), *args, "-o", str(validation)]) == exit_codes.BAD_INPUT
        assert "pass a new path" in capsys.readouterr().err
        assert validation.read_bytes() == RECORD.read_bytes()
    out = tmp_path / "dcgm.jsonl"
    assert main(["dcgm", str(R2), "-o", str(out)]) == main(["dcgm", str(R2), "-o", str(out)]) == exit_codes.FAILED
    assert read_run(out).earlier_runs == 1


def test_the_command_writes_a_record_node_state_drains_and_judge_reads(tmp_path, capsys):
    out = tmp_path / "dcgm.jsonl"
    assert main(["dcgm", str(R2), "-o", str(out)]) == exit_codes.FAILED
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith("FAIL  WC9011  DCGM memory on GPU1")
    run = read_run(out)
    assert run.run["versions"]["dcgm"] == "4.6.0" and run.run["kind"] == "dcgm"
    assert [v["code"] for v in run.verdicts if v["outcome"] != "pass"] == ["WC9011", "WC9012"]
    assert main(["node-state", "--exit-code", "1", "--record", str(out)]) == 1
    assert capsys.readouterr().out.startswith("wirecheck: dcgm_diag GPU1 A memory mismatch")
    assert main(["judge", str(out), "-q"]) == exit_codes.FAILED
    capsys.readouterr()
    assert main(["dcgm", str(R3), "-o", str(tmp_path / "r3.jsonl")]) == exit_codes.FAILED


def _fake_dcgmi(tmp_path: Path, sample: Path, code: int = 1, sleep: float = 0) -> Path:
    tool = tmp_path / "dcgmi"
    tool.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'dcgmi  version: 4.6.0'; exit 0; fi\n"
                    f"sleep {sleep}\necho \"Successfully ran diagnostic for group.\"\ncat '{sample}'\nexit {code}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_dcgmi_is_run_timed_and_read_whatever_its_exit_status(tmp_path):
    tool = _fake_dcgmi(tmp_path, R2)
    assert dcgm.version(str(tool)) == "4.6.0"
    ran = dcgm.run(str(tool), 2)
    assert ran.argv[1:] == ["diag", "-r", "2", "-j"] and ran.returncode == 1 and ran.seconds >= 0
    assert ran.error is None and len(ran.run.results) == 6
    slow = dcgm.run(str(_fake_dcgmi(tmp_path, R2, sleep=5)), 2, timeout_s=0.5)
    assert slow.run is None and "did not finish within 0.5 s" in slow.error
    empty = tmp_path / "empty"
    empty.write_text("nothing here\n")
    broken = dcgm.run(str(_fake_dcgmi(tmp_path, empty)), 1)
    assert broken.run is None and "no JSON object" in broken.error


@pytest.mark.parametrize(("given", "level"), [("r2", 2), ("R4", 4), ("3", 3)])
def test_levels(given, level):
    assert dcgm.level(given) == level
    with pytest.raises(ValueError, match="--dcgm r9: give a DCGM diagnostics level"):
        dcgm.level("r9")


def test_the_suite_takes_dcgm_as_an_option(pytester):
    """In simulation the test skips saying why, and the header says DCGM was asked; a bad level is a usage error."""
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--dcgm", "r2", "-rs", "--wirecheck-json=run.jsonl",
                       "tests/test_dcgm.py")
    assert result.ret == exit_codes.SIMULATED, result.stdout.str()
    result.stdout.fnmatch_lines(["*simulation: DCGM's diagnostics need the node's GPUs*"])
    header = records(pytester.path / "run.jsonl")[0]
    assert header["dcgm"] == {"level": "r2", "dcgmi": None, "version": None, "absent": "simulation: no DCGM"}
    bad = run_suite(pytester, "--simulate=h200-sxm-2", "--dcgm", "r9", "tests/test_dcgm.py")
    assert bad.ret == exit_codes.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--dcgm r9: give a DCGM diagnostics level*"])


def test_a_thresholds_file_that_cannot_be_read_is_refused(tmp_path, capsys):
    """The record names it as the file its verdicts are judged against: a broken one was kept silently."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("collectives: 3\n")
    out = tmp_path / "out.jsonl"
    assert main(["dcgm", str(R2), "--thresholds", str(bad), "-o", str(out)]) == exit_codes.BAD_INPUT
    assert str(bad) in capsys.readouterr().err and not out.exists()
