"""The collectives table and its measurement, on CPU: the table's arithmetic without processes, then
real gloo groups of 2 and 8 ranks (the 8 stand in for an 8-GPU node)."""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch

from wirecheck.measure import collective_worker as W, collectives as C
from wirecheck.vocab import ops as V
from wirecheck.workers.launcher import WorkerCallError, WorkerGroup

FAULTY = "selftests.faulty_workers"
OPS = V.OPS  # every op of the table: a new row is tested as the others are
SMALL_SIZES = [1024, 65536]
CPU = torch.device("cpu")


# ---- the table, no processes ---------------------------------------------------------------------


def test_every_op_of_the_vocabulary_has_its_kernel():
    assert OPS and set(W.KERNELS) == set(V.OPS)


def test_a_second_row_or_kernel_of_a_name_is_refused():
    from wirecheck.vocab.table import by_name

    first, second = V.OPS[:2]
    with pytest.raises(ValueError, match=f"collective '{first}' is defined twice"):
        by_name((V.COLLECTIVES[first], V.COLLECTIVES[second], V.COLLECTIVES[first]), "collective")
    with pytest.raises(ValueError, match=f"collective '{first}' has two kernels"):
        W.register(W.KERNELS[first])
    with pytest.raises(ValueError, match="unknown collective 'selftest_no_such_op'"):
        W.register(dataclasses.replace(W.KERNELS[first], name="selftest_no_such_op"))


def test_an_ordinary_op_gets_its_kernel_from_its_row_and_a_half_named_one_is_refused():
    """A row naming its torch.distributed function and DATA rule needs no kernel of its own: the
    worker's kernel is the rule's fill and expected values and a launch of that function."""
    derived = [name for name, row in V.COLLECTIVES.items() if row.torch is not None]
    assert derived and set(V.OPS) - set(derived) == {"broadcast"}
    for name in derived:
        fill, expected = W.DATA_RULES[V.COLLECTIVES[name].data]
        assert (W.KERNELS[name].fill, W.KERNELS[name].expected) == (fill, expected), name
    assert V.COLLECTIVES["broadcast"].torch is None and W.KERNELS["broadcast"].launch is W._launch_broadcast
    with pytest.raises(ValueError, match="give both .data one of"):
        dataclasses.replace(V.COLLECTIVES["all_reduce"], data=None)
    with pytest.raises(ValueError, match="give both"):
        dataclasses.replace(V.COLLECTIVES["all_reduce"], data="scattered")
    with pytest.raises(ValueError, match="result='rank 0'; one of"):
        dataclasses.replace(V.COLLECTIVES["reduce"], result="rank 0")


def test_dtype_and_reduction_are_axes_and_one_the_op_does_not_list_is_refused():
    reducing = next(op for op in OPS if V.get(op).reductions)
    moving = next(op for op in OPS if not V.get(op).reductions)
    with pytest.raises(ValueError, match=f"{reducing}: reduction 'prod'; {reducing} reduces with sum, max, min, avg"):
        V.axes(reducing, reduction="prod")
    with pytest.raises(ValueError, match=f"{moving}: reduction 'sum'; {moving} reduces with nothing"):
        V.axes(moving, reduction="sum")
    with pytest.raises(ValueError, match=f"{reducing}: dtype 'fp8'; {reducing} is measured in fp32, bf16, fp16"):
        V.axes(reducing, dtype="fp8")
    with pytest.raises(ValueError, match="collective x: dtypes .'fp8',."):
        V.Op("x", "x_perf", False, True, lambda n: 1.0, len, len, dtypes=("fp8",))
    assert V.axes(reducing) == V.Axes(reducing, "fp32", "sum") and V.axes(moving).reduction is None
    # every combination once, its own first; the further ones are every other, each with its own id
    for op in OPS:
        row, combos = V.get(op), V.all_axes(op)
        assert combos[0].first and combos[0].id == op
        assert len(combos) == len(row.dtypes) * max(1, len(row.reductions))
        assert len({a.id for a in combos}) == len(combos)
    assert V.FURTHER_AXES == tuple(a for op in OPS for a in V.all_axes(op)[1:])
    assert V.axes(reducing, "bf16", "max").id == f"{reducing}-bf16-max" and V.axes(moving, "fp16").id == f"{moving}-fp16"


