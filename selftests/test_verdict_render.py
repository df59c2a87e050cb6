"""One renderer writes every face of a verdict from its structure: reword it once and every face changes.

The faces: the verdict's message (recorded, asserted), the failure block and its short summary line, judge's
lines, the report's cells, the drain reason a scheduler keeps (Slurm's Reason, the Kubernetes condition),
and the Prometheus exposition. Nothing reads a message back to find its parts (the grep below).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wirecheck.checks import gpu_health, network
from wirecheck.checks.failure_block import reason as summary_line
from wirecheck.checks.failure_block import render as block
from wirecheck.cli.judge import main as judge_main
from wirecheck.core import render
from wirecheck.core.verdict import FAIL, OUTCOMES, PASS, WARN, Verdict
from wirecheck.records import reason
from wirecheck.records.file import RecordFile, read_run
from wirecheck.report import prometheus
from wirecheck.report.model import view_of
from wirecheck.report.sections import verdict_section
from wirecheck.thresholds.file import load_thresholds

PROJECT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(PROJECT / "thresholds.yaml")


def _power(thresholds, peak_w: float) -> Verdict:
    """sustained_power as the pytest plugin records it: the check's own verdict, named and with its inputs."""
    return gpu_health.sustained_power(thresholds, gpu=0, bus_id="00000000:19:00.0", peak_w=peak_w, limit_w=700.0,
                                      default_limit_w=700.0, samples=40, simulated=False)


def _record(tmp_path: Path, *verdicts: Verdict) -> Path:
    f = RecordFile(tmp_path / "run.jsonl")
    f.header({"simulated": False, "gpus": [{"index": 0}], "placements": []})
    for v in verdicts:
        f.verdict(v, "tests/test_gpu_health.py::test_sustained_power[GPU0]")
    f.end({"status": "complete", "tests": {"failed": sum(v.outcome == FAIL for v in verdicts)}})
    f.close()
    return f.path


def faces(tmp_path: Path, verdict: Verdict, capsys) -> dict[str, str]:
    """Every text the suite shows of `verdict`, each from the face that shows it (the record between)."""
    path = _record(tmp_path, verdict)
    judge_main([str(path), "--thresholds", str(PROJECT / "thresholds.yaml")])
    judged = capsys.readouterr().out
    view = view_of(path)
    return {
        "message": verdict.message,
        "block": "\n".join(block(verdict)),
        "summary": summary_line(verdict),
        "judge": next(line for line in judged.splitlines() if verdict.check in line) + judged,
        "report": verdict_section(view).html(),
        "drain": reason.verdict_reason(view.verdicts[0]),
    }


def test_a_verdict_keeps_its_checks_format_on_every_face(shipped, tmp_path, capsys):
    v = _power(shipped, 300.0)
    assert v.outcome == FAIL and (v.fmt, v.bound, v.unit) == ("percent", "floor", "of the power limit")
    shown = faces(tmp_path, v, capsys)
    # the share as the check writes it (42.9 %), never the bare fraction (0.4286) it is recorded as
    for face, text in shown.items():
        assert "42.9" in text and "75 % of the power limit" in text and "0.4286" not in text, (face, text)
    assert "measured  42.9 % of the power limit" in shown["block"]
    assert "limit     >= 75 % of the power limit" in shown["block"]
    assert shown["summary"] == "sustained_power 42.9 < 75 % of the power limit"
    assert shown["drain"] == "sustained_power GPU0 42.9 < 75 % of the power limit"
    assert "measured 42.9 % of the power limit; limit >= 75 % of the power limit" in shown["judge"]
    # a pass is a pass on every face too
    ok = _power(shipped, 690.0)
    assert ok.outcome == PASS and "measured 98.6 % >= 75 % of the power limit" in ok.message


def test_rewording_once_changes_every_face_together(shipped, tmp_path, capsys, monkeypatch):
    before = faces(tmp_path / "before", _power(shipped, 300.0), capsys)
    # one template and one format, changed in the one place they are written
    monkeypatch.setitem(render.FORMATS, "percent", lambda f: f"{f * 100:.0f} percent")
    monkeypatch.setitem(render.RELATIONS["floor"], "fail", "only {m} where {b}{q} is the floor")
    monkeypatch.setitem(render.SHORT["floor"], "fail", "{m} short of {b}{q}")
    after = faces(tmp_path / "after", _power(shipped, 300.0), capsys)
    for face in before:
        assert after[face] != before[face], face
        assert "75 percent of the power limit" in after[face] and "42.9" not in after[face], (face, after[face])
    assert "only 43 percent where 75 percent of the power limit is the floor" in after["message"]
    assert after["summary"] == "sustained_power 43 short of 75 percent of the power limit"
    assert after["drain"] == "sustained_power GPU0 43 short of 75 percent of the power limit"
    assert "limit     >= 75 percent of the power limit" in after["block"]


