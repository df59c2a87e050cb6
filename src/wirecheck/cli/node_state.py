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

The decision is `decide()` (wirecheck.cli.node_decision), a pure function of the exit code, the record and
validate's output, so the shell hooks only run validate, call this, and act on its exit code.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

from wirecheck.cli.node_decision import (HEALTHY, HOOKS, SLURM_REASON_MAX, UNHEALTHY, UNKNOWN, NodeState, decide,
                                         output_tail, read_record)
from wirecheck.cli.protocol import entry

NAME = "node-state"
HOOK_MODES = ("hook", "prolog", "healthcheck", "plugin")  # the shipped hooks' (scripts/lib/wirecheck-hook.sh), and the default
# What the command's callers (the hooks' self-tests, `wirecheck events`) read of the decision, named here too.
__all__ = ["HEALTHY", "UNHEALTHY", "UNKNOWN", "NodeState", "decide", "read_record", "output_tail", "NAME", "run", "main"]


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
    hook.add_argument("--mode", default="hook", choices=HOOK_MODES,
                      help="the hook's name, the prefix of its files in --records (default: hook)")
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
    hook.add_argument("--after-drain", action="store_true", help="(Slurm) the hook drained this node just now: "
                      "exit 31 where, by the order the controller stamped the partition's drains, this one was beyond "
                      "the guard's share (the hook takes it back), else 0")
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
        from wirecheck.cli import drain_hook  # the thresholds loader and the cluster's readers: only for --hook

        if not args.records or not Path(args.records).is_dir():
            print(f"wirecheck {NAME}: --hook needs --records DIR, an existing folder (the hook's: its state file, "
                  f"guard file and re-test records go there); got {args.records!r}", file=sys.stderr)
            return UNKNOWN
        hook = drain_hook.hook_from_args(args, validate_args or [])
        if args.after_drain:
            code, line = drain_hook.after_drain(hook)
        else:
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
