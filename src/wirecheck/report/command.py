"""`wirecheck report RESULTS.jsonl [MORE.jsonl ...] [--history DIR] [-o report.html] [--prometheus FILE]`

One self-contained HTML page for a run: the verdict first (failures with measured, limit,
source, placement), the node, bus bandwidth against size per collective and placement with
the floors, NVLink against the host path, the link matrix, the strategy dial, NCCL's path,
copy bandwidth, each GPU under load, a burn-in over its whole run, error-counter growth; with more record files or --history, each key figure
over time with its noise band. The first RESULTS file is the run described; every file given
and every record under --history DIR of the same host (and the same simulated-or-not) forms
the trend. --prometheus writes the key figures for node_exporter's textfile collector.

Exit codes: 0 written; 2 bad input (a file that is not a record, an unreadable --history
directory, an unwritable output path).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from pathlib import Path

from wirecheck.core import exit_codes
from wirecheck.records.file import RecordFileError


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


def _parser() -> argparse.ArgumentParser:
    return _add_arguments(argparse.ArgumentParser(prog="wirecheck report", description=__doc__,
                                                  formatter_class=argparse.RawDescriptionHelpFormatter))


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The `wirecheck` command-module protocol (NAME, add_parser, run): `wirecheck report ...`."""
    return _add_arguments(subparsers.add_parser(NAME, help=HELP, description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter))


def build_html(view, history, skipped, sources: list[str]) -> tuple[str, list]:
    """The page and the figures in it, for the command and for a fleet page that embeds runs."""
    import matplotlib

    from wirecheck.report import html, sections

    parts = sections.build(view, history, skipped)
    css, text = sections.headline(view)
    h = view.header
    title = f"wirecheck: {h.get('host')} {h.get('started')}" + (" (SIMULATION)" if view.simulated else "")
    header = (f"<h1>{html.esc(title)}</h1><div class=\"banner {css}\">{html.esc(text)}</div>")
    made = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    footer = (f"made by wirecheck report at {html.esc(made)} from {html.esc(', '.join(sources))}; "
              f"figures drawn with matplotlib {html.esc(matplotlib.__version__)}")
    images = [img for s in parts for img in s.images]
    return html.page(title, header, parts, footer), images


def _topology_of(view) -> tuple:
    h = view.header
    return h.get("fabric"), repr(h.get("groups")), repr(h.get("matrix"))


_KINDS = {"simulation": "a simulation", "hardware": "a hardware run",
          "no GPU": "a run that read no GPU (not simulated, and NVML saw none: nothing was measured)"}


def _trend_runs(view, others, history, skipped):
    """Runs of the same host and kind (hardware, simulation, or a run that read no GPU), and for a simulation of the same simulated
    topology: another node's nights, a dry run, or a dry run of another node would only blur this band."""
    kept = []
    for other in [*others, *history]:
        if other.header.get("host") != view.header.get("host"):
            skipped.append((other.run.path, f"another host ({other.header.get('host')})"))
        elif other.kind != view.kind:
            skipped.append((other.run.path, f"{_KINDS[other.kind]}; this one is {_KINDS[view.kind]}"))
        elif view.simulated and _topology_of(other) != _topology_of(view):
            skipped.append((other.run.path, f"a simulation of another topology ({other.header.get('simulation_source')})"))
        else:
            kept.append(other)
    return kept


def _unwritable(path: Path) -> str | None:
    """Why `path` cannot be written, checked before any drawing (a page takes seconds to draw)."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"{path} is a directory"
    if folder.exists() and not folder.is_dir():
        return f"{folder} is a file, not a directory"
    if not folder.is_dir():
        return f"{folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def main(argv: list[str] | None = None) -> int:
    return run(_parser().parse_args(argv), [])


def run(args: argparse.Namespace, extra: list[str]) -> int:
    """The command (NAME, add_parser, run): `extra` is always empty, wirecheck.cli.main refuses
    arguments this command does not take."""
    from wirecheck.report.model import load_history, load_runs
    from wirecheck.report.prometheus import exposition
    from wirecheck.core.safefs import write_atomically

    try:
        views = load_runs(args.records)
        history, skipped = load_history(args.history, exclude=[Path(p) for p in args.records]) if args.history else ([], [])
    except RecordFileError as exc:
        print(f"wirecheck report: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    view = views[0]
    output = Path(args.output) if args.output else Path(args.records[0]).with_suffix(".html")
    for target in [output] + ([Path(args.prometheus)] if args.prometheus else []):
        why = _unwritable(target)
        if why:
            print(f"wirecheck report: cannot write {target}: {why}; pass a writable path", file=sys.stderr)
            return exit_codes.BAD_INPUT
    trend = _trend_runs(view, views[1:], history, skipped)
    try:
        page, images = build_html(view, trend, skipped, args.records)
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
    for path, why in skipped:  # listed on the page too ("Over time")
        print(f"wirecheck report: left out of the trend: {why if why.startswith(str(path)) else f'{path}: {why}'}")
    if args.prometheus:
        print(f"wirecheck report: wrote {args.prometheus} (Prometheus text format)")
    if view.status != "complete":
        print(f"wirecheck report: {args.records[0]}: the run was {view.status}: the page says INCOMPLETE (not every "
              "check ran)")
    if view.simulated:
        print("wirecheck report: SIMULATION: the run described validated nothing")
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
