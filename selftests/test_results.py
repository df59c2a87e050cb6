"""Record files read back: runs append, the last one counts, a torn line ends only a run."""

from __future__ import annotations

import json

import pytest

from wirecheck.records.file import SCHEMA, RecordFileError, read_run


def _run(started: str, verdicts: int, end: bool = True) -> list[str]:
    lines = [{"type": "run", "schema": SCHEMA, "started": started}]
    lines += [{"type": "verdict", "check": "busbw", "outcome": "pass"}] * verdicts
    if end:
        lines.append({"type": "end", "status": "complete"})
    return [json.dumps(x) for x in lines]


def test_the_last_run_of_a_file_is_read(tmp_path):
    path = tmp_path / "night.jsonl"
    path.write_text("\n".join(_run("first", 3) + _run("second", 2)) + "\n")
    run = read_run(path)
    assert run.run["started"] == "second" and len(run.verdicts) == 2 and run.complete and run.earlier_runs == 1


def test_a_run_killed_mid_line_then_a_new_run(tmp_path):
    path = tmp_path / "night.jsonl"
    path.write_text("\n".join(_run("killed", 1, end=False) + ['{"type": "verd'] + _run("again", 1)) + "\n")
    run = read_run(path)
    assert run.run["started"] == "again" and run.earlier_runs == 1


def test_a_torn_line_at_the_end_is_dropped_and_one_inside_a_run_is_damage(tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(_run("cut", 1, end=False) + ['{"type": "verd']) + "\n")
    assert read_run(cut).end is None and read_run(cut).damaged == ()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(_run("x", 1, end=False) + ["not json"] + ['{"type": "end", "status": "complete"}']) + "\n")
    run = read_run(broken)  # the line is lost, named; the run's end is still read
    assert [(d.line, d.reason.split(" (")[0]) for d in run.damaged] == [(3, "not JSON")] and run.end is not None
    no_header = tmp_path / "no-header.jsonl"
    no_header.write_text('not json\n{"type": "end", "status": "complete"}\n')
    with pytest.raises(RecordFileError, match=r"no-header.jsonl:1: not JSON"):
        read_run(no_header)
