"""Bad input, tried on every command: a file of non-UTF-8 bytes, a binary one, an empty one,
one cut in the middle, a directory where a file belongs, a path that does not exist, and for what a
command writes: a directory, a folder it cannot write, a folder that is a file. None may end in a
traceback, and each message names the path it was given.

Every command is called in this process through its own main() (pytest's face through pytester's
in-process run), so the whole table costs a few seconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from e2e import PROJECT, make_project
from wirecheck.cli import judge
from wirecheck.cli import main as cli
from wirecheck.cli import fleet as fleet_cli
from wirecheck.cli import report
from wirecheck.core import exit_codes

RECORD = PROJECT / "selftests" / "data" / "sim-h200-sxm-2.jsonl"
THRESHOLDS = PROJECT / "thresholds.yaml"
TOPOLOGY = PROJECT / "fixtures" / "pytest_wirecheck" / "topologies" / "h200-sxm-2.txt"
UNIT_COSTS = PROJECT / "fixtures" / "pytest_wirecheck" / "unit_costs.yaml"

INPUT_KINDS = ("non-UTF-8", "binary", "empty", "truncated", "directory", "nonexistent")
OUTPUT_KINDS = ("directory", "unwritable", "no such folder", "folder is a file")


def bad_input(tmp_path: Path, kind: str, valid: Path) -> Path:
    """A file (or not) of `kind` made from the valid file `valid`, named like it."""
    path = tmp_path / "bad" / valid.name
    path.parent.mkdir(exist_ok=True)
    text = valid.read_bytes()
    if kind == "non-UTF-8":  # Latin-1 text where UTF-8 is read: one é in the first line
        first = text.index(b"\n")
        path.write_bytes(text[:first] + b" caf\xe9" + text[first:])
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 16)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":  # cut in the middle of its third line, as a full disk or a kill leaves it
        head = text.split(b"\n")
        path.write_bytes(b"\n".join(head[:2]) + b"\n" + head[2][: len(head[2]) // 2])
    elif kind == "directory":
        path.mkdir()
    elif kind == "nonexistent":
        pass
    return path


def bad_output(tmp_path: Path, kind: str, name: str) -> Path:
    if kind == "directory":
        path = tmp_path / name
        path.mkdir()
        return path
    if kind == "unwritable":  # /proc refuses new files, even to root
        return Path("/proc") / name
    if kind == "no such folder":
        return tmp_path / "nowhere" / name
    plain = tmp_path / "plain-file"
    plain.write_text("")
    return plain / name


def call(main, argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out + out.err


def assert_clean(code: int, text: str, allowed: set[int], named: str) -> None:
    assert code in allowed, f"exit {code}, expected {allowed}:\n{text}"
    assert "Traceback" not in text, text
    assert named in text, f"the message does not name {named}:\n{text}"


# ---- reading commands: judge, report, fleet report, fleet inventory, topo ----------------------------

# (command, main, argv given the bad path, the valid file it replaces, allowed exit codes by kind)
READERS = {
    "judge RECORD": (judge.main, lambda p, t: [str(p)], RECORD, {"truncated": {1}}),
    "judge --thresholds": (judge.main, lambda p, t: [str(RECORD), "--thresholds", str(p)], THRESHOLDS, {}),
    "report RECORD": (report.main, lambda p, t: [str(p), "-o", str(t / "r.html")], RECORD, {"truncated": {0}}),
    "fleet report --thresholds": (fleet_cli.main, lambda p, t: ["report", str(_fleet_dir(t)), "--thresholds", str(p)],
                                  THRESHOLDS, {}),
    "fleet report --nodes": (fleet_cli.main, lambda p, t: ["report", str(_fleet_dir(t)), "--nodes", str(p)],
                             RECORD, {}),
    "fleet inventory --thresholds": (fleet_cli.main, lambda p, t: ["inventory", "--thresholds", str(p)], THRESHOLDS, {}),
    "fleet inventory --simulate": (fleet_cli.main, lambda p, t: ["inventory", "--simulate", str(p)], TOPOLOGY,
                                   {"non-UTF-8": {0}}),
    "topo --simulate": (cli.main, lambda p, t: ["topo", "--simulate", str(p)], TOPOLOGY, {"non-UTF-8": {0}}),
    "plan --thresholds": (cli.main, lambda p, t: ["plan", "--thresholds", str(p)], THRESHOLDS, {}),
    "advise --thresholds": (cli.main, lambda p, t: ["advise", "--params", "7B", "--gpus", "2", "--profile",
                                                    "h200-sxm-2", "--thresholds", str(p)], THRESHOLDS, {}),
    "plan --unit-costs": (cli.main, lambda p, t: ["plan", "--unit-costs", str(p)], UNIT_COSTS, {}),
    "plan --record": (cli.main, lambda p, t: ["plan", "--record", str(p)], RECORD, {"truncated": {0}}),
    # validate said 1 (a check failed): the node is unhealthy whatever the record, whose fault is named in the line
    "node-state --record": (cli.main, lambda p, t: ["node-state", "--exit-code", "1", "--record", str(p)], RECORD,
                            {kind: {1} for kind in INPUT_KINDS}),
    "nccl-tests --thresholds": (cli.main, lambda p, t: ["nccl-tests", "--build-dir", str(t), "--thresholds", str(p)],
                                THRESHOLDS, {}),
}


# A `topo -m` copy with a Latin-1 byte, or cut after its matrix rows, is read as pasted copies are.
LENIENT_TOPOLOGY = ("non-UTF-8", "truncated")


def _fleet_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet"
    if not folder.exists():
        folder.mkdir()
        for node in ("node01", "node02", "node03"):
            shutil.copy(RECORD, folder / f"{node}.jsonl")
    return folder


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("command", READERS)
def test_a_bad_input_file_is_a_message_naming_it(command, kind, tmp_path, capsys):
    main, argv, valid, allowed = READERS[command]
    path = bad_input(tmp_path, kind, valid)
    code, text = call(main, argv(path, tmp_path), capsys)
    if command == "node-state --record" and kind == "truncated":  # read as far as it goes: a simulated run
        assert code == 2 and text == "wirecheck: SIMULATION: no GPU of this node was validated\n", text
        return
    if command.startswith(("topo", "fleet inventory --simulate")) and kind in LENIENT_TOPOLOGY and code == 0:
        return  # read: pasted copies carry such bytes, and copies cut after the matrix are common
    assert_clean(code, text, allowed.get(kind, set()) | {2}, str(path))


def test_judge_on_a_cut_simulated_record_says_incomplete_simulation_and_the_torn_line(tmp_path, capsys):
    """It ended "FAILED: 0 failed, 28 passed" with no SIMULATION, and dropped the torn line without a word."""
    path = bad_input(tmp_path, "truncated", RECORD)
    code, text = call(judge.main, [str(path)], capsys)
    assert_clean(code, text, {1}, f"{path}:3: a torn last line (not JSON: the run was killed or its disk filled "
                                  "while writing it): skipped")
    last = text.splitlines()[-1]
    assert last.startswith("wirecheck judge: INCOMPLETE: a run did not end (see above), so not every check was "
                           "judged: 0 failed, "), last
    assert last.endswith(f"; SIMULATION: {path} judged a simulated run, no node was validated"), last
    assert "FAILED" not in text, text
    # a failure in it is still FAILED, and still a simulation
    code, text = call(judge.main, [str(RECORD), "--thresholds", str(_failing_thresholds(tmp_path))], capsys)
    last = text.splitlines()[-1]
    assert code == 1 and last.startswith("wirecheck judge: FAILED: ") and "; SIMULATION: " in last, text


def test_judge_refuses_one_run_given_twice(tmp_path, capsys):
    """`judge x.jsonl x.jsonl` counted every verdict twice, without a word; a copy of it under another name too."""
    code, text = call(judge.main, [str(RECORD), str(RECORD)], capsys)
    assert_clean(code, text, {exit_codes.BAD_INPUT}, f"{RECORD}: the same file as {RECORD} (host vm, started "
                                                     "2026-11-30T22:20:00+00:00): each run is judged once")
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(RECORD.read_bytes())
    code, text = call(judge.main, [str(RECORD), str(copy)], capsys)
    assert_clean(code, text, {exit_codes.BAD_INPUT}, f"{copy}: the same run as {RECORD}")
    assert "verdicts from" not in text, "refused before anything is judged"


def _failing_thresholds(tmp_path: Path) -> Path:
    """The shipped thresholds with every simulated busbw floor out of reach."""
    from e2e import thresholds_with

    def raise_floors(data):
        for op in data["collectives"]["simulated_floors"].values():
            for key in op:
                op[key] = {"min": "5000 GB/s", "source": "selftest: out of reach"}

    path = tmp_path / "unreachable.yaml"
    path.write_text(thresholds_with(raise_floors))
    return path


@pytest.mark.parametrize("kind", INPUT_KINDS[:4])
def test_bad_files_in_a_history_or_fleet_directory_are_named(kind, tmp_path, capsys):
    history = tmp_path / "history"
    history.mkdir()
    bad = bad_input(tmp_path, kind, RECORD)
    shutil.move(bad, history / "night.jsonl")
    code, text = call(report.main, [str(RECORD), "--history", str(history), "-o", str(tmp_path / "r.html")], capsys)
    if kind == "truncated":  # a run cut short is still a run: it joins the trend
        assert code == 0 and "Traceback" not in text, text
    else:
        assert_clean(code, text, {0}, f"left out of the trend: {history / 'night.jsonl'}")
    fleet = _fleet_dir(tmp_path)
    shutil.copy(history / "night.jsonl", fleet / "node04.jsonl")
    code, text = call(fleet_cli.main, ["report", str(fleet)], capsys)
    assert_clean(code, text, {1, 2}, "node04.jsonl")  # 1: a node cut short fails the fleet, naming its record


@pytest.mark.parametrize("given", ["nonexistent", "a file"])
def test_a_directory_argument_that_is_not_one(given, tmp_path, capsys):
    path = tmp_path / "missing" if given == "nonexistent" else RECORD
    code, text = call(report.main, [str(RECORD), "--history", str(path), "-o", str(tmp_path / "r.html")], capsys)
    assert_clean(code, text, {2}, str(path))
    code, text = call(fleet_cli.main, ["report", str(path)], capsys)
    assert_clean(code, text, {2}, str(path))
    code, text = call(fleet_cli.main, ["inventory", "--sysfs-root", str(path)], capsys)
    assert_clean(code, text, {0, 2}, "" if code == 0 else str(path))  # no sysfs there: no ports, said so


# ---- writing commands: report -o/--prometheus, fleet report --json/--html, topo --save -------------

WRITERS = {
    "report -o": (report.main, lambda p, t: [str(RECORD), "-o", str(p)]),
    "report --prometheus": (report.main, lambda p, t: [str(RECORD), "-o", str(t / "r.html"), "--prometheus", str(p)]),
    "fleet report --json": (fleet_cli.main, lambda p, t: ["report", str(_fleet_dir(t)), "--json", str(p)]),
    "topo --save": (cli.main, lambda p, t: ["topo", "--simulate", "h200-sxm-2", "--save", str(p)]),
}


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("command", WRITERS)
def test_an_unwritable_output_is_a_message_naming_it(command, kind, tmp_path, capsys):
    main, argv = WRITERS[command]
    path = bad_output(tmp_path, kind, "out.x")
    code, text = call(main, argv(path, tmp_path), capsys)
    assert_clean(code, text, {2}, str(path))
    assert ".tmp" not in text, text  # never a temporary name of ours


# ---- values: memory ---------------------------------------------------------------------------------


@pytest.mark.parametrize("params", ["", "caf\udce9", "1e30", "abc", "nan", "-5", "1.5", "7BB", "7X", "1e999999999"])
def test_memory_takes_a_parameter_count_or_says_why_not(params, capsys):
    code, text = call(cli.main, ["memory", "--params", params, "--gpus", "4"], capsys)
    assert_clean(code, text, {2}, "--params")


def test_nccl_tests_without_a_driver_offers_no_option_it_refuses(tmp_path, capsys):
    code, text = call(cli.main, ["nccl-tests", "--build-dir", str(tmp_path)], capsys)
    if code != 2 or "NVML" not in text:
        pytest.skip("NVML answers here: this machine has a driver")
    assert "--simulate" not in text and "needs a GPU node" in text, text


# ---- pytest's face (wirecheck validate passes these through) ----------------------------------------

PYTEST_READERS = {"--thresholds": THRESHOLDS, "--simulate": TOPOLOGY}


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("option", PYTEST_READERS)
def test_the_suite_names_a_bad_input_file(option, kind, pytester):
    root = make_project(pytester)
    path = bad_input(Path(root), kind, PYTEST_READERS[option])
    args = ["--simulate=h200-sxm-2"] if option == "--thresholds" else []
    # one test file whose name no self-test module shares (in-process, a same-named module is already imported)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", *args, f"{option}={path}",
                                          "tests/test_inventory.py")
    text = "\n".join(result.outlines + result.errlines)
    if option == "--simulate" and kind in LENIENT_TOPOLOGY and result.ret == 10:
        return  # read, as above
    assert_clean(result.ret, text, {4}, str(path))
    assert "INTERNALERROR" not in text, text
    assert not (Path(root) / ".wirecheck").exists()  # a usage error leaves no record


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
def test_the_suite_names_an_unwritable_record(kind, pytester):
    root = make_project(pytester)
    path = bad_output(Path(root), kind, "run.jsonl")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "--simulate=h200-sxm-2",
                                          f"--wirecheck-json={path}", "tests/test_inventory.py")
    text = "\n".join(result.outlines + result.errlines)
    if kind == "no such folder":  # made for the record, and taken back with it: --collect-only ran nothing
        assert result.ret == 10 and not path.parent.exists(), text
        return
    assert_clean(result.ret, text, {4}, f"--wirecheck-json: cannot write the record file {path}")


def test_a_run_in_a_read_only_directory_is_told_to_choose_a_record(pytester, monkeypatch):
    """No --wirecheck-json was passed: the message says where the record would go and how to choose."""
    root = make_project(pytester)
    monkeypatch.chdir("/proc")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "--simulate=h200-sxm-2",
                                          "--rootdir", str(root), str(Path(root) / "tests" / "test_inventory.py"))
    text = "\n".join(result.outlines + result.errlines)
    assert_clean(result.ret, text, {4}, "without --wirecheck-json, a run keeps its record in /proc/.wirecheck")
    assert "pass a writable path" not in text


# ---- nccl-tests on a GPU node: its build folder and its record ---------------------------------------


@pytest.fixture
def on_a_gpu_node(monkeypatch):
    """NVML answers with the recorded 2x H200: nccl-tests gets past its GPU check to its own inputs."""
    from wirecheck.node import nvml
    from wirecheck.node.topo_text import load_recorded

    topology = load_recorded("h200-sxm-2", PROJECT / "fixtures" / "pytest_wirecheck" / "topologies")
    monkeypatch.setattr(nvml, "read_topology", lambda: topology)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.parametrize("kind", ("nonexistent", "a file", "no binaries"))
def test_nccl_tests_names_a_build_folder_without_its_binaries(kind, on_a_gpu_node, tmp_path, capsys):
    build = tmp_path / "build"
    if kind == "a file":
        build.write_text("")
    elif kind == "no binaries":
        build.mkdir()
    code, text = call(cli.main, ["nccl-tests", "--build-dir", str(build), "--out", str(tmp_path / "r.jsonl")], capsys)
    assert_clean(code, text, {2}, f"{build} has no executable all_reduce_perf")
    assert "build nccl-tests there" in text
    assert not (tmp_path / "r.jsonl").exists()  # nothing ran, so no record


@pytest.mark.parametrize("kind", [k for k in OUTPUT_KINDS if k != "no such folder"])  # that one is made
def test_nccl_tests_names_an_unwritable_record(kind, on_a_gpu_node, tmp_path, capsys):
    build = tmp_path / "build"
    build.mkdir()
    ran = tmp_path / "ran"
    from wirecheck.vocab.ops import COLLECTIVES

    for binary in (op.binary for op in COLLECTIVES.values()):  # stand-ins that would leave a mark if they ran
        (build / binary).write_text(f"#!/bin/sh\ntouch {ran}\n")
        (build / binary).chmod(0o755)
    path = bad_output(tmp_path, kind, "out.jsonl")
    code, text = call(cli.main, ["nccl-tests", "--build-dir", str(build), "--out", str(path)], capsys)
    assert_clean(code, text, {2}, str(path))
    assert "--out" in text and ".tmp" not in text, text
    assert not ran.exists()  # refused before any binary ran


@pytest.mark.parametrize("line", ["../../etc/passwd", "node01 node02", "<b>node</b>", "node\x1b[2J"])
def test_a_node_list_line_that_is_not_a_node_name_is_refused(line, tmp_path, capsys):
    """Names become file names (DIR/<name>.jsonl) and page text: a path, markup or a control sequence is refused."""
    nodes = tmp_path / "nodes.txt"
    nodes.write_text(f"node01\n{line}\n")
    code, text = call(fleet_cli.main, ["report", str(_fleet_dir(tmp_path)), "--nodes", str(nodes)], capsys)
    assert_clean(code, text, {2}, f"--nodes {nodes}, line 2:")
    assert "is not a node name" in text


# ---- the suite's run options: a slip of the finger is a usage error before anything runs -------------

# (arguments, what the message must say): each names the option, the value and the fix, exit 4.
RUN_OPTION_MISTAKES = {
    "shorter than a round": (["--level", "burn-in", "--duration", "0.5s"],
                             "--duration 0.5s: shorter than one burn-in round (3 s, thresholds.yaml: "
                             "gpu_health.simulated.sustained.duration.burn_in), so no round would run; give at least "
                             "--duration 3s"),
    "longer than a week": (["--level", "burn-in", "--duration", "1e9h"],
                           "--duration 1e9h: longer than a week (7d), the longest burn-in taken; give at most --duration 7d"),
    "eight days": (["--level", "burn-in", "--duration", "8d"], "--duration 8d: longer than a week"),
    "negative, with a space": (["--level", "burn-in", "--duration", "-5m"],
                               "--duration -5m: a duration cannot be negative; write how long, e.g. --duration 5m"),
    "negative, with =": (["--level", "burn-in", "--duration=-5m"], "--duration -5m: a duration cannot be negative"),
    "no value": (["--level", "burn-in", "--duration"], "--duration needs a value"),
    "unknown unit": (["--level", "burn-in", "--duration", "5 furlongs"], 'unknown unit "furlongs" for a duration'),
    "no unit": (["--level", "burn-in", "--duration", "300"], 'a bare duration is most likely seconds: write "300 s"'),
    "only separators": (["--placement", ","], "--placement ',': names no placement; give an id or a class"),
}


@pytest.mark.parametrize("mistake", RUN_OPTION_MISTAKES)
def test_a_run_option_mistake_is_a_usage_error_naming_the_fix(mistake, pytester):
    """Before: `--duration 0.5s` ran no round and exited 1 with 5 failed checks (a typo drained a node), `1e9h`
    started, `-5m` got argparse's "expected one argument"."""
    root = make_project(pytester)
    args, said = RUN_OPTION_MISTAKES[mistake]
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "--simulate=h200-sxm-2",
                                          "tests/test_inventory.py", *args)
    text = "\n".join(result.outlines + result.errlines)
    assert_clean(result.ret, text, {4}, said)
    assert "expected one argument" not in text and "INTERNALERROR" not in text, text
    assert not (Path(root) / ".wirecheck").exists()  # nothing ran: no record


