"""One place per extension, as docs/extending.md lists them: a copy of the tree gets a toy collective
(one row of the vocabulary's ops: its kernel is derived from the row), a toy strategy (one row of the
strategies table, reusing the ddp trainer), a toy placement class (one row of the class table and its
subsets rule), a toy check (one new module in wirecheck/checks/), a toy GPU check (its declaration,
with its inputs builder, limit, words and figure, in one new module, and its test file) and a toy
test file (one new file in tests/, its work marker on its test), and nothing else: no list, no other
module is edited (`ROWS` and `NEW_MODULES` are every edit). Only thresholds.yaml, which is data, gains
the toys' entries: floors for the op, the class and the GPU figure, the strategy's slowdown, peak-memory
limit and throughput floors (the loader names each one a new row lacks: it must not go unjudged).

On that copy, the suite runs in simulation and collects, measures, judges and records each toy;
`wirecheck judge` judges the record again, `wirecheck report` draws it (the toy GPU figure in the
GPU section, by its declared label), `wirecheck plan` prices a node with the toys on it, `wirecheck
limits` lists the toy GPU floor, and the self-tests that read the tables (thresholds, the gpu_health
loader, strategies, the plan's every-test-declares-its-work) pass: a row that breaks any of them
fails here.
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

from e2e import PROJECT, make_project, run_suite

TOY_OP, TOY_STRATEGY, TOY_CLASS, TOY_CHECK = "all_reduce_max", "ddp_foreach", "whole_node", "toy_gpus_on_node"
TOY_GPU_CHECK, TOY_FIGURE, TOY_LABEL = "toy_copy_share", "toy_copy_share", "HBM copy per read (toy)"

# (file under src/wirecheck, the existing text the toy goes right after, the toy)
ROWS = (
    # a collective: its row (a reduction the kernels launch: max; one torch.distributed function and a
    # data rule, so the worker derives its kernel)
    ("vocab/ops.py", '       torch="all_to_all_single", data="transposed"),\n',
     '''    Op("all_reduce_max", "all_reduce_perf", False, True, lambda n: 2 * (n - 1) / n, _whole, _whole,
       reductions=("max",), torch="all_reduce", data="reduced"),
'''),
    # a strategy: its row, the ddp trainer run with its settings
    ("vocab/strategies.py", '    Strategy("fsdp", "PyTorch FSDP2 (fully_shard)", _FSDP2, STATE_PARTS, TORCH_HOLDS, _FSDP),\n',
     '''    Strategy("ddp_foreach", "PyTorch DDP, foreach AdamW", "wirecheck.training.ddp:DDPTrainer", (),
             TORCH_HOLDS, (Setting("optimizer", "foreach", "torch AdamW's foreach kernels: a toy variant of ddp"),
                           Setting("bucket_cap_mb", 25, "DDP's default bucket size, as the ddp row has it"),
                           Setting("gradient_as_bucket_view", True, "as the ddp row: .grad are views into the buckets"))),
'''),
    ("vocab/placements.py",
     '''    PlacementClass(CLASS_NETWORK, "GPUs of several nodes: traffic crosses the nodes' NICs", False, False),\n''',
     '''    PlacementClass("whole_node", "every GPU of the node at once", True, False),
'''),
    ("node/placement.py", "    CLASS_PAIR: _nvlink_pairs,\n", '''    "whole_node": lambda topo, gpus: [gpus] if len(gpus) >= 2 else [],
'''),
)
NEW_MODULES = {
    "checks/toy_gpu.py": '''"""A toy GPU check: each GPU's HBM copy figure (read+write counted) as a share of its read figure,
against a floor per GPU model; declared in one place, its inputs' builder beside it."""
from wirecheck.checks import SECTION_GPU, SPECS, check
from wirecheck.checks.words import Words
from wirecheck.core.verdict import FAIL, PASS, Verdict, not_measured, skip
from wirecheck.gpu.inputs import FromPhase, phase_error, where
from wirecheck.thresholds.declared import Floor
from wirecheck.vocab.work import FIGURES


