"""`wirecheck fleet diagnose`: which node or which path is slow, from pairs of each suspect with known-good
partners. The judging is a pure function of the pair figures (fleet.diagnosis.judge), tested here with
synthetic pairs: one bad node, one bad path, a flaky one, a mixed one; the plan from a fleet report's data;
and the command in plan mode, and judging a pair run's record, over a small fake fleet directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e import PROJECT
from wirecheck.core import exit_codes
from wirecheck.core.pair_schedule import pair_key
from wirecheck.fleet import diagnose_plan
from wirecheck.fleet.diagnose_plan import PlanError, make_plan
from wirecheck.fleet.diagnosis import exit_code, judge
from wirecheck.records.culprit import diagnosed_culprits
from wirecheck.thresholds.file import load_thresholds

TH = load_thresholds(PROJECT / "thresholds.yaml")
RULE = TH.fleet(False).pairs  # 10 % below the reference and 3 scaled MADs
GOOD_BW = 48e9


def _report(states: dict[str, str], slow_links=(), pair_slow=()) -> dict:
    """A fleet report's data (report.as_json) reduced to what the plan reads."""
    nodes = []
    for name, state in states.items():
        nodes.append({"node": name, "ok": state == "PASS", "state": state, "path": None if state == "MISSING" else f"{name}.jsonl",
                      "pairs": [{"check": "pair_node", "outcome": "fail" if name in pair_slow else "pass"}],
                      "outliers": []})
    return {"nodes": nodes, "named": {"slow_links": list(slow_links)}}


def _plan(suspects=("s1",), good=("g1", "g2", "g3", "g4")):
    states = {**{s: "slow in pairs" for s in suspects}, **{g: "PASS" for g in good}}
    return make_plan(_report(states, pair_slow=suspects))


def culprits_by_node(findings) -> dict:
    """What a drain hook reads back of these findings' verdicts (records.culprit)."""
    from types import SimpleNamespace

    return diagnosed_culprits(SimpleNamespace(verdicts=[f.verdict().as_record() for f in findings]))


def _measure(plan, slow_pairs=(), factor=0.6, noise=(1.0, 0.99, 1.01, 0.995, 1.005)):
    """Every planned pair at GOOD_BW (with a little noise), those in slow_pairs at factor x."""
    out = {}
    for k, (a, b) in enumerate(plan.pairs):
        slow = pair_key(a, b) in {pair_key(*p) for p in slow_pairs}
        out[pair_key(a, b)] = {"busbw_bytes_per_s": GOOD_BW * noise[k % len(noise)] * (factor if slow else 1.0)}
    return out


def test_the_plan_pairs_each_suspect_with_three_distinct_good_partners_and_the_suspects_once():
    plan = _plan(suspects=("s1", "s2"), good=("g1", "g2", "g3", "g4"))
    assert [s.node for s in plan.suspects] == ["s1", "s2"]
    assert plan.partners == {"s1": ["g1", "g2", "g3"], "s2": ["g4", "g1", "g2"]}  # the least used first
    assert all(len(set(p)) == 3 for p in plan.partners.values())
    assert plan.between == [("s1", "s2")]
    assert plan.controls == [("g1", "g2"), ("g2", "g3"), ("g3", "g1")]
    text = diagnose_plan.render(plan)
    assert "s1 with 3 good partner(s): g1, g2, g3; leaf switch: could not tell" in text
    assert "suspects with each other: s1-s2" in text


def test_a_slow_link_makes_both_ends_suspects_and_a_missing_node_is_left_out():
    report = _report({"a": "PASS", "b": "PASS", "c": "PASS", "d": "PASS", "e": "MISSING", "f": "own checks"},
                     slow_links=["a~b"])
    suspects, good, left = diagnose_plan.classify(report)
    assert [(s.node, s.why) for s in suspects] == [("a", ("an end of the slow link a~b",)),
                                                  ("b", ("an end of the slow link a~b",)), ("f", ("failed (own checks)",))]
    assert good == ["c", "d"] and [n for n, _ in left] == ["e"]


def test_partners_on_another_leaf_come_first_where_the_leaves_are_known():
    leaves = {"s1": "leaf1", "g1": "leaf1", "g2": "leaf1", "g3": "leaf2", "g4": "leaf2"}
    partners = diagnose_plan.choose_partners(["s1"], ["g1", "g2", "g3", "g4"], leaves, per_suspect=3)
    assert partners == {"s1": ["g3", "g4", "g1"]}


