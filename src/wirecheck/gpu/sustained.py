"""A sustained GEMM load on one GPU, in a worker: products back to back for `duration_s`,
TFLOP/s per window, every `check_every`-th product compared with the reference on the device.
The last window is sized to end with the duration (at the rate of the window before it), not a whole
window past it; a short one is left out of the figure (inputs.full_windows), as the first ones are.

The GPU never waits for the host: window w+1 is queued before the host waits for window w's
end, so the load is continuous while each window's time is read from its own CUDA events.
Each window's wall-clock start and end (unix time, the host's clock when the device passed
its end event) let the parent line the windows up with the NVML samples it took meanwhile.
The comparisons (~1 % of the time at check_every 8 on an H200) count in the windows' time.
A burn-in's rounds (wirecheck.burnin.worker) queue and finish the same windows, beside collectives.

`aside`: host work of what the run does next (the one-GPU training's imports and first kernels:
training/single_gpu.py `prepare`), done once in the load's shadow. It runs right after a window sized
to `aside_cover_s` is queued, so the device computes that window meanwhile; whatever the aside queues
on the device runs after that window's end mark and before the next one's start, in no window's time.
Its seconds, the window it ran behind and the gap it left (the device idle between that window's end
and the next one's start, when the aside outlasted the window) are in the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from wirecheck.gpu import gemm
from wirecheck.gpu.stopwatch import Stopwatch

GROWTH = 8
ASIDE_COVER_S = 4.0  # the window queued before the aside: its seconds on a 1x H200 node, 2.5-3.5 (docs/levels.md)


@dataclass
class Window:
    """Products queued on the device between two marks, with their comparisons' tally."""

    start: Any
    end: Any
    products: int
    checked: int
    tally: torch.Tensor  # [mismatched elements, mismatched results, first index or -1], on the host when done
    queued_at: float  # unix time the host finished queuing it: its end on CPU, where ops run as they are called


def queue_window(a, b, ref, out, products: int, check_every: int, watch: Stopwatch, host: torch.Tensor) -> Window:
    device = out.device
    tally = torch.tensor([0, 0, -1], dtype=torch.int64, device=device)
    start = watch.mark()
    checked = 0
    for i in range(1, products + 1):
        gemm.matmul(a, b, out)
        if i % check_every == 0:
            count, first = gemm.compare(out, ref)
            # the first mismatch of the window: only while none was seen before it
            tally[2] = torch.where((tally[1] == 0) & (count > 0), first, tally[2])
            tally[0] += count
            tally[1] += (count > 0).to(torch.int64)
            checked += 1
    host.copy_(tally, non_blocking=True)
    return Window(start, watch.mark(), products, checked, host, time.time())


def finish_window(w: Window, watch: Stopwatch, n: int) -> tuple[dict[str, Any], int | None]:
    """(the window as the record keeps it, the index of its first wrong element or None), once the device
    has passed its end: its wall-clock span (unix time), products, seconds, FLOP/s and comparisons."""
    watch.wait(w.end)
    t1 = time.time() if watch.cuda else w.queued_at
    seconds = watch.seconds(w.start, w.end)
    elements, results, first = (int(x) for x in w.tally.tolist())
    window = {"t0": t1 - seconds, "t1": t1, "products": w.products, "seconds": seconds,
              "flops_per_s": gemm.flops(n) * w.products / seconds if seconds > 0 else None,
              "checked": w.checked, "mismatched_results": results, "mismatched_elements": elements}
    return window, (first if results else None)


def next_products(window: dict[str, Any], window_s: float, check_every: int) -> int:
    """Products for the next window: `window_s` at the last one's rate, growing at most GROWTH x."""
    if window["seconds"] <= 0:
        return window["products"]
    wanted = round(window_s * window["products"] / window["seconds"] / check_every) * check_every
    return min(max(check_every, wanted), window["products"] * GROWTH)


