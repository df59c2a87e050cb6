"""Every exit code of wirecheck, in one place: the suite under pytest, `wirecheck validate` and the
commands beside it (judge, report, fleet, nccl-tests, the multi-node entry point) all take theirs here,
so that a dry run means the same 10 everywhere. The README's exit-code table and `wirecheck validate
--help` list them with their meanings (wirecheck.cli.validate holds those words).

0-5 are pytest's own (pytest.ExitCode), which the suite passes on; 10, 11, 70, 74 and 75 are wirecheck's; a run
stopped by a signal exits 128+N (Ctrl-C 130, SIGTERM 143, SIGHUP 129), bare pytest as well as validate. The
commands that are not pytest keep argparse's 2 for bad input (BAD_INPUT): the same number as pytest's
INTERRUPTED, in another command.
"""

from __future__ import annotations

import signal

OK = 0  # every check that ran passed, on real hardware
FAILED = 1  # at least one check failed (or a measurement broke)
INTERRUPTED = 2  # pytest stopped the run: errors during collection, or a stop the suite requested
INTERNAL_ERROR = 3  # pytest or the plugin broke, or the install is broken
USAGE_ERROR = 4  # pytest's usage error: a bad option, selection, thresholds or topology file
NO_TESTS = 5  # no test was collected: nothing was validated
# A run that failed nothing but ran on stand-ins (a recorded topology, CPU processes and gloo): never 0,
# so that no script or scheduler takes a dry run for an accepted node.
SIMULATED = 10
# NVML reads no GPU on a machine meant to have GPUs (NVIDIA GPUs on its PCI bus, a driver installed, or a --profile
# naming the node; wirecheck.node.driver): nothing ran (bare pytest elsewhere: no GPU read, every check skipped)
NVML_BROKEN = 11
# Another run held the node for longer than this one would wait (--wait-for-node): nothing ran, nothing
# failed, nothing was mistyped, so a prolog or a node-problem detector tries again later instead of
# draining. 75 is sysexits' EX_TEMPFAIL ("temporary failure; try again later"): no code of pytest's (0-5)
# or wirecheck's, and no signal's (128+N).
NODE_BUSY = 75
# A fault of the harness, never a verdict on the node (wirecheck.core.harness): wirecheck could not write its
# record, a worker's log or a cache (no space, a read-only filesystem, the folder removed mid-run, an I/O
# error). 74 is sysexits' EX_IOERR. What was measured before is kept (the record, else the screen); a
# scheduler's hook reads it as "unknown", never as a reason to drain.
HARNESS_FAULT = 74
# The wirecheck plugin itself crashed (a bug of ours in a pytest hook, not a check that failed): sysexits'
# EX_SOFTWARE. pytest's own INTERNALERROR (3) stays for pytest and other plugins. "unknown" to the hooks too.
HARNESS_CRASH = 70

# `wirecheck diagnose`: what the follow-up probes found, in numbers no node verdict uses (0/1/10/11), so
# that a hook never reads a diagnosis as an accepted or a failed node. 0: the record has no failure.
NOTHING_TO_LOCALIZE = 0
DIAGNOSIS_FOUND = 20  # a part is named (a GPU, a pair's link, one NVLink, a GPU's slot) with its evidence
DIAGNOSIS_NOT_REPRODUCED = 21  # no failure came back under the probes
DIAGNOSIS_NOT_LOCALIZED = 22  # a failure came back (or could not be ruled out) and no probe singled out a part
# Without --run (the plan only), diagnose exits NOTHING_TO_LOCALIZE on a clean record, else DIAGNOSIS_PLANNED.
DIAGNOSIS_PLANNED = 23

# `wirecheck node-state`: node-problem-detector's 0 healthy, 1 unhealthy (drain), 2 unknown (act on nothing);
# with --hook (the drain rules applied: re-test, guard, escalate, wirecheck.cli.drain_hook) three more, in
# numbers no other command gives, so that a hook never takes one for a verdict or a diagnosis:
NODE_HEALTHY, NODE_UNHEALTHY, NODE_UNKNOWN = 0, 1, 2
NODE_FLAKY = 30  # a check failed, then passed its re-test: recorded as flaky, not drained (the node stays in service)
NODE_GUARD_HOLD = 31  # the node should drain, but the fleet guard holds: too many drained at once; not drained
NODE_REPLACE = 32  # drain, and replace a GPU (failed too often, or an uncorrectable memory fault); evidence bundle written

BAD_INPUT = 2  # the commands beside pytest (argparse's code): a bad option, file or value, named with its fix
# `wirecheck judge` and `wirecheck report`: a record with lines that do not decode (a bad byte): every other line
# was read and judged and nothing failed, but what the lost lines held (a failed verdict?) is unknown. Neither a
# pass (0) nor bad input (2): the verdicts stand, the record is damaged. A failure found still exits 1.
RECORD_DAMAGED = 12

CTRL_C = 128 + signal.SIGINT  # 130, as a shell reports a job stopped by Ctrl-C
TERMINATED = 128 + signal.SIGTERM  # 143
HANGUP = 128 + signal.SIGHUP  # 129: the terminal or ssh session went away


def verdict(failed: bool, simulated: bool) -> int:
    """The exit code of a run that got to its end: FAILED when anything failed, else SIMULATED for a
    dry run, else OK."""
    if failed:
        return FAILED
    return SIMULATED if simulated else OK
