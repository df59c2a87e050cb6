"""The suite's curve next to nccl-tests' curve for the same op, placement and sizes: one plain record
per size, and the side-by-side table.

Like is compared with like: torch's all_reduce and broadcast work in place, so they are compared with
nccl-tests' in-place column; all_gather, reduce_scatter and all_to_all with the out-of-place one. Both
columns stay in the record. The ratio is suite busbw / nccl-tests busbw (the same bytes, so also
nccl-tests time / suite time): 1.0 is parity, above 1 the suite is faster.
"""

from __future__ import annotations

from typing import Any, Sequence

from wirecheck.nccl.tests_output import Row, Timing

PARITY_BAND = 0.95  # the suite's curve within 5 % of nccl-tests or better: parity with the reference tool


def _timing_dict(t: Timing | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"time_us": t.time_us, "algbw_GBps": t.algbw_gbps, "busbw_GBps": t.busbw_gbps, "wrong": t.wrong, **t.extra}


def _suite_dict(r) -> dict[str, Any]:
    return {
        "time_us": r.time_s * 1e6, "busbw_GBps": r.busbw / 1e9, "algbw_GBps": r.algbw / 1e9, "path": r.path,
        "eager_us": None if r.eager_time_s is None else r.eager_time_s * 1e6,
        "graph_us": None if r.graph_time_s is None else r.graph_time_s * 1e6,
        "graph_note": r.graph_note, "wrong": r.wrong,
    }


def side_by_side(op: str, placement_id: str, n_gpus: int, suite: Sequence, rows: Sequence[Row],
                 column: str, axes=None) -> list[dict[str, Any]]:
    """One record per size measured by either side (suite: collectives.SizeResult; nccl-tests: Row).

    `column`: the nccl-tests column compared ("in_place" or "out_of_place"); `axes` (a
    wirecheck.vocab.ops.Axes): the dtype and reduction both sides ran, recorded with each size."""
    measured = {} if axes is None else {"dtype": axes.dtype, "reduction": axes.reduction}
    ours = {r.bytes: r for r in suite}
    theirs = {row.size: row for row in rows if row.size > 0}  # 0-byte rows: sizes too small to split
    out = []
    for size in sorted(set(ours) | set(theirs)):
        r, row = ours.get(size), theirs.get(size)
        timing = row.timing(column) if row is not None else None
        ratio = None
        if r is not None and timing is not None and timing.time_us and r.time_s > 0:
            ratio = timing.time_us / (r.time_s * 1e6)
        out.append({
            "op": op, **measured, "placement": placement_id, "n_gpus": n_gpus, "bytes": size,
            "suite": _suite_dict(r) if r is not None else None,
            "nccl_tests": None if row is None else {
                "column": column, **(_timing_dict(timing) or {}),
                "out_of_place": _timing_dict(row.out_of_place), "in_place": _timing_dict(row.in_place),
            },
            "busbw_ratio": ratio,  # suite busbw / nccl-tests busbw (= nccl-tests time / suite time)
        })
    return out


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_side_by_side(title: str, records: Sequence[dict[str, Any]]) -> str:
    """Size, suite time/busbw/path, nccl-tests time/busbw, ratio; '<' marks a size below 95 % of nccl-tests."""
    lines = [
        f"# {title}",
        f"#{'size':>11} {'suite':>10} {'path':>6} {'suite':>8} {'nccl-tests':>10} {'nccl-tests':>10} {'busbw':>7}",
        f"#{'(B)':>11} {'(us)':>10} {'':>6} {'(GB/s)':>8} {'(us)':>10} {'(GB/s)':>10} {'ratio':>7}",
    ]
    for rec in records:
        s, n, ratio = rec["suite"] or {}, rec["nccl_tests"] or {}, rec["busbw_ratio"]
        mark = " <" if ratio is not None and ratio < PARITY_BAND else ""
        lines.append(f" {rec['bytes']:>11} {_f(s.get('time_us'), '.2f'):>10} {s.get('path', '-'):>6} "
                     f"{_f(s.get('busbw_GBps'), '.2f'):>8} {_f(n.get('time_us'), '.2f'):>10} "
                     f"{_f(n.get('busbw_GBps'), '.2f'):>10} {_f(ratio, '.3f'):>7}{mark}")
    below = [rec["bytes"] for rec in records if rec["busbw_ratio"] is not None and rec["busbw_ratio"] < PARITY_BAND]
    compared = sum(1 for rec in records if rec["busbw_ratio"] is not None)
    lines.append(f"# {compared - len(below)} of {compared} sizes within 5 % of nccl-tests or better"
                 + (f"; below: {', '.join(str(b) for b in below)} B" if below else ""))
    return "\n".join(lines)
