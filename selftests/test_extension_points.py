"""One place per extension: a copy of the library gets a toy collective (one row of the collectives
table and its two functions beside it), a toy strategy (one row of the strategies table and its
trainer module), a toy placement class (one row of the class table), a toy check (one new module
in wirecheck/checks/) and a toy test file (one new file in tests/), and nothing else: no list, no
other module is edited. The suite then runs in simulation on that copy and collects, measures,
judges and records each toy; `wirecheck judge` judges the record again with the copy.

Only thresholds.yaml, which is data, gains the toy placement class's and strategy's entries that
its loader asks for (a class or strategy left out of it by accident must not go unjudged).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from e2e import PROJECT, make_project, pythonpath, run_suite

TOY_OP, TOY_STRATEGY, TOY_CLASS, TOY_CHECK = "all_reduce_max", "ddp_foreach", "whole_node", "toy_gpus_on_node"

# (file under src/wirecheck, the existing text the toy goes right after, the toy)
ROWS = (
    ("measure/collectives.py", "_whole, _whole, _fill_own, _expect_all_to_all, _launch_all_to_all),\n",
     '''        Collective("all_reduce_max", "all_reduce", False, True, lambda n: 2 * (n - 1) / n,
                   _whole, _whole, _fill_own, _expect_all_reduce_max, _launch_all_reduce_max),
'''),
    ("measure/collectives.py", "# ---- the table " + "-" * 83 + "\n", '''

def _expect_all_reduce_max(start, stop, rank, n, count, device):
    out = pattern(0, start, stop, device)
    for r in range(1, n):
        out = out.maximum(pattern(r, start, stop, device))
    return out


def _launch_all_reduce_max(inp, out):
    import torch.distributed as dist

    dist.all_reduce(out, op=dist.ReduceOp.MAX)

'''),
    ("vocab/strategies.py", '    Strategy("fsdp", "PyTorch FSDP2 (fully_shard)", _FSDP2, STATE_PARTS, TORCH_HOLDS, _FSDP),\n',
     '''    Strategy("ddp_foreach", "PyTorch DDP, foreach AdamW", "wirecheck.training.ddp_foreach:ForeachDDPTrainer", (),
             TORCH_HOLDS, (Setting("optimizer", "foreach", "torch AdamW's foreach kernels: a toy variant of ddp"),
                           Setting("bucket_cap_mb", 25, "DDP's default bucket size, as the ddp row has it"),
                           Setting("gradient_as_bucket_view", True, "as the ddp row: .grad are views into the buckets"))),
'''),
    ("node/placement.py",
     '''    PlacementClass(CLASS_NETWORK, "GPUs of several nodes: traffic crosses the nodes' NICs", False, False),\n''',
     '''    PlacementClass("whole_node", "every GPU of the node at once", True, False,
                   subsets=lambda topo, gpus: [gpus] if len(gpus) >= 2 else []),
'''),
)
NEW_MODULES = {
    "training/ddp_foreach.py": '''"""A toy strategy's trainer: DDP as the ddp trainer runs it."""
from wirecheck.training.ddp import DDPTrainer


class ForeachDDPTrainer(DDPTrainer):
    pass
''',
    "checks/toy.py": '''"""A toy check: every GPU of a placement is one of the node's."""
from wirecheck.checks import check
from wirecheck.core.verdict import no_problems


@check("toy_gpus_on_node")
def gpus_on_node(thresholds, *, placement: str, gpus: list, node_gpus: list):
    missing = [f"GPU{g} is not on this node" for g in gpus if g not in node_gpus]
    return no_problems("placement GPUs on the node", placement, missing)
''',
}
TOY_TEST_FILE = '''"""A toy test file: the toy check on every pair placement; no stage marker, no list to join."""
import pytest

from wirecheck import checks


@pytest.mark.placements("pair")
def test_toy_gpus_on_node(node, topology, placement, record):
    verdict = record(checks.toy.gpus_on_node(node.thresholds, placement=placement.id, gpus=list(placement.gpus),
                                             node_gpus=[g.index for g in topology.gpus]))
    assert verdict.ok, verdict.message
