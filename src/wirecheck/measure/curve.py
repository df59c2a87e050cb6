"""The size curve of a collective: which sizes a sweep measures, which timing path counts at each
size, and the two numbers read off the small-message end (latency and n½).

Plain data in, plain data out; no torch, no devices: the parent process, the record re-judging and
the nccl-tests cross-check all use it.

- A sweep is geometric, as nccl-tests' `-b FROM -e TO -f STEP`: FROM, FROM x STEP, ... up to TO.
- Path: on GPUs each size in the latency regime is timed twice, as eager calls and as the same calls
  replayed from a CUDA graph (no host launch cost per call). The faster counts; both are kept.
- Small-message latency: the median time per call over the measured sizes up to a bound. The median
  of several sizes, not one point: one noisy size neither passes nor fails a node on its own.
- n½ (Hockney's half-performance length): the size at which busbw first reaches a fraction (half)
  of the curve's peak busbw, interpolated between the two measured sizes around it (linear in
  log2 size), so the answer does not jump with the sweep's step.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Protocol, Sequence

EAGER = "eager"
GRAPH = "graph"
SWEEP_NAMES = ("quick", "full")  # quick: the default run; full: the whole curve


@dataclass(frozen=True)
class SweepSpec:
    """A geometric size sweep, nccl-tests' -b/-e/-f."""

    start: int  # bytes
    stop: int  # bytes, on the grid: start x step^k
    step: int  # whole factor >= 2

    @property
    def sizes(self) -> tuple[int, ...]:
        return geometric_sizes(self.start, self.stop, self.step)

    def nccl_tests_args(self) -> list[str]:
        return ["-b", str(self.start), "-e", str(self.stop), "-f", str(self.step)]


def geometric_sizes(start: int, stop: int, step: int) -> tuple[int, ...]:
    """start, start*step, ... while <= stop (nccl-tests' sweep with -f)."""
    if start < 1 or step < 2 or stop < start:
        raise ValueError(f"sweep {start}..{stop} x{step}: need 1 <= start <= stop and a whole step >= 2")
    out, size = [], start
    while size <= stop:
        out.append(size)
        size *= step
    return tuple(out)


def parse_sweep(text: str) -> SweepSpec:
    """"8B:1GiB:2" (FROM:TO:STEP, units as in thresholds.yaml, the space before a unit optional)."""
    from wirecheck.core.quantity import QuantityError, parse_quantity

    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"sweep {text!r}: write FROM:TO:STEP, e.g. 8B:1GiB:2")
    try:
        start, stop = (int(parse_quantity(p, "size", where=f"sweep {text!r}")) for p in parts[:2])
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    step_text = parts[2].strip().removesuffix("x").strip()
    if not step_text.isdigit():
        raise ValueError(f"sweep {text!r}: STEP {parts[2]!r} must be a whole factor like 2 (nccl-tests -f)")
    spec = SweepSpec(start, stop, int(step_text))
    spec.sizes  # noqa: B018 - validates the numbers
    if spec.sizes[-1] != stop:
        raise ValueError(f"sweep {text!r}: TO is not FROM x STEP^k; the sweep would stop at {spec.sizes[-1]} B")
    return spec


def choose_path(eager_s: float, graph_s: float | None) -> tuple[str, float]:
    """(path, seconds per call): the graph replay when it was measured and is faster, else eager."""
    if graph_s is not None and math.isfinite(graph_s) and 0 < graph_s < eager_s:
        return GRAPH, graph_s
    return EAGER, eager_s


class Point(Protocol):
    """One size of a measured curve (collectives.SizeResult has these)."""

    bytes: int
    time_s: float
    busbw: float


@dataclass(frozen=True)
class Latency:
    """Small-message latency: the median time per call over the sizes up to `up_to`."""

    time_s: float
    up_to: int
    sizes: tuple[int, ...]
    times_s: tuple[float, ...]
    paths: tuple[str, ...]  # per size, the path that counted ("" where unknown)

    def describe(self) -> str:
        from wirecheck.core.quantity import format_bytes

        paths = sorted(set(p for p in self.paths if p))
        return (f"median of {len(self.sizes)} size(s) from {format_bytes(self.sizes[0])} to {format_bytes(self.sizes[-1])}"
                + (f", {'/'.join(paths)} path" if paths else ""))


def small_message_latency(points: Sequence[Point], up_to: int) -> Latency | None:
    """The median time per call over the points with bytes <= up_to; None when there are none."""
    small = sorted((p for p in points if p.bytes <= up_to), key=lambda p: p.bytes)
    if not small:
        return None
    times = tuple(p.time_s for p in small)
    return Latency(
        time_s=statistics.median(times),
        up_to=up_to,
        sizes=tuple(p.bytes for p in small),
        times_s=times,
        paths=tuple(getattr(p, "path", "") or "" for p in small),
    )


@dataclass(frozen=True)
class HalfPeak:
    """n½: where busbw first reaches `fraction` x the peak busbw of the curve."""

    size: float  # bytes, interpolated; the smallest size when the first point already reaches it
    first_size: int  # the first measured size at or above the target
    below_size: int | None  # the measured size just before it (None: the first point reached it)
    fraction: float
    target_busbw: float  # bytes/s
    peak_busbw: float  # bytes/s
    peak_size: int
    sweep_max: int  # n½ is relative to the peak of this sweep: a longer sweep may find a higher peak

    @property
    def at_or_below_first_size(self) -> bool:
        return self.below_size is None


def half_peak_size(points: Sequence[Point], fraction: float = 0.5) -> HalfPeak | None:
    """n½ of a measured curve; None for an empty curve or one with no bandwidth at all."""
    if not 0 < fraction <= 1:
        raise ValueError(f"n½ fraction {fraction} must be in (0, 1]")
    curve = sorted(points, key=lambda p: p.bytes)
    if not curve:
        return None
    peak = max(curve, key=lambda p: p.busbw)
    if not peak.busbw > 0:
        return None
    target = fraction * peak.busbw
    i = next(k for k, p in enumerate(curve) if p.busbw >= target)
    hit = curve[i]
    if i == 0:
        size = float(hit.bytes)
        below = None
    else:
        prev = curve[i - 1]
        t = (target - prev.busbw) / (hit.busbw - prev.busbw)  # hit.busbw >= target > prev.busbw
        lo, hi = math.log2(prev.bytes), math.log2(hit.bytes)
        size = 2.0 ** (lo + t * (hi - lo))
        below = prev.bytes
    return HalfPeak(
        size=size, first_size=hit.bytes, below_size=below, fraction=fraction, target_busbw=target,
        peak_busbw=peak.busbw, peak_size=peak.bytes, sweep_max=curve[-1].bytes,
    )
