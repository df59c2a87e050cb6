"""`wirecheck advise`: which strategy and which GPUs for a model, from this node's records (or a profile's figures).

Every usage error exits 4 naming the option; a record or profile advise cannot read exits 2 naming the file.
"""

from __future__ import annotations

import argparse
import sys

from wirecheck.cli.protocol import entry
from wirecheck.advise.advice import advise, format_advice
from wirecheck.advise.figures import FiguresError, from_records
from wirecheck.advise.profile_figures import from_profile
from wirecheck.advise.fits import fit_strategies, shipped_fits
from wirecheck.cli.memory import parameter_count
from wirecheck.core import exit_codes
from wirecheck.core.paths import suite_paths
from wirecheck.core.precision import DEFAULT as DEFAULT_PRECISION
from wirecheck.core.precision import NAMES as PRECISIONS
from wirecheck.core.quantity import QuantityError, parse_quantity
from wirecheck.training.memory_model import ACCOUNTINGS, ARTICLE, IMPLEMENTATION

NAME = "advise"
DEFAULT_SEQ, DEFAULT_MICRO_BATCH = 1024, 8  # the suite's own training workload (thresholds.yaml training)
MIN_GPU_MEMORY = 1e9  # bytes: the least --gpu-memory takes (the smallest GPU advise could plan a model on has more)


class _Usage(Exception):
    pass


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="which strategy and GPUs for a model, predicted from the node's records",
                                   description=__doc__)
    parser.add_argument("--params", metavar="N", help="parameter count: 7B, 350M, 7.24e9 (required)")
    parser.add_argument("--gpus", metavar="G", help="GPUs of the job (data-parallel ranks), >= 1 (required)")
    parser.add_argument("--seq", metavar="S", default=str(DEFAULT_SEQ), help=f"tokens per sequence (default {DEFAULT_SEQ})")
    parser.add_argument("--micro-batch", metavar="B", default=str(DEFAULT_MICRO_BATCH),
                        help=f"sequences per GPU per step (default {DEFAULT_MICRO_BATCH})")
    parser.add_argument("--precision", metavar="P", default=DEFAULT_PRECISION,
                        help=f"{' or '.join(PRECISIONS)} (default {DEFAULT_PRECISION})")
    parser.add_argument("--record", metavar="RUN.jsonl", nargs="+", help="the node's record files (whole-suite runs)")
    parser.add_argument("--profile", metavar="NAME", help="predict from a node profile instead (a profiles: name of "
                                                         "thresholds.yaml, as every command's --profile: `wirecheck "
                                                         "limits --profile NAME` takes the same): its measured figures "
                                                         "where advise has them, else its physics")
    parser.add_argument("--thresholds", metavar="PATH", help="thresholds file (its profiles: and its training "
                                                            "peaks); default: the suite's, as limits and plan")
    parser.add_argument("--accounting", metavar="A", default=IMPLEMENTATION,
                        help=f"whose strategies: {IMPLEMENTATION} (this suite's, as its records measure them; default) "
                             f"or {ARTICLE} (the article's: bf16 gradients, ZeRO-3/FSDP gathering each block twice)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="GPU memory to plan for instead of the record's or "
                                                            "profile's, e.g. 80GB")

    def usage_error(message: str):
        # argparse's own errors (an unknown option, a missing value) are usage errors too: exit 4, as ours.
        parser.print_usage(sys.stderr)
        print(f"wirecheck advise: {message}", file=sys.stderr)
        raise SystemExit(exit_codes.USAGE_ERROR)

    parser.error = usage_error
    return parser


def _whole(text: str, option: str, low: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise _Usage(f"{option} {text!r}: write a whole number, e.g. {max(low, 4)}") from None
    if value < low:
        raise _Usage(f"{option} {value}: at least {low}")
    return value


def _gpu_memory(text: str | None) -> int | None:
    """--gpu-memory in bytes. Below 1 GB is a slip of the unit ("1KB", "80MB") or the sign, never a GPU's memory."""
    if text is None:
        return None
    too_small = _Usage(f"--gpu-memory {text}: one GPU's memory, at least {MIN_GPU_MEMORY / 1e9:.0f} GB; write it "
                       "with its unit, e.g. --gpu-memory 80GB")
    if text.strip().startswith("-"):
        raise too_small  # the same words as "1KB": parse_quantity's "negative" speaks of limits
    try:
        memory = int(parse_quantity(text, "size", where="--gpu-memory"))
    except (QuantityError, ValueError) as exc:
        raise _Usage(str(exc)) from None
    if memory < MIN_GPU_MEMORY:
        raise too_small
    return memory


def _options(args):
    if args.params is None:
        raise _Usage("--params is required: the model's parameter count, e.g. --params 7B")
    if args.gpus is None:
        raise _Usage("--gpus is required: the job's GPU count, e.g. --gpus 4")
    try:
        n_params = parameter_count(args.params)  # as `wirecheck memory` reads it: 7B, 350M, 7.24e9
    except argparse.ArgumentTypeError as exc:
        raise _Usage(f"--params: {exc}") from None
    if args.precision not in PRECISIONS:
        raise _Usage(f"--precision {args.precision!r}: one of {', '.join(PRECISIONS)}")
    if args.accounting not in ACCOUNTINGS:
        raise _Usage(f"--accounting {args.accounting!r}: one of {', '.join(ACCOUNTINGS)}")
    values = (n_params, _whole(args.gpus, "--gpus", 1), _whole(args.seq, "--seq", 1),
              _whole(args.micro_batch, "--micro-batch", 1), _gpu_memory(args.gpu_memory))
    # Only once every value is read: a wrong value is named before what is missing beside it.
    if bool(args.record) == bool(args.profile):
        raise _Usage("give one of --record RUN.jsonl ... (the node's records) or --profile NAME (a node profile of "
                     "thresholds.yaml, as `wirecheck limits --profile NAME`: h200-sxm-2, h200-nvl-8, a100-sxm-8, ...)")
    return values


def run(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        n_params, n_gpus, seq, micro_batch, memory = _options(args)
    except _Usage as exc:
        print(f"wirecheck advise: {exc}", file=sys.stderr)
        return exit_codes.USAGE_ERROR
    from wirecheck.thresholds.file import load_thresholds

    try:
        # Read as limits and plan read it, so that a site file's profiles (`extends: wirecheck`) are advised on too.
        thresholds = load_thresholds(args.thresholds or suite_paths().thresholds)
        limits = thresholds.training_limits(False)
    except (ValueError, OSError) as exc:  # ThresholdsError is a ValueError; it names the file and the fix
        print(f"wirecheck advise: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        def peak(model, precision):
            found = limits.peak_flops(model, precision)
            return found.flops if found else None

        if args.profile:
            figures = from_profile(args.profile, thresholds, peak, args.precision)
            fits = shipped_fits()
        else:
            figures = from_records(args.record)
            fits = fit_strategies(figures)
    except FiguresError as exc:
        print(f"wirecheck advise: {exc}", file=sys.stderr)
        return exit_codes.USAGE_ERROR if exc.usage else exit_codes.BAD_INPUT
    if memory is not None:
        figures.gpu_memory = memory
        figures.description += f"; GPU memory {memory / 1e9:.0f} GB as --gpu-memory says"
    try:
        advice = advise(figures, n_params, n_gpus, seq, micro_batch, args.precision, fits, args.accounting)
    except ValueError as exc:
        print(f"wirecheck advise: {exc}", file=sys.stderr)
        return exit_codes.USAGE_ERROR
    print(format_advice(advice))
    return exit_codes.OK


main = entry(NAME)
