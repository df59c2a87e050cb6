"""The fault-injection worker that makes a GPU read slower by a known share keeps its results right
and really does the extra work (the GPU runs of the limits use it, so it must not lie either way)."""

from __future__ import annotations

import torch

from slow_gpu_worker import slower_copy, slower_matmul


def test_a_slower_matmul_does_the_extra_rows_and_leaves_the_product_alone():
    calls = []

    def counting(a, b, out):
        calls.append(a.shape[0])
        torch.matmul(a, b, out=out)

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    out = torch.empty(64, 64)
    slower_matmul(counting, 0.10)(a, b, out)
    assert torch.equal(out, a @ b)
    assert calls == [64]  # the production product once; the extra 6 rows go to a scratch buffer


def test_a_slower_copy_copies_the_share_again_and_the_result_is_the_source():
    copied = []

    def counting(dst, src):
        copied.append(src.numel())
        dst.copy_(src)

    src, dst = torch.arange(100.0), torch.zeros(100)
    slower_copy(counting, 0.5)(dst, src)
    assert torch.equal(dst, src) and copied == [100]
