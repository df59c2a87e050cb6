"""The collectives' parent side: one size's result over every rank (`SizeResult`), the combiner of
the per-rank records (`combine`: the slowest rank's time, algbw and busbw in one place), and the
nccl-tests-like table. Touches no device and imports no torch.

The ops themselves (buffer shape, busbw factor, dtype and reduction axes, nccl-tests binary) are
data in wirecheck.vocab.ops; the worker side (kernels by op name, the timed and checked calls) is
wirecheck.measure.collective_worker, which only worker processes import.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from wirecheck.measure.curve import EAGER, GRAPH, choose_path
from wirecheck.vocab import ops as vocab
from wirecheck.vocab.ops import busbw_factor

# The graph note of the ranks that could capture when another could not (the one that failed says why).
CAPTURE_FAILED_ELSEWHERE = "capture failed on another rank"

# The worker entry names, spelled here once: the plugin, `wirecheck nccl-tests` and the multi-node job
# import them (a worker resolves "module:function" itself).
MEASURE_WORKER = "wirecheck.measure.collective_worker:measure"
MEASURE_LOOP_WORKER = "wirecheck.measure.collective_worker:measure_loop"


# ---- parent side ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeResult:
    """One size of one collective over all ranks. The slowest rank's time counts; where both paths
    were timed, the faster path's (`path`) counts and both stay in the record. The wrong elements are
    counted on the ranks where the op's result lives (every rank, or reduce's root)."""

    op: str
    world_size: int
    bytes: int
    requested_bytes: int
    time_s: float  # per call, the path that counts
    algbw: float  # bytes/s
    busbw: float  # bytes/s
    rank_time_spread: float  # slowest / fastest rank, on the path that counts
    wrong_by_rank: dict[int, int | None]  # None: not checked; else wrong elements over every checked path
    first_bad_by_rank: dict[int, int]  # only ranks with wrong elements
    path: str = EAGER  # "eager" or "graph"
    eager_time_s: float | None = None  # slowest rank's eager time per call
    graph_time_s: float | None = None  # slowest rank's graph-replay time per call; None: not timed
    graph_note: str | None = None  # why the graph path was not timed where it was asked for
    bad_paths: tuple[str, ...] = ()  # paths whose output had wrong elements on some rank
    dtype: str | None = None  # the axes it was measured at (wirecheck.vocab.ops); None: the op's first
    reduction: str | None = None

    @property
    def axes(self) -> vocab.Axes:
        return vocab.axes_of({"op": self.op, "dtype": self.dtype, "reduction": self.reduction})

    @property
    def checked(self) -> bool:
        return all(w is not None for w in self.wrong_by_rank.values())

    @property
    def wrong(self) -> int | None:
        return sum(self.wrong_by_rank.values()) if self.checked else None  # type: ignore[arg-type]

    @property
    def ok(self) -> bool:
        """Checked and every element right."""
        return self.wrong == 0

    def wrong_summary(self) -> str | None:
        """'all_reduce at 4096 B on 2 ranks: rank 1 has 1 wrong element(s) (first at element 5)', or None
        (the op's words carry its dtype and reduction past its first: 'all_reduce bf16 max at ...')."""
        bad = [(r, w) for r, w in sorted(self.wrong_by_rank.items()) if w]
        if not bad:
            return None
        ranks = "; ".join(f"rank {r} has {w} wrong element(s) (first at element {self.first_bad_by_rank[r]})"
                          for r, w in bad)
        paths = f" ({' and '.join(self.bad_paths)} path)" if self.graph_time_s is not None and self.bad_paths else ""
        return f"{self.axes.words} at {self.bytes} B on {self.world_size} ranks: {ranks}{paths}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _slowest(times: list[float]) -> tuple[float, float]:
    """(slowest, slowest / fastest)."""
    slowest, fastest = max(times), min(times)
    return slowest, (slowest / fastest if fastest > 0 else math.inf)


def _size_result(op: str, n: int, nbytes: int, requested: int, times: list[float],
                 wrong: dict[int, int | None], first_bad: dict[int, int],
                 graph_times: list[float | None] | None = None, graph_note: str | None = None,
                 bad_paths: tuple[str, ...] = (), dtype: str | None = None, reduction: str | None = None) -> SizeResult:
    eager, eager_spread = _slowest(times)
    graph = None
    graph_spread = math.inf
    if graph_times and all(t is not None for t in graph_times):
        graph, graph_spread = _slowest([t for t in graph_times if t is not None])
    path, time_s = choose_path(eager, graph)
    algbw = nbytes / time_s if time_s > 0 else math.inf
    return SizeResult(
        op=op, world_size=n, bytes=nbytes, requested_bytes=requested, time_s=time_s,
        algbw=algbw, busbw=algbw * busbw_factor(op, n),
        rank_time_spread=graph_spread if path == GRAPH else eager_spread,
        wrong_by_rank=wrong, first_bad_by_rank=first_bad,
        path=path, eager_time_s=eager, graph_time_s=graph, graph_note=graph_note, bad_paths=bad_paths,
        dtype=dtype, reduction=reduction,
    )


def _by_rank(op: str, world_size: int, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranks = sorted(r["rank"] for r in records)
    if ranks != list(range(world_size)):
        raise ValueError(f"{op}: expected one record per rank 0..{world_size - 1}, got ranks {ranks}")
    for r in records:
        if r["op"] != op or r["world_size"] != world_size:
            raise ValueError(f"{op} on {world_size} ranks: rank {r['rank']} measured "
                             f"{r['op']} on {r['world_size']} ranks")
    return sorted(records, key=lambda r: r["rank"])


def combine(op: str, world_size: int, rank_records: list[dict[str, Any]]) -> list[SizeResult]:
    """Per-rank `measure` records -> one SizeResult per size (the faster path where both were timed). The
    ranks where the op's result does not live (reduce: all but the root) take part in the timing and
    have no wrong count."""
    records = _by_rank(op, world_size, rank_records)
    holders = vocab.get(op).result_ranks(world_size)
    sizes = [res["bytes"] for res in records[0]["results"]]
    for rec in records:
        if [res["bytes"] for res in rec["results"]] != sizes:
            raise ValueError(f"{op}: rank {rec['rank']} measured sizes "
                             f"{[res['bytes'] for res in rec['results']]}, rank 0 {sizes}")
    out = []
    for k, nbytes in enumerate(sizes):
        per_rank = [rec["results"][k] for rec in records]
        # The rank that failed says why; the others only that someone did.
        notes = sorted((res["graph_note"] for res in per_rank if res.get("graph_note")),
                       key=lambda note: note == CAPTURE_FAILED_ELSEWHERE)
        bad = sorted({path for res in per_rank for path, w in (res.get("wrong_by_path") or {}).items() if w})
        out.append(_size_result(
            op, world_size, nbytes, per_rank[0]["requested_bytes"],
            [res["time_s"] for res in per_rank],
            {rank: res["wrong"] for rank, res in enumerate(per_rank) if rank in holders},
            {rank: res["first_bad"] for rank, res in enumerate(per_rank) if res["wrong"] and rank in holders},
            graph_times=[res.get("graph_time_s") for res in per_rank],
            graph_note=notes[0] if notes else None,
            bad_paths=tuple(bad),
            dtype=records[0].get("dtype"), reduction=records[0].get("reduction"),
        ))
    return out


def combine_loop(op: str, world_size: int, rank_records: list[dict[str, Any]]) -> SizeResult:
    """Per-rank `measure_loop` records -> one (unchecked) SizeResult."""
    records = _by_rank(op, world_size, rank_records)
    return _size_result(op, world_size, records[0]["bytes"], records[0]["requested_bytes"],
                        [r["time_s"] for r in records], {r["rank"]: None for r in records}, {},
                        dtype=records[0].get("dtype"), reduction=records[0].get("reduction"))


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.2f}"


def format_table(op: str, results: list[SizeResult]) -> str:
    """An nccl-tests-like table: size, count, time (us) and busbw of the path that counts, which path,
    both paths' times, #wrong. GB/s = 1e9 B/s."""
    n = results[0].world_size if results else "?"
    a = results[0].axes if results else vocab.axes(op)
    reduced = f", {a.reduction}" if a.reduction else ""
    lines = [
        f"# {op}, {n} ranks, {a.dtype}{reduced}, slowest rank's mean time per call; path: the faster of eager calls "
        "and CUDA-graph replay (graph timed up to graph_up_to)",
        f"#{'size':>11} {'count':>13} {'time':>10} {'algbw':>8} {'busbw':>8} {'path':>6} {'eager':>10} "
        f"{'graph':>10} {'#wrong':>7}",
        f"#{'(B)':>11} {'(elements)':>13} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6} {'(us)':>10} "
        f"{'(us)':>10} {'':>7}",
    ]
    notes = []
    for r in results:
        wrong = "-" if r.wrong is None else str(r.wrong)
        lines.append(f" {r.bytes:>11} {r.bytes // vocab.dtype(a.dtype).bytes:>13} {r.time_s * 1e6:>10.2f} "
                     f"{r.algbw / 1e9:>8.2f} {r.busbw / 1e9:>8.2f} {r.path:>6} {_us(r.eager_time_s):>10} "
                     f"{_us(r.graph_time_s):>10} {wrong:>7}")
        if r.graph_note and r.graph_note not in notes:
            notes.append(r.graph_note)
    lines += [f"# graph path: {note}" for note in notes]
    return "\n".join(lines)