def test_the_structure_survives_the_record_and_old_records_still_read(shipped, tmp_path):
    v = _power(shipped, 300.0)
    again = Verdict.from_record({**v.as_record(), "a_field_of_a_later_version": 1})
    assert again == v and render.message(again) == v.message and render.bound_text(again) == render.bound_text(v)
    # a record written before the structure: no fmt, bound, place, note or hint; its figures read plainly
    old = {"check": "busbw", "what": "all_reduce busbw at 1 GiB", "where": "pair-0.1", "outcome": "fail",
           "message": "all_reduce busbw at 1 GiB on pair-0.1: measured 12.3 GB/s < floor 360.0 GB/s (...)",
           "measured": 12.34, "unit": "GB/s", "limit": {"min": 360.0, "max": None}, "source": "measured",
           "yaml_path": "thresholds.yaml: collectives.floors.nvswitch.all_reduce.2", "inputs": {}, "details": {}}
    loaded = Verdict.from_record(old)
    assert loaded.message == old["message"] and loaded.bound == "floor"  # kept as recorded; its bound from its limit
    assert reason.verdict_reason(old) == "busbw pair-0.1 12.34 < 360 GB/s"
    assert render.bound_text(loaded) == ">= 360 GB/s" and render.measured_text(loaded) == "12.34 GB/s"


def test_a_warning_passes_is_counted_apart_and_never_drains(tmp_path, capsys):
    shipped = load_thresholds(PROJECT / "thresholds.yaml")
    warned = network.gpu_nic_affinity(shipped, gpu=1, paths={"mlx5_0": "NODE"}, source="topo.txt")
    assert warned.outcome == WARN and warned.ok and WARN in OUTCOMES
    assert "crosses the host bridge or the CPU interconnect" in warned.message
    passed = network.gpu_nic_affinity(shipped, gpu=0, paths={"mlx5_0": "PIX"}, source="topo.txt")
    assert passed.outcome == PASS
    path = _record(tmp_path, warned, passed)
    assert judge_main([str(path), "--thresholds", str(PROJECT / "thresholds.yaml"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "WARN gpu_nic_affinity" in out and "1 warned" in out and "PASSED" in out
    view = view_of(path)
    assert view.verdict_counts[WARN] == 1
    page = verdict_section(view).html()
    assert "Warnings" in page and "crosses the host bridge" in page
    text = prometheus.exposition(view)
    assert 'wirecheck_verdicts{outcome="warn"} 1' in text and "(pass, warn, fail, skip)" in text
    assert reason.failure_line(read_run(path), 80) is None  # nothing failed: no drain reason


def test_a_fleet_figure_is_named_and_shown_from_structure(shipped):
    """What a fleet page needs of a verdict (the figure's name, the measured value and the bound as text)."""
    from wirecheck.checks import fleet
    peers = {f"n{k}": 270.0 + k for k in range(6)}
    v = fleet.fleet_outlier(shipped, node="n9", figure="all_reduce busbw on nvswitch-2gpu-0.1 at 1 GiB", kind="busbw",
                            value=200.0, peers=peers, unit="GB/s", simulated=False)
    assert v.outcome == FAIL and render.figure_name(v) == "all_reduce busbw on nvswitch-2gpu-0.1 at 1 GiB"
    assert render.measured_text(v) == "200.0 GB/s"
    assert render.bound_text(v).startswith("at most ") and "below the peers' median 272.5 GB/s" in render.bound_text(v)
    assert "200.0 GB/s is 26.6 % below the median 272.5 GB/s of 6 other node(s): more than the" in v.message
    assert render.figure(273.0, "GB/s", "bandwidth") == "273.0 GB/s" and "n0 270.0 GB/s" in v.message


# Reading a verdict's prose back (its `what` or `message` split, searched, matched) is what a renderer ends.
PROSE_PARSING = re.compile(r"(\.what|message|\.hint)\s*\.\s*(split|partition|rsplit|find|index|startswith|endswith)\s*\(|"
                           r"\bre\.\w+\([^\n]*(\.what|message)\b|"
                           r"[\"'] in [\w.()]*(\.what|message|\.hint)\b")


def test_nothing_parses_a_verdicts_prose():
    roots = [PROJECT / "src" / "wirecheck", PROJECT / "fixtures" / "pytest_wirecheck", PROJECT / "tests",
             PROJECT / "scripts"]
    found = []
    for root in roots:
        for path in root.rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if PROSE_PARSING.search(line):
                    found.append(f"{path.relative_to(PROJECT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
    # and the pattern does see what it looks for
    assert PROSE_PARSING.search('name = v.what.split(" against the fleet")[0]')
    assert PROSE_PARSING.search("m = re.match(r'measured (\\S+)', v.message)")
    assert PROSE_PARSING.search('state = "CUT" if "cut short" in self.record.message else "BROKEN"')
    assert PROSE_PARSING.search("if verdict.message.startswith(text):")
