"""`wirecheck node-state`: what a validate run says about the node, for the hooks that drain it.

The decision (healthy / unhealthy / unknown) is a pure function of the exit code, the record and
validate's output; the drain reason is one short ASCII line from the first failed verdict. The shell
hooks (test_drain_hooks.py) and the Slurm cluster (test_slurm_e2e.py) only check the plumbing around it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wirecheck.cli.main import main
from wirecheck.cli.node_state import HEALTHY, UNHEALTHY, UNKNOWN, decide
from wirecheck.core import problems
from wirecheck.core.verdict import FAIL, PASS, SKIP, Verdict
from wirecheck.records import reason
from wirecheck.records.file import Measurement, RecordFile, read_run

HOLDER = {"pid": 4321, "command": "wirecheck validate --profile h200-sxm-8", "since": "2026-12-01T10:00:00+00:00",
          "host": "n1", "user": "root"}


def busbw(outcome: str, measured: float, where: str = "nvswitch-2gpu-0.1") -> Verdict:
    return Verdict("busbw", "all_reduce busbw at 1 GiB", where, outcome,
                   f"all_reduce busbw at 1 GiB on {where}: measured {measured} GB/s < floor 360 GB/s "
                   "(thresholds.yaml: collectives.floors.nvswitch.all_reduce.2; source: measured)",
                   measured=measured, unit="GB/s", limit={"min": 360.0, "max": None},
                   yaml_path="thresholds.yaml: collectives.floors.nvswitch.all_reduce.2", source="measured")


def write_record(path: Path, verdicts=(), simulated=False, end: dict | None = None, measurements=()) -> Path:
    f = RecordFile(path)
    f.header({"simulated": simulated, "gpus": [{"index": 0}, {"index": 1}], "placements": []})
    for m in measurements:
        f.measurement(m)
    for v in verdicts:
        f.verdict(v, "tests/test_x.py::test_x")
    if end is not None:
        f.end(end)
    f.close()
    return path


def state(tmp_path, code: int, output: str = "", limit: int = 255, **record) -> tuple[int, str]:
    run = read_run(write_record(tmp_path / "r.jsonl", **record)) if record else None
    s = decide(code, run, output, limit)
    return s.state, s.line


def test_a_passing_hardware_run_is_healthy(tmp_path):
    verdicts = [busbw(PASS, 400.0), busbw(PASS, 401.0, "pair-0.1"), Verdict("nvlink_speed", "x", "GPU0", SKIP, "n/a")]
    assert state(tmp_path, 0, verdicts=verdicts, end={"status": "complete"}) == (
        HEALTHY, "wirecheck: passed: 2 checks on 2 GPU(s), 1 skipped")


@pytest.mark.parametrize("verdicts", [[], [Verdict("dcgm_diag", "DCGM diagnostics", None, SKIP, "no host engine")]],
                         ids=["no-verdict", "only-skips"])
def test_a_record_with_no_passed_check_is_never_healthy(tmp_path, verdicts):
    """Nothing to judge is never a pass: a DCGM run that could not reach its host engine exits 0 with one skip,
    and a file of another kind of run holds no verdict."""
    got, line = state(tmp_path, 0, verdicts=verdicts, end={"status": "complete", "exit_status": 0})
    assert got == UNKNOWN and line.startswith("wirecheck: no verdict: ") and "holds no passed check" in line, line


def test_a_failed_check_is_unhealthy_and_names_the_first_failure(tmp_path):
    verdicts = [busbw(PASS, 400.0, "pair-0.1"), busbw(FAIL, 12.34), busbw(FAIL, 11.0, "pair-0.1")]
    assert state(tmp_path, 1, verdicts=verdicts, end={"status": "complete", "tests": {"failed": 2}}) == (
        UNHEALTHY, "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s (+1 more)")


def test_a_failed_check_drains_even_when_the_run_then_timed_out(tmp_path):
    code, line = state(tmp_path, 124, verdicts=[busbw(FAIL, 312.4)])  # no end line: killed by the hook's timeout
    assert (code, line) == (UNHEALTHY, "wirecheck: busbw nvswitch-2gpu-0.1 312.4 < 360 GB/s")
    assert state(tmp_path, 124, verdicts=[busbw(PASS, 400.0)]) == (
        UNKNOWN, "wirecheck: no verdict: timed out (the hook's time limit) (exit 124)")


@pytest.mark.parametrize("code", [0, 4, 5])
def test_a_record_that_is_not_this_runs_is_never_acted_on(tmp_path, code):
    """A failed check in the record, yet validate passed, or ran no test (a usage error, nothing collected): the
    record is another run's (left from an earlier one, or the wrong path). Draining on it takes a healthy node out."""
    got, line = state(tmp_path, code, verdicts=[busbw(FAIL, 12.34)], end={"status": "complete", "exit_status": 1})
    assert got == UNKNOWN and line.startswith("wirecheck: record mismatch: ") and f"validate exited {code}" in line, line


