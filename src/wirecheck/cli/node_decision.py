"""What one run of `wirecheck validate` says about this node, as `decide()`: a pure function of validate's exit
code, the run's record and validate's output, for `wirecheck node-state` (the command) and the drain hook's rules
(wirecheck.cli.drain_hook), which both read it. Its states and lines: the command's help (wirecheck.cli.node_state).

Nothing here reads validate's words: a busy node's holder, a fault of the harness and NVML's error come from the
record's end line, else from validate's state line (wirecheck.core.problems: `wirecheck-state: {json}`).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from wirecheck.cli.validate import EXIT_CODES
from wirecheck.core import problems
from wirecheck.core.exit_codes import (FAILED, HARNESS_CRASH, HARNESS_FAULT, NODE_BUSY, NODE_HEALTHY, NODE_UNHEALTHY,
                                       NODE_UNKNOWN, NO_TESTS, NVML_BROKEN, OK, SIMULATED, USAGE_ERROR)
from wirecheck.records import reason
from wirecheck.records.file import RecordFileError, RunRecord, read_run

HEALTHY, UNHEALTHY, UNKNOWN = NODE_HEALTHY, NODE_UNHEALTHY, NODE_UNKNOWN  # node-problem-detector's OK, NonOK, Unknown
# Slurm keeps a node's reason in its accounting database as MySQL `tinytext` (slurmdbd's event table):
# 255 bytes. slurmctld itself takes longer ones, but `sacctmgr show event` would not show them whole.
SLURM_REASON_MAX = 255
TIMED_OUT = 124  # timeout(1)'s code when the command ran past its limit (the hooks bound validate with it)
# The highest signal number (Linux: 64, SIGRTMAX): 128+N up to 192 is a run killed by signal N; codes above
# are no signal's.
SIGNAL_MAX = int(getattr(signal, "SIGRTMAX", 64))
HOOKS = ("slurm", "k8s")  # --hook: whose fleet guard reads the cluster (sinfo, kubectl)
# Exit codes of a validate run after which no check of this run can have failed: a passed run, a usage error
# (pytest ran no test), no test collected.
NOTHING_RAN_OR_FAILED = (OK, USAGE_ERROR, NO_TESTS)
OUTPUT_TAIL = 64 * 1024  # validate's output is read from its end: the lines that matter are the last ones


@dataclass(frozen=True)
class NodeState:
    state: int  # HEALTHY | UNHEALTHY | UNKNOWN, also the command's exit code
    line: str  # one printable ASCII line, starting "wirecheck: "


def decide(exit_code: int, run: RunRecord | None, output: str = "", limit: int = SLURM_REASON_MAX,
           record_note: str | None = None) -> NodeState:
    """The node's state after one `wirecheck validate` run that exited `exit_code`, with its record (None
    when it left none) and its output. Only a failed check on this node's GPUs and a broken driver make
    it unhealthy; a simulation, whatever failed in it, never does."""
    def say(state: int, text: str) -> NodeState:
        return NodeState(state, reason.line(text, limit))

    said = problems.read_state(output)  # validate's state line: what it knew that the record may not hold
    if exit_code in (HARNESS_FAULT, HARNESS_CRASH):
        # Our fault, never the node's: a full disk must not drain a healthy node (nor a failed verdict
        # recorded before it: the run that could not be kept is judged again by the next one).
        return say(UNKNOWN, f"not checked (harness fault, exit {exit_code}): {_harness_fault(exit_code, run, said)}")
    if exit_code == NODE_BUSY:
        return say(UNKNOWN, f"node busy: {_holder(run, said)}: not checked")
    if exit_code == SIMULATED or (run is not None and run.simulated):
        return say(UNKNOWN, "SIMULATION: no GPU of this node was validated")
    if exit_code == NVML_BROKEN:
        return say(UNHEALTHY, f"NVML failed: {_nvml_error(said, run)}")
    failure = reason.failure_line(run, limit) if run is not None else None
    if failure and exit_code in NOTHING_RAN_OR_FAILED:
        # The record holds a failed check, yet this run passed or never ran a test: the record is another run's
        # (left from an earlier one, or the wrong path). Drain on it and a healthy node goes out of service.
        ended = (run.end or {}).get("exit_status")
        return say(UNKNOWN, f"record mismatch: {run.path} holds a failed check (its run ended with exit {ended}), but "
                   f"validate exited {exit_code}: not this run's record; not acted on")
    if failure:
        return NodeState(UNHEALTHY, failure)
    if exit_code == FAILED:
        failed = (run.end or {}).get("tests", {}).get("failed") if run is not None else None
        count = f"{failed} test(s)" if isinstance(failed, int) else "tests"
        return say(UNHEALTHY, f"{count} failed without a recorded verdict ({record_note or 'see the log'})")
    if exit_code == OK:
        if run is not None and not any(v.get("outcome") in ("pass", "warn") for v in run.verdicts):
            # nothing to judge is never a pass: a DCGM run that could not reach its host engine, a file of another
            # kind of run
            return say(UNKNOWN, f"no verdict: {run.path} holds no passed check ({_passed(run)}); not acted on")
        return say(HEALTHY, _passed(run))
    return say(UNKNOWN, f"no verdict: {_meaning(exit_code)} (exit {exit_code})")


def _holder(run: RunRecord | None, said: dict) -> str:
    """Who held the node: the record's end line names the holder, else validate's state line."""
    holder = (run.end or {}).get("holder") if run is not None else None
    if not (isinstance(holder, dict) and holder.get("pid")) and said.get("problem") == problems.BUSY:
        holder = said.get("holder")
    if isinstance(holder, dict) and holder.get("pid"):
        return f"pid {holder.get('pid')} ({holder.get('command')}), user {holder.get('user')}, since {holder.get('since')}"
    return "another wirecheck run holds the GPUs"


def _harness_fault(exit_code: int, run: RunRecord | None, said: dict) -> str:
    """What failed in the harness, the cause first (node-problem-detector keeps 80 characters): from the
    record's end line, else validate's state line, else the code's meaning."""
    fault = (run.end or {}).get("fault") if run is not None else None
    if not (isinstance(fault, dict) and fault.get("path")) and said.get("problem") in (problems.HARNESS_FAULT,
                                                                                      problems.HARNESS_CRASH):
        fault = said.get("fault")
    if isinstance(fault, dict) and fault.get("path"):
        return f"{fault.get('cause')}: {fault.get('what')} {fault.get('path')}"
    if said.get("problem") == problems.HARNESS_CRASH and said.get("crash"):
        return str(said["crash"])
    return _meaning(exit_code)


