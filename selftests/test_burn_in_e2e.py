"""The burn-in as an operator runs it, in simulation with rounds of a second: a short one records every
round as it ends, prints one plain progress line per round and ends with its verdicts; a GPU that computes
one wrong element from round 2 on stops it in round 2, named; Ctrl-C on `wirecheck validate` in a terminal
(the progress line rewritten in place) keeps every round so far and the record ends interrupted."""

from __future__ import annotations

import re
import sys

from e2e import make_project, pythonpath, records, run_suite, thresholds_with
from terminal import Terminal
from wirecheck.core.exit_codes import CTRL_C, FAILED, SIMULATED
from wirecheck.vocab.ops import OPS

ROUND_S = 0.5
WINDOW_S = 0.1  # the load's TFLOP/s window: a round needs two
DURATION_S = 4
FAULTY = '''
import pytest


@pytest.fixture(scope="module")
def burn_in_workers():
    return "faulty_burn_in_worker"  # rank 1 (GPU1) computes one bit of element 5 wrong from round 2 on
'''


def _short_rounds(data):
    sim = data["gpu_health"]["simulated"]
    sim["sustained"]["duration"] = {"quick": "0.5 s", "acceptance": "0.5 s", "burn_in": f"{ROUND_S:g} s"}
    sim["sustained"]["window"] = f"{WINDOW_S:g} s"
    # Not a test of speed: two CPU ranks on a loaded 2-core machine ran 8x apart (87 % below their peer, load 10-14),
    # past the shipped simulated peer rule (80 %); only a wrong result may fail here.
    data["gpu_health"]["peers"]["simulated"]["max_below_median"] = "99 %"


def _burn_in(pytester, duration: str, *extra: str, conftest: str | None = None):
    root = make_project(pytester, thresholds_text=thresholds_with(_short_rounds), tests_conftest=conftest)
    out = root / "run.jsonl"
    result = run_suite(pytester, "tests/test_burn_in.py", "--simulate=h200-sxm-2", "--placement", "nvswitch",
                       f"--thresholds={root / 'thresholds.yaml'}", "--level", "burn-in", "--duration", duration,
                       f"--wirecheck-json={out}", "-rfs", *extra)
    return result, records(out)


def _kinds(lines: list[dict], kind: str) -> list[dict]:
    return [r for r in lines if r.get("type") == "measurement" and r.get("kind") == kind]


