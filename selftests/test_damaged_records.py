"""A record survives a bad byte: three invalid bytes in one line of a committed record cost that line, never
the record; so does a line that is not JSON inside a run (NUL bytes a crash left, a line cut mid-file). judge, report and the fleet report name it (file, line, byte), skip it as a torn line is, keep
every other verdict, and say the record is DAMAGED (judge and report exit 12; the fleet's node is DAMAGED)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from e2e import PROJECT, thresholds_with
from wirecheck.cli import fleet as fleet_cli
from wirecheck.cli import report
from wirecheck.cli.judge import main as judge
from wirecheck.core import exit_codes
from wirecheck.records.file import DamagedLine, RecordFileError, read_run
from wirecheck.records.run import COMPLETE, RunWriter

COMMITTED = PROJECT / "fixtures/reference/h200-sxm-2/wirecheck-2026-12-01b/run1.jsonl"
BAD = b"\xff\xfe\xfd"


def damaged_copy(tmp_path: Path, keep=lambda line: True, name: str = "run1.jsonl") -> tuple[Path, int, int]:
    """COMMITTED (its lines `keep` keeps) with BAD inside the message of its 30th verdict: (path, line, byte)."""
    lines = [line for line in COMMITTED.read_bytes().split(b"\n") if line and keep(line)]
    verdicts = [i for i, line in enumerate(lines) if line.startswith(b'{"type": "verdict"')]
    i = verdicts[30]
    at = lines[i].index(b'"message": "') + len(b'"message": "') + 5
    lines[i] = lines[i][:at] + BAD + lines[i][at:]
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, i + 1, sum(len(line) + 1 for line in lines[:i]) + at


def test_the_bad_line_is_named_and_skipped_and_every_other_line_kept(tmp_path):
    path, line, byte = damaged_copy(tmp_path)
    whole, damaged = read_run(COMMITTED), read_run(path)
    assert whole.damaged == () and whole.damage() is None
    assert damaged.damaged == (DamagedLine(line, byte, byte - sum(len(x) + 1 for x in path.read_bytes().split(b"\n")[:line - 1])),)
    assert len(damaged.verdicts) == len(whole.verdicts) - 1 and len(damaged.measurements) == len(whole.measurements)
    assert damaged.end == whole.end and damaged.torn_line is None
    assert f"{path}: 1 line(s) unreadable (line {line}, byte {byte}: not UTF-8 text), skipped" in damaged.damage()


def test_a_damaged_run_header_leaves_nothing_to_read(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(BAD + COMMITTED.read_bytes())
    with pytest.raises(RecordFileError, match=r"r.jsonl:1: the run header is not UTF-8 text \(line 1, byte 0\)"):
        read_run(path)


def test_judge_keeps_every_other_verdict_and_says_damaged(tmp_path, capsys):
    """Before: `not UTF-8 text (byte 19107): not a wirecheck record file`, exit 2, every verdict dropped."""
    path, line, byte = damaged_copy(tmp_path)
    assert judge(["-q", str(path)]) == exit_codes.RECORD_DAMAGED
    out = capsys.readouterr().out
    assert f"wirecheck judge: {path}:{line}: not UTF-8 text (byte {byte} of the file" in out, out
    last = out.splitlines()[-1]
    assert last.startswith(f"wirecheck judge: DAMAGED: {path}: 1 line(s) unreadable (line {line}, byte {byte}: not UTF-8")
    # the whole record judges 140 passed, 8 skipped: the lost line held a pass
    assert last.endswith("every other verdict: 0 failed, 139 passed, 8 skipped; 11 changed since recorded"), last
    # a failure among the lines that were read is still FAILED (exit 1), and the damage is said beside it
    raised = tmp_path / "raised.yaml"
    raised.write_text(thresholds_with(lambda d: d["collectives"]["floors"]["nvswitch"]["all_reduce"][2].update(
        min="900 GB/s")))
    assert judge(["-q", str(path), "--thresholds", str(raised)]) == exit_codes.FAILED
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("wirecheck judge: FAILED: ") and "; and DAMAGED: " in last, last


def test_report_draws_the_rest_and_says_damaged(tmp_path, capsys):
    # the verdicts only (no measurement to draw: the page in a second), those that passed or skipped as recorded
    path, line, byte = damaged_copy(tmp_path, keep=lambda line: not line.startswith(b'{"type": "measurement"')
                                    and b'"outcome": "fail"' not in line)
    page, prom = tmp_path / "r.html", tmp_path / "r.prom"
    assert report.main([str(path), "-o", str(page), "--prometheus", str(prom)]) == exit_codes.RECORD_DAMAGED
    out = capsys.readouterr().out
    assert f"wirecheck report: DAMAGED: {path}: 1 line(s) unreadable (line {line}, byte {byte}: not UTF-8" in out, out
    html = page.read_text()
    assert "DAMAGED RECORD: 1 line(s) unreadable, what they held is unknown" in html, html[:3000]
    assert f"line {line}, byte {byte}" in html and "PASSED" not in html
    assert "wirecheck_record_damaged_lines 1" in prom.read_text()


def test_the_fleet_judges_the_rest_of_a_damaged_node_and_fails_it(tmp_path, capsys):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    lines = COMMITTED.read_text().splitlines(keepends=True)
    for node in ("node01", "node02"):  # each node's own run: its host in the header (one run copied is one)
        (fleet / f"{node}.jsonl").write_text(json.dumps({**json.loads(lines[0]), "host": node}) + "\n" + "".join(lines[1:]))
    path, line, byte = damaged_copy(fleet, name="node03.jsonl")
    out_json = tmp_path / "fleet.json"
    assert fleet_cli.main(["report", str(fleet), "--json", str(out_json)]) == exit_codes.FAILED
    out = capsys.readouterr().out
    row = next(r for r in out.splitlines() if r.startswith("node03 "))
    assert row.split()[1] == "DAMAGED" and "0/139/8" in row, row  # every other verdict judged: one pass is lost
    nodes = {n["node"]: n for n in json.loads(out_json.read_text())["nodes"]}
    assert nodes["node03"]["state"] == "DAMAGED" and nodes["node03"]["damaged_lines"] == [{"line": line, "byte": byte}]
    assert nodes["node03"]["counts"] == {"fail": 0, "pass": 139, "skip": 8}
    assert nodes["node01"]["state"] == "PASS" and nodes["node01"]["damaged_lines"] == []


@pytest.mark.parametrize("bad", [b"\x00" * 200, b'{"type": "verdict", "test": "tests/test_c'], ids=["NUL block", "cut line"])
def test_a_line_that_is_not_json_inside_a_run_costs_that_line(tmp_path, capsys, bad):
    """Before: `FILE:31: not JSON (Expecting value); is this a wirecheck record file?`, exit 2, every verdict lost."""
    lines = COMMITTED.read_bytes().split(b"\n")
    path = tmp_path / "run1.jsonl"
    path.write_bytes(b"\n".join(lines[:30] + [bad] + lines[30:]))
    whole, damaged = read_run(COMMITTED), read_run(path)
    (line,) = damaged.damaged
    assert (line.line, line.byte) == (31, sum(len(x) + 1 for x in lines[:30])) and line.reason.startswith("not JSON (")
    assert damaged.verdicts == whole.verdicts and damaged.end == whole.end and damaged.torn_line is None
    assert judge(["-q", str(path)]) == exit_codes.RECORD_DAMAGED
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"wirecheck judge: DAMAGED: {path}: 1 line(s) "
                                                              "unreadable (line 31, byte")
    # before any run header, the file is no record (or one whose header is lost): refused, naming it
    path.write_bytes(b"\n".join([bad] + lines[1:]))
    with pytest.raises(RecordFileError, match=r"run1.jsonl(:1: not JSON|: NUL bytes from its first byte)"):
        read_run(path)


def test_a_record_the_disk_lost_is_named_and_a_fleet_counts_it_a_broken_node(tmp_path, capsys):
    """Zeros from the first byte (a crash before the blocks were written back): named, and in a fleet one broken
    node, as an empty record is, never a reason to refuse the whole fleet's report."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    shutil.copy(COMMITTED, fleet / "node01.jsonl")
    (fleet / "node02.jsonl").write_bytes(b"\x00" * 4096)
    with pytest.raises(RecordFileError, match="NUL bytes from its first byte: the disk lost this record"):
        read_run(fleet / "node02.jsonl")
    assert fleet_cli.main(["report", str(fleet)]) == exit_codes.FAILED
    rows = {r.split()[0]: r.split()[1] for r in capsys.readouterr().out.splitlines() if r.startswith("node0")}
    assert rows == {"node01": "complete", "node02": "BROKEN"}


def test_a_run_appended_after_a_cut_line_starts_on_its_own(tmp_path):
    """A run killed mid-line leaves no newline: the next run's header would join that line, and the whole run
    after it would be unreadable. The writer starts its run on a line of its own."""
    lines = COMMITTED.read_bytes().split(b"\n")
    path = tmp_path / "nightly.jsonl"
    path.write_bytes(b"\n".join(lines[:10]) + b"\n" + lines[10][:30])
    writer = RunWriter(path)
    writer.header({"simulated": True, "gpus": [], "placements": []})
    writer.end(COMPLETE, 0)
    writer.close()
    run = read_run(path)
    assert run.earlier_runs == 1 and run.end["exit_status"] == 0 and run.damaged == ()