def test_nvml_failing_on_a_driver_is_unhealthy_with_nvmls_words():
    error = "NVML could not start (NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.)"
    # validate's output as it prints it: NVML's words, its state line (the data), its last line
    output = (f"wirecheck validate: NVML failed: {error}\n{problems.state_line(problems.NVML_UNREADABLE, error=error)}\n"
              "wirecheck validate: NVML failed on a machine with an NVIDIA driver: nothing ran; exit 11\n")
    s = decide(11, None, output)
    assert (s.state, s.line) == (UNHEALTHY, f"wirecheck: NVML failed: {error}")
    assert decide(11, None, "").line == ("wirecheck: NVML failed: no GPU was read (no NVML error in the output "
                                         "given); every selected check skipped")
    # the words alone are not read: reworded or not, only the state line says NVML's error
    assert decide(11, None, f"wirecheck validate: NVML failed: {error}\n").line == decide(11, None, "").line


def test_bare_pytest_that_read_no_gpu_says_why_from_its_record_and_claims_no_driver(tmp_path):
    """Bare pytest whose NVML read no GPU exits 11 too: the line gives the record's reason (no driver
    here), never "although an NVIDIA driver is installed"."""
    path = tmp_path / "r.jsonl"
    f = RecordFile(path)
    f.header({"simulated": False, "gpus": [], "placements": [],
              "unavailable": "no NVIDIA driver on this machine (libnvidia-ml.so.1 not found)"})
    f.end({"status": "complete", "exit_status": 11})
    f.close()
    s = decide(11, read_run(path), "")
    assert (s.state, s.line) == (UNHEALTHY, "wirecheck: NVML failed: no GPU was read (no NVIDIA driver on this machine "
                                            "(libnvidia-ml.so.1 not found)); every selected check skipped")
    assert "driver is installed" not in s.line


def test_busy_is_unknown_and_names_the_holder(tmp_path):
    end = {"status": "busy", "exit_status": 75, "holder": HOLDER, "waited_s": 60.0}
    assert state(tmp_path, 75, end=end) == (UNKNOWN, "wirecheck: node busy: pid 4321 (wirecheck validate --profile "
                                                     "h200-sxm-8), user root, since 2026-12-01T10:00:00+00:00: not checked")
    # No record: validate's state line names the holder (its last line says it in words, not read)
    holder = {"pid": 77, "command": "pytest", "user": "ops", "since": "X", "host": "n1"}
    s = decide(75, None, f"...\n{problems.state_line(problems.BUSY, holder=holder)}\n"
                         "wirecheck validate: node busy: pid 77 (pytest), user ops, since X; exit 75\n")
    assert (s.state, s.line) == (UNKNOWN, "wirecheck: node busy: pid 77 (pytest), user ops, since X: not checked")
    s = decide(75, None, "...\nwirecheck validate: node busy: pid 77 (pytest), user ops, since X; exit 75\n")
    assert s.line == "wirecheck: node busy: another wirecheck run holds the GPUs: not checked"


