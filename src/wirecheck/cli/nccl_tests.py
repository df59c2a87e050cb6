"""`wirecheck nccl-tests`: NVIDIA nccl-tests, built on this node, run on the suite's placements and
sizes, next to the suite's own curve.

    wirecheck nccl-tests --build-dir DIR [--placement ID|CLASS ...] [--sizes quick|full|FROM:TO:STEP]
                         [--ops all_reduce,all_gather,reduce_scatter] [--dtypes fp32,bf16|all]
                         [--reductions sum,max|all] [--out FILE.jsonl] [--raw-dir DIR]

Per placement: the suite's workers measure each op over the sweep (the same worker function, timing
paths and checks as tests/test_collectives.py), then each nccl-tests binary runs on the same GPUs
(CUDA_VISIBLE_DEVICES, -g N, the placement's environment such as NCCL_P2P_DISABLE=1, the parent's
environment passed through) with -b/-e/-f from the sweep and the suite's warm-up and iteration counts,
-d and -o from each dtype and reduction asked (default: each op's first, as the suite's own sweep).
Both curves go side by side to stdout and, one JSON line per op, dtype, reduction and size, to the
record file.

Exit status: 0 when both sides ran and every checked element was right, 1 otherwise, 2 for a usage
error. The ratios are reported, not judged: the suite's own checks judge the node.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "nccl-tests"
HELP = "run nccl-tests beside the suite on the same placements and sizes"


def add_parser(subparsers) -> argparse.ArgumentParser:
    from wirecheck.nccl.tests import DEFAULT_OPS
    from wirecheck.vocab import ops as vocab

    parser = subparsers.add_parser(NAME, help=HELP, description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", required=True, type=Path, help="nccl-tests' build directory (all_reduce_perf, ...)")
    parser.add_argument("--placement", action="append", default=[], metavar="ID|CLASS",
                        help="placement id or class to run (repeatable); default: every placement with collectives")
    parser.add_argument("--sizes", default="quick", metavar="quick|full|FROM:TO:STEP",
                        help="a sweep of thresholds.yaml (default quick) or e.g. 8B:1GiB:2")
    parser.add_argument("--ops", default=",".join(DEFAULT_OPS), help=f"comma-separated (default {','.join(DEFAULT_OPS)}; "
                        f"known: {','.join(vocab.OPS)})")
    parser.add_argument("--dtypes", default="", metavar="fp32,bf16|all",
                        help=f"comma-separated, nccl-tests' -d (default: each op's first; known: {','.join(vocab.DTYPES)})")
    parser.add_argument("--reductions", default="", metavar="sum,max|all",
                        help=f"comma-separated, nccl-tests' -o for the ops that reduce (default: each op's first; "
                             f"known: {','.join(vocab.REDUCTIONS)})")
    parser.add_argument("--thresholds", type=Path, help="thresholds file for iterations and timeouts (default: the suite's)")
    parser.add_argument("--out", type=Path, help="JSON-lines record file (default .wirecheck/nccl-tests-<UTC>-<host>-<pid>.jsonl, a new file)")
    parser.add_argument("--raw-dir", type=Path, help="also keep each binary's stdout there")
    parser.add_argument("--binary-timeout", type=float, default=300, metavar="S", help="seconds per binary (default 300)")
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.core.harness import HarnessFault
    from wirecheck.core.paths import suite_paths
    from wirecheck.core.safefs import UnsafePath
    from wirecheck.nccl.tests import combinations, crosscheck_placements, select_placements, sweep
    from wirecheck.node import nvml, visible
    from wirecheck.node.placement import enumerate_placements
    from wirecheck.records.file import RecordFileError
    from wirecheck.records.run import cannot_write
    from wirecheck.thresholds.file import ThresholdsError, load_thresholds
    from wirecheck.vocab import ops as vocab

    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    try:
        unknown = [op for op in ops if op not in vocab.OPS]
        if unknown or not ops:
            raise ValueError(f"--ops {args.ops}: unknown {', '.join(unknown) or 'none given'}; known: {', '.join(vocab.OPS)}")
        try:
            combos = combinations(ops, _names(args.dtypes), _names(args.reductions))
        except ValueError as exc:
            raise ValueError(f"--dtypes {args.dtypes or '-'} --reductions {args.reductions or '-'}: {exc}") from None
        thresholds = load_thresholds(args.thresholds or suite_paths().thresholds)
        settings = thresholds.collective_settings(simulated=False)
        spec = sweep(settings, args.sizes)
        placements = select_placements(enumerate_placements(visible.from_environment(nvml.read_topology())),
                                       args.placement)
    except nvml.NvmlUnavailable as exc:
        print(f"wirecheck nccl-tests: {nvml.without_simulate_hint(exc)}; nccl-tests runs NVIDIA's binaries on this "
              "node's GPUs, so it needs a GPU node (it has no dry run)", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except (ValueError, ThresholdsError, OSError) as exc:
        print(f"wirecheck nccl-tests: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:  # without --out: a new .wirecheck/nccl-tests-<UTC>-<host>-<pid>.jsonl (RecordFile.fresh)
        return crosscheck_placements(args.build_dir, placements, combos, spec, settings, args.out,
                                     binary_timeout_s=args.binary_timeout, raw_dir=args.raw_dir)
    except RecordFileError as exc:
        print(f"wirecheck nccl-tests: {cannot_write(exc, '--out', bool(args.out), '.wirecheck')}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except HarnessFault as fault:  # the disk refused the record (full, read-only): nothing ran
        print(f"wirecheck nccl-tests: HARNESS FAULT, not a verdict on this node (exit {exit_codes.HARNESS_FAULT}): "
              f"{fault.line().replace('--wirecheck-json', '--out')}", file=sys.stderr)
        return exit_codes.HARNESS_FAULT
    except UnsafePath as exc:
        print(f"wirecheck nccl-tests: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT

def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


main = entry(NAME)