def test_a_record_without_the_axes_is_read_as_the_ops_first():
    for op in OPS:
        assert V.axes_of({"op": op}) == V.axes(op)  # a record written before the axes
        for a in V.all_axes(op):
            assert V.axes_of({"op": op, "dtype": a.dtype, "reduction": a.reduction}) == a


def _reduce_in_order(terms: list[torch.Tensor], order: list[int]) -> torch.Tensor:
    """The terms added in `order`, each partial result rounded to their dtype (as a ring adds)."""
    total = terms[order[0]].clone()
    for r in order[1:]:
        total = total + terms[r]
    return total


@pytest.mark.parametrize("dtype", list(V.DTYPES))
@pytest.mark.parametrize("n", [2, 3, 5, 6, 7, 8])
def test_every_reduction_is_exact_in_its_dtype_in_any_order(dtype, n):
    """The values of each dtype and reduction make every partial result exact, so the expected value is
    the one right answer whatever order the backend reduces in, and avg's the same whether each
    contribution is scaled by 1/n (NCCL, in the dtype or in float32) or the sum divided (a wrong element
    is never within a rounding of the right one)."""
    # every entry of each table of the narrow dtypes (at most 2039), and fp32's largest values
    idx = torch.cat([torch.arange(0, 4096), torch.arange(60_000, 70_000)])
    orders = [list(range(n)), list(reversed(range(n))), [r for k in (1, 0) for r in range(k, n, 2)]]
    for reduction in V.REDUCTIONS:
        values = W.Values(dtype, n, reduction)
        ins = [values.put(idx, r) for r in range(n)]
        want = values.reduced(idx)
        assert want.dtype == W.TORCH_DTYPES[dtype]
        if reduction in ("max", "min"):
            stack = torch.stack(ins)
            assert torch.equal(stack.amax(0) if reduction == "max" else stack.amin(0), want), (reduction, n)
            continue
        if reduction == "avg":
            scale = torch.tensor(1.0 / n, dtype=want.dtype)
            premul = [[t * scale for t in ins], [(t.float() * scale.float()).to(want.dtype) for t in ins],
                      [(t.float() * torch.tensor(1.0 / n)).to(want.dtype) for t in ins]]
            for terms in premul:
                for order in orders:
                    assert torch.equal(_reduce_in_order(terms, order), want), (reduction, n, order)
            divided = [_reduce_in_order(ins, order) / n for order in orders]
            assert all(torch.equal(d.to(want.dtype), want) for d in divided), (reduction, n)
            continue
        for order in orders:
            assert torch.equal(_reduce_in_order(ins, order), want), (reduction, n, order)


def test_values_beyond_exactness_are_refused():
    """bf16 has 8 significand bits: no two values average exactly over 32 ranks."""
    with pytest.raises(ValueError, match="bf16 avg over 32 ranks: no two values stay exact"):
        W.value_table("bf16", 32, "avg")


@pytest.mark.parametrize(("op", "n", "factor"), [
    ("all_reduce", 2, 1.0), ("all_reduce", 8, 1.75),
    ("all_gather", 2, 0.5), ("all_gather", 8, 0.875),
    ("reduce_scatter", 4, 0.75), ("broadcast", 8, 1.0), ("all_to_all", 4, 0.75), ("reduce", 8, 1.0),
])
def test_busbw_factor(op, n, factor):
    assert V.busbw_factor(op, n) == pytest.approx(factor)


def test_unknown_op_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown collective 'allreduce'; known: all_reduce"):
        V.busbw_factor("allreduce", 2)


