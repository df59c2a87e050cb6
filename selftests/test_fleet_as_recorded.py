"""The fleet report's fast path: a node's record judged under the fleet's very thresholds by this very
wirecheck (its header says so) keeps its verdicts as recorded; any other is judged again. Both ways
must give the same fleet report, node for node and verdict for verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from test_fleet_report import TH, _network_record, write_node
from wirecheck.core import code_digest, jsondata
from wirecheck.fleet import judging, report
from wirecheck.fleet.judging import digest, judge_fleet, node_result
from wirecheck.fleet.records import NodeRun, collect
from wirecheck.core.verdict import Verdict
from wirecheck.records.file import read_run
from wirecheck.records.run import judged_under, judging_under, thresholds_fields
from wirecheck.thresholds.file import load_thresholds

NOW = {**thresholds_fields(TH.path), "versions": code_digest.versions()}  # what a run of this wirecheck records


def _other_thresholds(tmp_path: Path):
    """The shipped file with the 2-GPU NVSwitch all_reduce floor at 250 GB/s, not 295."""
    data = yaml.safe_load(Path(TH.path).read_text())
    data["collectives"]["floors"]["nvswitch"]["all_reduce"][2]["min"] = "250 GB/s"
    path = tmp_path / "other-thresholds.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_thresholds(path)


def _fleet(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    jitter = (0.004, -0.006, 0.001, 0.007, -0.002, 0.003)
    for k in range(4):  # gpu02 10 % slow on reduce_scatter: inside its floor, below its peers
        write_node(d / f"gpu{k:02d}.jsonl", {"reduce_scatter": 0.9} if k == 2 else None, jitter=jitter[k], header=NOW)
    # gpu04 ran under another thresholds file, whose floor its all_reduce (287 GB/s) clears: the fleet's
    # floor (295) fails it, and only judging it again says so
    other = _other_thresholds(tmp_path)
    write_node(d / "gpu04.jsonl", {"all_reduce": 0.88}, jitter=jitter[4], thresholds=other,
               header={**thresholds_fields(other.path), "versions": code_digest.versions()})
    torn = write_node(d / "gpu05.jsonl", jitter=jitter[5], end=False, header=NOW)  # killed mid-line
    with open(torn, "a") as fh:
        fh.write('{"type": "measurement", "kind": "collective", "placement": "nvsw')
    return d


def _judged(d: Path, trust: bool):
    return judge_fleet(collect(d, expect_n=6, digest=digest(TH, trust_recorded=trust)), TH)


def test_the_fleet_report_is_the_same_taken_as_recorded_or_judged_again(tmp_path):
    d = _fleet(tmp_path)
    fast, full = _judged(d, True), _judged(d, False)
    how = {n.node: n.as_recorded for n in fast.nodes}
    assert how == {"gpu00": True, "gpu01": True, "gpu02": True, "gpu03": True, "gpu04": False, "gpu05": True}
    assert not any(n.as_recorded for n in full.nodes)
    states = {n.node: n.state for n in fast.nodes}
    assert states == {"gpu00": "PASS", "gpu01": "PASS", "gpu02": "below peers", "gpu03": "PASS",
                      "gpu04": "own checks", "gpu05": "CUT"}
    gpu04 = next(n for n in fast.nodes if n.node == "gpu04")
    assert [v.check for v in gpu04.own_failed] == ["busbw"] and "295" in gpu04.own_failed[0].message
    recorded = [v for v in read_run(d / "gpu04.jsonl").verdicts if v["check"] == "busbw"]
    assert all(v["outcome"] == "pass" for v in recorded), "its own run passed it, under its own thresholds"

    def data(result):
        out = report.as_json(result)
        for n in out["nodes"]:
            n.pop("own_verdicts")
        return json.dumps(out, sort_keys=True)

    assert data(fast) == data(full)
    assert report.render(fast, full=True) == report.render(full, full=True)
    assert "5 record(s) as recorded" in report.own_verdicts_line(fast)
    assert "1 judged again" in report.own_verdicts_line(fast) and report.own_verdicts_line(full) == ""


def _node(path: Path, under) -> object:
    run = read_run(path)
    return node_result(TH, NodeRun(path.stem, path, run), under=under)


def test_a_record_is_taken_as_recorded_only_under_the_same_thresholds_and_the_same_code(tmp_path):
    path = write_node(tmp_path / "n.jsonl", header=NOW)
    lines = path.read_text().splitlines()
    # one recorded verdict edited to fail: taken as recorded, the node fails; judged again, it passes
    k = next(i for i, line in enumerate(lines) if '"check": "busbw"' in line)
    rec = json.loads(lines[k])
    rec["outcome"] = "fail"
    lines[k] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    under = judging_under(TH.path)
    assert judged_under(read_run(path).run) == under
    assert _node(path, under).as_recorded and _node(path, under).count("fail") == 1
    assert _node(path, None).count("fail") == 0, "no `under`: judged again"
    for key, value in (("thresholds_sha256", "0" * 64), ("versions", {"wirecheck": "0.1.0", "wirecheck_code": "x"}),
                       ("versions", {})):
        head = {**json.loads(lines[0]), key: value}
        path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
        n = _node(path, under)
        assert not n.as_recorded and n.count("fail") == 0, f"{key}={value}: judged again"


def test_a_record_without_an_over_long_digit_run_is_read_with_integers_parsed_in_c():
    assert jsondata.no_long_digits(b'{"a": ' + b"9" * jsondata.MAX_INT_DIGITS + b"}")
    assert not jsondata.no_long_digits(b'{"a": ' + b"1" + b"0" * jsondata.MAX_INT_DIGITS + b"}")
    assert jsondata.loads('{"a": [1, 2.5]}', guarded=False) == {"a": [1, 2.5]}


REFERENCE_RUN = Path(__file__).resolve().parents[1] / "fixtures/reference/h200-sxm-2/wirecheck-2026-12-01/run1.jsonl"


def _as_now(source: Path, dest: Path, drop: str | None = None) -> Path:
    """`source` with a header that says it was judged under the shipped thresholds by this wirecheck
    (its verdicts are then taken as recorded), as the run of the node `dest` names (its host: one run copied to
    several nodes is one run); `drop`: leave out the first line holding it."""
    lines = source.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **NOW, "host": dest.stem})
    for k, line in enumerate(lines):  # each verdict as this wirecheck writes it
        rec = json.loads(line)
        if rec["type"] == "verdict":
            lines[k] = json.dumps({"type": "verdict", "test": rec["test"], "time": rec["time"],
                                   **Verdict.from_record(rec).as_record()})
    if drop is not None:
        lines.remove(next(line for line in lines if drop in line))
    dest.write_text("\n".join(lines) + "\n")
    return dest


def test_a_record_taken_as_recorded_is_read_lean_and_judged_as_read_in_full(tmp_path):
    """Lean reading (verdicts that passed or skipped with nothing to say are counted, not parsed; the
    measurements the fleet does not compare are skipped) gives the very report a full read gives."""
    d = _fleet(tmp_path)
    for k in range(3):  # a real 2x H200 record, 274 lines: most of them passed verdicts and curve sizes
        _as_now(REFERENCE_RUN, d / f"h200-{k}.jsonl")
    lean = digest(TH)
    assert lean.lines is not None and digest(TH, trust_recorded=False).lines is None
    run = read_run(d / "h200-0.jsonl", lean.lines)
    assert read_run(d / "gpu04.jsonl", lean.lines).skipped == {}, "another thresholds file: parsed to be judged again"
    full_run = read_run(d / "h200-0.jsonl")
    assert run.skipped["pass"] > 90 and run.skipped["measurement"] > 90, run.skipped
    assert len(run.verdicts) + run.skipped["pass"] + run.skipped["skip"] == len(full_run.verdicts)
    assert all(m["kind"] != "nvlink_crc" for m in run.measurements)

    fast = judge_fleet(collect(d, expect_n=9, digest=lean), TH)
    full = judge_fleet(collect(d, expect_n=9, digest=digest(TH, lean=False)), TH)
    assert json.dumps(report.as_json(fast), sort_keys=True) == json.dumps(report.as_json(full), sort_keys=True)
    assert report.render(fast, full=True) == report.render(full, full=True)
    h200 = next(n for n in fast.nodes if n.node == "h200-0")
    assert h200.as_recorded and h200.counts == {"fail": 0, "pass": 134, "skip": 14}


def test_a_lean_read_whose_counts_disagree_with_the_end_line_is_read_again_in_full(tmp_path, monkeypatch):
    path = _as_now(REFERENCE_RUN, tmp_path / "n.jsonl", drop='"check": "gpus_visible"')  # one passed line lost
    lean = digest(TH).lines
    run = read_run(path, lean)
    assert not judging._counts_agree(run), "133 passed lines against the end's 134"
    assert judging._counts_agree(read_run(_as_now(REFERENCE_RUN, tmp_path / "m.jsonl"), lean))
    full_reads = []
    real = judging.read_run
    monkeypatch.setattr(judging, "read_run", lambda p, *a: full_reads.append(p) or real(p, *a))
    n = node_result(TH, NodeRun("n", path, run), under=judging_under(TH.path))
    assert full_reads == [path] and n.as_recorded and n.counts["pass"] == 133


def test_a_multinode_record_is_never_kept_lean(tmp_path):
    d = tmp_path / "results"
    d.mkdir()
    write_node(d / "gpu00.jsonl", header=NOW)
    net = d / "multinode-1.jsonl"
    _network_record(net, ["gpu00", "gpu01", "gpu02"], slow="gpu02")
    lines = net.read_text().splitlines()
    net.write_text("\n".join([json.dumps({**json.loads(lines[0]), **NOW}), *lines[1:]]) + "\n")
    fleet = collect(d, digest=digest(TH))
    assert len(fleet.network) == 1
    kept, whole = fleet.network[0], read_run(net)
    assert (kept.skipped, kept.verdicts, kept.measurements) == ({}, whole.verdicts, whole.measurements)