def copy_share_inputs(run, phase, gpu):
    part = (phase.of(gpu) or {}).get("hbm")
    error = phase_error(phase, gpu, part)
    return {**where(run, gpu), "gpu_model": run.names.get(gpu), "simulated": run.simulated,
            "copy": None if error else part["copy"]["per_s"], "read": None if error else part["read"]["per_s"],
            "error": error}


@check("toy_copy_share", inputs=FromPhase(FIGURES, copy_share_inputs), section=SECTION_GPU,
       figure=lambda inputs: "toy_copy_share",
       limits=(Floor("gpu_health.floors.<model>.toy_copy_share", unit="%", label="HBM copy per read (toy)"),),
       words=Words("HBM copy per read", "the GPU copies far slower than it reads", "compare the HBM copy and read figures",
                   say={"no_floor": "no toy_copy_share floor for {gpu_model!r}"}))
def copy_share(thresholds, *, gpu, bus_id, gpu_model, simulated, copy, read, error=None):
    words = SPECS["toy_copy_share"].words
    what, where_ = words.judged(), f"GPU{gpu}"
    if error or not read:
        return not_measured(what, where_, error)
    floor = thresholds.gpu_health.floor("toy_copy_share", gpu_model, simulated)
    if floor is None:
        return skip(what, where_, words.said("no_floor", gpu_model=gpu_model))
    share = copy / read
    return Verdict("", what, where_, PASS if share >= floor.min else FAIL, measured=share * 100, unit="%",
                   limit={"min": floor.min * 100}, bound="floor", source=floor.source, yaml_path=floor.yaml_path)
''',
    "checks/toy.py": '''"""A toy check: every GPU of a placement is one of the node's."""
from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.verdict import no_problems

WORDS = Words("placement GPUs on the node", "a placement names a GPU the node does not have",
              "compare the placement with `wirecheck topo`", say={"missing": "GPU{gpu} is not on this node"})


@check("toy_gpus_on_node", words=WORDS)
def gpus_on_node(thresholds, *, placement: str, gpus: list, node_gpus: list):
    missing = [WORDS.said("missing", gpu=g) for g in gpus if g not in node_gpus]
    return no_problems(WORDS.judged(), placement, missing)
''',
}
TOY_TEST_FILE = '''"""A toy test file: the toy check on every pair placement; no stage marker, no list to join."""
import pytest

from wirecheck import checks


@pytest.mark.work()  # reads the topology only: pytest's share in the plan
@pytest.mark.placements("pair")
def test_toy_gpus_on_node(node, topology, placement, record):
    verdict = record(checks.toy.gpus_on_node(node.thresholds, placement=placement.id, gpus=list(placement.gpus),
                                             node_gpus=[g.index for g in topology.gpus]))
    assert verdict.ok, verdict.message
'''
TOY_GPU_TEST_FILE = '''"""A toy GPU check's test: its inputs as its declaration builds them."""
import pytest

from wirecheck import checks
from wirecheck.vocab.work import FIGURES

pytestmark = pytest.mark.health


