"""One collective's busbw against message size on one placement class and GPU count.

Between two recorded sizes busbw is interpolated linearly in log(size) and log(busbw) (a sweep's
sizes are geometric and busbw rises smoothly between them); outside the sweep the nearest end
holds (a bucket beyond the largest size runs at the largest size's busbw: the curve has flattened
there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Curve:
    op: str
    klass: str  # placement class
    n_gpus: int
    points: tuple[tuple[int, float], ...]  # (bytes, busbw bytes/s), ascending size
    source: str  # where the figures come from: a record's placement, or a profile's source

    def __post_init__(self):
        if not self.points or any(bw <= 0 for _, bw in self.points):
            raise ValueError(f"{self.op} on {self.klass}: a curve needs sizes with positive busbw")

    def busbw(self, size: float) -> float:
        pts = self.points
        if size <= pts[0][0]:
            return pts[0][1]
        if size >= pts[-1][0]:
            return pts[-1][1]
        for (a, ba), (b, bb) in zip(pts, pts[1:]):
            if a <= size <= b:
                t = (math.log(size) - math.log(a)) / (math.log(b) - math.log(a))
                return math.exp(math.log(ba) + t * (math.log(bb) - math.log(ba)))
        raise AssertionError("unreachable: sizes are ascending")


def curve_of(op: str, klass: str, n_gpus: int, samples, source: str) -> Curve:
    """A curve from (bytes, busbw) samples; repeated sizes (several runs) keep their median."""
    import statistics

    by_size: dict[int, list[float]] = {}
    for size, bw in samples:
        if bw and bw > 0:
            by_size.setdefault(int(size), []).append(float(bw))
    points = tuple((s, statistics.median(v)) for s, v in sorted(by_size.items()))
    return Curve(op, klass, n_gpus, points, source)