def test_a_leaves_file_is_read_and_the_plan_says_where_the_partners_are(tmp_path):
    leaves = tmp_path / "leaves.txt"
    leaves.write_text("# from ibnetdiscover\ns1 leaf1\ng1 leaf1\ng2 leaf2  # spine A\ng3 leaf2\ng4 leaf2\n")
    report = _report({"s1": "slow in pairs", **{g: "PASS" for g in ("g1", "g2", "g3", "g4")}}, pair_slow=["s1"])
    plan = make_plan(report, leaves=diagnose_plan.read_leaves(str(leaves)))
    assert plan.partners == {"s1": ["g2", "g3", "g4"]}
    assert "s1 with 3 good partner(s): g2, g3, g4; leaf switch: every partner on another leaf than its leaf1" in \
        diagnose_plan.render(plan)
    plan = make_plan(report, good=["g1", "g2"], leaves=diagnose_plan.read_leaves(str(leaves)))
    assert "g1 share(s) its leaf leaf1 (no other good node to take)" in diagnose_plan.render(plan)
    leaves.write_text("s1\n")
    with pytest.raises(PlanError, match="line 1: 's1'; write 'NODE LEAF'"):
        diagnose_plan.read_leaves(str(leaves))


def test_good_nodes_given_must_have_passed():
    report = _report({"s1": "slow in pairs", "g1": "PASS", "g2": "PASS"}, pair_slow=["s1"])
    assert make_plan(report, good=["g2"]).partners == {"s1": ["g2"]}
    with pytest.raises(PlanError, match="--good s1: it is a suspect"):
        make_plan(report, good=["s1"])
    with pytest.raises(PlanError, match="--good zz: no such node"):
        make_plan(report, good=["zz"])


def test_one_bad_node_is_slow_with_every_good_partner():
    plan = _plan()
    findings, figures = judge(plan, _measure(plan, [("s1", "g1"), ("s1", "g2"), ("s1", "g3")]), RULE)
    (f,) = findings
    assert f.result == "found" and f.part == "s1"
    assert f.summary == "node s1: slow with 3 of 3 good partners: the node (its NICs, its PCIe path to them, or its GPUs)"
    assert exit_code(findings) == exit_codes.DIAGNOSIS_FOUND
    v = f.verdict()
    assert v.check == "diagnosis" and v.outcome == "fail" and v.details["culprit"] == f.summary
    assert figures["reference"]["n"] == 3 and abs(figures["reference"]["median"] - 48.0) < 0.5
    # the same node 5 % slower only: within the rule (10 %), nothing named
    findings, _ = judge(plan, _measure(plan, [("s1", "g1"), ("s1", "g2"), ("s1", "g3")], factor=0.95), RULE)
    assert findings[0].result == "not reproduced" and exit_code(findings) == exit_codes.DIAGNOSIS_NOT_REPRODUCED


def test_one_bad_path_is_two_suspects_slow_only_together():
    plan = _plan(suspects=("s1", "s2"))
    findings, _ = judge(plan, _measure(plan, [("s1", "s2")]), RULE)
    assert [(f.subject, f.result) for f in findings] == [("s1", "not reproduced"), ("s2", "not reproduced"),
                                                        ("s1~s2", "found")]
    path = findings[-1]
    assert path.part == "the path s1~s2" and path.summary.startswith("path s1~s2: slow only together (")
    assert path.summary.endswith("each fine with its good partners: the switch or cables between their leaves")
    assert culprits_by_node(findings) == {"s1": path.summary, "s2": path.summary}
    assert exit_code(findings) == exit_codes.DIAGNOSIS_FOUND
    # a bad node among the two: the slow pair is the node's, no path is named
    findings, _ = judge(plan, _measure(plan, [("s1", "s2"), ("s1", "g1"), ("s1", "g2"), ("s1", "g3")]), RULE)
    assert [(f.subject, f.result) for f in findings] == [("s1", "found"), ("s2", "not reproduced")]