@pytest.mark.work(FIGURES)
def test_toy_copy_share(node, gpu, gpu_load, gpu_health_workers, record):
    verdict = record(checks.toy_gpu.copy_share(
        node.thresholds, **gpu_load.inputs("toy_copy_share", gpu, gpu_health_workers)))
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
    for ops in c["floors"].values():  # the op's floors: all_reduce's, wherever it has some
        if "all_reduce" in ops:
            ops[TOY_OP] = dict(ops["all_reduce"])
    c["floors"][TOY_CLASS] = dict(c["floors"]["pcie"])  # the class: judged on hardware as PCIe is
    for section in (c["latency"]["ceilings"], c["half_peak"]["ceilings"]):
        section[TOY_CLASS] = {}  # curve ceilings: none yet
    sim = c["simulated_floors"]  # (where "*" stands for every op, the new op is one of them)
    sim[TOY_OP] = dict(sim.get("all_reduce") or sim["*"])
    t = data["training"]  # the strategy: the slowdown, peak memory and throughput floors the loader asks for (ddp's)
    t["slow_wire"]["min_slowdown"][TOY_STRATEGY] = t["slow_wire"]["min_slowdown"]["ddp"]
    t["peak_memory"]["any"][TOY_STRATEGY] = t["peak_memory"]["any"]["ddp"]
    for strategies in t["throughput_floors"].values():
        strategies[TOY_STRATEGY] = strategies["ddp"]
    sim = t["simulated_throughput_floors"]
    sim[TOY_STRATEGY] = sim.get("ddp") or sim["*"]
    g = data["gpu_health"]  # the GPU check's floor: for one model, and for CPU ranks
    g["floors"]["NVIDIA H200"][TOY_FIGURE] = {"min": "50 %", "source": "a toy floor"}
    g["simulated_floors"][TOY_FIGURE] = {"min": "1 %", "source": "a toy floor: CPU ranks"}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# The self-tests that read the tables, run on the toy tree: every op and class judged on hardware,
