"""`wirecheck node-state --exit-code N [--record FILE] [--output FILE] [--max-length N]`: what one run
of `wirecheck validate` says about this node, for the hook that acts on it: a Slurm prolog or
HealthCheckProgram (scripts/slurm/), a node-problem-detector plugin (scripts/k8s/node-problem-detector/).

It prints one line and exits with node-problem-detector's codes:
  0 healthy: a run on this node's GPUs in which every selected check passed;
  1 unhealthy, drain the node: a check failed on this node's GPUs (a failed verdict in the record, or
    pytest's 1), or NVML read no GPU on a machine meant to have GPUs (11: a missing or broken driver);
  2 unknown, act on nothing: a fault of the harness (74: wirecheck could not write its record, a log or a
    cache; 70: the plugin crashed), whatever the record says failed before it, node busy (75), a
    simulation (10, or a simulated record whatever failed in it), a usage error, an internal error, no test
    collected, or a run stopped, killed or timed out without a failed check. Also this command's own bad
    input.
An unhealthy line is the drain reason, `wirecheck: <check> <where> <measured> < <limit>`
(wirecheck.records.reason); every line is printable ASCII, at most --max-length characters.

With --hook slurm|k8s (the hooks call it so), a failure goes through the drain rules first
(wirecheck.cli.drain_hook): the failed tests re-run once, and three more codes:
  30 flaky: failed, then passed its re-test: recorded in RECORDS/drain-events.jsonl, not drained;
  31 the fleet guard holds: too many of the partition drained within its window (or the guard file is
    there): not drained, the line starts `wirecheck: GUARD`;
  32 drain and replace a GPU: it failed replace_after times within replace_window, or an uncorrectable
    memory fault; the evidence bundle's path ends the line.

The decision is `decide()`, a pure function of the exit code, the record and validate's output, so the
shell hooks only run validate, call this, and act on its exit code.
"""

from __future__ import annotations

import argparse
import platform
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from wirecheck.cli.protocol import entry
from wirecheck.cli.validate import EXIT_CODES
from wirecheck.core.exit_codes import (FAILED, HARNESS_CRASH, HARNESS_FAULT, NODE_BUSY, NODE_HEALTHY, NODE_UNHEALTHY,
                                       NODE_UNKNOWN, NVML_BROKEN, OK, SIMULATED)
from wirecheck.records import reason
from wirecheck.records.file import RecordFileError, RunRecord, read_run

NAME = "node-state"

HEALTHY, UNHEALTHY, UNKNOWN = NODE_HEALTHY, NODE_UNHEALTHY, NODE_UNKNOWN  # node-problem-detector's OK, NonOK, Unknown
# Slurm keeps a node's reason in its accounting database as MySQL `tinytext` (slurmdbd's event table):
# 255 bytes. slurmctld itself takes longer ones, but `sacctmgr show event` would not show them whole.
SLURM_REASON_MAX = 255
TIMED_OUT = 124  # timeout(1)'s code when the command ran past its limit (the hooks bound validate with it)
# The highest signal number (Linux: 64, SIGRTMAX): 128+N up to 192 is a run killed by signal N; codes above
# are no signal's.
SIGNAL_MAX = int(getattr(signal, "SIGRTMAX", 64))
HOOKS = ("slurm", "k8s")  # --hook: whose fleet guard reads the cluster (sinfo, kubectl)
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

    if exit_code in (HARNESS_FAULT, HARNESS_CRASH):
        # Our fault, never the node's: a full disk must not drain a healthy node (nor a failed verdict
        # recorded before it: the run that could not be kept is judged again by the next one).
        return say(UNKNOWN, f"not checked (harness fault, exit {exit_code}): {_harness_fault(exit_code, run, output)}")
    if exit_code == NODE_BUSY:
        return say(UNKNOWN, f"node busy: {_holder(run, output)}: not checked")
    if exit_code == SIMULATED or (run is not None and run.simulated):
        return say(UNKNOWN, "SIMULATION: no GPU of this node was validated")
    if exit_code == NVML_BROKEN:
        return say(UNHEALTHY, f"NVML failed: {_nvml_error(output, run)}")
    failure = reason.failure_line(run, limit) if run is not None else None
    if failure:
        return NodeState(UNHEALTHY, failure)
    if exit_code == FAILED:
        failed = (run.end or {}).get("tests", {}).get("failed") if run is not None else None
        count = f"{failed} test(s)" if isinstance(failed, int) else "tests"
        return say(UNHEALTHY, f"{count} failed without a recorded verdict ({record_note or 'see the log'})")
    if exit_code == OK:
        return say(HEALTHY, _passed(run))
    return say(UNKNOWN, f"no verdict: {_meaning(exit_code)} (exit {exit_code})")


def _holder(run: RunRecord | None, output: str) -> str:
    holder = (run.end or {}).get("holder") if run is not None else None
    if isinstance(holder, dict) and holder.get("pid"):
        return f"pid {holder.get('pid')} ({holder.get('command')}), user {holder.get('user')}, since {holder.get('since')}"
    for text in reversed(output.splitlines()):  # validate's last line names the holder
        if "node busy: " in text:
            return text.split("node busy: ", 1)[1].split("; exit", 1)[0]
    return "another wirecheck run holds the GPUs"


def _harness_fault(exit_code: int, run: RunRecord | None, output: str) -> str:
    """What failed in the harness, the cause first (node-problem-detector keeps 80 characters): from the
    record's end line, else validate's last line, else the code's meaning."""
    fault = (run.end or {}).get("fault") if run is not None else None
    if isinstance(fault, dict) and fault.get("path"):
        return f"{fault.get('cause')}: {fault.get('what')} {fault.get('path')}"
    for text in reversed(output.splitlines()):  # validate: "...: cannot write the record file PATH: CAUSE; FIX, exit 74"
        said = re.search(r"cannot write (.+?) (\S+): (.+?)(?:; |, exit |$)", text)
        if said:
            return f"{said.group(3)}: {said.group(1)} {said.group(2)}"
    return _meaning(exit_code)