def test_a_short_burn_in_records_each_round_prints_a_line_per_round_and_ends_with_verdicts(pytester):
    # How many rounds fit in the duration is the machine's business (a loaded one runs each round's memory
    # test and collectives slower): what holds anywhere is that rounds follow each other until what is left
    # of the duration is too short for one. 4 s leaves room for two rounds even at a load of 7 on 2 cores.
    result, lines = _burn_in(pytester, f"{DURATION_S}s")
    text = result.stdout.str()
    assert result.ret == SIMULATED, text  # nothing failed, in simulation
    rounds = _kinds(lines, "burn_in_round")
    numbers = [r["details"]["round"] for r in rounds]
    assert len(numbers) >= 2 and numbers == list(range(1, len(numbers) + 1)), numbers
    # every round but the last is a whole one; the burn-in stopped only with less than a round's windows left
    assert all(r["details"]["round_s"] == ROUND_S for r in rounds[:-1]), [r["details"]["round_s"] for r in rounds]
    for r in rounds:
        d = r["details"]
        assert d["fault"] is None and not d["interrupted"]
        assert set(d["gpus"]) == {"GPU0", "GPU1"}
        for g in d["gpus"].values():
            assert g["flops_per_s"] > 0 and g["math"]["checked"] > 0 and g["math"]["mismatched_elements"] == 0
            assert g["memory"]["patterns"] and not any(p["mismatched_words"] for p in g["memory"]["patterns"])
        assert d["collectives"] and all(c["wrong"] == 0 and c["busbw"] for c in d["collectives"].values())
        assert d["series"]["GPU0"]["windows"], "every window of the round is in the record"
    (summary,) = _kinds(lines, "burn_in")
    assert summary["details"]["status"] == "complete" and summary["details"]["rounds"] == len(numbers)
    # (its seconds are rounded to a tenth)
    assert summary["details"]["seconds"] >= DURATION_S - 2 * WINDOW_S - 0.1, "stopped before the duration was spent"
    # the record holds each round before the verdicts judged over all of them, and ends complete
    first_verdict = next(i for i, r in enumerate(lines) if r["type"] == "verdict")
    assert max(lines.index(r) for r in rounds) < first_verdict
    assert lines[-1]["type"] == "end" and lines[-1]["status"] == "complete"
    verdicts = {(v["check"], v["where"]): v["outcome"] for v in lines if v["type"] == "verdict"}
    assert verdicts[("burn_in_no_hard_fault", None)] == "pass"
    for gpu in ("GPU0", "GPU1"):
        for check in ("sustained_throughput", "burn_in_throughput_drift", "memory_pattern"):
            assert verdicts[(check, gpu)] == "pass", (check, gpu)
        assert verdicts[("sustained_clocks", gpu)] == "skip"  # no NVML on CPU ranks
    per_op = {(v["check"], v["inputs"].get("op")): v["outcome"] for v in lines
              if v["type"] == "verdict" and v["where"] == "nvswitch-2gpu-0.1"}
    # The burn-in cycles through the collectives of the table in order, round after round; how far it gets in the
    # duration is the machine's business (all of them on a quiet one, two at a load of 14 on 2 cores).
    cycled = [op for op in OPS if ("busbw", op) in per_op]
    assert len(cycled) >= 2 and cycled == list(OPS)[:len(cycled)], cycled
    for op in cycled:
        assert per_op[("busbw", op)] == "pass" and per_op[("burn_in_busbw_spread", op)] in ("pass", "skip"), op
    # not a terminal: one plain line per round, with every GPU's figures and the round's last busbw
    progress = [line for line in result.outlines if line.startswith("burn-in ")]
    assert len(progress) == len(numbers), text
    assert re.match(rf"burn-in 0:00:0\d of 0:00:0{DURATION_S} \(0:00:0\d left\) round 1 \| GPU0 [\d.]+ GFLOP/s -°C -W \| "
                    r"GPU1 [\d.]+ GFLOP/s -°C -W \| \w+ nvswitch-2gpu-0\.1 [\d.]+ GB/s$", progress[0]), progress[0]
    assert "\r" not in text
    assert f"wirecheck: burn-in complete: {len(numbers)} round(s) in" in text


def test_a_wrong_gemm_element_in_round_2_stops_the_burn_in_there_and_names_it(pytester):
    result, lines = _burn_in(pytester, "60s", conftest=FAULTY)
    text = result.stdout.str()
    assert result.ret == FAILED, text
    rounds = [r["details"] for r in _kinds(lines, "burn_in_round")]
    assert [r["round"] for r in rounds] == [1, 2], "the burn-in must stop in the round the fault came in"
    fault = rounds[1]["fault"]
    assert rounds[0]["fault"] is None
    assert fault["kind"] == "wrong GEMM result" and fault["where"] == "GPU1" and fault["round"] == 2
    assert "element 5 (row 0, col 5)" in fault["message"]
    assert rounds[1]["gpus"]["GPU1"]["stopped"] == "wrong result" and rounds[1]["gpus"]["GPU0"]["stopped"] == "asked to stop"
    assert rounds[1]["ended"] - rounds[1]["started"] < 10 * ROUND_S, "round 2 must end at the fault, not run out"
    (summary,) = _kinds(lines, "burn_in")
    assert summary["details"]["status"] == "stopped by a hard fault"
    failed = sorted(line.split()[1] for line in result.outlines if line.startswith("FAILED "))
    assert "tests/test_burn_in.py::test_burn_in_without_hard_fault" in failed, text
    assert re.search(r"STOPPED in round 2 at \d\d:\d\d:\d\d after 0:00:0\d of 0:01:00 by a wrong GEMM result on GPU1: "
                     r"GEMM results against the reference on GPU1: round 2: \d+ of \d+ results differ from the reference", text), text
    progress = [line for line in result.outlines if line.startswith("burn-in ")]
    assert progress[-1].endswith("| STOPPED: wrong GEMM result on GPU1"), progress


