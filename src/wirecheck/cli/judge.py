"""`wirecheck judge RESULTS.jsonl [MORE.jsonl ...] [--thresholds FILE]`: judge recorded runs again.

Each verdict in a record file carries the inputs its check was computed from; the same check
functions (wirecheck.checks) run on them again against a thresholds file — retuned floors,
another node's limits — without GPUs. Without --thresholds each run is judged against its own
thresholds, as it read them (the record's header keeps the file's bytes); say --thresholds FILE to
judge against another. Failures are printed first, each with what was measured, the limit, where
it is written and its source. pytest counts tests, judge counts verdicts: where their skips
differ, judge says why (a test skipped before its check ran records no verdict).

A warn verdict (nothing failed, something to say) is printed with the failures, even with -q, and
counted apart; it does not fail the judgement.

A line that is not UTF-8 text (a bad byte on a disk or in a copy) is named (file, line, byte) and
skipped as a torn line is; every other line is judged, and the outcome says the record is DAMAGED.

Exit codes: 0 every verdict passes (or warns) on a complete hardware run; 1 a verdict fails (FAILED), or a run
was cut short (no end record) or interrupted with nothing failed (INCOMPLETE; a torn last line is
named and skipped); 2 bad input (a file that is not a record, a run that ended with no verdict to judge, one
run given twice: the same file or a copy of it, a malformed thresholds file); 10 the runs passed but one of
them was a simulation (no node was validated); 12 nothing failed, but a record has lines that could not be read (DAMAGED: what they
held is lost).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "judge"
HELP = "judge recorded runs again against a thresholds file, without GPUs"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", metavar="RESULTS.jsonl", help="record files written by a run (--wirecheck-json)")
    parser.add_argument("--thresholds", metavar="FILE",
                        help="thresholds file to judge against (default: each run's own, kept in its record; a record "
                             "written before 2026-12-02 keeps none and is judged against the shipped thresholds.yaml)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also say, once per limit, where the failed and warned verdicts' limits come from (their "
                             "source in the thresholds file)")
    return parser


def refuse_copies(runs) -> None:
    """One run given twice (the same file, or a copy of it) would count each of its verdicts twice: refused,
    naming both files. RecordFileError."""
    from wirecheck.records.file import RecordFileError
    from wirecheck.records.same_run import run_key, same_run_words

    seen = {}
    for run in runs:
        first = seen.setdefault(run_key(run.run), run)
        if first is not run:
            what = "the same file as" if Path(run.path).resolve() == Path(first.path).resolve() else "the same run as"
            raise RecordFileError(f"{run.path}: {what} {first.path} ({same_run_words(run.run)}): each run is judged "
                                  "once; give each record once")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.checks.judge import (counted, format_verdict, judge_run, own_thresholds, refuse_diagnosis,
                                        run_status, skips_explained)
    from wirecheck.core.paths import suite_paths
    from wirecheck.core.verdict import FAIL, OUTCOMES, PASS, SKIP, WARN
    from wirecheck.records.file import RecordFileError, read_run
    from wirecheck.thresholds.file import ThresholdsError, load_thresholds

    notes = []
    try:
        runs = [read_run(p) for p in args.records]
        refuse_copies(runs)
        for run in runs:
            refuse_diagnosis(run, NAME)
            if not run.verdicts and run.end is not None:  # ended with nothing to judge: never PASSED
                kind = run.run.get("kind")
                what = (f"a `wirecheck {kind}` run: figures, no check" if kind else "its selected tests each skipped "
                        f"before their check ran (`wirecheck report {run.path}` shows why)")
                raise RecordFileError(f"{run.path}: its last run holds no verdict ({what}): nothing to judge, and no "
                                      "pass")
        if args.thresholds:
            try:
                given = load_thresholds(Path(args.thresholds))
            except FileNotFoundError:
                raise ThresholdsError(f"--thresholds {args.thresholds}: no such file") from None
            judged = [j for run in runs for j in judge_run(run, given)]
            notes.append(f"against {args.thresholds}")
        else:
            judged = []
            for run in runs:
                own, note = own_thresholds(run, suite_paths().thresholds)
                judged += judge_run(run, own)
                notes.append(note)
    except (ThresholdsError, RecordFileError, ValueError) as exc:
        print(f"wirecheck judge: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except FileNotFoundError as exc:
        print(f"wirecheck judge: {exc.filename}: no such file", file=sys.stderr)
        return exit_codes.BAD_INPUT

    print(f"wirecheck judge: {len(judged)} verdicts from {len(runs)} run(s)" + (f" {notes[0]}" if args.thresholds else ""))
    if not args.thresholds:
        for note in notes:
            print(f"wirecheck judge: {note}")
    for run in runs:
        if run.torn_line is not None:
            print(f"wirecheck judge: {run.path}:{run.torn_line}: a torn last line (not JSON: the run was killed or "
                  "its disk filled while writing it): skipped")
        if run.damaged:
            for d in run.damaged:
                print(f"wirecheck judge: {run.path}:{d.line}: {d.reason} (byte {d.byte} of the file, column "
                      f"{d.column}): skipped, as a torn line is; what it held is lost")
        if run.earlier_runs:
            print(f"wirecheck judge: {run.path} holds {run.earlier_runs + 1} runs; judging the last one "
                  f"(started {run.run.get('started')})")
    order = {FAIL: 0, WARN: 1, PASS: 2, SKIP: 3}
    for j in sorted(judged, key=lambda j: order.get(j.now.outcome, 4)):
        if j.now.outcome in (FAIL, WARN) or not args.quiet:
            print(format_verdict(j))
    if args.verbose:
        from wirecheck.checks.failure_block import provenance_lines

        lines = provenance_lines([j.now for j in judged if j.now.outcome in (FAIL, WARN)])
        if lines:
            print("wirecheck judge: where the limits of the failed and warned verdicts come from, each once:")
            for line in lines:
                print(f"  {line}")
    for line in skips_explained(runs, judged):
        print(f"wirecheck judge: {line}")
    counts = {o: sum(j.now.outcome == o for j in judged) for o in OUTCOMES}
    changed = sum(j.changed for j in judged)
    problems = [p for p in (run_status(run) for run in runs) if p]
    for p in problems:
        print(f"wirecheck judge: {p}")
    simulated = [str(run.path) for run in runs if run.simulated]
    summary = f"{counted(counts)}; {changed} changed since recorded"
    # Said in every outcome, failed or cut short too: a dry run's verdicts never stand for a node.
    simulation = (f"; SIMULATION: {', '.join(simulated)} judged a simulated run, no node was validated"
                  if simulated else "")
    damaged = [run.damage() for run in runs if run.damaged]
    if counts[FAIL]:
        print(f"wirecheck judge: FAILED: {summary}{simulation}"
              + (f"; and DAMAGED: {'; '.join(damaged)}" if damaged else ""))
        return exit_codes.FAILED
    if problems:  # nothing failed, but not every check was judged: no verdict on the run as a whole
        print(f"wirecheck judge: INCOMPLETE: a run did not end (see above), so not every check was judged: "
              f"{summary}{simulation}")
        return exit_codes.FAILED
    if damaged:  # every line that could be read passed; the lost ones may have held anything
        print(f"wirecheck judge: DAMAGED: {'; '.join(damaged)}; every other verdict: {summary}{simulation}")
        return exit_codes.RECORD_DAMAGED
    if simulated:
        print(f"wirecheck judge: {summary}{simulation}")
        return exit_codes.SIMULATED
    print(f"wirecheck judge: PASSED: {summary}")
    return exit_codes.OK

main = entry(NAME)