# every strategy with its limits, the strategies table, every suite test declaring its work.
# (Not the one that edits the shipped file's text: the toy's file is written back through YAML.)
TABLE_SELFTESTS = ("selftests/test_thresholds.py", "selftests/test_thresholds_gpu_health.py",
                   "selftests/test_strategies_table.py", "selftests/test_check_declarations.py",
                   "selftests/test_plan.py::test_the_plans_groups_hold_exactly_the_collected_tests",
                   "-k", "not test_duplicate_key_is_refused_with_both_lines")


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory):
    """The copy: src with the toys, the plugin (fixtures/pytest_wirecheck/, found as pytest_wirecheck
    through a link, so the suite's paths are the copy's), tests, selftests, and the toys' thresholds.yaml."""
    root = tmp_path_factory.mktemp("toys")
    shutil.copytree(PROJECT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    _add_toys(root / "src")
    shutil.copytree(PROJECT / "fixtures" / "pytest_wirecheck", root / "fixtures" / "pytest_wirecheck",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "packages").mkdir()
    (root / "packages" / "pytest_wirecheck").symlink_to(root / "fixtures" / "pytest_wirecheck",
                                                         target_is_directory=True)
    shutil.copy(PROJECT / "conftest.py", root / "conftest.py")
    shutil.copytree(PROJECT / "tests", root / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PROJECT / "selftests", root / "selftests", ignore=shutil.ignore_patterns("__pycache__", "data"))
    (root / "tests" / "test_toy.py").write_text(TOY_TEST_FILE)
    (root / "tests" / "test_toy_gpu.py").write_text(TOY_GPU_TEST_FILE)
    (root / "thresholds.yaml").write_text(_thresholds_for_toys())
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\naddopts = --strict-markers\n")
    paths = [root / "src", root / "packages", root, root / "selftests"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")])}
    return root, env


def _run(toy_tree, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    root, env = toy_tree
    return subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def toy_run(toy_tree):
    root, _ = toy_tree
    record = root / "run.jsonl"
    # a bound on a hang, not the run's time: on a loaded 2-core machine the run takes minutes
    suite = _run(toy_tree, "-m", "pytest", "-p", "no:cacheprovider", "--simulate=h200-sxm-2",
                 f"--wirecheck-json={record}", "-v", "-rs", "-k", SELECTION, timeout=900)
    judge = _run(toy_tree, "-m", "wirecheck.cli.main", "judge", str(record), "--thresholds",
                 str(root / "thresholds.yaml"), timeout=120)
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


def test_a_gpu_check_is_its_declaration_and_its_test(toy_run):
    """Its inputs built by its own builder from the GPU load, its floor read from thresholds.yaml by
    its declaration (the CPU ranks' floor in simulation), on every GPU."""
    _, _, lines = toy_run
    for gpu in ("GPU0", "GPU1"):
        (verdict,) = _verdicts(lines, TOY_GPU_CHECK, gpu)
        assert verdict["outcome"] == "pass" and verdict["limit"] == {"min": 1.0}, verdict
        assert verdict["yaml_path"].endswith(f"gpu_health.simulated_floors.{TOY_FIGURE}"), verdict
        assert verdict["inputs"]["copy"] > 0 and verdict["inputs"]["read"] > 0, verdict


def test_judge_knows_every_toy(toy_run):
    _, judge, lines = toy_run
    out = judge.stdout + judge.stderr
    assert judge.returncode == 10, out  # passed, and says the run was a simulation
    judged = {(v["check"], v["where"]) for v in lines if v["type"] == "verdict"}
    assert {(TOY_CHECK, "pair-0.1"), ("busbw", f"{TOY_CLASS}-2gpu-0.1"), (TOY_GPU_CHECK, "GPU0")} <= judged
    assert " 0 failed" in out and "0 changed since recorded" in out, out


def test_the_report_draws_every_toy(toy_tree, toy_run):
    root, _ = toy_tree
    report = _run(toy_tree, "-m", "wirecheck.cli.main", "report", str(root / "run.jsonl"), "-o", str(root / "run.html"),
                  timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    page = (root / "run.html").read_text()
    # the GPU figure in the GPU section, named as its declaration's Floor labels it
    assert all(toy in page for toy in (TOY_OP, TOY_CHECK, f"{TOY_CLASS}-2gpu-0.1", TOY_STRATEGY, TOY_LABEL)), report.stdout


def test_the_plan_prices_a_node_with_every_toy(toy_tree):
    """The plan collects the copy's suite for an 8-GPU node: the toy op (no unit cost measured for it,
    priced by its floors), the toy class's placement and the toy strategy, every test declared."""
    done = _run(toy_tree, "-m", "wirecheck.cli.main", "plan", "--profile", "h200-sxm-8", "--level", "acceptance",
                "--json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    groups = json.loads(done.stdout)["groups"]
    assert not [g["function"] for g in groups if not g["known"]]
    assert any(TOY_OP in g["params"].get("ops", []) and g["seconds"] > 0 for g in groups), groups
    assert any(g["class"] == TOY_CLASS for g in groups)
    assert any(TOY_STRATEGY in g["params"].get("strategies", []) for g in groups)
    assert any(g["function"] == "test_toy_copy_share" for g in groups), [g["function"] for g in groups]


def test_the_limits_list_the_toy_gpu_floor(toy_tree):
    """`wirecheck limits` lists the floor the toy GPU check declares, for the model that has one."""
    done = _run(toy_tree, "-m", "wirecheck.cli.main", "limits", "--profile", "h200-sxm-8", "--json", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [r for r in json.loads(done.stdout)["limits"] if r["check"] == TOY_GPU_CHECK]
    assert rows and rows[0]["yaml_path"].endswith(f"NVIDIA H200.{TOY_FIGURE}"), rows


def test_the_self_tests_that_read_the_tables_pass_on_the_toys(toy_tree):
    done = _run(toy_tree, "-m", "pytest", "-p", "no:cacheprovider", "-q", *TABLE_SELFTESTS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_an_unknown_stage_is_a_usage_error(pytester):
    root = make_project(pytester)
    (root / "tests" / "test_late.py").write_text(
        'import pytest\n\npytestmark = pytest.mark.stage("lastly")\n\n\ndef test_late():\n    assert True\n')
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--collect-only", "tests/test_late.py")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*test_late.py::test_late: pytest.mark.stage('lastly'): unknown stage; "
                                 "write one of 'inventory', 'measure', 'last'*"])