def test_ctrl_c_stops_the_burn_in_keeps_every_round_and_the_record_ends_interrupted(tmp_path):
    """wirecheck validate in a terminal: the progress line rewritten in place, then Ctrl-C."""
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(thresholds_with(_short_rounds))
    out = tmp_path / "run.jsonl"
    cmd = [sys.executable, "-m", "wirecheck.cli.main", "validate", "--level", "burn-in", "-p", "no:cacheprovider",
           "--color=no", "--simulate=h200-sxm-2", "--placement", "nvswitch", "-k", "burn_in", "--duration", "120s",
           f"--thresholds={thresholds}", f"--wirecheck-json={out}"]
    term = Terminal(cmd, env={**_env(), "COLUMNS": "200"}, cwd=str(tmp_path))
    term.wait_for("round 2 |", timeout=120)
    term.ctrl_c()
    code = term.finish(timeout=120)
    output = term.output
    assert code == CTRL_C, output
    lines = records(out)
    rounds = [r["details"] for r in _kinds(lines, "burn_in_round")]
    assert len(rounds) >= 2 and [r["round"] for r in rounds] == list(range(1, len(rounds) + 1)), output
    # Ctrl-C falls inside a round (that round is kept, marked cut) or, on a loaded machine that prints the
    # progress line late, between two rounds (during the memory test): then no round is cut. Never an earlier one.
    cut = [r for r in rounds if r["interrupted"]]
    assert cut in ([], [rounds[-1]]), [r["round"] for r in cut]
    assert not cut or cut[0]["series"]["GPU0"]["windows"], "the round Ctrl-C cut short keeps its windows"
    (summary,) = _kinds(lines, "burn_in")
    assert summary["details"]["status"] == "interrupted"
    assert lines[-1]["type"] == "end" and lines[-1]["status"] == "interrupted", lines[-1]
    # on a terminal the line is rewritten in place: a carriage return before each round's line
    assert re.search(r"\rburn-in 0:\d\d:\d\d of 0:02:00 \(0:01:\d\d left\) round 2 \| GPU0 ", output), output
    assert "wirecheck: burn-in interrupted (Ctrl-C): every round so far is in" in output
    assert output.rstrip().splitlines()[-1].endswith("interrupted (Ctrl-C): the run is incomplete, exit 130")


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = pythonpath(env)
    env.pop("PYTEST_ADDOPTS", None)
    return env



def test_the_whole_burn_in_level_on_an_nvlink_node_runs_the_burn_in_once(pytester):
    """The run order put test_nccl_path's forced_pcie test between test_burn_in's shared-pool tests and its
    forced_pcie ones: pytest tore the module's burn_in fixture down and ran the burn-in again, so --duration 4h
    held an NVLink node 8 h. The self-tests ran test_burn_in.py alone and never saw it."""
    make_project(pytester)
    record = pytester.path / "burn-in.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--level", "burn-in", "--duration", "10s",
                       f"--wirecheck-json={record}")
    assert result.ret == SIMULATED, result.stdout.str()
    kinds = [line.get("kind") for line in records(record) if line["type"] == "measurement"]
    assert kinds.count("burn_in") == 1, kinds


def test_sigterm_is_said_as_sigterm(tmp_path):
    """A scheduler's SIGTERM (a job's time limit) was said as "interrupted (Ctrl-C)"; its exit 143 and the record
    were right."""
    import signal
    import subprocess

    from wirecheck.core.exit_codes import TERMINATED

    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(thresholds_with(_short_rounds))
    cmd = [sys.executable, "-m", "wirecheck.cli.main", "validate", "--level", "burn-in", "-p", "no:cacheprovider",
           "--simulate=h200-sxm-2", "--placement", "nvswitch", "-k", "burn_in", "--duration", "120s",
           f"--thresholds={thresholds}", f"--wirecheck-json={tmp_path / 'run.jsonl'}"]
    proc = subprocess.Popen(cmd, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "round 2 |" in line:
            proc.send_signal(signal.SIGTERM)
            break
    seen += proc.stdout.readlines()
    assert proc.wait(timeout=120) == TERMINATED, "".join(seen)
    assert any("wirecheck: burn-in interrupted (SIGTERM): every round so far is in" in line for line in seen), seen