def test_buffer_elements_round_down_like_nccl_tests():
    """nccl-tests 2.19.6 (all_gather.cu): base = (count/nranks) & ~(16/eltSize - 1), each rank's chunk a
    multiple of 16 bytes; its size column is base * nranks * eltSize, so the rows pair on 3, 5, 6, 7 GPUs."""
    assert V.buffer_elements("all_reduce", 1 << 30, 6) == (1 << 28)  # not split: no rounding
    assert V.buffer_elements("all_gather", 1 << 30, 6) == 44739240 * 6  # 268435456 / 6 = 44739242.67 -> 44739240
    assert V.buffer_elements("all_gather", 1 << 30, 8) == 1 << 28
    assert V.buffer_elements("all_gather", 1 << 30, 8, "bf16") == 1 << 29  # two bytes an element
    assert V.buffer_elements("reduce_scatter", 1 << 20, 3) == 87380 * 3  # 262144 / 3 = 87381.3 -> 87380
    assert V.buffer_elements("all_to_all", 1 << 20, 7, "bf16") == 74896 * 7  # 74898.3 -> a multiple of 8
    assert V.buffer_elements("all_gather", 64, 2) == 16  # 32 B a rank
    assert V.buffer_elements("all_gather", 80, 2) == 16  # 40 B a rank, down to 32
    with pytest.raises(ValueError, match="size 64 B is too small for 8 ranks; need at least 128 B"):
        V.buffer_elements("all_to_all", 64, 8)
    with pytest.raises(ValueError, match="size 64 B is too small for 8 ranks; need at least 128 B"):
        V.buffer_elements("all_to_all", 64, 8, "fp16")


def simulate(a: V.Axes, n: int, count: int) -> list[torch.Tensor | None]:
    """What each rank's output must be, computed from the table's inputs by the op's definition (None
    where the op's result does not live)."""
    op, values = a.op, W.Values(a.dtype, n, a.reduction)
    c, k = V.COLLECTIVES[op], W.KERNELS[op]
    inputs = []
    for rank in range(n):
        t = torch.empty(c.input_elements(count, n), dtype=values.torch_dtype)
        k.fill(t, rank, values)
        inputs.append(t)
    chunk = count // n
    if c.reductions:
        stack = torch.stack(inputs).double()  # exact: the values are integers
        total = {"sum": stack.sum(0), "max": stack.amax(0), "min": stack.amin(0),
                 "avg": stack.sum(0) / n}[a.reduction].to(values.torch_dtype)
    if c.data == "reduced":
        return [total if r in c.result_ranks(n) else None for r in range(n)]
    if c.data == "gathered":
        return [torch.cat(inputs)] * n
    if c.data == "reduced_chunk":
        return [total[r * chunk:(r + 1) * chunk] for r in range(n)]
    if op == "broadcast":
        return [inputs[0]] * n
    if c.data == "transposed":
        return [torch.cat([inputs[s][r * chunk:(r + 1) * chunk] for s in range(n)]) for r in range(n)]
    raise AssertionError(f"{op}: no definition here for data {c.data!r}")


ALL_AXES = [a for op in OPS for a in V.all_axes(op)]


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("axes", ALL_AXES, ids=str)
def test_expected_values_match_the_collectives_definition(axes, n):
    count = V.buffer_elements(axes.op, 4 * 7 * n, n, axes.dtype)
    values = W.Values(axes.dtype, n, axes.reduction)
    for rank, out in enumerate(simulate(axes, n, count)):
        if out is None:
            continue
        expected = W.KERNELS[axes.op].expected(0, out.numel(), rank, count, CPU, values)
        assert torch.equal(out, expected), (axes, n, rank)


@pytest.mark.parametrize("op", OPS)
def test_misplaced_or_stale_data_does_not_pass(op):
    """Every element differs from its neighbour one element or one chunk away, from what another rank
    must hold, and (in-place collectives) from the rank's own unreduced input."""
    n, count = 4, 4 * 64
    c, k = V.COLLECTIVES[op], W.KERNELS[op]
    values = W.Values(c.dtype, n, c.reduction)
    outs = [k.expected(0, c.output_elements(count, n), r, count, CPU, values) for r in c.result_ranks(n)]
    chunk = count // n
    for r, out in zip(c.result_ranks(n), outs):
        for shift in (1, chunk):
            if shift < out.numel():
                assert (torch.roll(out, shift) != out).all(), (op, r, shift)
        if c.in_place and c.reduction in (None, "sum") and not (op == "broadcast" and r == W.BROADCAST_ROOT):
            own_input = torch.empty(c.input_elements(count, n))
            k.fill(own_input, r, values)
            assert (own_input != out).all(), (op, r)
    if op in ("reduce_scatter", "all_to_all"):  # the collectives whose outputs differ per rank
        assert all((outs[0] != o).all() for o in outs[1:])