def _nvml_error(output: str, run: RunRecord | None = None) -> str:
    for text in output.splitlines():  # validate: "wirecheck validate: NVML failed: <NVML's error>"
        if "NVML failed: " in text:
            return text.split("NVML failed: ", 1)[1]
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


def exit_code(text: str) -> int:
    """--exit-code: a process's exit status, 0-255 (a shell's $?); anything else is a usage error, never a
    state (300 read as "killed by signal 172" before)."""
    try:
        code = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an exit code: pass wirecheck validate's exit status "
                                         "($?), a whole number 0-255") from None
    if not 0 <= code <= 255:
        raise argparse.ArgumentTypeError(f"{code} is not an exit code: a process exits with 0-255; pass wirecheck "
                                         "validate's exit status ($?) as the shell gives it")
    return code


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


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="what one validate run says about this node (healthy, unhealthy, unknown) as one line, for a "
                   "Slurm prolog/HealthCheckProgram or a node-problem-detector plugin",
        description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exit-code", type=exit_code, required=True, metavar="N",
                        help="wirecheck validate's exit code, 0-255 (124: it ran past the hook's timeout; 128+N: "
                             "killed by signal N)")
    parser.add_argument("--record", metavar="FILE", help="the run's record (--wirecheck-json); missing is allowed")
    parser.add_argument("--output", metavar="FILE", help="validate's output (stdout and stderr), for NVML's error")
    parser.add_argument("--max-length", type=int, default=SLURM_REASON_MAX, metavar="N",
                        help=f"cut the line to N characters (default {SLURM_REASON_MAX}: Slurm's accounting keeps "
                             "that much of a reason; node-problem-detector's max_output_length is 80 by default)")
    hook = parser.add_argument_group(
        "the drain rules (--hook): re-test, flaky, guard, escalate; validate's arguments follow a `--`")
    hook.add_argument("--hook", choices=HOOKS, help="apply the drain rules for this scheduler: re-run "
                      "the failed tests once, count flaky ones, hold drains above the fleet guard's share, escalate "
                      "a GPU that keeps failing (exit 30 flaky, 31 guard holds, 32 replace a GPU)")
    hook.add_argument("--node", default=platform.node().split(".")[0], help="this node's scheduler name")
    hook.add_argument("--records", metavar="DIR", help="the hook's folder: the state file drain-events.jsonl, the "
                      "guard file, the re-test's record, bundles")
    hook.add_argument("--mode", default="hook", help="the hook's name, the prefix of its files (prolog, healthcheck, plugin)")
    hook.add_argument("--wirecheck", metavar="PATH", help="the wirecheck command that re-runs validate (default: this one)")
    hook.add_argument("--time-left", type=float, default=60.0, metavar="S",
                      help="seconds the re-test and a diagnosis may take together (default 60)")
    hook.add_argument("--diagnose", action="store_true", help="on a re-test that failed again, run `wirecheck "
                      "diagnose --run` and drain with its culprit")
    hook.add_argument("--bug-report", action="store_true", help="add nvidia-bug-report.sh's file to a replacement's bundle")
    hook.add_argument("--guard-file", metavar="FILE", help="the guard's file (default DIR/guard): while it is there, "
                      "no drain; a person removes it")
    hook.add_argument("--prometheus", metavar="FILE", help="the decision's gauges for node_exporter's textfile "
                      "collector (default DIR/wirecheck-drain.prom)")
    hook.add_argument("--events", choices=("nvsentinel", "gpud"), help="also write the decision as health events "
                      "(NVSentinel's HealthEvents, gpud's component states; `wirecheck events`): one per failed or warned "
                      "verdict, one healthy per component that passed, the action following the decision")
    hook.add_argument("--events-file", metavar="FILE", help="where --events go (default DIR/wirecheck-health-events.json)")
    hook.add_argument("--sinfo", default="sinfo", metavar="PATH", help="Slurm's sinfo, for the guard")
    hook.add_argument("--kubectl", default="kubectl", metavar="PATH", help="kubectl, for the guard on Kubernetes")
    parser.set_defaults(passes_extra_args=True)
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.max_length < 20:
        print(f"wirecheck {NAME}: --max-length {args.max_length}: give at least 20 characters", file=sys.stderr)
        return UNKNOWN
    validate_args = extra[1:] if extra[:1] == ["--"] else None
    if (extra and validate_args is None) or (validate_args is not None and not args.hook):
        print(f"wirecheck {NAME}: unrecognized arguments: {' '.join(extra)} (validate's arguments go after `--`, "
              "with --hook)", file=sys.stderr)
        return UNKNOWN
    if args.hook:
        from wirecheck.cli import drain_hook  # it reads node-state's decision: imported here, not at the top

        if not args.records or not Path(args.records).is_dir():
            print(f"wirecheck {NAME}: --hook needs --records DIR, an existing folder (the hook's: its state file, "
                  f"guard file and re-test records go there); got {args.records!r}", file=sys.stderr)
            return UNKNOWN
        hook = drain_hook.hook_from_args(args, validate_args or [])
        code, line = drain_hook.run_hook(hook, args.exit_code, args.record, args.output)
        for warning in hook.warnings:
            print(f"wirecheck {NAME}: {warning}", file=sys.stderr, flush=True)
        print(line, flush=True)
        return code
    record, note = read_record(args.record)
    state = decide(args.exit_code, record, output_tail(args.output), args.max_length, note)
    print(state.line, flush=True)
    return state.state


main = entry(NAME)
