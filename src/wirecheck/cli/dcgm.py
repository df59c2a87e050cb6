"""`wirecheck dcgm DCGM.json [--record RUN.jsonl] [-o OUT.jsonl]`: NVIDIA DCGM's diagnostics (`dcgmi diag -r LEVEL
-j`, saved to a file) as verdicts of a record, one per DCGM test and GPU, judged as DCGM judged it: Fail fails,
Warn warns, Skip and Not Run are said, each with DCGM's error id and message and the values DCGM measured.

The record it writes (-o, default a new .wirecheck/dcgm-<UTC>-<host>-<pid>.jsonl) is read like a run's:
`wirecheck report`, `wirecheck node-state --record` and the drain rules treat its verdicts like the suite's own
(a DCGM failure drains, an uncorrectable memory fault among DCGM's error ids replaces the GPU), `wirecheck events`
turns them into health events. Each DCGM GPU is named by its serial, with the bus id and UUID of the same GPU
in --record's header (a run on the same node) or, on a GPU node, NVML's. To run DCGM as part of a run:
`wirecheck validate --dcgm r2`.

Exit codes: 0 no DCGM test failed, 1 one failed, 2 bad input (a file that is not dcgmi's JSON, an unreadable
record).
"""

from __future__ import annotations

import argparse
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "dcgm"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="turn DCGM's diagnostics (dcgmi diag -j) into verdicts of a record",
                                   description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="DCGM.json", help="`dcgmi diag -r LEVEL -j` output, saved")
    parser.add_argument("--record", metavar="RUN.jsonl", help="a record of the same node: its GPUs' bus ids and UUIDs")
    parser.add_argument("-o", "--out", metavar="OUT.jsonl", help="the record to write (default: a new "
                        ".wirecheck/dcgm-<UTC>-<host>-<pid>.jsonl)")
    parser.add_argument("--thresholds", metavar="FILE", help="the thresholds file the record names (default: the suite's)")
    return parser


def _node(record: str | None) -> tuple[list[dict], str | None]:
    """The node DCGM ran on: the GPUs and host of --record's header, else NVML's GPUs on this node (and this
    host), else no GPUs (DCGM's own serials then name them)."""
    if record:
        from wirecheck.records.file import read_run

        header = read_run(record).run
        return [g for g in header.get("gpus") or [] if isinstance(g, dict)], header.get("host")
    from wirecheck.node import nvml

    try:
        topology = nvml.read_topology()
    except nvml.NvmlUnavailable:
        return [], None
    return [{"index": g.index, "serial": getattr(g, "serial", None), "bus_id": g.bus_id, "uuid": getattr(g, "uuid", None),
             "name": g.name} for g in topology.gpus], None


def _same_node(diag, gpus: list[dict], record: str | None) -> None:
    """Refuse a DCGM run whose GPUs are not the node's: its verdicts would land on other GPUs by index."""
    from wirecheck.node import dcgm

    foreign = dcgm.foreign_serials(diag, gpus)
    if foreign:
        ours = ", ".join(sorted(str(g.get("serial")) for g in gpus if g.get("serial")))
        node = f"--record {record}" if record else "this node's GPUs (NVML)"
        raise dcgm.DcgmError(f"DCGM's GPU serial(s) {', '.join(foreign)} are none of {node} (serials {ours}): DCGM ran "
                             f"on another node; give a record of the node it ran on{'' if record else ' with --record'}")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.checks import dcgm as dcgm_check
    from wirecheck.core.harness import HarnessFault
    from wirecheck.core.paths import suite_paths
    from wirecheck.core.verdict import FAIL, PASS, SKIP, WARN
    from wirecheck.node import dcgm
    from wirecheck.records.file import RecordFileError
    from wirecheck.records.run import RunWriter, cannot_write, refuse_other_runs
    from wirecheck.thresholds.file import ThresholdsError, load_thresholds

    try:
        if args.out:
            refuse_other_runs(args.out, NAME, [args.record] if args.record else [])
        if args.thresholds:  # the record keeps it as the file its verdicts are judged against: it must be one
            load_thresholds(args.thresholds)
        _, diag = dcgm.load(args.file)
        gpus, host = _node(args.record)
        _same_node(diag, gpus, args.record)
    except (dcgm.DcgmError, RecordFileError, ThresholdsError, OSError) as exc:
        print(f"wirecheck {NAME}: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    verdicts = dcgm_check.judge(diag, gpus)
    thresholds = args.thresholds or str(suite_paths().thresholds)
    try:
        writer = RunWriter(args.out, prefix="dcgm")
        dcgm_check.write_record(writer, diag, verdicts, source=str(args.file), gpus=gpus, thresholds=thresholds,
                                host=host)
        writer.close()
    except RecordFileError as exc:
        print(f"wirecheck {NAME}: {cannot_write(exc, '--out', bool(args.out), '.wirecheck')}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except HarnessFault as fault:
        print(f"wirecheck {NAME}: HARNESS FAULT (exit {exit_codes.HARNESS_FAULT}): {fault.line()}", file=sys.stderr)
        return exit_codes.HARNESS_FAULT
    order = {FAIL: 0, WARN: 1, SKIP: 2, PASS: 3}
    for v in sorted(verdicts, key=lambda v: order.get(v.outcome, 4)):
        print(f"{v.outcome.upper():5} {v.code or '':7} {v.message}")
    counts = {o: sum(v.outcome == o for v in verdicts) for o in (PASS, WARN, FAIL, SKIP)}
    print(f"wirecheck {NAME}: DCGM {diag.version or '?'}: {counts[FAIL]} failed, {counts[WARN]} warned, "
          f"{counts[PASS]} passed, {counts[SKIP]} skipped; record {writer.path}")
    return exit_codes.FAILED if counts[FAIL] else exit_codes.OK


main = entry(NAME)
