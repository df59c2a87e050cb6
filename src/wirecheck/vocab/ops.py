"""The collectives as data, in the nccl-tests style (its `struct testColl`): each op's buffer shape,
busbw factor, nccl-tests binary and where its result lives, with the data type and the reduction as
axes, not as rows.

Conventions (nccl-tests' PERFORMANCE.md): `size` is the total buffer in bytes — the all_gather
output, the reduce_scatter input, each rank's all_to_all send buffer; algbw = bytes / time; busbw =
algbw x the op's factor, which makes it comparable with the link speed. The time is the slowest rank's
(nccl-tests' `-a 3`; its default, `-a 1`, averages the ranks' times): the busbw no rank fell short of,
as the floors were measured. The two differ by the spread between ranks: 0.00-0.33 % (median 0.02 %) at 1 GiB
in the 99 such figures of the 2x H200 SXM records (fixtures/reference/h200-sxm-2/, `rank_time_spread`).

`dtypes` and `reductions` list what the worker kernels (wirecheck.measure.collective_worker) measure
and check exactly, nccl-tests' `-d` and `-o`. The first of each is the op's own measurement (its
size sweep, latency, n½, benchmark rounds, and what every record written before the axes holds);
every other combination (`Axes`) is measured at the floor size at acceptance (the full grid with
`--sweep full`), judged and recorded under its own id, `all_reduce-bf16-max`. A new reduction of an
op is a value in its `reductions`. A new op is a row here and its floors in thresholds.yaml: where it
is one torch.distributed function (`torch`) whose data follows one of the DATA rules (`data`), the
worker derives its kernel from the row; an op that is neither (broadcast: its root) has a kernel of
its own in wirecheck.measure.collective_worker.

A sum catches an output the collective never wrote on every rank. An in-place max or min does not
on a rank whose own data is already the extreme at an element (about 1/n of the elements, every
rank in turn): keep sum first where a reduction is measured for correctness, and max or min as
further values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from wirecheck.vocab.table import by_name, lookup


@dataclass(frozen=True)
class Dtype:
    name: str  # the suite's name: test ids, records
    bytes: int  # per element
    bits: int  # significand bits, the implicit one included: every integer up to 2**bits is exact
    torch: str  # the torch dtype's attribute name (the workers resolve it; this table imports no torch)
    nccl_tests: str  # nccl-tests' -d


DTYPES: Mapping[str, Dtype] = by_name((
    Dtype("fp32", 4, 24, "float32", "float"),
    Dtype("bf16", 2, 8, "bfloat16", "bfloat16"),
    Dtype("fp16", 2, 11, "float16", "half"),
), "dtype")
# Reductions the kernels launch, as nccl-tests' -o and torch's ReduceOp name them. avg is NCCL's
# (2.10 on); a backend that refuses one (gloo: "Cannot use ReduceOp.AVG with Gloo" in torch up to at
# least 2.11) has it said as not measured, never stood in for.
REDUCTIONS = ("sum", "max", "min", "avg")
# Where an op's result lives: on every rank, or on the root alone (reduce: the other ranks' buffers
# hold whatever the algorithm left there, partial sums on gloo, and are never checked).
EVERY, ROOT_ONLY = "every rank", "root"
RESULTS = (EVERY, ROOT_ONLY)
ROOT = 0  # the root of the rooted ops (broadcast's source, reduce's destination), numbered in its group
# Exact sums: a rank's values shrink with the ranks (2^24 / n in float32), so a sum over any number of ranks
# stays below 2^24 and is exact whatever order NCCL adds in; the narrower dtypes narrow them further, and a
# dtype that keeps no two values exact over n ranks is refused there (wirecheck.measure.collective_worker).

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
    # Buffers are world_size equal chunks of a multiple of 16 bytes (`buffer_elements`).
    chunked: bool
    # One buffer is input and output (torch's all_reduce, broadcast and reduce work in place;
    # nccl-tests' in-place column is the one to compare with).
    in_place: bool
    bus_factor: Callable[[int], float]
    input_elements: Callable[[int, int], int]  # (count, n) -> elements
    output_elements: Callable[[int, int], int]
    dtypes: tuple[str, ...] = tuple(DTYPES)
    reductions: tuple[str, ...] = ()  # empty: the op moves data and reduces nothing
    # Its kernel, derived by the worker: the torch.distributed function that runs it, called as
    # fn(output[, input], [op=reduction], [dst=root,] group=) (one buffer when in_place; dst where the
    # result lives on the root), and its DATA rule. None: the op has a kernel of its own in
    # wirecheck.measure.collective_worker.
    torch: str | None = None
    data: str | None = None
    result: str = EVERY  # where the result lives, so where it is checked: EVERY or ROOT_ONLY

    def __post_init__(self):
        unknown = [d for d in self.dtypes if d not in DTYPES] + [r for r in self.reductions if r not in REDUCTIONS]
        if unknown or not self.dtypes:
            raise ValueError(f"collective {self.name}: dtypes {self.dtypes}, reductions {self.reductions}; "
                             f"known dtypes {tuple(DTYPES)}, reductions {REDUCTIONS}")
        if (self.torch is None) != (self.data is None) or (self.data is not None and self.data not in DATA):
            raise ValueError(f"collective {self.name}: torch={self.torch!r}, data={self.data!r}; give both (data one "
                             f"of {DATA}) for a derived kernel, or neither for a kernel of its own")
        if self.result not in RESULTS:
            raise ValueError(f"collective {self.name}: result={self.result!r}; one of {RESULTS}")

    @property
    def dtype(self) -> str:
        """The data type of the op's own measurement."""
        return self.dtypes[0]

    @property
    def reduction(self) -> str | None:
        """The reduction of the op's own measurement (None: the op reduces nothing)."""
        return self.reductions[0] if self.reductions else None

    def result_ranks(self, n: int) -> tuple[int, ...]:
        """The ranks (of n) whose output holds the result: those the correctness check reads."""
        return (ROOT,) if self.result == ROOT_ONLY else tuple(range(n))


