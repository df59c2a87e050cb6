"""nvbandwidth beside the suite's copies: its `-j` output (a sample written from nvbandwidth's json_output.cpp,
checked against a schema made from it) read into matrices, set beside a real 2x H200 SXM run's host and peer
copies with the ratio; the binary run where it is installed (a stand-in here), and said where it is not.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

import json_schema
from wirecheck.cli.main import main
from wirecheck.core import exit_codes
from wirecheck.measure import copy_crosscheck
from wirecheck.node import nvbandwidth as nvb
from wirecheck.records.file import read_run

SAMPLE = Path(__file__).parent / "data" / "nvbandwidth" / "nvbandwidth-h200-sxm-2.json"
RECORD = Path(__file__).parents[1] / "fixtures" / "reference" / "h200-sxm-2" / "wirecheck-2026-12-01" / "run1.jsonl"
SCHEMA = json_schema.load("nvbandwidth.schema.json")


def _doc() -> dict:
    text = SAMPLE.read_text()
    return json.loads(text[text.index("{"):])


def test_the_sample_follows_nvbandwidths_own_format():
    assert json_schema.problems(SCHEMA, _doc()) == []
    broken = _doc()
    broken["nvbandwidth"]["testcases"][0]["bandwidth_matrix"] = [[55.61, 55.58]]  # numbers: nvbandwidth writes strings
    assert json_schema.problems(SCHEMA, broken)


def test_matrices_devices_and_na():
    reading = nvb.load(SAMPLE)
    assert reading.version == "v0.8" and reading.driver == "580.159.04"
    assert reading.devices == [{"ordinal": 0, "name": "NVIDIA H200", "bus_id": "00000000:00:06"},
                               {"ordinal": 1, "name": "NVIDIA H200", "bus_id": "00000000:00:07"}]
    assert reading.testcases[nvb.PEER].matrix == [[None, 389.2], [389.4, None]]
    assert len(reading.testcases["device_to_device_bidirectional_memcpy_read_ce"].matrix) == 6  # three appended


def _suite() -> tuple[dict, list[dict]]:
    run = read_run(RECORD)
    (copies,) = [m for m in run.measurements if m["kind"] == "copy_bandwidth"]
    return copies["details"], run.run["gpus"]


def test_beside_a_real_runs_copies():
    suite, gpus = _suite()
    rows = copy_crosscheck.side_by_side(suite, nvb.load(SAMPLE), gpus)
    assert [(r["copy"], r["gpu"], r["peer"]) for r in rows] == [("h2d", 0, None), ("d2h", 0, None), ("h2d", 1, None),
                                                               ("d2h", 1, None), ("peer", 0, 1), ("peer", 1, 0)]
    peer = rows[4]
    assert peer["nvbandwidth_GBps"] == 389.2 and peer["suite_GBps"] == pytest.approx(394.4, abs=0.1)
    assert peer["ratio"] == pytest.approx(394.4 / 389.2, rel=1e-3)
    text = copy_crosscheck.format_side_by_side(rows, nvb.load(SAMPLE))
    assert "# 6 of 6 copies within 5 % of nvbandwidth or better" in text and " <  " not in text
    slow = {**suite, "peer": [{**p, "bytes_per_s": p["bytes_per_s"] * 0.5} for p in suite["peer"]]}
    text = copy_crosscheck.format_side_by_side(copy_crosscheck.side_by_side(slow, nvb.load(SAMPLE), gpus), nvb.load(SAMPLE))
    assert "# 4 of 6 copies within 5 %" in text and text.count(" <  device_to_device_memcpy_write_ce") == 2


def test_gpus_are_matched_by_bus_id_and_a_missing_testcase_is_said():
    suite, gpus = _suite()
    reading = nvb.load(SAMPLE)
    reading.devices = [{"ordinal": 0, "name": "x", "bus_id": "00000000:00:07"}, {"ordinal": 1, "name": "x", "bus_id": "00000000:00:06"}]
    assert copy_crosscheck.ordinals(reading, gpus) == {0: 1, 1: 0}
    reading.testcases[nvb.D2H].status = "Waived"
    del reading.testcases[nvb.H2D]
    rows = copy_crosscheck.side_by_side(suite, reading, gpus)
    assert {r["note"] for r in rows if r["copy"] in ("h2d", "d2h")} == {"not run", "waived"}
    assert all(r["ratio"] is None for r in rows if r["copy"] != "peer")


def test_another_nodes_gpus_are_refused_never_matched_by_number(tmp_path, capsys):
    """By number, another node's nvbandwidth would stand beside this record's copies with ratios near 1."""
    doc = _doc()
    doc["nvbandwidth"]["GPU Device list"] = ["0: NVIDIA H200 (00000000:9A:00): (other)",
                                             "1: NVIDIA H200 (00000000:1B:00): (other)"]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    assert main(["nvbandwidth", "--json", str(other), "--record", str(RECORD)]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert "is one of nvbandwidth's" in err and "nvbandwidth ran on another node" in err
    # nvbandwidth on fewer GPUs than the suite's (its own CUDA_VISIBLE_DEVICES): the GPU it did not see is said
    doc["nvbandwidth"]["GPU Device list"] = ["0: NVIDIA H200 (00000000:00:06): (vm)"]
    other.write_text(json.dumps(doc))
    assert main(["nvbandwidth", "--json", str(other), "--record", str(RECORD)]) == exit_codes.OK
    assert "a GPU nvbandwidth did not run on" in capsys.readouterr().out


@pytest.mark.parametrize(("cell", "said"), [("nan", "'nan' is no bandwidth"), (float("inf"), "inf is no bandwidth"),
                                            (-5, "-5 is no bandwidth"), ({"x": 1}, '{"x": 1} is neither a number nor text')])
def test_a_cell_that_is_no_bandwidth_is_named(tmp_path, capsys, cell, said):
    """NaN would pass as "within 5 %" (no comparison with NaN is below the band), a negative figure as slow."""
    doc = _doc()
    doc["nvbandwidth"]["testcases"][0]["bandwidth_matrix"][0][0] = cell
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["nvbandwidth", "--json", str(bad), "--record", str(RECORD)]) == exit_codes.BAD_INPUT
    assert f"testcases[0] ({doc['nvbandwidth']['testcases'][0]['name']}): bandwidth_matrix[0][0]: {said}" in \
        capsys.readouterr().err


def test_a_cut_file_names_its_own_line(tmp_path, capsys):
    """Lines before the JSON (nvbandwidth's own) count: the line said is the file's, as an editor shows it."""
    half = SAMPLE.read_text()[:len(SAMPLE.read_text()) // 2]
    lines = []
    for before in ("", "a line of its own\nand another\n"):
        cut = tmp_path / "cut.json"
        cut.write_text(before + half)
        assert main(["nvbandwidth", "--json", str(cut), "--record", str(RECORD)]) == exit_codes.BAD_INPUT
        lines.append(int(capsys.readouterr().err.rsplit("line ", 1)[1].split(")")[0]))
    assert lines[1] == lines[0] + 2 and lines[0] > half[:half.index("{")].count("\n") + 1


def _fake(tmp_path: Path, body: str) -> Path:
    tool = tmp_path / "nvbandwidth"
    tool.write_text(f"#!/bin/sh\necho \"CUDA_DEVICE_ORDER=$CUDA_DEVICE_ORDER $*\" >&2\ncat <<'JSON'\n{body}\nJSON\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_the_command(tmp_path, capsys, monkeypatch):
    out = tmp_path / "nvb.jsonl"
    assert main(["nvbandwidth", "--json", str(SAMPLE), "--record", str(RECORD), "--out", str(out)]) == exit_codes.OK
    assert "peer    0     1    394.40       389.20   1.013" in capsys.readouterr().out
    (m,) = read_run(out).measurements
    assert m["kind"] == "nvbandwidth" and len(m["details"]["rows"]) == 6
    # run where present: the stand-in is given NVML's device order and the copy-engine testcases
    tool = _fake(tmp_path, json.dumps(_doc()))
    reading, error, _ = nvb.run(str(tool))
    assert error is None and reading.source.endswith(f"-j -t {' '.join(nvb.COMPARED)}")
    assert main(["nvbandwidth", "--binary", str(tool), "--record", str(RECORD)]) == exit_codes.OK
    capsys.readouterr()
    # not installed: said, never a traceback
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["nvbandwidth", "--record", str(RECORD)]) == exit_codes.BAD_INPUT
    assert "nvbandwidth is not installed (not on PATH)" in capsys.readouterr().err


def test_an_error_of_nvbandwidth_and_bad_input(tmp_path, capsys):
    doc = _doc()
    doc["nvbandwidth"]["testcases"][2] = {"name": nvb.PEER, "status": "Error", "error": "data verification failed"}
    assert main(["nvbandwidth", "--binary", str(_fake(tmp_path, json.dumps(doc))), "--record", str(RECORD)]) == exit_codes.FAILED
    assert "data verification failed" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    assert main(["nvbandwidth", "--json", str(bad), "--record", str(RECORD)]) == exit_codes.BAD_INPUT
    assert f"{bad}: no \"nvbandwidth\" object" in capsys.readouterr().err
    no_copies = Path(__file__).parent / "data" / "sim-h200-sxm-2.jsonl"
    assert main(["nvbandwidth", "--json", str(SAMPLE), "--record", str(no_copies)]) == exit_codes.BAD_INPUT
    assert "holds no copy figures" in capsys.readouterr().err
    # a binary file, a --binary that is not there, and bad input with --out: named, exit 2, no record written
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    assert main(["nvbandwidth", "--json", str(binary), "--record", str(RECORD)]) == exit_codes.BAD_INPUT
    assert f"{binary}: not UTF-8 text (byte 0): not `nvbandwidth -j` output" in capsys.readouterr().err
    assert main(["nvbandwidth", "--binary", str(tmp_path / "nowhere"), "--record", str(RECORD)]) == exit_codes.BAD_INPUT
    assert "--binary" in capsys.readouterr().err
    out = tmp_path / "kept.jsonl"
    assert main(["nvbandwidth", "--json", str(SAMPLE), "--record", str(no_copies), "--out", str(out)]) == 2
    assert not out.exists(), "bad input and nothing measured here: no record"


def test_out_never_hides_the_run_it_reads(tmp_path, capsys):
    """Runs append and every reader takes a file's last run: --out onto the --record it reads (or onto any
    validation record) would make judge, report and the drain hooks read nvbandwidth's figures instead of the
    validation's verdicts. Refused before nvbandwidth runs; a file of nvbandwidth runs takes more."""
    record = tmp_path / "run.jsonl"
    record.write_bytes(RECORD.read_bytes())
    for out in (record, tmp_path / "other-validation.jsonl"):
        if out != record:
            out.write_bytes(RECORD.read_bytes())
        assert main(["nvbandwidth", "--json", str(SAMPLE), "--record", str(record), "--out", str(out)]) == 2
        assert "pass a new path" in capsys.readouterr().err
        assert out.read_bytes() == RECORD.read_bytes()
    out = tmp_path / "nvb.jsonl"
    for _ in range(2):
        assert main(["nvbandwidth", "--json", str(SAMPLE), "--record", str(record), "--out", str(out)]) == 0
    assert read_run(out).earlier_runs == 1
    assert main(["judge", str(out)]) == exit_codes.BAD_INPUT  # figures, no check: never PASSED
    assert "holds no verdict (a `wirecheck nvbandwidth` run: figures, no check)" in capsys.readouterr().err


def test_a_thresholds_file_that_cannot_be_read_is_refused(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("collectives: 3\n")
    assert main(["nvbandwidth", "--json", str(SAMPLE), "--record", str(RECORD), "--thresholds", str(bad)]) == 2
    assert f"--thresholds: {bad}" in capsys.readouterr().err
