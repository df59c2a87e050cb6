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
training/single_gpu.py `prepare`), done once in the load's shadow: in a thread of its own, started once a
full window has run (or half the load, where a busy host never sizes one that long), on a CUDA stream of its own, while this thread keeps the device fed. A window queued
ahead cannot hide it: the driver blocks a launch once about a thousand are pending (0.46 s of this load on
a 1x H200 node), so host work done between two windows left the device idle for all but 0.46 s of it
(fixtures/reference/h200-1/aside-2026-12-05). While it runs, Python's switch interval is ASIDE_SWITCH_S, so
this thread gets the interpreter back within that of each launch returning. Its kernels share the device
with the windows it overlaps (one block of the training's model: milliseconds); its seconds and those
windows are in the result."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from wirecheck.gpu import gemm
from wirecheck.gpu.stopwatch import Stopwatch

GROWTH = 8
ASIDE_SWITCH_S = 0.0002  # Python's switch interval while the aside runs (its default is 5 ms: a GEMM's 1.7 ms x 3)
ASIDE_WAIT_S = 120.0  # how long the load waits for an aside still running at its end (one took 1.9-3.6 s)


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
        aside: Callable[[], dict] | None = None) -> dict[str, Any]:
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
    beside: Aside | None = None
    try:
        while pending is not None or time.time() < end_at:
            # once a full window has run (the first ones are a few products each), or half the load has: a short
            # load on a busy host may never size a window that long, and its aside would never run
            if aside is not None and beside is None and windows and (
                    windows[-1]["seconds"] >= 0.5 * window_s or time.time() - began >= 0.5 * duration_s):
                beside = Aside(aside, device)
            queued = None
            start = max(time.time(), busy_until)
            if start < end_at:
                if rate:  # the last window ends with the duration, not up to a window past it
                    products = max(check_every, min(products, int((end_at - start) * rate) // check_every * check_every))
                queued = queue_window(a, b, ref, out, products, check_every, watch, hosts[turn % 2])
                turn += 1
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
    finally:
        aside_done = beside.join(windows) if beside is not None else None
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


class Aside:
    """The aside in a thread of its own, on a CUDA stream of its own (on a GPU), with Python's switch interval at
    ASIDE_SWITCH_S until it ends."""

    def __init__(self, fn: Callable[[], dict], device: torch.device):
        self.fn, self.device = fn, device
        self.out: dict[str, Any] = {}
        self.ended = None
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(ASIDE_SWITCH_S)
        self.began = time.time()
        self.thread = threading.Thread(target=self._run, name="wirecheck-aside", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            if self.device.type == "cuda":
                with torch.cuda.stream(torch.cuda.Stream(self.device)):
                    result = self.fn()
            else:
                result = self.fn()
            self.out = {"result": result, "error": None}
        except Exception as exc:  # noqa: BLE001 - the load's figures do not depend on it; the record says it failed
            self.out = {"result": None, "error": f"{type(exc).__name__}: {str(exc).strip()[:500]}"}
        finally:
            self.out["seconds"] = time.perf_counter() - t0
            self.ended = time.time()
            sys.setswitchinterval(self.interval)

    def join(self, windows: list[dict[str, Any]]) -> dict[str, Any]:
        """Its outcome once it has ended (the load waits for it, at most ASIDE_WAIT_S: its kernels and memory are
        the load's to release): what it returned or its error, its seconds, and the windows it overlapped (by
        wall clock). One still running then is left to itself and said so: the load's figures stand, and the
        training that comes next does its own preparation."""
        wait_s = ASIDE_WAIT_S
        self.thread.join(wait_s)
        if self.thread.is_alive():
            sys.setswitchinterval(self.interval)
            return {"result": None, "error": f"still running {wait_s:.0f} s after the load ended; left to itself",
                    "seconds": time.time() - self.began, "windows": None}
        during = [i for i, w in enumerate(windows) if w["t1"] > self.began and w["t0"] < self.ended]
        return {**self.out, "windows": [during[0], during[-1]] if during else None}
