"""`wirecheck memory`: predicted model-state bytes per GPU for each strategy (wirecheck.training.memory_model)."""

from __future__ import annotations

import argparse
import decimal
import math

from wirecheck.cli.protocol import at_least_one, entry
from wirecheck.core import exit_codes
from wirecheck.training.memory_model import ACCOUNTINGS, ARTICLE, format_memory_table
from wirecheck.core.precision import DEFAULT as DEFAULT_PRECISION
from wirecheck.core.precision import NAMES as PRECISIONS

NAME = "memory"
# Past this a count no longer fits a float's 53 bits of integer and the table would print rounding
# noise (1e30 gave 12000000000000002097152.00 GB).
MAX_PARAMS = 1e15


# The suffixes model cards use: 7B, 350M, 1.5T (case does not matter: 70b is 70B).
_SUFFIXES = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_EXAMPLES = "e.g. 7B, 7.24e9, 350M or 7240000000"


def parameter_count(text: str) -> int:
    """--params: a whole number of parameters of at least 1, written plainly (7240000000), as 7.24e9,
    or with a suffix K, M, B or T (7B, 7.24B, 350M, 70b).

    Counted in decimal, not in floats: 1.1B is 1100000000 exactly, where 1.1 * 1e9 is not a whole number.
    argparse turns the ArgumentTypeError into `argument --params: <message>` and exit 2.
    """
    written = text.strip()
    scale = _SUFFIXES.get(written[-1:].lower(), 1)
    number = written[:-1].rstrip() if scale != 1 else written
    try:
        value = decimal.Decimal(number)
    except (decimal.InvalidOperation, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; write a parameter count, {_EXAMPLES}") from None
    if not value.is_finite():
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; write a parameter count, {_EXAMPLES}")
    if value and value.adjusted() > 20:  # 1e999999999 would overflow the arithmetic below: beyond any model
        value = decimal.Decimal(MAX_PARAMS) * (10 if value > 0 else -10)
    value *= scale
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text} is not a parameter count: a model has at least 1 parameter; write {_EXAMPLES}"
        )
    if value > MAX_PARAMS:
        raise argparse.ArgumentTypeError(
            f"{text} parameters is beyond any model (at most 1e15: a thousand times the largest "
            f"trained); write {_EXAMPLES}")
    if value != value.to_integral_value():
        raise argparse.ArgumentTypeError(
            f"{text} is not a whole number of parameters; write e.g. {math.floor(value)} or {math.ceil(value)}"
        )
    return int(value)


gpu_count = at_least_one("GPUs", "4")  # --gpus: data-parallel ranks


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="predicted model-state memory per GPU for each strategy", description=__doc__,
    )
    parser.add_argument("--params", type=parameter_count, required=True, metavar="N",
                        help="parameter count, a whole number >= 1: 7.24e9, or with a suffix K, M, B, T: 7B, 350M")
    parser.add_argument("--gpus", type=gpu_count, required=True, metavar="G",
                        help="number of GPUs (data-parallel ranks), >= 1")
    parser.add_argument("--accounting", choices=ACCOUNTINGS, default=ARTICLE,
                        help="article: params and grads in the precision's bytes + 8 B of Adam state per parameter "
                             "(default); implementation: how each library really stores it")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help=f"training precision (default {DEFAULT_PRECISION})")
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    print(format_memory_table(args.params, args.gpus, args.accounting, args.precision))
    return exit_codes.OK


main = entry(NAME)
