"""A memory pattern test on one GPU, in a worker: write patterns over most of the free memory,
then read every word back.

Patterns (64-bit words): alternating bits both ways (0xAA.., 0x55..), all zeros, all ones, and
each word's own address (its index in the whole tested range: a word written to the wrong
place shows there). Every pattern is written over all chunks first and verified after, so a
word is read back long after it was written, never from a cache. Mismatches are counted on the
device per chunk; the first bad byte offset (in the tested range) and the pattern are kept.
On a 1x H200 node, four patterns over 125.4 GiB took 0.72 s and the address pattern 0.55 s
(the GPU health probe, scripts/device/gpu_health_probe.py, 2026-12-01).
"""

from __future__ import annotations

import time
from typing import Any

import torch

WORD = 8  # bytes: patterns are written as int64 words
# Verifying the address pattern needs the expected values: made in blocks of this many words.
ADDRESS_BLOCK_WORDS = 32 * 2**20


def _word(byte: int) -> int:
    return int.from_bytes(bytes([byte]) * WORD, "little", signed=True)


PATTERNS = (("0xAA", _word(0xAA)), ("0x55", _word(0x55)), ("zeros", 0), ("ones", -1), ("address", None))


def fill(chunk: torch.Tensor, value: int | None, first_word: int) -> None:
    """Write one pattern into a chunk (int64 words); `first_word`: its index in the tested range.
    Every write goes through here (one name the self-tests can swap in the worker)."""
    if value is None:
        torch.arange(first_word, first_word + chunk.numel(), dtype=torch.int64, device=chunk.device, out=chunk)
    else:
        chunk.fill_(value)


def _verify(chunk: torch.Tensor, value: int | None, first_word: int, scratch: torch.Tensor | None):
    """(differing words, index of the first in the chunk) as device tensors."""
    if value is not None:
        differ = chunk != value
        return differ.sum(), differ.view(torch.uint8).argmax()
    counts, firsts = [], []
    for start in range(0, chunk.numel(), ADDRESS_BLOCK_WORDS):
        part = chunk[start:start + ADDRESS_BLOCK_WORDS]
        expected = scratch[:part.numel()]
        torch.arange(first_word + start, first_word + start + part.numel(), dtype=torch.int64, device=chunk.device,
                     out=expected)
        differ = part != expected
        counts.append(differ.sum())
        # the first differing word of the chunk: this block's first, if an earlier block had none
        firsts.append(torch.where(differ.any(), differ.view(torch.uint8).argmax() + start, chunk.numel()))
    firsts = torch.stack(firsts).min()
    return torch.stack(counts).sum(), torch.where(firsts == chunk.numel(), 0, firsts)


def _allocate(device: torch.device, target: int, chunk_bytes: int) -> tuple[list[torch.Tensor], str | None]:
    chunks, covered = [], 0
    while covered < target:
        size = min(chunk_bytes, target - covered) // WORD
        if size == 0:
            break
        try:
            chunks.append(torch.empty(size, dtype=torch.int64, device=device))
        except RuntimeError as exc:  # out of memory: what was allocated is tested; the coverage check says it fell short
            return chunks, f"allocation stopped at {covered} bytes: {str(exc).splitlines()[0]}"
        covered += size * WORD
    return chunks, None


def run(device: torch.device, coverage: float, chunk: int, cap: int | None, passes: int) -> dict[str, Any]:
    """{"free_bytes", "total_bytes", "target_bytes", "bytes_covered", "passes", "patterns": [...], "wall_s", ...}."""
    began = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(device)
    else:
        free = total = cap  # CPU memory is not what is tested in simulation: the cap stands for it
    if cap is not None:
        free = min(free, cap)
    target = int(free * coverage) // WORD * WORD
    scratch = torch.empty(min(ADDRESS_BLOCK_WORDS, max(1, target // WORD)), dtype=torch.int64, device=device)
    chunks, alloc_error = _allocate(device, target, chunk)
    covered = sum(c.numel() for c in chunks) * WORD
    starts, word = [], 0
    for c in chunks:
        starts.append(word)
        word += c.numel()
    results = []
    for p in range(passes):
        for name, value in PATTERNS:
            t0 = time.perf_counter()
            for c, start in zip(chunks, starts):
                fill(c, value, start)
            checked = [_verify(c, value, start, scratch) for c, start in zip(chunks, starts)]
            counts = torch.stack([n for n, _ in checked]).tolist() if checked else []
            bad = next((i for i, n in enumerate(counts) if n), None)
            first_offset = None
            if bad is not None:
                first_offset = (starts[bad] + int(checked[bad][1])) * WORD
            results.append({"pass": p + 1, "pattern": name, "mismatched_words": int(sum(counts)),
                            "first_bad_offset": first_offset, "seconds": time.perf_counter() - t0})
    del chunks, scratch
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {
        "free_bytes": free,
        "total_bytes": total,
        "target_bytes": target,
        "bytes_covered": covered,
        "coverage": coverage,
        "passes": passes,
        "patterns": results,
        "allocation_error": alloc_error,
        "wall_s": time.perf_counter() - began,
    }
