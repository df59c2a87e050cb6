"""Dense GEMM on one GPU, in a worker: throughput (bf16, and fp8 e4m3 where the GPU has it)
and results compared with a reference bit for bit (gpu-burn's method, exact).

Inputs come from a seeded generator, so every GPU multiplies the same matrices; the reference
is the first product, computed once; later products are compared with it element by element
as 16-bit patterns (a bf16 GEMM repeated on one H200 gave bitwise-identical results: issue
20's probe). TFLOP/s = 2 n^3 per product over its time (the median of per-call times).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from wirecheck.gpu.stopwatch import Stopwatch, summary

FP8_MIN_CAPABILITY = (8, 9)  # Ada and Hopper have fp8 tensor cores


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """Every product goes through here (one name the self-tests can swap in the worker)."""
    torch.matmul(a, b, out=out)


def inputs(n: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Two n x n bf16 matrices, the same on every GPU and every call for one seed."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    a = torch.randn(n, n, generator=generator, device=device, dtype=torch.float32).to(torch.bfloat16)
    b = torch.randn(n, n, generator=generator, device=device, dtype=torch.float32).to(torch.bfloat16)
    return a, b


def flops(n: int) -> float:
    return 2.0 * n ** 3


def compare(out: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(elements that differ, index of the first), both on the device: no wait for the host."""
    differ = (out.view(torch.int16) != ref.view(torch.int16)).view(-1)
    # argmax returns the first maximum: the first differing element when any differs
    return differ.sum(), differ.view(torch.uint8).argmax()


def digest(t: torch.Tensor) -> str | None:
    """A short hash of the tensor's bits (a result from another call or GPU can be compared)."""
    try:
        data = t.detach().view(torch.int16).cpu().numpy()
    except (RuntimeError, TypeError):  # torch without numpy
        return None
    return hashlib.blake2b(memoryview(data).cast("B"), digest_size=16).hexdigest()


def reference(n: int, seed: int, device: torch.device) -> dict[str, Any]:
    """The inputs, the reference product and a spare output, ready to compare against."""
    a, b = inputs(n, seed, device)
    ref = torch.empty(n, n, dtype=torch.bfloat16, device=device)
    matmul(a, b, ref)
    finite = int(torch.isfinite(ref).sum())
    return {"a": a, "b": b, "ref": ref, "out": torch.empty_like(ref), "nonfinite": n * n - finite}


def bf16(device: torch.device, n: int, warmup_iters: int, iters: int, compare_iters: int, seed: int) -> dict[str, Any]:
    """Throughput, then `compare_iters` products compared with the reference."""
    r = reference(n, seed, device)
    a, b, ref, out = r["a"], r["b"], r["ref"], r["out"]
    watch = Stopwatch(device)
    timing = summary(watch.each(lambda: matmul(a, b, out), warmup_iters, iters), flops(n))
    counts, firsts = [], []
    for _ in range(compare_iters):
        matmul(a, b, out)
        count, first = compare(out, ref)
        counts.append(count)
        firsts.append(first)
    counts = torch.stack(counts).tolist()
    firsts = torch.stack(firsts).tolist()
    bad = [i for i, c in enumerate(counts) if c]
    first = None
    if bad:
        index = int(firsts[bad[0]])
        first = {"result": bad[0] + 1, "index": index, "row": index // n, "col": index % n}
    return {
        "n": n,
        "throughput": timing,
        "math": {"checked": compare_iters, "mismatched_results": len(bad), "mismatched_elements": int(sum(counts)),
                 "first": first, "reference_nonfinite": r["nonfinite"], "reference_digest": digest(ref)},
    }


def fp8_unsupported(device: torch.device) -> str | None:
    """Why this device cannot run an fp8 GEMM here, or None."""
    if device.type != "cuda":
        return "fp8 GEMMs need a GPU (simulation runs on CPU)"
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_MIN_CAPABILITY:
        return (f"fp8 tensor cores need compute capability >= {FP8_MIN_CAPABILITY[0]}.{FP8_MIN_CAPABILITY[1]}; "
                f"this GPU is {capability[0]}.{capability[1]}")
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no torch._scaled_mm / float8_e4m3fn"
    return None


def fp8(device: torch.device, n: int, warmup_iters: int, iters: int, seed: int) -> dict[str, Any]:
    """fp8 e4m3 x e4m3 -> bf16 through torch._scaled_mm (unit scales; mat2 column-major, as it requires)."""
    reason = fp8_unsupported(device)
    if reason:
        return {"n": n, "unsupported": reason}
    a, b = inputs(n, seed, device)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
    del a, b
    scale = torch.ones((), dtype=torch.float32, device=device)

    def product() -> None:
        torch._scaled_mm(a8, b8, scale, scale, out_dtype=torch.bfloat16)

    watch = Stopwatch(device)
    return {"n": n, "throughput": summary(watch.each(product, warmup_iters, iters), flops(n))}
