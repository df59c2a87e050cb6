"""The work of `wirecheck fleet report` (its options and usage: wirecheck.cli.fleet.report): a fleet's
records judged together (wirecheck.fleet.judging), written as text leading with the failures, as JSON and as
a page; `run(args)` with the command's options parsed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wirecheck.core import exit_codes
from wirecheck.fleet.judging import (FleetResult, digest, gpus_below_fleet, judge_fleet, named_by_fleet_rule, named_by_pairs,
                                     slow_links)
from wirecheck.fleet import summary
from wirecheck.fleet.diagnosis_view import DiagnosisView, html_section, read_diagnosis, text_lines
from wirecheck.records.file import RecordFileError
from wirecheck.records.run import refuse_other_runs
from wirecheck.fleet.records import FleetInputError, collect, default_jobs, read_node_list
from wirecheck.fleet.settings import FULL_TABLE_UP_TO, MAX_LINES  # a small fleet's every row; failures listed
from wirecheck.core.paths import suite_paths
from wirecheck.core.safefs import umask, write_atomically
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.core.verdict import FAIL, PASS, SKIP, Verdict




def table(result: FleetResult, only_failed: bool = False) -> str:
    rows = [("node", "record", "checks fail/pass/skip", "below peers", "GPUs below fleet", "pairs", "status")]
    for n in result.nodes:
        if only_failed and n.ok:
            continue
        below = sum(v.outcome == FAIL for v in n.outliers)
        judged = sum(v.outcome != SKIP for v in n.outliers)
        gpus_judged = {v.where for v in n.gpus if v.outcome != SKIP}
        gpus_below = {v.where for v in n.gpus if v.outcome == FAIL}
        rows.append((n.node + (" (not listed)" if n.unexpected else ""), n.record_status,
                     f"{n.count(FAIL)}/{n.count(PASS)}/{n.count(SKIP)}" if n.judged or n.path else "-",
                     f"{below} of {judged}" if judged else "-",
                     f"{len(gpus_below)} of {len(gpus_judged)}" if gpus_judged else "-", n.pairs_status,
                     "PASS" if n.ok else "FAIL"))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def _capped(lines: list[str], full: bool, what: str) -> list[str]:
    if full or len(lines) <= MAX_LINES:
        return lines
    return lines[:MAX_LINES] + [f"  ... and {len(lines) - MAX_LINES} more {what}: every one in --json FILE, "
                                "or run with --full"]


def summary_lines(result: FleetResult, quiet: bool = False) -> list[str]:
    """Counts per state, the worst nodes, the distribution of each figure a node was named in (every
    figure's without -q)."""
    lines = ["summary: " + summary.states_line(result)]
    worst = summary.worst_nodes(result, 5)
    if worst:
        lines.append("furthest below the fleet's median: " + "; ".join(
            f"{w.node} {w.below * 100:.1f} % ({w.figure}){' NAMED' if w.named else ''}" for w in worst))
    dists = summary.distributions(result)
    shown = [d for d in dists if d.named or not quiet]
    for d in shown:
        lines.append("  " + summary.distribution_line(d))
    if len(shown) < len(dists):
        lines.append(f"  {len(dists) - len(shown)} other figure(s): no node named (each figure's spread: without -q, "
                     "--json or --html)")
    return lines


def _network_lines(result: FleetResult) -> list[str]:
    out = []
    for net in result.network:
        busbw = [v for v in net.verdicts if v.check == "busbw" and v.where and v.where.startswith("network-")]
        figures = ", ".join(f"{v.inputs.get('op', v.check)} {v.measured:.2f} GB/s {v.outcome}" for v in busbw
                            if v.measured is not None)  # the collective from the verdict's inputs, not its wording
        state = "complete" if net.complete else net.problem
        out.append(f"network run {Path(net.path).name}: {len(net.nodes)} nodes, {state}; {figures or 'no busbw verdict'}; "
                   f"{len(net.failed)} failed verdict(s)")
    return out


def render(result: FleetResult, quiet: bool = False, full: bool = False) -> str:
    """The failures first, then the summary, then the table (every node's up to FULL_TABLE_UP_TO nodes
    or with `full`, the failed nodes' otherwise), the network runs and the verdict."""
    lines = [f"wirecheck fleet report: {note}" for note in result.notes]
    if result.changes:
        lines.append(f"fleet-wide changes ({len(result.changes)}): one finding each, not a failure of every node:")
        lines += [f"  {c.describe()}; nodes: {summary.shortened(c.nodes)}" for c in result.changes]
    fails = [(Path(who).name, v) for who, v in result.failures]  # a multi-node run by its file name
    if fails:
        failed_nodes = sum(not n.ok for n in result.nodes)
        lines.append(f"failures ({len(fails)} failed verdict(s) on {failed_nodes} node(s)):")
        lines += _capped([f"  {who}: [{v.check}] {v.message}" for who, v in fails], full, "failures")
    if result.missing_unnamed:
        lines.append(f"MISSING: {result.missing_unnamed} node(s) wrote no record (--expect); pass --nodes FILE to name them")
    if not quiet:
        warnings = [(n.node, v) for n in result.nodes for v in n.warnings]
        lines += _capped([f"  {who}: warning [{v.check}] {v.details['warning']}" for who, v in warnings], full,
                         "warnings")
    if lines:
        lines.append("")
    lines += summary_lines(result, quiet)
    lines.append("")
    small = full or len(result.nodes) <= FULL_TABLE_UP_TO
    if small:
        lines.append(table(result))
    elif any(not n.ok for n in result.nodes):
        lines.append(f"the failed nodes (every node's row: --full or --json):")
        lines.append(table(result, only_failed=True))
    lines += _network_lines(result)
    if result.network_missing:
        lines.append("network run: MISSING")
    by_rule, by_pairs, links = named_by_fleet_rule(result), named_by_pairs(result), slow_links(result)
    short = summary.shortened
    lines.append("")
    lines.append(f"GPUs below the fleet's GPUs of their model: {_gpu_names(result) or 'none'}")
    lines.append(f"below their peers (fleet rule): {short(by_rule) or 'none'}; slow with every partner (pair "
                 f"schedule): {short(by_pairs) or 'none' if result.network else 'not measured'}; slow links: "
                 f"{short(links) or 'none' if result.network else 'not measured'}")
    failed = sum(not n.ok for n in result.nodes) + result.missing_unnamed
    word = "FAILED" if not result.ok else "no failures in a SIMULATION" if result.simulated else "PASSED"
    changes = f"; {len(result.changes)} change(s) across the fleet" if result.changes else ""
    lines.append(f"wirecheck fleet report: {word}: {failed} of {len(result.nodes) + result.missing_unnamed} node(s) failed; "
                 f"{sum(len(net.failed) for net in result.network) + result.network_missing} failed network verdict(s)"
                 f"{changes}")
    if result.simulated:
        lines.append("wirecheck fleet report: SIMULATION: the records are simulated runs; no node was validated")
    return "\n".join(lines)


def own_verdicts_line(result: FleetResult) -> str:
    """How the nodes' own verdicts were judged: taken as recorded (the record says it was judged under
    these very thresholds by this very wirecheck) or judged again with these thresholds. Said once some
    record is taken as recorded; where none is, every node was judged again, as the report has always done."""
    recorded = sum(n.as_recorded for n in result.nodes)
    again = sum(n.judged and not n.as_recorded for n in result.nodes)
    if not recorded:
        return ""
    parts = []
    if recorded:
        parts.append(f"{recorded} record(s) as recorded (judged under these thresholds by this wirecheck)")
    if again:
        parts.append(f"{again} judged again with these thresholds (their records were judged under other "
                     "thresholds or by another wirecheck, or do not say)")
    return "wirecheck fleet report: own verdicts: " + "; ".join(parts)


def _gpu_names(result: FleetResult) -> str:
    """"n03/GPU2 (HBM copy bandwidth (read+write))" for every GPU the fleet's GPU rule named."""
    figures: dict[str, list[str]] = {}
    for n in result.nodes:
        for v in n.gpus:
            if v.outcome == FAIL:
                figures.setdefault(v.where, []).append(v.details["figure"])
    return summary.shortened([f"{who} ({', '.join(whats)})" for who, whats in sorted(figures.items())])


def _record(v) -> dict:
    """Verdict.as_record without dataclasses.asdict's deep copy: a verdict's fields are plain data
    already, and at 10,000 nodes the copies took most of --json's time."""
    return {name: getattr(v, name) for name in _VERDICT_FIELDS}


_VERDICT_FIELDS = tuple(Verdict.__dataclass_fields__)


def _figure_row(v) -> dict:
    """A judged figure in a line: what a dashboard plots. Its verdict in full is kept when it did not pass."""
    return {"figure": v.details.get("figure"), "unit": v.unit, "value": v.measured, "outcome": v.outcome,
            "below": v.details.get("below"), "median": (v.limit or {}).get("median")}


def as_json(result: FleetResult) -> dict:
    """The fleet's verdicts as data. Per node: every failed verdict, the fleet rule's verdicts that
    did not pass (failed or skipped: in full, with the inputs that judge them again), and each figure
    and GPU figure with its value and outcome; the summary's counts and distributions. A passing
    fleet verdict is a row of `figures` (or `gpu_figures`), not a whole verdict: thousands of nodes
    times dozens of figures would make the file hundreds of MB."""
    return {
        "directory": result.directory, "thresholds": result.thresholds, "simulated": result.simulated,
        "exit_status": result.exit_code, "ok": result.ok, "missing_unnamed": result.missing_unnamed,
        "network_record": _record(result.network_record) if result.network_record else None,
        "changes": [c.as_dict() for c in result.changes], "notes": result.notes,
        "named": {"fleet_rule": named_by_fleet_rule(result), "pair_schedule": named_by_pairs(result),
                  "slow_links": slow_links(result), "gpus": gpus_below_fleet(result)},
        "summary": {
            "states": summary.state_counts(result),
            "worst": [{"where": w.node, "below": w.below, "figure": w.figure, "named": w.named}
                      for w in summary.worst_nodes(result, 20)],
            "figures": [{"figure": d.figure, "unit": d.unit, "n": d.n, "median": d.median, "p05": d.quantile(0.05),
                         "p95": d.quantile(0.95), "min": d.values[0], "max": d.values[-1], "rule": d.rule,
                         "named": [{"where": who, "value": v} for who, v in d.named]}
                        for d in summary.distributions(result)],
        },
        "nodes": [{
            "node": n.node, "path": n.path, "ok": n.ok, "state": n.state, "unexpected": n.unexpected,
            "own_verdicts": "as recorded" if n.as_recorded else "judged again" if n.judged else None,
            "record": _record(n.record),
            "damaged_lines": [{"line": d.line, "byte": d.byte} for d in n.damaged],
            "counts": {o: n.count(o) for o in (FAIL, PASS, SKIP)},
            "failed": [_record(v) for v in n.failed],
            "outliers": [_record(v) for v in n.outliers if v.outcome != PASS],
            "pairs": [_record(v) for v in n.pairs],
            "gpus": [_record(v) for v in n.gpus if v.outcome != PASS],
            "figures": {key: {"label": f.label, "kind": f.kind, "unit": f.unit, "value": f.value, "models": list(f.models)}
                        for key, f in n.figures.items()},
            "judged": [_figure_row(v) for v in n.outliers],
            "gpu_figures": [{"where": v.where, "gpu_model": v.details.get("gpu_model"), **_figure_row(v)}
                            for v in n.gpus],
        } for n in result.nodes],
        "network": [{"path": net.path, "nodes": net.nodes, "complete": net.complete, "problem": net.problem,
                     "verdicts": [_record(v) for v in net.verdicts]} for net in result.network],
    }


def run(args) -> int:
    """`wirecheck fleet report` with its options parsed (wirecheck.cli.fleet.report): the fleet's exit code
    (wirecheck.core.exit_codes), after its text and any --json and --html file."""
    th_path = Path(args.thresholds) if args.thresholds else suite_paths().thresholds
    inputs = [p for p in (args.thresholds, args.nodes, args.diagnosis) if p]
    for option in ("--json", "--html"):  # before the records are read: a fleet takes up to a minute
        target = getattr(args, option.lstrip("-"))
        try:  # the file is replaced: never a node's record (the next report would miss the node) nor an input
            refuse_other_runs(target, None, inputs) if target else None
        except RecordFileError as exc:
            print(f"wirecheck fleet report: {option}: {exc} (nothing was written)", file=sys.stderr)
            return exit_codes.BAD_INPUT
    try:
        thresholds = load_thresholds(th_path)
        expected = read_node_list(args.nodes) if args.nodes else None
        if args.expect is not None and args.expect < 1:
            raise FleetInputError(f"--expect {args.expect}: give the number of nodes, at least 1")
        if args.jobs is not None and args.jobs < 1:
            raise FleetInputError(f"--jobs {args.jobs}: give the number of processes that read records, at least 1")
        fleet = collect(args.directory, expected, args.expect, digest=digest(thresholds),
                        jobs=args.jobs or default_jobs())
        result = judge_fleet(fleet, thresholds, expect_network=args.expect_network)
        diagnosis = read_diagnosis(args.diagnosis) if args.diagnosis else None
    except FileNotFoundError as exc:
        if args.diagnosis and exc.filename == args.diagnosis:
            print(f"wirecheck fleet report: --diagnosis {args.diagnosis}: no such file; pass the record `wirecheck "
                  "fleet diagnose --run` wrote", file=sys.stderr)
            return exit_codes.BAD_INPUT
        print(f"wirecheck fleet report: --thresholds: {th_path} does not exist; pass the path of a thresholds file",
              file=sys.stderr)
        return exit_codes.BAD_INPUT
    except (ThresholdsError, FleetInputError, RecordFileError, ValueError) as exc:
        print(f"wirecheck fleet report: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(f"wirecheck fleet report: {fleet.directory}: {len(fleet.nodes)} node(s), {len(fleet.network)} multi-node "
          f"run(s); thresholds {th_path}")
    line = own_verdicts_line(result)
    if line:
        print(line)
    print(render(result, args.quiet, args.full))
    if diagnosis is not None:
        print("\n".join(["", *text_lines(diagnosis)]))
    for option, write in (("--json", _write_json), ("--html", _write_html)):
        target = getattr(args, option.lstrip("-"))
        if target:
            try:
                write(result, Path(target), diagnosis)
            except (OSError, ImportError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                print(f"wirecheck fleet report: {option} {target}: cannot write it ({why}); pass a writable path",
                      file=sys.stderr)
                return exit_codes.BAD_INPUT
            print(f"wirecheck fleet report: wrote {target}")
    return result.exit_code


# Written beside the target and renamed over it: a link planted at the name is replaced, never followed.
# Without indentation: at 10,000 nodes the spaces alone would be a third of the file (jq shows it indented).
def _write_json(result: FleetResult, path: Path, diagnosis: DiagnosisView | None = None) -> None:
    data = as_json(result)
    if diagnosis is not None:
        data["diagnosis"] = {"path": str(diagnosis.path), "exit_status": diagnosis.exit_status,
                             "result": diagnosis.result, "verdicts": diagnosis.verdicts}
    write_atomically(path, json.dumps(data, separators=(",", ":"), default=str) + "\n", mode=0o666 & ~umask())


def _write_html(result: FleetResult, path: Path, diagnosis: DiagnosisView | None = None) -> None:
    from wirecheck.fleet.html import render_page

    write_atomically(path, render_page(result, html_section(diagnosis) if diagnosis else None), mode=0o666 & ~umask())