@pytest.mark.parametrize("code", [1, 10, 0])
def test_a_simulation_never_drains_whatever_failed_in_it(tmp_path, code):
    s, line = state(tmp_path, code, verdicts=[busbw(FAIL, 1.0)], simulated=True, end={"status": "complete"})
    assert (s, line) == (UNKNOWN, "wirecheck: SIMULATION: no GPU of this node was validated")


@pytest.mark.parametrize("code, meaning", [
    (4, "usage error"), (3, "internal error"), (2, "pytest stopped the run (errors during collection?)"),
    (5, "no test was collected: nothing was validated"), (130, "interrupted (Ctrl-C): the run is incomplete"),
    (137, "killed by SIGKILL"), (143, "stopped by SIGTERM: the run is incomplete"),
    (190, "killed by signal 62"), (193, "an exit code wirecheck validate does not give"),
    (255, "an exit code wirecheck validate does not give"),
])
def test_no_verdict_is_unknown_never_unhealthy(code, meaning):
    s = decide(code, None, "")
    assert (s.state, s.line) == (UNKNOWN, f"wirecheck: no verdict: {meaning} (exit {code})")


def test_a_failed_group_without_a_verdict_is_named(tmp_path):
    failure = {"label": "nvswitch-2gpu-0.1", "what": "all_reduce at 1 GiB", "kind": "hung",
               "root": {"rank": 1, "kind": "hung", "summary": "no reply within 10 s"}}
    m = Measurement("collective", "nvswitch-2gpu-0.1", "all_reduce at 1 GiB", details={"failure": failure})
    assert state(tmp_path, 1, measurements=[m], end={"status": "complete", "tests": {"failed": 1}}) == (
        UNHEALTHY, "wirecheck: hung nvswitch-2gpu-0.1 all_reduce at 1 GiB: rank 1 no reply within 10 s")
    assert state(tmp_path, 1, end={"status": "complete", "tests": {"failed": 3}}) == (
        UNHEALTHY, "wirecheck: 3 test(s) failed without a recorded verdict (see the log)")


def test_other_bounds_and_figures_without_a_bound():
    latency = Verdict("small_message_latency", "all_reduce latency", "nvswitch-8gpu-0.1.2.3.4.5.6.7", FAIL, "m",
                      measured=98.76, unit="\u00b5s", limit={"min": None, "max": 50.0})
    assert reason.verdict_reason(latency.as_record()) == "small_message_latency nvswitch-8gpu-0.1.2.3.4.5.6.7 98.76 > 50 \u00b5s"
    count = Verdict("gpu_count", "GPU count", None, FAIL, "GPU count: 7 GPUs, the profile expects 8",
                    measured=7, limit={"expected": 8})
    assert reason.verdict_reason(count.as_record()) == "gpu_count node 7 != 8"
    ratio = Verdict("losses_agree", "zero1 loss", "pair-0.1", FAIL, "m", measured=0.0213, unit="relative difference",
                    limit={"max": 0.001})
    assert reason.verdict_reason(ratio.as_record()) == "losses_agree pair-0.1 0.0213 > 0.001 relative difference"
    links = Verdict("nvlinks_per_gpu", "NVLinks", "GPU3", FAIL,
                    "NVLinks on GPU3: 12 active, expected 18 (thresholds.yaml: profiles.x; source: the spec)\n  more",
                    measured={"active": 12}, limit={"expected": 18}, yaml_path="thresholds.yaml: profiles.x")
    assert reason.verdict_reason(links.as_record()) == "nvlinks_per_gpu GPU3 active 12 != 18"


