"""`wirecheck diagnose RUN.jsonl [--run]`: for each failure in a record, the follow-up probes that localize
it (printed as a plan); with --run, run them here and name the part with its evidence, in a record of its
own (verdicts of check `diagnosis`), the culprit last.

A record that is not all of its run (cut short, interrupted, or with lines that cannot be read) is said so
first; its failures are planned or probed as any, and where none was read it is no clean record: a check it
did not reach, or a verdict on a lost line, may have failed.

Exit codes (wirecheck.core.exit_codes): 0 nothing to localize (a complete, undamaged record without failure),
20 found (a part is named), 21 not reproduced (no failure came back), 22 not localized (a failure came back,
or could not be ruled out, and no probe singled out a part; also a run cut short or interrupted with no
failure recorded), 23 planned (without --run: the plan was printed), 12 no failure in the lines that could
be read, but others could not (DAMAGED, as judge), 2 bad input.
"""

from __future__ import annotations

import argparse
import platform
import sys

from wirecheck.checks.judge import refuse_diagnosis, run_status
from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes as codes
from wirecheck.core.paths import suite_paths
from wirecheck.diagnose import plan
from wirecheck.diagnose.command import KIND, diagnose
from wirecheck.diagnose.context import context_for
from wirecheck.diagnose.suspects import suspects
from wirecheck.diagnose.context import WORKERS
from wirecheck.gpu.load import WORKERS as GPU_WORKERS
from wirecheck.node import nvml
from wirecheck.records.culprit import diagnosed_culprit
from wirecheck.records.file import RecordFileError, read_run
from wirecheck.records.run import recorded_thresholds, refuse_other_runs
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

NAME = "diagnose"
PROG = f"wirecheck {NAME}"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="localize a record's failures: the probes as a plan, or run (--run)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", metavar="RUN.jsonl", help="a record of `wirecheck validate` (its last run)")
    parser.add_argument("--run", dest="run_probes", action="store_true", help="run the probes on this node (in simulation for a "
                        "simulated record) and name the part")
    parser.add_argument("--json", dest="out", metavar="PATH", help="where the diagnosis record goes (default: a new "
                        "diagnosis-<UTC>-<host>-<pid>.jsonl in .wirecheck/)")
    parser.add_argument("--thresholds", metavar="PATH", help="thresholds file (default: the copy in the record's "
                        "header, else the suite's)")
    parser.add_argument("--collective-workers", default=WORKERS, metavar="MODULE", help="module of the probes' "
                        "collective worker functions `measure` and `pair` (self-tests inject faults through it)")
    parser.add_argument("--gpu-workers", default=GPU_WORKERS, metavar="MODULE", help="module of the GPU load's "
                        "worker functions (self-tests inject faults through it)")
    return parser


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def _thresholds(args, run):
    if args.thresholds:
        return load_thresholds(args.thresholds)
    recorded = recorded_thresholds(run.run)
    if recorded is not None:
        return load_thresholds(run.run.get("thresholds") or "recorded thresholds", content=recorded[0])
    return load_thresholds(suite_paths().thresholds)


def _topology(run):
    """NVML's topology on a node; the header's for a simulated record. A GPU record is probed only on the node
    that wrote it: another node's GPUs would answer for parts that are not theirs."""
    if run.simulated:
        return None
    here, there = platform.node(), run.run.get("host")
    if there and there != here:
        raise ValueError(f"{run.path} was recorded on {there}, and this is {here}: run `{PROG} {run.path} --run` on "
                         f"{there} (without --run, the plan prints anywhere)")
    try:
        return nvml.read_topology()
    except nvml.NvmlUnavailable as exc:
        raise ValueError(f"{run.path} was recorded on GPUs, and NVML here says: {nvml.without_simulate_hint(exc)}; "
                         "run diagnose --run on the node the record came from") from None


def _unclean(record) -> list[str]:
    """What keeps a record from being all of its run, as judge says it: a run cut short or interrupted, lines lost."""
    return [line for line in (run_status(record), record.damage()) if line]


def _nothing_read_failed(record) -> int:
    """No failure in a record that is not all of its run: not the clean record 0 stands for. A check the run did not
    reach, or a verdict on a lost line, may have failed; so incomplete first, as judge orders them."""
    if run_status(record):
        print(f"nothing to localize in what the run recorded, but the run did not finish: a check it did not reach may "
              f"fail; run the level again (`wirecheck validate`) and `{PROG}` its record")
        return codes.DIAGNOSIS_NOT_LOCALIZED
    print(f"nothing to localize in the lines that could be read, but a failed verdict may be on a lost one: `wirecheck "
          f"judge {record.path}` says what is left; run the level again (`wirecheck validate`) for a whole record")
    return codes.RECORD_DAMAGED


def run(args, extra_args) -> int:
    try:
        if args.out and args.run_probes:  # before the probes: a path that cannot take their record loses it
            refuse_other_runs(args.out, KIND, [args.record])
        record = read_run(args.record)
        refuse_diagnosis(record, NAME)  # its failures are findings already: diagnose the record it diagnosed
        thresholds = _thresholds(args, record)
    except (RecordFileError, ThresholdsError, ValueError) as exc:
        _say(str(exc))
        return codes.BAD_INPUT
    found = suspects(record)
    unclean = _unclean(record)
    for line in unclean:  # said before the plan or the probes: the failures read may not be all of the run's
        print(f"{PROG}: {line}")
    if not found and unclean:
        return _nothing_read_failed(record)
    if not args.run_probes:
        print(plan.render(found))
        if plan.probed(found):
            print(f"\nrun them: {PROG} {args.record} --run")
        elif found:  # --run would only record them as not localized: the failures' own steps are the way on
            print("\nno probe to run: act on each failure as its `to do` above says")
        return codes.DIAGNOSIS_PLANNED if found else codes.NOTHING_TO_LOCALIZE
    if not found:
        print("nothing to localize: the record has no failure")
        return codes.NOTHING_TO_LOCALIZE
    try:
        ctx = context_for(record, thresholds, topology=_topology(record), collective_workers=args.collective_workers,
                          gpu_workers=args.gpu_workers)
        findings, path, code = diagnose(record, ctx, args.out, say=print)
    except (RecordFileError, ValueError) as exc:
        _say(str(exc))
        return codes.BAD_INPUT
    culprit = diagnosed_culprit(read_run(path))
    results = ", ".join(f"{f.suspect.label}: {f.result}" for f in findings)
    print(f"\ndiagnosis record: {path}")
    print(f"culprit: {culprit}" if culprit else f"no part named ({results})")
    return code


main = entry(NAME)