_TABLE = (
    Op("all_reduce", "all_reduce_perf", False, True, lambda n: 2 * (n - 1) / n, _whole, _whole,
       reductions=REDUCTIONS, torch="all_reduce", data="reduced"),
    Op("all_gather", "all_gather_perf", True, False, lambda n: (n - 1) / n, _chunk, _whole,
       torch="all_gather_into_tensor", data="gathered"),
    Op("reduce_scatter", "reduce_scatter_perf", True, False, lambda n: (n - 1) / n, _whole, _chunk,
       reductions=REDUCTIONS, torch="reduce_scatter_tensor", data="reduced_chunk"),
    Op("broadcast", "broadcast_perf", False, True, lambda n: 1.0, _whole, _whole),  # its root: a kernel of its own
    Op("all_to_all", "alltoall_perf", True, False, lambda n: (n - 1) / n, _whole, _whole,
       torch="all_to_all_single", data="transposed"),
    # nccl-tests: reduce's busbw = algbw (each byte reaches the root once, as broadcast's leaves it).
    Op("reduce", "reduce_perf", False, True, lambda n: 1.0, _whole, _whole,
       reductions=REDUCTIONS, torch="reduce", data="reduced", result=ROOT_ONLY),
)

COLLECTIVES: Mapping[str, Op] = by_name(_TABLE, "collective")
# The collectives the suite runs, in order: tests, thresholds and reports take the names from here.
OPS: tuple[str, ...] = tuple(COLLECTIVES)


def get(op: str) -> Op:
    return lookup(COLLECTIVES, op, "collective")


def dtype(name: str) -> Dtype:
    return lookup(DTYPES, name, "dtype")


# ---- the axes: an op at one dtype and one reduction ------------------------------------------------


@dataclass(frozen=True)
class Axes:
    """One op at one of its dtypes and reductions. `id` names it in test ids, records and tables: the
    op alone for its own measurement (the first dtype and reduction: the ids and names of every record
    written before the axes), else op-dtype[-reduction], as `all_reduce-bf16-max` or `all_gather-fp16`."""

    op: str
    dtype: str
    reduction: str | None

    @property
    def first(self) -> bool:
        row = get(self.op)
        return self.dtype == row.dtype and self.reduction == row.reduction

    @property
    def id(self) -> str:
        return self.op if self.first else "-".join(x for x in (self.op, self.dtype, self.reduction) if x)

    @property
    def words(self) -> str:
        """How a message names it: `all_reduce`, `all_reduce bf16 max`."""
        return self.id.replace("-", " ")

    def __str__(self) -> str:
        return self.id


