"""A parameter count as people write it: 7B, 350M, 1.5e9, 7240000000."""

from __future__ import annotations

import math

SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
MAX_PARAMS = 1e15  # beyond any model: a float no longer holds the count exactly


def parse_params(text: str) -> int:
    """The count `text` names; ValueError saying how to write it."""
    raw = str(text).strip().replace("_", "")
    scale = 1.0
    if raw and raw[-1].upper() in SUFFIXES:
        scale, raw = SUFFIXES[raw[-1].upper()], raw[:-1]
    try:
        value = float(raw) * scale
    except ValueError:
        raise ValueError(f"{text!r} is not a parameter count; write e.g. 7B, 350M or 7.24e9") from None
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{text!r} is not a parameter count of at least 1; write e.g. 7B, 350M or 7.24e9")
    if value > MAX_PARAMS:
        raise ValueError(f"{text!r} is beyond any model (at most 1e15 parameters); write e.g. 7B")
    return int(round(value))


def short(n_params: float) -> str:
    """7.24e9 -> '7.24B', 3.5e8 -> '350M'."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n_params >= scale:
            return f"{n_params / scale:.3g}{suffix}"
    return f"{n_params:.0f}"
