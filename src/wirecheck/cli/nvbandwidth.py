"""`wirecheck nvbandwidth [--json NVB.json | --binary PATH] [--record RUN.jsonl] [--out FILE.jsonl]`: NVIDIA
nvbandwidth's copy matrices beside the suite's host and peer copy figures, with the ratio, as `wirecheck
nccl-tests` sets nccl-tests beside the suite's collectives.

nvbandwidth's side: its saved `-j` output (--json), else the binary run now (--binary, else `nvbandwidth` on
PATH) on its copy-engine testcases host_to_device_memcpy_ce, device_to_host_memcpy_ce and
device_to_device_memcpy_write_ce, in NVML's device order. Where it is not installed the command says so.
The suite's side: the copy figures of a run's record (--record: tests/test_copy_bandwidth.py's measurement),
else measured now on this node's GPUs with the same worker and settings (a GPU node).
Prints nvbandwidth's matrices, then each suite copy beside nvbandwidth's with suite / nvbandwidth (`<` below
95 %); --out writes both, with the ratios, as a record's `nvbandwidth` measurement.

Exit codes: 0 both sides gave their figures (the ratios are reported, not judged: the suite's copy checks judge
the node); 1 nvbandwidth reported an error (a testcase's Error: its own data check after the copy), or could not run, or
the suite's copies could not be measured on this node; 2 bad input (a file that is not nvbandwidth's JSON, a
record without copy figures, no GPU and no --record, an --out that holds another kind of run), or nvbandwidth
not installed (or --binary naming no executable file) and no --json given. --out is written unless the input was
bad and nothing was measured here.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "nvbandwidth"
MEASURED_NOW = "measured now on this node"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="nvbandwidth's copy matrices beside the suite's copies, with the ratio",
                                   description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--json", metavar="NVB.json", help="nvbandwidth's saved -j output, instead of running it")
    source.add_argument("--binary", metavar="PATH", help="the nvbandwidth binary (default: nvbandwidth on PATH)")
    parser.add_argument("--record", metavar="RUN.jsonl", help="a run's record: the suite's copy figures (default: "
                        "measure them now on this node)")
    parser.add_argument("--thresholds", metavar="FILE", help="the copy settings when measuring now (default: the suite's)")
    parser.add_argument("--out", metavar="FILE.jsonl", help="also write both sides and the ratios as a record")
    return parser


def _nvbandwidth(args) -> tuple[object | None, str | None, bool]:
    """(the Reading, why there is none, whether that is bad input)."""
    from wirecheck.node import nvbandwidth as nvb

    if args.json:
        try:
            return nvb.load(args.json), None, False
        except nvb.NvbandwidthError as exc:
            return None, str(exc), True
    if args.binary and shutil.which(args.binary) is None:
        return None, f"--binary {args.binary}: no such executable file; pass the path of the nvbandwidth binary", True
    binary = args.binary or nvb.find()
    if binary is None:
        return None, ("nvbandwidth is not installed (not on PATH): nothing to compare with; build it from "
                      "github.com/NVIDIA/nvbandwidth and pass --binary PATH, or give a saved `nvbandwidth -j` output "
                      "with --json"), True
    reading, error, seconds = nvb.run(binary)
    if reading is not None:
        reading.extra["seconds"] = round(seconds, 1)
    return reading, error, False


def _suite(args) -> tuple[dict | None, list[dict], str | None, str]:
    """(the suite's copy figures, the node's GPUs {index, bus_id}, why there are none, where they came from)."""
    if args.record:
        from wirecheck.records.file import read_run
        from wirecheck.vocab import records as kinds

        run = read_run(args.record)
        copies = [m for m in run.measurements if m.get("kind") == kinds.COPY_BANDWIDTH]
        gpus = [g for g in run.run.get("gpus") or [] if isinstance(g, dict)]
        if not copies or not (copies[-1].get("details") or {}).get("host"):
            return None, gpus, (f"{args.record} holds no copy figures (an acceptance run measures them: "
                                "tests/test_copy_bandwidth.py)"), args.record
        return copies[-1]["details"], gpus, None, args.record
    from wirecheck.core.paths import suite_paths
    from wirecheck.measure.copy_crosscheck import measure_suite
    from wirecheck.node import nvml
    from wirecheck.node.placement import CLASS_PAIR, enumerate_placements
    from wirecheck.thresholds.file import load_thresholds

    try:
        topology = nvml.read_topology()
    except nvml.NvmlUnavailable as exc:
        return None, [], (f"{nvml.without_simulate_hint(exc)}: no suite figures to set beside nvbandwidth's; give "
                          "--record RUN.jsonl (a run with copy bandwidth)"), "this node"
    gpus = [{"index": g.index, "bus_id": g.bus_id} for g in topology.gpus]
    settings = load_thresholds(args.thresholds or suite_paths().thresholds).copy_bandwidth.settings
    pairs = [list(p.gpus) for p in enumerate_placements(topology) if p.klass == CLASS_PAIR]
    result, error = measure_suite(sorted(topology.indices), pairs, settings)
    return result, gpus, error, MEASURED_NOW


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.measure import copy_crosscheck
    from wirecheck.records.file import RecordFileError
    from wirecheck.thresholds.file import ThresholdsError

    if args.out:  # before nvbandwidth runs: a path it cannot write to would lose what it measured
        from wirecheck.records.run import refuse_other_runs

        try:
            refuse_other_runs(args.out, NAME, [args.record] if args.record else [])
        except RecordFileError as exc:
            print(f"wirecheck {NAME}: --out: {exc}", file=sys.stderr)
            return exit_codes.BAD_INPUT
    if args.thresholds:  # read before nvbandwidth runs, whether or not the suite's side is measured now
        from wirecheck.thresholds.file import load_thresholds

        try:
            load_thresholds(args.thresholds)
        except (ThresholdsError, OSError) as exc:
            print(f"wirecheck {NAME}: --thresholds: {exc}", file=sys.stderr)
            return exit_codes.BAD_INPUT
    reading, why, bad = _nvbandwidth(args)
    if reading is None:
        print(f"wirecheck {NAME}: {why}", file=sys.stderr)
        return exit_codes.BAD_INPUT if bad else exit_codes.FAILED
    try:
        suite, gpus, missing, where = _suite(args)
    except (RecordFileError, ThresholdsError, OSError, ValueError) as exc:
        print(f"wirecheck {NAME}: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        rows = copy_crosscheck.side_by_side(suite, reading, gpus) if suite else []
    except ValueError as exc:  # another node's nvbandwidth
        print(f"wirecheck {NAME}: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(copy_crosscheck.format_side_by_side(rows, reading))
    if missing:
        print(f"wirecheck {NAME}: the suite's copies ({where}): {missing}", file=sys.stderr)
    errors = [f"{c.name}: {c.error or c.status}" for c in reading.testcases.values() if c.status == "Error"]
    if reading.error:
        errors.append(reading.error)
    nothing_measured = args.json and missing and where != MEASURED_NOW  # bad input, and nothing ran here
    if args.out and not nothing_measured:
        status = _write(args, reading, rows, where, missing, errors)
        if status is not None:
            return status
    if errors:
        print(f"wirecheck {NAME}: nvbandwidth reported: {'; '.join(errors)}", file=sys.stderr)
        return exit_codes.FAILED
    if missing:  # measured now and broke: the node's; no figures given or none readable: the input's
        return exit_codes.FAILED if where == MEASURED_NOW else exit_codes.BAD_INPUT
    return exit_codes.OK


def _write(args, reading, rows, where, missing, errors) -> int | None:
    """--out: a record with one `nvbandwidth` measurement (both sides, the ratios); None when written."""
    from dataclasses import asdict

    from wirecheck.core.paths import suite_paths
    from wirecheck.records.file import Measurement, RecordFileError
    from wirecheck.records.run import COMPLETE, RunWriter, run_header
    from wirecheck.vocab import records as kinds

    try:
        writer = RunWriter(args.out, prefix="nvbandwidth")
        writer.header(run_header(simulated=False, simulation_source=None,
                                 thresholds=args.thresholds or suite_paths().thresholds,
                                 versions={"nvbandwidth": reading.version, "driver": reading.driver},
                                 placements=[], kind="nvbandwidth"))
        writer.measurement(Measurement(kinds.NVBANDWIDTH, None, "nvbandwidth beside the suite's copies", None, None, {
            "source": reading.source, "suite": where, "suite_missing": missing, "rows": rows, "errors": errors,
            "nvbandwidth": {k: v for k, v in asdict(reading).items() if k != "extra"}, **reading.extra}))
        writer.end(COMPLETE, exit_codes.FAILED if errors else exit_codes.OK)
        writer.close()
    except RecordFileError as exc:
        print(f"wirecheck {NAME}: --out: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(f"wirecheck {NAME}: record {writer.path}", file=sys.stderr)
    return None


main = entry(NAME)
