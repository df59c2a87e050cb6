"""`wirecheck report RESULTS.jsonl [MORE.jsonl ...] [--history DIR] [-o report.html] [--prometheus FILE]`

One self-contained HTML page for a run: the verdict first (failures with measured, limit,
source, placement), the node, bus bandwidth against size per collective and placement with
the floors, NVLink against the host path, the link matrix, the strategy dial, NCCL's path,
copy bandwidth, each GPU under load, a burn-in over its whole run, error-counter growth; with more record files or --history, each key figure
over time with its noise band. The first RESULTS file is the run described; every file given
and every record under --history DIR of the same host that is a run like it (the same kind of run,
simulated or not, level, selection and GPUs) forms the trend, each run once; one line says what was
left out and why. --prometheus writes the key figures for node_exporter's textfile collector.

A line of the run's record that is not UTF-8 text (a bad byte) is named (file, line, byte) and skipped;
the page is drawn from every other line and says DAMAGED RECORD.

The terminal says the run's state beside the page's name: FAILED (the verdicts counted, each failure
named), INCOMPLETE, SIMULATION, DAMAGED. A failed run's page is written: exit 0 (judge exits 1 for it).

Exit codes: 0 written; 2 bad input (a file that is not a record, an unreadable --history
directory, an unwritable output path, or one that is an input or holds a record, refused before anything
is drawn); 12 written, but the run's record is damaged (lines that could not be read: what they held is lost).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "report"
HELP = "one self-contained HTML page (and Prometheus figures) from record files, with the trend over earlier runs"


def _add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("records", nargs="+", metavar="RESULTS.jsonl",
                        help="record files written by a run (--wirecheck-json); the first is the run described")
    parser.add_argument("--history", metavar="DIR", help="a directory of earlier record files (*.jsonl, searched "
                        "recursively) for the trend; files that are not records are listed and left out")
    parser.add_argument("-o", "--output", metavar="report.html",
                        help="the HTML file to write (default: the first RESULTS file with .html instead of .jsonl)")
    parser.add_argument("--prometheus", metavar="FILE",
                        help="also write the key figures and verdict counts in Prometheus' text format (for "
                             "node_exporter's textfile collector: give it a .prom name in the collector's directory)")
    return parser


def add_parser(subparsers) -> argparse.ArgumentParser:
    return _add_arguments(subparsers.add_parser(NAME, help=HELP, description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter))


# Failures named on the terminal; the page has every one.
NAMED_FAILURES = 5


def _failures(failures: list[dict]) -> str:
    """The failed verdicts, each as the drain reason names it (check, where, measured against its limit)."""
    from wirecheck.core import render
    from wirecheck.core.verdict import Verdict

    def named(v: dict) -> str:
        try:
            return render.drain_reason(Verdict.from_record(v))
        except (TypeError, ValueError):  # a verdict line not as wirecheck writes them: its check and place
            return f"{v.get('check')} {v.get('where') or 'node'}"

    more = len(failures) - NAMED_FAILURES
    return "; ".join(named(v) for v in failures[:NAMED_FAILURES]) + (f"; and {more} more" if more > 0 else "")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.checks.judge import counted
    from wirecheck.records.file import RecordFileError
    from wirecheck.records.run import refuse_other_runs
    from wirecheck.report.command import build_html, trend_runs, unwritable
    from wirecheck.report.model import load_history, load_runs
    from wirecheck.report.prometheus import exposition
    from wirecheck.report.sections import headline
    from wirecheck.report.trends import left_out_line
    from wirecheck.core.safefs import write_atomically

    output = Path(args.output) if args.output else Path(args.records[0]).with_suffix(".html")
    targets = [("-o" if args.output else "-o (not given: the first RESULTS file with .html)", output)]
    targets += [("--prometheus", Path(args.prometheus))] if args.prometheus else []
    for option, target in targets:
        try:  # the page and the Prometheus file replace what is there: never a record, least of all an input
            refuse_other_runs(target, None, args.records)
        except RecordFileError as exc:
            print(f"wirecheck report: {option}: {exc} (nothing was written)", file=sys.stderr)
            return exit_codes.BAD_INPUT
    for option, target in targets:
        why = unwritable(target)  # before anything is read or drawn: a page takes seconds
        if why:
            print(f"wirecheck report: cannot write {target}: {why}; nothing was drawn: pass a path in a folder you "
                  "can write (or leave -o out: the page goes beside the record)", file=sys.stderr)
            return exit_codes.BAD_INPUT
    try:
        views = load_runs(args.records)
        history, skipped = load_history(args.history, exclude=[Path(p) for p in args.records]) if args.history else ([], [])
    except RecordFileError as exc:
        print(f"wirecheck report: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    view = views[0]
    trend = trend_runs(view, views[1:], history, skipped)
    try:
        page, images = build_html(view, trend, skipped, args.records)
    except ImportError as exc:  # the install, not the record: a package the page needs is missing
        print(f"wirecheck report: cannot draw the page: {exc}; this Python lacks a package wirecheck's report needs: "
              f"`pip install {exc.name or 'wirecheck'}` (or reinstall wirecheck with its dependencies)", file=sys.stderr)
        return exit_codes.INTERNAL_ERROR
    except Exception as exc:  # noqa: BLE001 (records are data from other nodes: a message, never a traceback)
        print(f"wirecheck report: cannot draw the page from {', '.join(map(str, args.records))}: a value in it is not "
              f"one wirecheck records ({type(exc).__name__}: {str(exc)[:300]}); the record was changed or damaged",
              file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        write_atomically(output, page)
        if args.prometheus:
            write_atomically(args.prometheus, exposition(view))
    except OSError as exc:
        target = exc.filename or output
        print(f"wirecheck report: cannot write {target}: {exc.strerror or exc}; pass a writable path", file=sys.stderr)
        return exit_codes.BAD_INPUT
    size = len(page.encode("utf-8"))
    print(f"wirecheck report: wrote {output} ({size / 1024:.0f} KiB, {len(images)} figures: "
          f"{' '.join(i.id for i in images) or 'none'})")
    if skipped:
        print(f"wirecheck report: {left_out_line(skipped)}; {len(trend) + 1} run(s) in the trend")
    for path, why in skipped:  # listed on the page too ("Over time")
        print(f"wirecheck report: left out of the trend: {why if why.startswith(str(path)) else f'{path}: {why}'}")
    if args.prometheus:
        print(f"wirecheck report: wrote {args.prometheus} (Prometheus text format)")
    if view.header.get("kind") == "diagnosis":  # the page's banner says so: findings about another record
        print(f"wirecheck report: {args.records[0]}: {headline(view)[1]}")
    elif view.failures:  # the terminal names the run's state as judge does: a log or a script reads no page
        print(f"wirecheck report: {args.records[0]}: FAILED: {counted(view.verdict_counts)}: "
              f"{_failures(view.failures)}; the page leads with them, each with what to do")
    if view.status != "complete":
        print(f"wirecheck report: {args.records[0]}: the run was {view.status}: the page says INCOMPLETE (not every "
              "check ran)")
    if view.simulated:
        print("wirecheck report: SIMULATION: the run described validated nothing")
    if view.run.damaged:
        print(f"wirecheck report: DAMAGED: {view.run.damage()}; the page shows every other line and says so")
        return exit_codes.RECORD_DAMAGED
    return exit_codes.OK

main = entry(NAME)