'''
SELECTION = " or ".join((
    f"test_busbw and {TOY_CLASS}-2gpu-0.1-all_reduce]",  # the toy class, an existing op
    f"nvswitch-2gpu-0.1-{TOY_OP} and (test_busbw or test_result_correct)",  # the toy op, an existing class
    f"nvswitch-2gpu-0.1-{TOY_STRATEGY} and (test_steps_complete or test_model_state_matches_model)",
    "test_toy_",
    "test_groups_are_full_meshes",  # inventory stage: runs before the toy test file
    "test_error_counters_did_not_grow",  # the last stage: after it (skips in simulation)
))


def _add_toys(src: Path) -> None:
    for relative, anchor, toy in ROWS:
        path = src / "wirecheck" / relative
        text = path.read_text()
        assert text.count(anchor) == 1, f"{relative}: the toy's anchor {anchor!r} is gone; update ROWS"
        path.write_text(text.replace(anchor, anchor + toy))
    for relative, text in NEW_MODULES.items():
        assert not (src / "wirecheck" / relative).exists(), relative
        (src / "wirecheck" / relative).write_text(text)


def _thresholds_for_toys() -> str:
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    c = data["collectives"]
    for section in (c["floors"], c["latency"]["ceilings"], c["half_peak"]["ceilings"]):
        section[TOY_CLASS] = {}  # judged by the derived and simulated floors only
    c["simulated_floors"][TOY_OP] = dict(c["simulated_floors"]["all_reduce"])
    data["training"]["slow_wire"]["min_slowdown"][TOY_STRATEGY] = data["training"]["slow_wire"]["min_slowdown"]["ddp"]
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("toys")
    shutil.copytree(PROJECT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    _add_toys(root / "src")
    shutil.copy(PROJECT / "conftest.py", root / "conftest.py")
    shutil.copytree(PROJECT / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests" / "test_toy.py").write_text(TOY_TEST_FILE)
    (root / "thresholds.yaml").write_text(_thresholds_for_toys())
    (root / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), pythonpath()])}
    record = root / "run.jsonl"
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--simulate=h200-sxm-2", f"--wirecheck-json={record}",
         "-v", "-rs", "-k", SELECTION], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    judge = subprocess.run([sys.executable, "-m", "wirecheck.checks.judge", str(record), "--thresholds",
                            str(root / "thresholds.yaml")], cwd=root, env=env, capture_output=True, text=True,
                           timeout=120)
    lines = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return suite, judge, lines


def _verdicts(lines, check: str, where: str) -> list[dict]:
    return [r for r in lines if r["type"] == "verdict" and r["check"] == check and r["where"] == where]


def test_the_suite_runs_every_toy(toy_run):
    suite, _, lines = toy_run
    out = suite.stdout + suite.stderr
    assert suite.returncode == 10, out  # a simulated run that failed nothing
    assert lines and lines[-1]["type"] == "end" and lines[-1]["status"] == "complete", out


def test_a_collective_is_one_row(toy_run):
    _, _, lines = toy_run
    where = "nvswitch-2gpu-0.1"
    measured = [r for r in lines if r["type"] == "measurement" and r["kind"] == "collective"
                and r["placement"] == where and r["details"]["op"] == TOY_OP]
    assert len(measured) == 3 and all(r["details"]["wrong_by_rank"] == {"0": 0, "1": 0} for r in measured), measured
    for check in ("collective_correct", "busbw"):
        verdicts = _verdicts(lines, check, where)
        assert [v["outcome"] for v in verdicts if v["inputs"].get("op") == TOY_OP] == ["pass"], (check, verdicts)


def test_a_placement_class_is_one_row(toy_run):
    _, _, lines = toy_run
    where = f"{TOY_CLASS}-2gpu-0.1"
    assert {"id": where, "class": TOY_CLASS, "gpus": [0, 1]} in lines[0]["placements"]
    assert [r for r in lines if r["type"] == "measurement" and r["placement"] == where
            and r["details"]["placement_class"] == TOY_CLASS]
    assert [v["outcome"] for v in _verdicts(lines, "busbw", where)] == ["pass"]


def test_a_strategy_is_one_row_and_its_trainer(toy_run):
    _, _, lines = toy_run
    (run,) = [r for r in lines if r["type"] == "measurement" and r["kind"] == "strategy"]
    assert run["details"]["strategy"] == TOY_STRATEGY and run["details"]["error"] is None, run["details"]["error"]
    ranks = run["details"]["ranks"]
    assert [r["settings"]["optimizer"] for r in ranks] == ["foreach", "foreach"]  # read back from its trainer
    assert {r["wrapper"] for r in ranks} == {"DistributedDataParallel"}
    for check in ("steps_complete", "model_state"):  # model_state: the memory model predicts it from the row
        verdicts = _verdicts(lines, check, "nvswitch-2gpu-0.1")
        assert [v["outcome"] for v in verdicts] == ["pass"], verdicts


def test_a_check_is_one_module_and_a_test_file_one_file(toy_run):
    suite, _, lines = toy_run
    assert [v["outcome"] for v in _verdicts(lines, TOY_CHECK, "pair-0.1")] == ["pass"]
    ran = [line.split(" ")[0] for line in suite.stdout.splitlines() if line.startswith("tests/") and "::" in line]
    order = [name.split("::")[0] for name in ran]
    assert order.index("tests/test_topology.py") < order.index("tests/test_toy.py") \
        < order.index("tests/test_link_health.py"), ran


def test_judge_knows_every_toy(toy_run):
    _, judge, lines = toy_run
    out = judge.stdout + judge.stderr
    assert judge.returncode == 10, out  # passed, and says the run was a simulation
    judged = {(v["check"], v["where"]) for v in lines if v["type"] == "verdict"}
    assert {(TOY_CHECK, "pair-0.1"), ("busbw", f"{TOY_CLASS}-2gpu-0.1")} <= judged
    assert " 0 failed" in out and "0 changed since recorded" in out, out


def test_an_unknown_stage_is_a_usage_error(pytester):
    root = make_project(pytester)
    (root / "tests" / "test_late.py").write_text(
        'import pytest\n\npytestmark = pytest.mark.stage("lastly")\n\n\ndef test_late():\n    assert True\n')
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--collect-only", "tests/test_late.py")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*test_late.py::test_late: pytest.mark.stage('lastly'): unknown stage; "
                                 "write one of 'inventory', 'measure', 'last'*"])