@pytest.mark.parametrize("given, collected", [
    (["--level", "burn-in", "--duration", "1h30m"], "test_burn_in_without_hard_fault"),
    (["--level", "burn-in", "--duration", "5m"], "test_burn_in_without_hard_fault"),
    (["--level", "burn-in", "--duration", "90 s"], "test_burn_in_without_hard_fault"),
    (["--placement", "nvswitch,"], "test_busbw[nvswitch-2gpu-0.1-"),
    (["--placement", "nvswitch, forced_pcie"], "test_busbw[forced_pcie-2gpu-0.1-"),
])
def test_the_forms_people_write_are_taken(given, collected, pytester):
    """`5m`, `1h30m` and `90 s` are durations; `--placement nvswitch,` is the placement nvswitch (before: "unknown
    placement (nvswitch); did you mean nvswitch?")."""
    make_project(pytester)
    # importlib mode: the whole tests/ is collected in this process, beside self-test modules of the same names
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--import-mode=importlib", "--collect-only", "-q",
                                          "--simulate=h200-sxm-2", *given)
    text = "\n".join(result.outlines + result.errlines)
    assert result.ret == 10, text  # collected, in simulation
    assert collected in text, text

# ---- values: a thresholds file's own mistakes --------------------------------------------------------

# (what the file holds, what the message says, what it must not say): each names its cause and no other.
_COMMON_CAUSES = ("a tab in the indentation", "an unclosed quote", "an unclosed bracket", "a key without its ':'")
THRESHOLDS_MISTAKES = {
    "duplicate key": ("profiles:\n  a: 1\n  a: 2\n", "line 3, column 3: duplicate key 'a' (first at line 2); remove one",
                      _COMMON_CAUSES + ("not valid YAML",)),
    "tab": ("profiles:\n\ta: 1\n", "line 2, column 1: while scanning for the next token found character that cannot "
            "start any token (a tab in the indentation: indent with spaces)", _COMMON_CAUSES[1:]),
    "unclosed quote": ('profiles: "x\na: 1\n', "(an unclosed quote)", _COMMON_CAUSES[:1] + _COMMON_CAUSES[2:]),
    "unclosed bracket": ("profiles: [1, 2\na: 1\n", "(an unclosed bracket", _COMMON_CAUSES[:2] + _COMMON_CAUSES[3:]),
    # 110,000 values and no alias: before, "its aliases (*name) stand for more than 100000 values"
    "many values, no alias": ("profiles:\n" + "  - 1\n" * 110_000, "line 2, column 3: more than 100000 values",
                              ("alias",)),
}