def axes(op: str, dtype: str | None = None, reduction: str | None = None) -> Axes:
    """`op` at `dtype` and `reduction` (None: the op's first); a value the op does not list is refused."""
    row = get(op)
    dtype = row.dtype if dtype is None else dtype
    if dtype not in row.dtypes:
        raise ValueError(f"{op}: dtype {dtype!r}; {op} is measured in {', '.join(row.dtypes)}")
    if reduction is None:
        reduction = row.reduction
    elif reduction not in row.reductions:
        raise ValueError(f"{op}: reduction {reduction!r}; {op} reduces with {', '.join(row.reductions) or 'nothing'}")
    return Axes(op, dtype, reduction)


def all_axes(op: str) -> tuple[Axes, ...]:
    """Every dtype x reduction of `op`, its own measurement first (nccl-tests' -d all -o all)."""
    row = get(op)
    return tuple(Axes(op, d, r) for d in row.dtypes for r in (row.reductions or (None,)))


# Every combination past each op's own: what the axis tests of tests/test_collectives.py run.
FURTHER_AXES: tuple[Axes, ...] = tuple(a for op in OPS for a in all_axes(op) if not a.first)


def axes_of(details: Mapping[str, Any]) -> Axes:
    """The axes a record's measurement or verdict inputs name; those written before the axes (no dtype,
    no reduction) are the op's first, which is all they measured."""
    row = get(str(details.get("op")))
    if details.get("dtype") is None:
        return Axes(row.name, row.dtype, row.reduction)
    return Axes(row.name, str(details["dtype"]), details.get("reduction"))


def own_axes(details: Mapping[str, Any]) -> bool:
    """Whether a record's measurement or verdict inputs are of their op's own dtype and reduction: what
    its sweep, curve, floor table, calibration and history are about (a record written before the axes
    holds nothing else)."""
    if details.get("dtype") is None:
        return True
    row = COLLECTIVES.get(str(details.get("op")))
    return row is not None and details["dtype"] == row.dtype and details.get("reduction") == row.reduction


def axes_name(details: Mapping[str, Any]) -> tuple[str, str]:
    """(id, words) of what a record's measurement or verdict inputs measured: `all_reduce-bf16-max`,
    `all_reduce bf16 max`; an op this vocabulary does not know (a record of another version) as it is."""
    if str(details.get("op")) not in COLLECTIVES:
        return str(details.get("op")), str(details.get("op"))
    a = axes_of(details)
    return a.id, a.words


# ---- sizes -----------------------------------------------------------------------------------------


def busbw_factor(op: str, n: int) -> float:
    """busbw / algbw for `op` on n ranks (nccl-tests' PERFORMANCE.md)."""
    return get(op).bus_factor(n)


def element_bytes(op: str, dtype_name: str | None = None) -> int:
    """Bytes per element of `op` in `dtype_name` (None: the op's first)."""
    return dtype(dtype_name or get(op).dtype).bytes


# nccl-tests (since 2.13.12) trims each rank's chunk of a split buffer to a multiple of 16 bytes, so that
# chunks on a rank count that is not a power of two start aligned; the suite splits alike, so both tools
# move the same bytes at each size and their rows pair up (`wirecheck nccl-tests`).
CHUNK_ALIGN_BYTES = 16


def _chunk_step(width: int) -> int:
    """Elements a rank's chunk is a multiple of, for elements of `width` bytes."""
    return max(1, CHUNK_ALIGN_BYTES // width)


def min_size(op: str, n: int, dtype_name: str | None = None) -> int:
    """The smallest size in bytes that gives every rank at least one element of `op`'s buffers (a split
    buffer: one aligned chunk each)."""
    width = element_bytes(op, dtype_name)
    return width * _chunk_step(width) * n if get(op).chunked else width


def feasible_sizes(op: str, sizes, n: int, dtype_name: str | None = None) -> list[int]:
    """The sizes of a sweep that `op` can run on n ranks (nccl-tests prints 0-byte rows for the others;
    we leave them out)."""
    return [s for s in sizes if s >= min_size(op, n, dtype_name)]


def buffer_elements(op: str, size: int, n: int, dtype_name: str | None = None) -> int:
    """Elements of the size-defining buffer for `size` bytes on n ranks, rounded down as nccl-tests does:
    a split buffer is n chunks of a multiple of 16 bytes each."""
    if n < 1:
        raise ValueError(f"{op}: {n} ranks; give at least one")
    width = element_bytes(op, dtype_name)
    count = size // width
    if get(op).chunked:
        step = _chunk_step(width)
        count = count // n // step * step * n
    if count < 1:
        raise ValueError(f"{op}: size {size} B is too small for {n} ranks; "
                         f"need at least {min_size(op, n, dtype_name)} B")
    return count