@pytest.mark.parametrize("axes", V.FURTHER_AXES, ids=str)
def test_misplaced_data_is_caught_in_every_dtype_and_reduction(axes):
    """The narrower dtypes take fewer values (bf16 sums over 8 ranks: 31), so an element one place or
    one chunk away can equal its neighbour; most do not: a misplaced chunk is caught."""
    n, count = 8, 8 * 64
    c, k = V.COLLECTIVES[axes.op], W.KERNELS[axes.op]
    values = W.Values(axes.dtype, n, axes.reduction)
    for r in c.result_ranks(n):
        out = k.expected(0, c.output_elements(count, n), r, count, CPU, values)
        for shift in (1, count // n):
            if shift < out.numel():
                assert (torch.roll(out, shift) != out).float().mean() > 0.5, (axes, r, shift)


def record(rank: int, times: list[float], wrong: list[int | None], first_bad: list[int | None],
           op: str = "all_gather", n: int = 2, sizes=(1024, 4096)) -> dict:
    return {"rank": rank, "op": op, "world_size": n, "results": [
        {"bytes": s, "requested_bytes": s, "time_s": t, "wrong": w, "first_bad": f}
        for s, t, w, f in zip(sizes, times, wrong, first_bad)
    ]}


def test_combine_takes_the_slowest_rank_and_applies_the_bus_factor():
    recs = [record(1, [2e-6, 4e-6], [0, 3], [None, 7]), record(0, [1e-6, 4e-6], [0, 0], [None, None])]
    small, big = C.combine("all_gather", 2, recs)
    assert small.time_s == 2e-6 and small.rank_time_spread == 2.0
    assert small.algbw == pytest.approx(1024 / 2e-6) and small.busbw == pytest.approx(small.algbw * 0.5)
    assert small.ok and small.wrong_summary() is None
    assert not big.ok and big.wrong == 3
    assert big.wrong_by_rank == {0: 0, 1: 3} and big.first_bad_by_rank == {1: 7}
    assert big.wrong_summary() == ("all_gather at 4096 B on 2 ranks: rank 1 has 3 wrong element(s) "
                                   "(first at element 7)")
    table = C.format_table("all_gather", [small, big])
    assert "# all_gather, 2 ranks" in table and "busbw" in table
    # size, count, time, algbw, busbw, path, eager time, graph time (not timed), #wrong
    assert table.splitlines()[-1].split() == ["4096", "1024", "4.00", "1.02", "0.51", "eager", "4.00", "-", "3"]


def test_combine_refuses_incomplete_or_mixed_records():
    with pytest.raises(ValueError, match="one record per rank 0..1, got ranks \\[0\\]"):
        C.combine("all_gather", 2, [record(0, [1, 1], [0, 0], [None, None])])
    with pytest.raises(ValueError, match="rank 1 measured all_reduce"):
        C.combine("all_gather", 2, [record(0, [1, 1], [0, 0], [None, None]),
                                    record(1, [1, 1], [0, 0], [None, None], op="all_reduce")])


def test_unchecked_results_are_not_ok():
    (r,) = C.combine("all_gather", 2, [record(k, [1e-6], [None], [None], sizes=(1024,)) for k in (0, 1)])
    assert not r.checked and r.wrong is None and not r.ok
    assert C.format_table("all_gather", [r]).splitlines()[-1].split()[-1] == "-"


# ---- real ranks ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair():
    with WorkerGroup("selftest-collectives", 2, "gloo") as group:
        yield group


def measure(group: WorkerGroup, op: str, fn: str = "wirecheck.measure.collective_worker:measure", **kw) -> list:
    args = {"op": op, "sizes": SMALL_SIZES, "warmup_iters": 2, "iters": 5, **kw}
    return C.combine(op, group.world_size, group.run(fn, args, timeout_s=60, what=f"{op} {kw}"))


def _holding(op: str, n: int = 2, wrong: dict | None = None) -> dict:
    """wrong_by_rank as combine gives it: the ranks where the op's result lives, 0 unless `wrong` says."""
    return {r: (wrong or {}).get(r, 0) for r in V.get(op).result_ranks(n)}


@pytest.mark.parametrize("op", OPS)
def test_each_collective_is_correct_and_timed(pair, op):
    results = measure(pair, op)
    assert [r.bytes for r in results] == SMALL_SIZES
    for r in results:
        assert r.ok, r.wrong_summary()
        assert r.wrong_by_rank == _holding(op)
        assert r.time_s > 0 and r.busbw > 0 and math.isfinite(r.busbw)
        assert (r.dtype, r.reduction) == (V.get(op).dtype, V.get(op).reduction)


@pytest.mark.parametrize("axes", V.FURTHER_AXES, ids=str)
def test_each_dtype_and_reduction_is_correct_on_real_ranks(pair, axes):
    """gloo runs each combination exactly: the data's exactness holds on a real backend, not only here."""
    recs = pair.run("wirecheck.measure.collective_worker:measure",
                    {"op": axes.op, "sizes": [4096], "warmup_iters": 1, "iters": 1, "dtype": axes.dtype,
                     "reduction": axes.reduction}, timeout_s=60, what=str(axes))
    assert all(r.get("refused") is None for r in recs), recs[0].get("refused")  # torch 2.13's gloo runs avg too
    (r,) = C.combine(axes.op, 2, recs)
    assert r.ok and r.wrong_by_rank == _holding(axes.op), r.wrong_summary()
    assert r.axes == axes and r.bytes == 4096


def test_a_wrong_bf16_element_is_caught_and_named_with_its_axes(pair):
    (r,) = measure(pair, "all_reduce", fn=f"{FAULTY}:measure_corrupt", sizes=[4096], dtype="bf16", reduction="max")
    assert r.wrong_by_rank == {0: 0, 1: 1} and r.first_bad_by_rank == {1: 5}
    assert r.wrong_summary() == ("all_reduce bf16 max at 4096 B on 2 ranks: rank 1 has 1 wrong element(s) "
                                 "(first at element 5)")


def test_a_reduction_the_backend_refuses_is_said_and_nothing_is_measured(pair):
    """gloo refuses avg in some torch versions ("Cannot use ReduceOp.AVG with Gloo"): the worker says so
    for every rank, measures nothing, and the group goes on."""
    recs = pair.run(f"{FAULTY}:measure_refused", {"op": "all_reduce", "sizes": [4096], "warmup_iters": 1,
                                                  "iters": 1, "dtype": "fp32", "reduction": "avg"}, timeout_s=60)
    assert all(r["results"] == [] for r in recs)
    assert recs[0]["refused"] == ("gloo refuses all_reduce fp32 avg: Cannot use ReduceOp.AVG with Gloo "
                                  "(stood in by a self-test)")
    assert measure(pair, "all_reduce")[0].ok


def test_records_carry_provenance(pair):
    recs = pair.run("wirecheck.measure.collective_worker:measure",
                    {"op": "broadcast", "sizes": [1024], "warmup_iters": 0, "iters": 1}, timeout_s=60)
    assert [r["rank"] for r in recs] == [0, 1]
    assert all(r["device_name"] == "cpu" and r["nccl_version"] is None and r["backend"] == "gloo"
               for r in recs)
    assert all(isinstance(r["nccl_env"], dict) for r in recs)


@pytest.mark.parametrize("op", OPS)
def test_a_flipped_element_is_caught_and_located(pair, op):
    """The fault is put on a rank whose result is checked (faulty_workers.checked_rank: reduce's root)."""
    results = measure(pair, op, fn=f"{FAULTY}:measure_corrupt", flip_index=5)
    bad = 1 if 1 in V.get(op).result_ranks(2) else V.ROOT
    for r in results:
        assert r.wrong_by_rank == _holding(op, wrong={bad: 1}) and r.first_bad_by_rank == {bad: 5}
        assert f"{op} at {r.bytes} B on 2 ranks: rank {bad} has 1 wrong element(s) (first at element 5)" \
            == r.wrong_summary()


def test_a_fault_where_no_result_lives_is_no_fault(pair):
    """reduce's result lives on the root: what rank 1's buffer holds after it is no one's (gloo leaves
    partial sums there), so a wrong element there is not counted, and the root's is."""
    assert measure(pair, "reduce", fn=f"{FAULTY}:measure_corrupt", flip_rank=1)[0].wrong_by_rank == {0: 0}
    assert measure(pair, "reduce", fn=f"{FAULTY}:measure_corrupt", flip_rank=0)[0].wrong_by_rank == {0: 1}


@pytest.mark.parametrize("op", OPS)
def test_an_output_never_written_is_caught(pair, op):
    """Every element of an output the collective never wrote is wrong; but an in-place max or min
    leaves the rank whose own data is the extreme holding the right values (ops.py says so): there
    the stale elements caught are exactly those that differ from the definition's."""
    results = measure(pair, op, fn=f"{FAULTY}:measure_stale")
    c = V.COLLECTIVES[op]
    stale = 1 if 1 in c.result_ranks(2) else V.ROOT
    for r in results:
        count = r.bytes // V.element_bytes(op)
        if c.in_place and c.reduction in ("max", "min"):
            values = W.Values(c.dtype, 2, c.reduction)
            own = torch.empty(c.input_elements(count, 2))
            W.KERNELS[op].fill(own, stale, values)
            differ = int((own != simulate(V.axes(op), 2, count)[stale]).sum())
            assert r.wrong_by_rank == _holding(op, wrong={stale: differ})
            continue
        assert r.wrong_by_rank == _holding(op, wrong={stale: c.output_elements(count, 2)})
        assert r.first_bad_by_rank == {stale: 0}


def test_measure_loop_for_benchmark_rounds(pair):
    recs = pair.run("wirecheck.measure.collective_worker:measure_loop",
                    {"op": "all_reduce", "size": 4096, "iters": 10}, timeout_s=60)
    r = C.combine_loop("all_reduce", 2, recs)
    assert r.bytes == 4096 and r.time_s == max(x["time_s"] for x in recs) and r.busbw > 0
    assert not r.checked


def test_a_node_pair_on_its_own_group_is_measured_and_checked_as_any_collective(pair):
    """wirecheck.fleet.pairs runs on a process group of its own through the collectives' code: its
    records combine like `measure`'s, and a wrong element on one rank is caught there too."""
    good = C.combine("all_reduce", 2, pair.run(f"{FAULTY}:pair_on_own_group", {"size": 4096}, timeout_s=60))
    assert [(r.bytes, r.ok, r.wrong_by_rank) for r in good] == [(4096, True, {0: 0, 1: 0})] and good[0].busbw > 0
    recs = pair.run(f"{FAULTY}:pair_on_own_group", {"size": 4096, "flip_rank": 1}, timeout_s=60)
    (bad,) = C.combine("all_reduce", 2, recs)
    assert bad.wrong_by_rank == {0: 0, 1: 1} and bad.first_bad_by_rank == {1: 5}
    assert [r["job_rank"] for r in recs] == [0, 1]


def test_bad_arguments_come_back_as_errors_and_leave_the_group_usable(pair):
    with pytest.raises(WorkerCallError, match="unknown collective 'bogus'"):
        pair.run("wirecheck.measure.collective_worker:measure",
                 {"op": "bogus", "sizes": [1024], "warmup_iters": 0, "iters": 1}, timeout_s=60)
    with pytest.raises(WorkerCallError, match="too small for 2 ranks"):
        pair.run("wirecheck.measure.collective_worker:measure",
                 {"op": "all_gather", "sizes": [4], "warmup_iters": 0, "iters": 1}, timeout_s=60)
    assert pair.alive
    assert measure(pair, "all_reduce")[0].ok


def test_eight_ranks_like_an_eight_gpu_node():
    with WorkerGroup("selftest-8", 8, "gloo", start_timeout_s=120) as group:
        for op in OPS:
            recs = group.run("wirecheck.measure.collective_worker:measure",
                             {"op": op, "sizes": [256, 4096], "warmup_iters": 1, "iters": 2},
                             timeout_s=60, what=op)
            for r in C.combine(op, 8, recs):
                assert r.ok, r.wrong_summary()
                assert r.busbw > 0 and r.wrong_by_rank == _holding(op, 8)


# ---- sweeps and the graph path -------------------------------------------------------------------


def test_sizes_too_small_for_every_rank_are_left_out():
    """nccl-tests prints 0-byte rows where a rank's chunk rounds down to no 16 bytes; the suite leaves them out."""
    sweep = [8, 16, 32, 64, 128, 1024]
    assert V.feasible_sizes("all_reduce", sweep, 8) == sweep  # not split: one element is enough
    assert V.feasible_sizes("all_gather", sweep, 8) == [128, 1024]  # 8 ranks x 16 B
    assert V.feasible_sizes("all_gather", sweep, 8, "bf16") == [128, 1024]
    assert V.feasible_sizes("all_to_all", sweep, 2) == [32, 64, 128, 1024]
    assert V.min_size("reduce_scatter", 3) == 48


def path_record(rank: int, eager: list[float], graph: list[float | None], note: str | None = None,
                wrong_by_path: list[dict] | None = None, sizes=(1024, 1 << 20), op: str = "all_reduce") -> dict:
    wrong_by_path = wrong_by_path or [{"eager": 0, "graph": 0} if g is not None else {"eager": 0} for g in graph]
    return {"rank": rank, "op": op, "world_size": 2, "results": [
        {"bytes": s, "requested_bytes": s, "time_s": e, "graph_time_s": g, "graph_note": note,
         "wrong": sum(w.values()), "first_bad": 5 if sum(w.values()) else None, "wrong_by_path": w}
        for s, e, g, w in zip(sizes, eager, graph, wrong_by_path)
    ]}


def test_combine_keeps_the_faster_path_per_size_and_both_times():
    # small size: graph 20 us vs eager 45 us (slowest ranks); large: graph slower than eager
    recs = [path_record(0, [44e-6, 50e-6], [19e-6, 70e-6]), path_record(1, [45e-6, 52e-6], [20e-6, 63e-6])]
    small, large = C.combine("all_reduce", 2, recs)
    assert (small.path, small.time_s, small.eager_time_s, small.graph_time_s) == ("graph", 20e-6, 45e-6, 20e-6)
    assert small.busbw == pytest.approx(1024 / 20e-6)  # busbw from the path that counts
    assert small.rank_time_spread == pytest.approx(20 / 19)  # the spread of that path
    assert (large.path, large.time_s, large.graph_time_s) == ("eager", 52e-6, 70e-6)
    table = C.format_table("all_reduce", [small, large]).splitlines()
    assert table[-2].split() == ["1024", "256", "20.00", "0.05", "0.05", "graph", "45.00", "20.00", "0"]
    assert table[-1].split()[5:8] == ["eager", "52.00", "70.00"]


def test_a_rank_without_a_graph_time_keeps_the_size_on_eager():
    recs = [path_record(0, [45e-6], [19e-6], sizes=(1024,)), path_record(1, [45e-6], [None], sizes=(1024,))]
    (r,) = C.combine("all_reduce", 2, recs)
    assert r.path == "eager" and r.time_s == 45e-6 and r.graph_time_s is None


def test_the_reason_for_no_graph_reaches_the_table():
    note = "gloo on cpu: no CUDA graphs, eager calls only"
    recs = [path_record(k, [1e-4], [None], note=note, sizes=(1024,)) for k in (0, 1)]
    (r,) = C.combine("all_reduce", 2, recs)
    assert r.graph_note == note and r.path == "eager"
    assert C.format_table("all_reduce", [r]).splitlines()[-1] == f"# graph path: {note}"


def test_wrong_data_on_the_graph_path_is_named():
    bad = [{"eager": 0, "graph": 2}]
    recs = [path_record(0, [45e-6], [19e-6], sizes=(1024,)),
            path_record(1, [45e-6], [19e-6], wrong_by_path=bad, sizes=(1024,))]
    (r,) = C.combine("all_reduce", 2, recs)
    assert not r.ok and r.bad_paths == ("graph",)
    assert r.wrong_summary() == ("all_reduce at 1024 B on 2 ranks: rank 1 has 2 wrong element(s) "
                                 "(first at element 5) (graph path)")


class _Ctx:
    def __init__(self, device: str, backend: str = "nccl"):
        self.device, self.backend, self.rank = torch.device(device), backend, 0


@pytest.mark.parametrize(("device", "nccl", "env", "expected"), [
    ("cpu", None, {}, "gloo on cpu: no CUDA graphs"),
    ("cuda", None, {}, "NCCL version unknown"),
    ("cuda", "2.9.5", {}, "NCCL 2.9.5 cannot be captured"),
    ("cuda", "2.28.9", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, "expandable_segments is on and NCCL 2.28.9"),
    ("cuda", "2.29.1", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, None),
    ("cuda", "2.28.9", {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}, None),
])
def test_when_graphs_are_not_attempted(device, nccl, env, expected):
    from wirecheck.measure.collective_timing import graph_unavailable

    ctx = _Ctx(device, "gloo" if device == "cpu" else "nccl")
    note = graph_unavailable(ctx, nccl, env)
    assert (note is None) if expected is None else (expected in note), note


def test_gloo_ranks_say_why_they_time_no_graph(pair):
    results = measure(pair, "all_reduce", graph_up_to=4096)
    small, large = results  # 1024 B (graph asked for) and 65536 B (above graph_up_to)
    assert small.graph_note == "gloo on cpu: no CUDA graphs, eager calls only" and small.graph_time_s is None
    assert large.graph_note is None
    assert all(r.path == "eager" and r.ok for r in results)


@pytest.mark.parametrize("op", OPS)
def test_graph_path_is_timed_up_to_graph_up_to_and_checked(pair, op):
    results = measure(pair, op, fn=f"{FAULTY}:measure_with_stand_in_graphs", graph_up_to=4096, graph_time_s=1e-9)
    small, large = results
    assert small.graph_time_s == 1e-9 and small.path == "graph" and small.time_s == 1e-9
    assert large.graph_time_s is None and large.path == "eager"
    assert small.ok and large.ok


def test_wrong_data_on_the_graph_path_only_is_caught(pair):
    results = measure(pair, "all_gather", fn=f"{FAULTY}:measure_with_stand_in_graphs", graph_up_to=4096,
                      corrupt_graph_rank=1)
    small, large = results
    assert small.wrong_by_rank == {0: 0, 1: 1} and small.bad_paths == ("graph",)
    assert "(graph path)" in small.wrong_summary()
    assert large.ok  # above graph_up_to nothing is replayed


def test_a_capture_that_fails_on_one_rank_leaves_every_rank_on_eager(pair):
    results = measure(pair, "all_reduce", fn=f"{FAULTY}:measure_with_stand_in_graphs", graph_up_to=4096,
                      fail_capture_rank=1)
    small = results[0]
    assert small.graph_time_s is None and small.path == "eager" and small.ok
    assert small.graph_note.startswith("capture failed on rank 1: CUDA error: operation not permitted")
    assert pair.alive and measure(pair, "all_reduce")[0].ok  # the group goes on


@pytest.mark.parametrize("n", [512, 1024])
def test_a_multi_node_job_over_256_ranks_has_buffers_and_exact_sums(n):
    """A fleet job of 64 or 128 nodes of 8 GPUs failed at its first measurement ("sums stay exact in float32 only
    up to 256"), a limit the value table had outgrown: its values shrink with the ranks. The fp32 sum's reduced
    value, added in float32 in any order, is the exact one."""
    from wirecheck.measure.collective_worker import Values
    from wirecheck.vocab.ops import buffer_elements

    assert buffer_elements("all_reduce", 2**30, n, "fp32") == 2**28
    values = Values("fp32", n, "sum")
    idx = torch.arange(0, 4096, dtype=torch.int64)
    exact = sum(values._y(idx, r) for r in range(n))  # int64: no rounding
    assert int(exact.max()) < 2**24
    backwards = functools.reduce(torch.add, [values.put(idx, r) for r in reversed(range(n))])  # float32, reversed
    assert torch.equal(backwards.to(torch.int64), exact) and torch.equal(values.reduced(idx), backwards)


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("dtype", list(V.DTYPES))
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_a_max_or_min_sees_any_rank_go_missing_at_every_size(reduction, dtype, n):
    """Each rank holds the extreme at about 1/n of the elements, from the first: in the smallest buffer
    of a sweep and in the first 16k elements, the result without any one rank's data differs from the
    right one, so a max or min catches a rank whose data never arrived (a sum always did)."""
    values = W.Values(dtype, n, reduction)
    pick = torch.maximum if reduction == "max" else torch.minimum
    for count in (V.buffer_elements("all_reduce", V.min_size("all_reduce", n, dtype) * n, n, dtype), 1 << 14):
        idx = torch.arange(count)
        want = values.reduced(idx)
        for missing in range(n):
            rest = functools.reduce(pick, [values.put(idx, r) for r in range(n) if r != missing])
            decided = int((rest != want).sum())
            assert decided >= max(1, count // (4 * n)), (count, missing, decided)
