"""The collectives as data, in the nccl-tests style (its `struct testColl`): each op's buffer shape,
busbw factor and nccl-tests binary, with the data type and the reduction as axes, not as rows.

Conventions (nccl-tests' PERFORMANCE.md): `size` is the total buffer in bytes — the all_gather
output, the reduce_scatter input, each rank's all_to_all send buffer; algbw = bytes / time of the
slowest rank; busbw = algbw x the op's factor, which makes it comparable with the link speed.

`dtypes` and `reductions` list what the worker kernels (wirecheck.measure.collective_worker) can
measure and check exactly; the first of each is what the suite measures. A new reduction of an op
is a value in its `reductions`. A new op is a row here and its floors in thresholds.yaml: where it is
one torch.distributed function (`torch`) whose data follows one of the DATA rules (`data`), the worker
derives its kernel from the row; an op that is neither (broadcast: its root) has a kernel of its own
in wirecheck.measure.collective_worker.

A sum catches an output the collective never wrote on every rank. An in-place max or min does not
on a rank whose own data is already the extreme at an element (with the rank-shifted pattern, the
highest rank for most elements of small buffers): keep sum first where a reduction is measured for
correctness, and max or min as further values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from wirecheck.vocab.table import by_name, lookup

# Data types: bytes per element, and the name nccl-tests' -d takes.
DTYPE_BYTES: Mapping[str, int] = {"float32": 4}
NCCL_TESTS_DTYPE: Mapping[str, str] = {"float32": "float"}
# Reductions, as nccl-tests' -o names them.
REDUCTIONS = ("sum", "max", "min", "prod")
DTYPE = "float32"  # what the suite measures: bf16 adds nothing to a wire check
ELEMENT_BYTES = DTYPE_BYTES[DTYPE]
# Exact sums: every element a rank sends is below 2^16, so a sum over up to MAX_RANKS ranks stays
# below 2^24 and is exact in float32 whatever order NCCL adds in.
MAX_RANKS = 256

# What each rank puts in and what a correct output holds (wirecheck.measure.collective_worker
# implements each): an op's `data`. "reduced": every rank fills its own pattern, every output
# element is the reduction over ranks; "reduced_chunk": as reduced, rank r keeps chunk r of it;
# "gathered": rank r fills chunk r of the output's numbering, the output is every rank's chunk in
# rank order; "transposed": output chunk s on rank r is chunk r of rank s's input.
DATA = ("reduced", "reduced_chunk", "gathered", "transposed")


def _whole(count: int, n: int) -> int:
    return count


def _chunk(count: int, n: int) -> int:
    return count // n


@dataclass(frozen=True)
class Op:
    name: str
    binary: str  # the nccl-tests binary that measures it (nccl-tests names all_to_all "alltoall")
    # Buffers are world_size equal chunks: the element count is rounded down to a multiple of n.
    chunked: bool
    # One buffer is input and output (torch's all_reduce and broadcast work in place; nccl-tests'
    # in-place column is the one to compare with).
    in_place: bool
    bus_factor: Callable[[int], float]
    input_elements: Callable[[int, int], int]  # (count, n) -> elements
    output_elements: Callable[[int, int], int]
    dtypes: tuple[str, ...] = (DTYPE,)
    reductions: tuple[str, ...] = ()  # empty: the op moves data and reduces nothing
    # Its kernel, derived by the worker: the torch.distributed function that runs it, called as
    # fn(output[, input], [op=reduction], group=) (one buffer when in_place), and its DATA rule.
    # None: the op has a kernel of its own in wirecheck.measure.collective_worker.
    torch: str | None = None
    data: str | None = None

    def __post_init__(self):
        unknown = [d for d in self.dtypes if d not in DTYPE_BYTES] + [r for r in self.reductions if r not in REDUCTIONS]
        if unknown or not self.dtypes:
            raise ValueError(f"collective {self.name}: dtypes {self.dtypes}, reductions {self.reductions}; "
                             f"known dtypes {tuple(DTYPE_BYTES)}, reductions {REDUCTIONS}")
        if (self.torch is None) != (self.data is None) or (self.data is not None and self.data not in DATA):
            raise ValueError(f"collective {self.name}: torch={self.torch!r}, data={self.data!r}; give both (data one "
                             f"of {DATA}) for a derived kernel, or neither for a kernel of its own")

    @property
    def reduction(self) -> str | None:
        """The reduction the suite measures (None: the op reduces nothing)."""
        return self.reductions[0] if self.reductions else None


_TABLE = (
    Op("all_reduce", "all_reduce_perf", False, True, lambda n: 2 * (n - 1) / n, _whole, _whole,
       reductions=("sum",), torch="all_reduce", data="reduced"),
    Op("all_gather", "all_gather_perf", True, False, lambda n: (n - 1) / n, _chunk, _whole,
       torch="all_gather_into_tensor", data="gathered"),
    Op("reduce_scatter", "reduce_scatter_perf", True, False, lambda n: (n - 1) / n, _whole, _chunk,
       reductions=("sum",), torch="reduce_scatter_tensor", data="reduced_chunk"),
    Op("broadcast", "broadcast_perf", False, True, lambda n: 1.0, _whole, _whole),  # its root: a kernel of its own
    Op("all_to_all", "alltoall_perf", True, False, lambda n: (n - 1) / n, _whole, _whole,
       torch="all_to_all_single", data="transposed"),
)

COLLECTIVES: Mapping[str, Op] = by_name(_TABLE, "collective")
# The collectives the suite runs, in order: tests, thresholds and reports take the names from here.
OPS: tuple[str, ...] = tuple(COLLECTIVES)


def get(op: str) -> Op:
    return lookup(COLLECTIVES, op, "collective")


def busbw_factor(op: str, n: int) -> float:
    """busbw / algbw for `op` on n ranks (nccl-tests' PERFORMANCE.md)."""
    return get(op).bus_factor(n)


def min_size(op: str, n: int) -> int:
    """The smallest size in bytes that gives every rank at least one element of `op`'s buffers."""
    return ELEMENT_BYTES * (n if get(op).chunked else 1)


def feasible_sizes(op: str, sizes, n: int) -> list[int]:
    """The sizes of a sweep that `op` can run on n ranks (nccl-tests prints 0-byte rows for the others;
    we leave them out)."""
    return [s for s in sizes if s >= min_size(op, n)]


def buffer_elements(op: str, size: int, n: int) -> int:
    """Elements of the size-defining buffer for `size` bytes on n ranks (rounded down as nccl-tests does)."""
    c = get(op)
    if not 1 <= n <= MAX_RANKS:
        raise ValueError(f"{op}: {n} ranks; sums stay exact in float32 only up to {MAX_RANKS}")
    count = size // ELEMENT_BYTES
    if c.chunked:
        count -= count % n
    if count < (n if c.chunked else 1):
        need = ELEMENT_BYTES * (n if c.chunked else 1)
        raise ValueError(f"{op}: size {size} B is too small for {n} ranks; need at least {need} B")
    return count