def run(device: torch.device, n: int, duration_s: float, window_s: float, check_every: int, seed: int,
        aside: Callable[[], dict] | None = None, aside_cover_s: float = ASIDE_COVER_S) -> dict[str, Any]:
    r = gemm.reference(n, seed, device)
    a, b, ref, out = r["a"], r["b"], r["ref"], r["out"]
    watch = Stopwatch(device)
    pinned = device.type == "cuda"
    hosts = [torch.empty(3, dtype=torch.int64, pin_memory=pinned) for _ in range(2)]
    # The first windows are short; each next one is sized from the last one's rate (the
    # comparisons included), growing at most GROWTH x so that a wrong first guess costs little.
    products = check_every

    windows: list[dict[str, Any]] = []
    first_mismatch = None
    began = time.time()
    end_at = began + duration_s
    pending: Window | None = None
    turn = 0
    rate = None  # products per second of the last finished window, its comparisons included
    busy_until = began  # when the products queued on the device should be done: a new window starts then
    aside_done: dict[str, Any] | None = None
    hidden_by: list[Window] = []  # the window the aside ran behind, then the one after it
    while pending is not None or time.time() < end_at:
        queued = None
        start = max(time.time(), busy_until)
        # behind the first window queued once a full one has given the rate (the first ones are a few products)
        covering = aside is not None and aside_done is None and bool(windows) and windows[-1]["seconds"] >= 0.5 * window_s
        if start < end_at:
            if covering:  # the window the aside runs behind: long enough to hide it
                products = max(products, round(aside_cover_s * rate / check_every) * check_every)
            if rate:  # the last window ends with the duration, not up to a window past it
                products = max(check_every, min(products, int((end_at - start) * rate) // check_every * check_every))
            queued = queue_window(a, b, ref, out, products, check_every, watch, hosts[turn % 2])
            turn += 1
            if len(hidden_by) == 1:
                hidden_by.append(queued)
        if covering and queued is not None:
            aside_done = _aside(aside, len(windows) + (pending is not None))
            hidden_by.append(queued)
        if pending is not None:
            window, first = finish_window(pending, watch, n)
            if first is not None and first_mismatch is None:
                first_mismatch = {"window": len(windows), "index": first, "row": first // n, "col": first % n}
            windows.append(window)
            products = next_products(window, window_s, check_every)
            rate = window["products"] / window["seconds"] if window["seconds"] > 0 else rate
            # the window queued now started as this one ended (on a CPU it ran as it was queued)
            busy_until = time.time() + (queued.products / rate if queued is not None and rate and watch.cuda else 0.0)
        pending = queued
    if aside_done is not None:  # the device's time between the two windows: the aside's kernels, and idle if any
        aside_done["gap_s"] = watch.seconds(hidden_by[0].end, hidden_by[1].start) if len(hidden_by) == 2 else None
    return {
        "aside": aside_done,
        "n": n,
        "duration_s": duration_s,
        "window_s": window_s,
        "check_every": check_every,
        "began": began,
        "windows": windows,
        "math": {"checked": sum(w["checked"] for w in windows),
                 "mismatched_results": sum(w["mismatched_results"] for w in windows),
                 "mismatched_elements": sum(w["mismatched_elements"] for w in windows),
                 "first": first_mismatch, "reference_nonfinite": r["nonfinite"],
                 "reference_digest": gemm.digest(ref)},
    }


def _aside(aside: Callable[[], dict], window: int) -> dict[str, Any]:
    """The aside's outcome: what it returned, or its error (the load goes on either way), its seconds, and the
    index of the window it ran behind."""
    t0 = time.perf_counter()
    try:
        out: dict[str, Any] = {"result": aside(), "error": None}
    except Exception as exc:  # noqa: BLE001 - the load's figures do not depend on it; the record says it failed
        out = {"result": None, "error": f"{type(exc).__name__}: {str(exc).strip()[:500]}"}
    return {**out, "seconds": time.perf_counter() - t0, "window": window}
