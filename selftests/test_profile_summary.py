"""The profiler summary's timeline arithmetic on synthetic kernels with known answers."""

from __future__ import annotations

import pytest

from wirecheck.training.profile import COMM, COMPUTE, COPY, classify, gaps, overlap, summarize, total, union

MS = 1_000_000  # ns


@pytest.mark.parametrize("name, kind", [
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", COMM),
    ("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bf16", COMM),
    ("gloo:all_reduce", COMM),
    ("Memcpy DtoD (Device -> Device)", COPY),
    ("Memset (Device)", COPY),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", COMPUTE),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", COMPUTE),
])
def test_classify(name, kind):
    assert classify(name) == kind


def test_union_merges_overlaps_and_nesting():
    assert union([(5, 8), (0, 3), (2, 4), (6, 7), (10, 10)]) == [(0, 4), (5, 8)]
    assert total(union([(0, 10), (2, 3)])) == 10


def test_overlap_of_interval_lists():
    assert overlap([(0, 10), (20, 30)], [(5, 25)]) == 10
    assert overlap([(0, 5)], [(5, 9)]) == 0
    assert overlap([(0, 4), (6, 9)], [(1, 2), (3, 7), (8, 20)]) == 1 + 1 + 1 + 1


def test_gaps_longest_first():
    assert gaps([(0, MS), (2 * MS, 3 * MS), (3 * MS + 100, 4 * MS), (9 * MS, 10 * MS)]) == [5 * MS, MS]


def test_summary_of_an_overlapped_and_an_exposed_collective():
    """Two steps. Compute 0-10 and 20-30 ms; an all-reduce 5-25 ms (10 ms of it hidden); an idle
    stretch 30-40 ms (the CPU late); a copy 40-42 ms; an exposed all-gather 42-50 ms."""
    events = [
        ("gemm", 0, 10 * MS), ("gemm", 20 * MS, 30 * MS),
        ("ncclDevKernel_AllReduce", 5 * MS, 25 * MS),
        ("Memcpy DtoD", 40 * MS, 42 * MS),
        ("ncclDevKernel_AllGather", 42 * MS, 50 * MS),
    ]
    s = summarize(events, n_steps=2)
    assert s["window_ms"] == pytest.approx(25)  # 50 ms over 2 steps
    assert s["busy_ms"] == pytest.approx(20)  # 0-30, 40-50
    assert s["idle_ms"] == pytest.approx(5)
    assert s["compute_ms"] == pytest.approx(11)  # gemm 20 ms + copy 2 ms
    assert s["copy_ms"] == pytest.approx(1)
    assert s["comm_ms"] == pytest.approx(14)  # 20 + 8 ms
    assert s["comm_only_ms"] == pytest.approx(9)  # 10 + 8 ms not under compute
    assert s["comm_kernel_sum_ms"] == pytest.approx(14)
    assert s["largest_gaps_ms"] == [10.0] and s["idle_gaps"] == 0.5
    top = s["top"]
    assert top[0]["name"] == "gemm" and top[0]["calls"] == 1 and top[0]["ms"] == pytest.approx(10)
    assert {t["kind"] for t in top} == {COMPUTE, COMM, COPY}


def test_summary_without_events():
    assert summarize([], 3) == {"profiled_steps": 3, "events": 0}
