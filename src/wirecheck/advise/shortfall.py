"""Where DDP's step falls behind the fastest strategy's: the recommendation's margin taken apart.

Both steps are the model's (advise/model.py): compute + overhead + exposed communication. Of the
difference, the compute part is the optimizer step a sharding strategy does not take (its forward and
backward are DDP's), the overhead part what each wrapper costs per byte of its collectives (fitted on
the node's, or the shipped 2x H200, NVLink runs), the rest what the wire leaves exposed. On an
NVSwitch or inside an NVL quad nearly all of the communication hides, so a sharding strategy that
runs ahead of DDP there does so by the first two, which no choice of GPUs changes: the output says
which, so that "FSDP, DDP 21 % slower" can be read against the article's "DDP when it fits".

`Shortfall` is the structure (the advice's `Choice` holds one); `line` renders it, once, for the
text and for the report page alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.vocab.strategies import OPTIMIZER, strategy as _strategy

TERMS = ("compute", "overhead", "exposed")  # the model's terms, in the order the line names them
LABEL = "where DDP's shortfall comes from"


@dataclass(frozen=True)
class Shortfall:
    strategy: str  # the faster strategy DDP is held against
    n_gpus: int
    ddp_step_s: float
    best_step_s: float
    ddp_overhead_s: float
    best_overhead_s: float
    parts: dict  # term -> DDP's seconds less the faster one's (TERMS; their sum is the difference of the steps)
    shards_optimizer: bool  # the faster one steps 1/N of the optimizer

    @property
    def ahead(self) -> list[str]:
        """The terms that put DDP behind, largest first."""
        return sorted((t for t in TERMS if self.parts[t] > 0), key=lambda t: -self.parts[t])

    @property
    def against(self) -> list[str]:
        """The terms where DDP is the faster, largest first: what the faster strategy pays and DDP does not."""
        return sorted((t for t in TERMS if self.parts[t] < 0), key=lambda t: self.parts[t])


def parts(ddp, best) -> dict[str, float]:
    """DDP's step less the best's, in seconds, by term (their sum is the difference of the steps)."""
    return {"compute": ddp.compute_s - best.compute_s,
            "overhead": max(0.0, ddp.overhead_s) - max(0.0, best.overhead_s),
            "exposed": ddp.exposed_s - best.exposed_s}


def of(ddp_option, best_option) -> Shortfall:
    d, b = ddp_option.prediction, best_option.prediction
    return Shortfall(best_option.strategy, d.n_gpus, d.step_s, b.step_s, max(0.0, d.overhead_s),
                     max(0.0, b.overhead_s), parts(d, b), OPTIMIZER in _strategy(best_option.strategy).shards)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.0f} ms"


def words(s: Shortfall) -> str:
    """'DDP's 301 ms step against fsdp's 237 ms: +36 ms compute (...), +31 ms overhead (...), -3 ms exposed ...'"""
    p = s.parts
    compute = (f"{ms(p['compute'])} compute (DDP steps the optimizer over every parameter, {s.strategy} over "
               f"1/{s.n_gpus})" if s.shards_optimizer else f"{ms(p['compute'])} compute")
    return (f"DDP's {s.ddp_step_s * 1e3:.0f} ms step against {s.strategy}'s {s.best_step_s * 1e3:.0f} ms: {compute}, "
            f"{ms(p['overhead'])} overhead ({s.ddp_overhead_s * 1e3:.0f} against {s.best_overhead_s * 1e3:.0f} ms, "
            f"per byte of each one's collectives), {ms(p['exposed'])} exposed communication")


def line(s: Shortfall) -> str:
    """The output's line, as the text and the report page both show it."""
    return f"{LABEL}: {words(s)}"