def test_a_flaky_node_is_not_reproduced():
    plan = _plan()
    findings, _ = judge(plan, _measure(plan), RULE)
    assert [f.result for f in findings] == ["not reproduced"]
    assert findings[0].summary == "node s1: not reproduced: fine with 3 of 3 good partners"
    assert findings[0].verdict().outcome == "pass" and culprits_by_node(findings) == {}
    assert exit_code(findings) == exit_codes.DIAGNOSIS_NOT_REPRODUCED


def test_slow_with_some_partners_only_is_not_localized_and_names_them():
    plan = _plan()
    findings, _ = judge(plan, _measure(plan, [("s1", "g2")]), RULE)
    (f,) = findings
    assert f.result == "not localized"
    assert f.summary.startswith("node s1: not localized: slow with g2 (1 of 3 good partners), fine with g1, g3")
    assert exit_code(findings) == exit_codes.DIAGNOSIS_NOT_LOCALIZED
    # a pair below the pair floor is slow even where the reference is as slow (a fabric-wide fault)
    measured = _measure(plan)
    measured[pair_key("s1", "g1")]["below_floor"] = True
    assert judge(plan, measured, RULE)[0][0].summary.startswith("node s1: not localized: slow with g1 (1 of 3")


def test_without_a_reference_or_partners_nothing_is_named():
    plan = _plan()
    measured = {k: v for k, v in _measure(plan, [("s1", "g1"), ("s1", "g2"), ("s1", "g3")]).items()
                if k not in {pair_key(*p) for p in plan.controls}}
    (f,), figures = judge(plan, measured, RULE)
    assert f.result == "not localized" and "no pair of two known-good nodes was measured" in f.summary
    assert figures["reference"] is None
    (f,), _ = judge(plan, {}, RULE)
    assert f.result == "not localized"
    assert "with g1: not measured" in f.verdict().message
    # measured, but with nothing to hold it against (one good node: no reference pair): said so, not "not measured"
    plan = _plan(good=("g1",))
    measured = _measure(plan)
    (f,), _ = judge(plan, measured, RULE)
    assert f.result == "not localized" and "  with g1: 48 GB/s, no reference measured to hold it against" in \
        f.verdict().message.splitlines()
    measured[pair_key("s1", "g1")]["below_floor"] = True  # slow by the floor alone
    (f,), _ = judge(plan, measured, RULE)
    assert f.evidence == ["with g1: 48 GB/s, no reference measured to hold it against; below the pair floor"]


# ---- the command over a fake fleet directory (records as test_fleet_report writes them) -------------------


def _fake_fleet(tmp_path: Path) -> Path:
    """Six nodes of 2x H200 SXM figures; the ring schedule's record names gpu04 slow with every partner."""
    from test_fleet_report import _network_record, fleet

    d = fleet(tmp_path)
    _network_record(d / "network-42.jsonl", [f"gpu{k:02d}" for k in range(6)], slow="gpu04")
    return d


def _pairs_record(path: Path, plan, slow: str) -> None:
    """A pair run's record as `wirecheck fleet multinode -- --pair-list` writes it (pair measurements and
    their busbw verdicts against the network floor), every pair with `slow` at 60 %."""
    from wirecheck import checks
    from wirecheck.records.file import Measurement, RecordFile

    rf = RecordFile(path)
    rf.header({"simulated": False, "thresholds": str(TH.path), "placements": [],
               "multinode": {"nodes": plan.nodes, "world_size": 2 * len(plan.nodes)}})
    for a, b in plan.pairs:
        busbw = GOOD_BW * (0.6 if slow in (a, b) else 1.0)
        rf.measurement(Measurement("pair", pair_key(a, b), "pair", busbw / 1e9, "GB/s",
                                   {"a": a, "b": b, "busbw": busbw}))
        rf.verdict(checks.collectives.busbw(TH, op="all_reduce", placement=pair_key(a, b), placement_class="network",
                                            n_gpus=4, simulated=False, busbw_bytes_per_s=busbw, size_bytes=2**30,
                                            link_ceiling_bytes_per_s=None), f"multinode::pair::{pair_key(a, b)}::busbw")
    rf.end({"status": "complete", "exit_status": 1, "verdicts": {}, "tests": {}, "wall_s": 1.0})
    rf.close()