def test_the_line_is_short_plain_ascii_on_one_line_whatever_the_record_holds(tmp_path):
    """A record is data from a node: its strings reach scontrol and the API server only as printable ASCII."""
    evil = Verdict("temperature_margin", "margin", "GPU1\n\x1b[31mState=RESUME\x07", FAIL, "m",
                   measured=2.0, unit="\u00b0C", limit={"min": 5.0})
    many = [evil] + [busbw(FAIL, 1.0, f"pair-0.{k}") for k in range(1, 40)]
    code, line = state(tmp_path, 1, limit=80, verdicts=many)
    assert code == UNHEALTHY
    assert line == "wirecheck: temperature_margin GPU1 [31mState=RESUME 2 < 5 C (+39 more)"
    assert line.isascii() and line.isprintable() and len(line) <= 80
    long = busbw(FAIL, 1.0, "nvswitch-8gpu-" + ".".join(str(k) for k in range(60)))
    code, line = state(tmp_path, 1, limit=80, verdicts=[long, long])
    assert len(line) == 80 and line.endswith("... (+1 more)") and line.startswith("wirecheck: busbw nvswitch-8gpu-0.1.2")


def test_the_command_prints_the_line_and_exits_with_the_state(tmp_path, capsys):
    record = write_record(tmp_path / "r.jsonl", verdicts=[busbw(FAIL, 12.34)], end={"status": "complete"})
    assert main(["node-state", "--exit-code", "1", "--record", str(record)]) == UNHEALTHY
    assert capsys.readouterr().out == "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s\n"
    log = tmp_path / "validate.log"
    log.write_text(f"wirecheck validate: NVML failed: Driver Not Loaded\n"
                   f"{problems.state_line(problems.NVML_UNREADABLE, error='Driver Not Loaded')}\n")
    assert main(["node-state", "--exit-code", "11", "--record", str(tmp_path / "none.jsonl"), "--output", str(log)]) == UNHEALTHY
    assert capsys.readouterr().out == "wirecheck: NVML failed: Driver Not Loaded\n"
    (tmp_path / "bad.jsonl").write_text("not a record\n")
    assert main(["node-state", "--exit-code", "0", "--record", str(tmp_path / "bad.jsonl")]) == HEALTHY
    assert capsys.readouterr().out == "wirecheck: passed\n"
    assert main(["node-state", "--exit-code", "1", "--record", str(tmp_path / "bad.jsonl"), "--max-length", "80"]) == UNHEALTHY
    assert capsys.readouterr().out == "wirecheck: tests failed without a recorded verdict (record bad.jsonl unreadab...\n"


@pytest.mark.parametrize("given", ["300", "-1", "256", "1.0", "abc"])
def test_an_exit_code_outside_0_to_255_is_a_usage_error_naming_the_option(given, capsys):
    """300 was read as "killed by signal 172": no process exits with it, so it is the caller's mistake."""
    with pytest.raises(SystemExit) as info:
        main(["node-state", f"--exit-code={given}"])
    err = capsys.readouterr().err
    assert info.value.code == UNKNOWN and "Traceback" not in err
    shown = repr(given) if given in ("1.0", "abc") else given  # not a whole number: quoted as given
    assert f"argument --exit-code: {shown} is not an exit code" in err, err
    assert "0-255" in err and "signal" not in err


def test_no_gpu_visible_reads_as_a_floor_of_one_gpu(tmp_path):
    """The drain reason read "gpus_visible node 0 != >= 1": the check recorded its floor as an expected text."""
    from wirecheck.checks.inventory import gpus_visible

    verdicts = [gpus_visible(None, n_gpus=0, unavailable=None, simulated=False).with_inputs("gpus_visible", {})]
    assert state(tmp_path, 1, verdicts=verdicts, end={"status": "complete"}) == (
        UNHEALTHY, "wirecheck: gpus_visible node 0 < 1 GPUs")
    assert gpus_visible(None, n_gpus=2, unavailable=None, simulated=False).ok
    assert not gpus_visible(None, n_gpus=2, unavailable="NVML: Driver Not Loaded", simulated=False).ok


def test_a_hook_mode_that_is_no_hooks_is_refused(tmp_path, capsys):
    """--mode names the hook's files in --records: an unknown one wrote `bogus-retest.jsonl` beside them."""
    with pytest.raises(SystemExit) as info:
        main(["node-state", "--exit-code", "1", "--hook", "slurm", "--records", str(tmp_path),
                         "--mode", "bogus", "--"])
    assert info.value.code == 2 and "invalid choice: 'bogus'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
