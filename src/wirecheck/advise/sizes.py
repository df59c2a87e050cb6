"""A parameter count as people read it: 7.24e9 -> '7.24B' (`wirecheck memory`'s parameter_count reads
what people write)."""

from __future__ import annotations


def short(n_params: float) -> str:
    """7.24e9 -> '7.24B', 3.5e8 -> '350M'."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n_params >= scale:
            return f"{n_params / scale:.3g}{suffix}"
    return f"{n_params:.0f}"
