"""Where a strategy's set-up time goes: cProfile around the wrapping, the top functions kept.

DeepSpeed's set-up took 8.9-14.3 s per strategy on 2x H200 (against 3.6 s for FSDP), and it
varied with the host: a fifth of the whole suite's wall time. The device probe asks for this
profile to find which calls cost it; the suite never does (profiling slows what it measures).
"""

from __future__ import annotations

import cProfile
import pstats


class SetupProfile:
    """`with SetupProfile(n) as p: ...` then p.top: {"cumulative": [...], "own": [...]}, the n
    functions with the most cumulative seconds and the n with the most seconds of their own,
    each {"function", "calls", "cumulative_s", "own_s"}; n = 0 profiles nothing. Both views:
    the cumulative one is led by imports and wrappers, the own one names the hot spot."""

    def __init__(self, top_n: int):
        self.top_n = top_n
        self.top: dict[str, list[dict]] = {}
        self._profiler = cProfile.Profile() if top_n > 0 else None

    def __enter__(self) -> "SetupProfile":
        if self._profiler is not None:
            self._profiler.enable()
        return self

    def __exit__(self, *exc) -> None:
        if self._profiler is None:
            return
        self._profiler.disable()
        stats = pstats.Stats(self._profiler).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
        rows = [
            {"function": f"{_short(file)}:{line}({name})", "calls": nc, "cumulative_s": ct, "own_s": tt}
            for (file, line, name), (_cc, nc, tt, ct, _callers) in stats.items()
        ]
        self.top = {
            "cumulative": sorted(rows, key=lambda r: r["cumulative_s"], reverse=True)[: self.top_n],
            "own": sorted(rows, key=lambda r: r["own_s"], reverse=True)[: self.top_n],
        }


def _short(path: str) -> str:
    """site-packages/deepspeed/runtime/engine.py -> deepspeed/runtime/engine.py"""
    for marker in ("site-packages/", "dist-packages/", "/src/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