@pytest.mark.parametrize("mistake", THRESHOLDS_MISTAKES)
def test_a_thresholds_mistake_names_its_own_cause(mistake, tmp_path, capsys):
    text, said, unsaid = THRESHOLDS_MISTAKES[mistake]
    path = tmp_path / "thresholds.yaml"
    path.write_text(text)
    code, out = call(judge.main, [str(RECORD), "--thresholds", str(path)], capsys)
    assert_clean(code, out, {2}, f"{path}: ")
    assert said in out, out
    assert not [word for word in unsaid if word in out], out


def test_a_thresholds_file_over_the_size_bound_is_refused_before_it_is_parsed(tmp_path, capsys):
    """A 50 MB file of plain keys cost 58 s and 3.9 GB, then was refused for aliases it did not have."""
    import time

    from wirecheck.thresholds.yaml_reader import MAX_BYTES

    path = tmp_path / "thresholds.yaml"
    line = b"key: 1\n"
    path.write_bytes(line * (MAX_BYTES // len(line) + 1))
    started = time.monotonic()
    code, out = call(judge.main, [str(RECORD), "--thresholds", str(path)], capsys)
    assert time.monotonic() - started < 20, "parsed before it was refused"  # parsing it took 58 s
    assert_clean(code, out, {2}, f"{path}: larger than 4 MiB (the shipped thresholds.yaml is about 60 KB)")
    assert "alias" not in out
    assert THRESHOLDS.stat().st_size < MAX_BYTES / 16  # the bound leaves the shipped file room to grow