def test_the_command_plans_from_a_records_directory_and_a_report_then_judges_a_pair_run(tmp_path, capsys):
    from wirecheck.cli.fleet import main as fleet
    from wirecheck.cli.fleet.report import main as report
    from wirecheck.records.culprit import diagnosed_culprit
    from wirecheck.records.file import read_run

    d = _fake_fleet(tmp_path)
    assert fleet(["diagnose", str(d)]) == exit_codes.DIAGNOSIS_PLANNED
    out = capsys.readouterr().out
    assert "  gpu04: slow with every partner in the pair schedule" in out, out
    assert "gpu04 with 3 good partner(s): gpu00, gpu01, gpu02; leaf switch: could not tell" in out
    assert "reference, two known-good nodes: gpu00-gpu01, gpu01-gpu02, gpu02-gpu00" in out
    assert f"run them: wirecheck fleet diagnose {d} --run" in out
    # the same plan from the report's JSON
    assert report([str(d), "--json", str(tmp_path / "fleet.json")]) == 1
    capsys.readouterr()
    assert fleet(["diagnose", str(tmp_path / "fleet.json"), "--good", "gpu03,gpu05"]) == exit_codes.DIAGNOSIS_PLANNED
    assert "gpu04 with 2 good partner(s): gpu03, gpu05" in capsys.readouterr().out
    # a pair run made by hand, judged: gpu04 slow with every good partner
    plan = make_plan(json.loads((tmp_path / "fleet.json").read_text()))
    _pairs_record(tmp_path / "pairs.jsonl", plan, slow="gpu04")
    out_record = tmp_path / "diagnosis.jsonl"
    code = fleet(["diagnose", str(d), "--pairs-record", str(tmp_path / "pairs.jsonl"), "--json", str(out_record)])
    out = capsys.readouterr().out
    assert code == exit_codes.DIAGNOSIS_FOUND, out
    line = "node gpu04: slow with 3 of 3 good partners: the node (its NICs, its PCIe path to them, or its GPUs)"
    assert f"culprit gpu04: {line}" in out
    run = read_run(out_record)
    assert run.run["kind"] == "diagnosis" and run.run["fleet"] and run.end["exit_status"] == exit_codes.DIAGNOSIS_FOUND
    assert diagnosed_culprit(run) == line  # the drain reason's culprit, as for `wirecheck diagnose`
    assert diagnosed_culprits(run) == {"gpu04": line}  # per node, for the hook that drains it
    assert f"  drain reason: wirecheck: {line}" in out
    # and the fleet report shows it, in its text and its page
    page = tmp_path / "fleet.html"
    assert report([str(d), "--diagnosis", str(out_record), "--html", str(page), "--json", str(tmp_path / "f2.json")]) == 1
    text = capsys.readouterr().out
    assert json.loads((tmp_path / "f2.json").read_text())["diagnosis"]["result"] == "found"
    assert f"fleet diagnosis {out_record.name}: found (exit 20)" in text and f"  {line}" in text
    assert "Fleet diagnosis" in page.read_text() and line in page.read_text()
    # a healthy pair run: not reproduced
    _pairs_record(tmp_path / "clean.jsonl", plan, slow="nobody")
    assert fleet(["diagnose", str(d), "--pairs-record", str(tmp_path / "clean.jsonl"), "--json",
                  str(tmp_path / "clean-diagnosis.jsonl")]) == exit_codes.DIAGNOSIS_NOT_REPRODUCED