def _nvml_error(said: dict, run: RunRecord | None = None) -> str:
    if said.get("problem") == problems.NVML_UNREADABLE and said.get("error"):
        return str(said["error"])  # validate's: NVML's own error
    # bare pytest: its record's header says why NVML read no GPU (no driver, or NVML's error)
    unavailable = run.run.get("unavailable") if run is not None else None
    if isinstance(unavailable, str) and unavailable:
        return f"no GPU was read ({unavailable}); every selected check skipped"
    return "no GPU was read (no NVML error in the output given); every selected check skipped"


def _passed(run: RunRecord | None) -> str:
    if run is None:
        return "passed"
    counts = {outcome: sum(v.get("outcome") == outcome for v in run.verdicts) for outcome in ("pass", "warn", "skip")}
    gpus = run.run.get("gpus")
    on = f" on {len(gpus)} GPU(s)" if isinstance(gpus, list) and gpus else ""
    # a warning passes (the node is not drained), and says it has one
    return (f"passed: {counts['pass'] + counts['warn']} checks{on}" + (f", {counts['warn']} warned" if counts["warn"] else "")
            + (f", {counts['skip']} skipped" if counts["skip"] else ""))


def _meaning(code: int) -> str:
    if code in EXIT_CODES:
        return EXIT_CODES[code][0]
    if code == TIMED_OUT:
        return "timed out (the hook's time limit)"
    if 128 < code <= 128 + SIGNAL_MAX:
        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:  # a real-time signal without a name of its own
            return f"killed by signal {code - 128}"
    return "an exit code wirecheck validate does not give"


def read_record(path: str | None) -> tuple[RunRecord | None, str | None]:
    """The record at `path` (--record), or None with why, for decide()'s `record_note` (validate exited
    before pytest wrote one: NVML, usage; or it is unreadable). Never raises for a missing or bad file:
    a hook must always get a state."""
    if not path:
        return None, "no record given"
    try:
        return read_run(path), None
    except FileNotFoundError:
        return None, f"no record {Path(path).name}"
    except (RecordFileError, OSError, ValueError) as exc:
        return None, f"record {Path(path).name} unreadable: {exc}"


def output_tail(path: str | None) -> str:
    """The last OUTPUT_TAIL bytes of validate's output file (--output), as decide()'s `output`: "" when
    there is none or it cannot be read (the lines that name NVML's error or a lock holder are the last)."""
    if not path:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - OUTPUT_TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


