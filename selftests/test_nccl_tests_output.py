"""nccl-tests' text output parsed: the real 2.19.6 run on 2x H200 kept in fixtures/reference, and the
older and optional layouts operators' logs hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from wirecheck.nccl.tests_output import Row, Timing, parse

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "h200-sxm-2" / "nccl-tests.txt"
MiB = 2**20


@pytest.fixture(scope="module")
def reference():
    return parse(REFERENCE.read_text())


def test_every_run_of_the_reference_file(reference):
    # default and NCCL_P2P_DISABLE=1, each all_reduce, all_gather, reduce_scatter, in one text
    assert [r.test for r in reference] == ["all_reduce_perf", "all_gather_perf", "reduce_scatter_perf"] * 2
    for run in reference:
        assert run.version == "2.19.6" and run.nccl_library == "22809"
        assert run.settings["nGpus"] == "2" and run.settings["step"] == "8(factor)" and run.settings["iters"] == "20"
        assert run.settings["warmup iters"] == "1" and run.settings["minBytes"] == "1048576"
        assert len(run.devices) == 2 and run.devices[0].endswith("NVIDIA H200")
        assert [row.size for row in run.rows] == [MiB, 8 * MiB, 64 * MiB, 512 * MiB]
        assert run.wrong_column == "#wrong" and run.out_of_bounds == 0 and run.ok


def test_reference_rows_carry_both_columns(reference):
    all_reduce, all_gather = reference[0], reference[1]
    first = all_reduce.rows[0]
    assert first == Row(size=1048576, count=262144, dtype="float", redop="sum", root=-1,
                        out_of_place=Timing(17.76, 59.04, 59.04, 0.0), in_place=Timing(18.13, 57.84, 57.84, 0.0))
    assert all_reduce.avg_busbw_gbps == pytest.approx(202.244)
    row = all_gather.by_size()[512 * MiB]
    assert (row.redop, row.count) == ("none", 67108864)  # count per rank; size is the gathered buffer
    assert row.timing("out_of_place").busbw_gbps == 256.30 and row.timing("in_place").time_us == 979.94
    p2p_off = reference[3]
    assert p2p_off.by_size()[512 * MiB].out_of_place.time_us == 20035.9  # 7 wide: one decimal
    with pytest.raises(ValueError, match="out_of_place or in_place"):
        row.timing("inplace")


# nccl-tests 2.10-era output (no root column, an `error` magnitude), NCCL INFO lines in between, as an
# AWS ParallelCluster test log and many issue threads show it; two runs of a shell loop in one file.
OLD = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid   1428 on ip-10-0-139-244 device  0 [0x00] NVIDIA A10G
#
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
ip-10-0-139-244:14:14 [0] NCCL INFO Launch mode Parallel
           8             2     float     sum     4.17    0.00    0.00  0e+00     0.58    0.01    0.00  0e+00
          16             4     float     sum     4.28    0.00    0.00  0e+00     0.58    0.03    0.00  0e+00
   104857600      26214400     float     sum   202872    0.52    0.69    N/A   224616    0.47    0.62    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.23
#
# nThread 1 nGpus 8 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           0             0   float    57.30    0.00    0.00  0e+00    57.09    0.00    0.00  0e+00
          48             1   float    57.46    0.00    0.00  2e-07    57.40    0.00    0.00  0e+00
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : 0
"""


def test_older_layouts_and_interleaved_logs():
    first, second = parse(OLD)
    assert first.version is None and first.wrong_column == "error" and first.settings["nGpus"] == "1"
    assert [r.size for r in first.rows] == [8, 16, 104857600]  # the NCCL INFO line is not a row
    assert first.rows[0].root is None and first.rows[0].redop == "sum"
    assert first.rows[2].out_of_place == Timing(202872.0, 0.52, 0.69, None)  # N/A: not checked
    assert first.ok
    # no redop column at all in the oldest layout; a 0-byte row is kept as printed
    assert [r.size for r in second.rows] == [0, 48] and second.rows[1].redop is None
    assert second.rows[1].out_of_place.wrong == pytest.approx(2e-7)
    assert second.out_of_bounds == 1 and second.out_of_bounds_ok is False and not second.ok


# The -I 1 (per-iteration) and -S 1 (timestamp) layouts, as src/util.cu of 2.19.6 prints their headers.
PER_ITERATION = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#                                                              out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
           8             2     float     sum      -1    20.80    0.00    0.00       0    19.90    24.10    24.10     4.20    21.10    0.00    0.00       0    20.00    25.00    25.00     5.00
          16             4     float     sum      -1    20.90    0.00    0.00       0    19.95    24.20    24.20     4.30    21.00    0.00    0.00       0    20.10    24.90    24.90     4.90
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00025
#
# Collective test concluded: all_reduce_perf
# Collective test starting: all_gather_perf
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)        %Y-%m-%d %H:%M:%S
           8             1     float    none      -1    21.80    0.00    0.00       0    26.21    0.00    0.00       0 2026-11-30 21:10:03
vm: Test NCCL failure common.cu:1158 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'
"""


def test_per_iteration_and_timestamp_columns_and_failures():
    per_iter, stamped = parse(PER_ITERATION)
    row = per_iter.rows[0]
    assert row.out_of_place.time_us == 20.80 and row.out_of_place.extra == {"i_min": 19.9, "i_max": 24.1,
                                                                            "i_p99": 24.1, "i_cv%": 4.2}
    assert row.in_place.time_us == 21.10 and row.in_place.wrong == 0
    assert per_iter.ok and per_iter.concluded
    assert stamped.test == "all_gather_perf" and stamped.rows[0].in_place.time_us == 26.21
    assert stamped.failures == ["vm: Test NCCL failure common.cu:1158 'unhandled cuda error (run with NCCL_DEBUG=INFO "
                                "for details)'"]
    assert not stamped.ok  # a failure and no footer


def test_text_without_a_run():
    assert parse("") == [] and parse("bash: all_reduce_perf: command not found\n") == []