def test_a_diagnosis_phrase_reworded_in_the_renderer_changes_every_face_of_it(tmp_path, capsys, monkeypatch):
    """The words are wirecheck.core.render's alone: reword what a found node names there and the verdict's
    message, the command's culprit and drain reason, and the fleet report's text and page all say the new words
    (none of them builds the line itself or reads it back out of a message)."""
    from wirecheck.cli.fleet import main as fleet
    from wirecheck.core import render

    old = "the node (its NICs, its PCIe path to them, or its GPUs)"
    assert render.DIAGNOSIS_PARTS["fleet_node"] == old
    monkeypatch.setitem(render.DIAGNOSIS_PARTS, "fleet_node", "this node's network side")
    monkeypatch.setitem(render.DIAGNOSIS_PAIRS, "measured", "against {partner} {busbw} ({side} {median}){floor}, {status}")
    plan = _plan()
    (f,), _ = judge(plan, _measure(plan, [("s1", "g1"), ("s1", "g2"), ("s1", "g3")]), RULE)
    message = f.verdict().message
    assert message.startswith("node s1: slow with 3 of 3 good partners: this node's network side\n"), message
    assert "  against g1 28.7 GB/s (40 % below 48 GB/s), slow" in message and old not in message
    assert culprits_by_node([f]) == {"s1": "node s1: slow with 3 of 3 good partners: this node's network side"}

    d = _fake_fleet(tmp_path)
    assert fleet(["report", str(d), "--json", str(tmp_path / "fleet.json")]) == 1
    _pairs_record(tmp_path / "pairs.jsonl", make_plan(json.loads((tmp_path / "fleet.json").read_text())), slow="gpu04")
    out_record = tmp_path / "diagnosis" / "diagnosis.jsonl"
    capsys.readouterr()
    assert fleet(["diagnose", str(d), "--pairs-record", str(tmp_path / "pairs.jsonl"), "--json", str(out_record)]) == \
        exit_codes.DIAGNOSIS_FOUND
    line = "node gpu04: slow with 3 of 3 good partners: this node's network side"
    evidence = "against gpu00 28.8 GB/s (40 % below 48 GB/s), slow"
    terminal = capsys.readouterr().out
    assert f"{line}\n  {evidence}" in terminal and f"culprit gpu04: {line}" in terminal, terminal
    assert f"  drain reason: wirecheck: {line}" in terminal and old not in terminal
    page = tmp_path / "fleet.html"
    assert fleet(["report", str(d), "--diagnosis", str(out_record), "--html", str(page)]) == 1
    text = capsys.readouterr().out
    assert f"\n  {line}\n    {evidence}\n" in text and old not in text, text
    html = page.read_text()
    assert f"<b>{line.replace(chr(39), '&#x27;')}</b><ul><li>{evidence}</li>" in html and old not in html
    # and the old words come back with the renderer's own, on every face at once
    monkeypatch.undo()
    assert fleet(["report", str(d), "--diagnosis", str(out_record)]) == 1
    assert "this node's network side" in capsys.readouterr().out  # the record keeps the words it was written with
    (f,), _ = judge(plan, _measure(plan, [("s1", "g1"), ("s1", "g2"), ("s1", "g3")]), RULE)
    assert f.verdict().message.startswith(f"node s1: slow with 3 of 3 good partners: {old}\n  with g1: 28.7 GB/s, "
                                          "40 % below the reference 48 GB/s: slow")


def test_the_command_says_what_is_wrong_with_its_input(tmp_path, capsys):
    from wirecheck.cli.fleet import main as fleet

    assert fleet(["diagnose", str(tmp_path / "nothing")]) == exit_codes.BAD_INPUT
    assert "nothing: no such file or directory; pass a fleet report" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("[1, 2]")
    assert fleet(["diagnose", str(tmp_path / "x.json")]) == exit_codes.BAD_INPUT
    assert "JSON without the fleet report's 'nodes'" in capsys.readouterr().err
    d = _fake_fleet(tmp_path)
    assert fleet(["diagnose", str(d), "--good", "gpu04"]) == exit_codes.BAD_INPUT
    assert "--good gpu04: it is a suspect" in capsys.readouterr().err
    assert fleet(["diagnose", str(d), "--json", str(d / "diagnosis.jsonl"), "--run"]) == exit_codes.BAD_INPUT
    assert "inside the records directory" in capsys.readouterr().err
    # a hardware fleet outside Slurm: --run says how to run the pairs by hand
    code = fleet(["diagnose", str(d), "--run"])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT and "inside a Slurm allocation holding gpu00, gpu01, gpu02, gpu04" in err, err
    assert "--pair-list gpu00~gpu01," in err and "--pairs-record" in err


