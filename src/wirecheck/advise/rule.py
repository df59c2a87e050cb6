"""Where the node's figures part from the article's rule, "DDP when the model fits", and why, in one line.

The article measured DDP and FSDP even on a fast wire and concluded: DDP if it fits (simpler), FSDP if it
does not. advise recommends DDP when it fits and is within the model's error of the fastest
(advice.Advice.choice); when DDP fits and still falls beyond that error, the recommendation departs from the
article's rule, and the operator is told by what (the terms of DDP's shortfall that put it behind, largest
first, against what the faster strategy pays that DDP does not: shortfall.py) and what to do about it (take the
faster strategy, or the micro-batches above the asked one at which DDP is within the error again: forward and
backward grow with the micro-batch, the optimizer step and the overhead do not). The model is not bent toward
the article: the line says where and why they part.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.advise.shortfall import Shortfall

DDP = "ddp"
LABEL = "against the article's rule (DDP when it fits)"


@dataclass(frozen=True)
class Departure:
    shortfall: Shortfall  # DDP against the recommended strategy
    micro_batch: int  # the asked one
    ddp_at: tuple[int, ...]  # the swept micro-batches above the asked one at which DDP is the advice
    swept: tuple[int, ...]  # the swept micro-batches above the asked one


def departure(choice, micro_batch: int, sweep) -> Departure | None:
    """`choice`: advice.Choice of the asked micro-batch; `sweep`: (micro-batch, Choice or None) of the others.
    None where the advice keeps the rule: DDP recommended, or DDP does not fit (no shortfall weighed)."""
    if choice is None or choice.best.strategy == DDP or choice.shortfall is None:
        return None
    above = [(mb, c) for mb, c in sweep if mb > micro_batch]
    return Departure(choice.shortfall, micro_batch,
                     tuple(mb for mb, c in above if c is not None and c.best.strategy == DDP),
                     tuple(mb for mb, _ in above))


def _ms(seconds: float) -> str:
    return f"{abs(seconds) * 1e3:.0f} ms"


def _behind(s: Shortfall, term: str) -> str:
    """A term that puts DDP behind, as what DDP does (the line puts "DDP" before the first)."""
    x = s.parts[term]
    if term == "compute":
        return (f"steps the optimizer over every parameter on each GPU, {s.strategy} over 1/{s.n_gpus} of them "
                f"(+{_ms(x)} a step)" if s.shards_optimizer else f"computes longer (+{_ms(x)})")
    if term == "overhead":
        return f"pays more overhead (+{_ms(x)}: {s.ddp_overhead_s * 1e3:.0f} against {s.best_overhead_s * 1e3:.0f} ms)"
    return f"leaves more communication exposed (+{_ms(x)})"


def _ahead(s: Shortfall, term: str) -> str:
    """A term where DDP is the faster, as what the other strategy pays."""
    what = {"compute": "longer compute", "overhead": "overhead", "exposed": "extra exposed communication"}[term]
    return f"{s.strategy}'s {what} ({_ms(s.parts[term])})"


def _visible(s: Shortfall, terms) -> list[str]:
    return [t for t in terms if round(abs(s.parts[t]) * 1e3) >= 1]


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def line(d: Departure) -> str:
    """'against the article's rule (DDP when it fits): DDP steps the optimizer ... (+36 ms a step) and pays more
    overhead (+30 ms: 40 against 10 ms); at micro-batch 2 that outweighs fsdp's extra exposed communication (2 ms):
    take fsdp, or DDP at micro-batch 4 and 8, where it is within the error'"""
    s = d.shortfall
    behind = _visible(s, s.ahead) or s.ahead
    against = _visible(s, s.against)
    weighed = (f"outweighs {_join([_ahead(s, t) for t in against])}" if against
               else f"is not offset by anything {s.strategy} pays more")
    if d.ddp_at:
        then = (f"take {s.strategy}, or DDP at micro-batch {_join([str(mb) for mb in d.ddp_at])}, "
                "where it is within the error")
    elif d.swept:
        then = f"take {s.strategy} (DDP stays beyond the error at micro-batch {_join([str(mb) for mb in d.swept])})"
    else:
        then = f"take {s.strategy}"
    return f"{LABEL}: DDP {_join([_behind(s, t) for t in behind])}; at micro-batch {d.micro_batch} that {weighed}: {then}"