def test_under_slurm_the_pairs_run_as_one_srun_step_of_the_fleet_s_multinode_launcher(tmp_path):
    from wirecheck.fleet.diagnose import launch_commands

    plan = _plan()
    (cmd,) = launch_commands(plan, tmp_path / "p.jsonl", False, {"SLURM_JOB_ID": "77"}, {}, "/usr/bin/srun")
    assert cmd[:5] == ["/usr/bin/srun", "--nodes=4", "--nodelist=g1,g2,g3,s1", "--ntasks-per-node=1",
                       "--kill-on-bad-exit=0"]
    launcher = cmd[cmd.index("-m") + 1:]
    assert launcher[:3] == ["wirecheck.cli.main", "fleet", "multinode"]  # `wirecheck fleet multinode`, as the sbatch's step 2
    assert launcher[launcher.index("--rdzv-endpoint") + 1] == "g1:29400"
    assert launcher[launcher.index("--rdzv-id") + 1] == "77-diagnose"
    assert launcher[launcher.index("--pair-list") + 1] == "g1~g2,g2~g3,g3~g1,s1~g1,s1~g2,s1~g3"
    with pytest.raises(PlanError, match="only for a simulated run on this machine"):
        launch_commands(plan, tmp_path / "p.jsonl", False, {"SLURM_JOB_ID": "77"}, {"s1": "m:f"}, "/usr/bin/srun")
    # a simulated fleet outside Slurm: one agent per node here, each named
    local = launch_commands(plan, tmp_path / "p.jsonl", True, {}, {"s1": "m:f"}, None)
    assert [c[c.index("--node-name") + 1] for c in local] == plan.nodes
    assert ["--pair-worker", "m:f"] == local[-1][-2:]


def test_run_on_this_machine_names_a_node_made_slow_in_a_simulated_fleet(tmp_path, capsys, monkeypatch):
    """--run for a simulated fleet: one `wirecheck fleet multinode` agent per planned node on this machine (CPU
    ranks, gloo), gpu04's pair worker the test-only slow one (0.3 s before each call, as test_fleet_e2e's)."""
    from e2e import pythonpath
    from test_fleet_report import fleet as fake_fleet

    from wirecheck.cli.fleet import main as fleet
    from wirecheck.records.file import read_run

    d = fake_fleet(tmp_path, slow={"gpu04": {"all_reduce": 0.1}}, simulated=True)  # below its peers: the suspect
    monkeypatch.setenv("PYTHONPATH", pythonpath())  # the agents import fleet_faults from selftests/
    monkeypatch.chdir(tmp_path)
    for var in [v for v in __import__("os").environ if v.startswith("SLURM_")]:
        monkeypatch.delenv(var)
    out_record = tmp_path / "diagnosis.jsonl"
    code = fleet(["diagnose", str(d), "--good", "gpu00,gpu01", "--run", "--json", str(out_record),
                  "--pair-worker", "gpu04=fleet_faults:slow_pair"])
    out = capsys.readouterr().out
    assert code == exit_codes.DIAGNOSIS_FOUND, out
    assert "  gpu04: failed (below peers)" in out
    assert "pairs measured: 3 of 3" in out
    assert ("culprit gpu04: node gpu04: slow with 2 of 2 good partners: the node (its NICs, its PCIe path to them, "
            "or its GPUs)") in out
    assert "SIMULATION" in out.splitlines()[-1]
    pairs = read_run(tmp_path / "diagnosis.pairs.jsonl")
    assert sorted(m["placement"] for m in pairs.measurements if m["kind"] == "pair") == \
        ["gpu00~gpu01", "gpu00~gpu04", "gpu01~gpu04"]
    assert pairs.run["multinode"]["ops"] == []  # the listed pairs only, no collective across the job
    assert read_run(out_record).end["exit_status"] == exit_codes.DIAGNOSIS_FOUND


def test_listed_pairs_run_in_matchings_of_disjoint_pairs_and_bad_lists_are_refused():
    from wirecheck.core.pair_schedule import listed_rounds
    from wirecheck.fleet.multinode import UsageError, _pair_list

    (r,) = listed_rounds([("a", "b"), ("c", "d"), ("a", "c"), ("b", "a")])
    assert r.pairs == (("a", "b"), ("c", "d"), ("a", "c")) and r.matchings == ((("a", "b"), ("c", "d")), (("a", "c"),))
    assert _pair_list("a~b, c~d", ["a", "b", "c", "d"]) == [("a", "b"), ("c", "d")]
    with pytest.raises(UsageError, match="--pair-list: x not in this job"):
        _pair_list("a~x", ["a", "b"])
    with pytest.raises(UsageError, match="'a-b' is not a pair of two nodes"):
        _pair_list("a-b", ["a", "b"])
