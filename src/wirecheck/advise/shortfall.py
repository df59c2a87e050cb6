"""Where DDP's step falls behind the fastest strategy's: the recommendation's margin taken apart.

Both steps are the model's (advise/model.py): compute + overhead + exposed communication. Of the
difference, the compute part is the optimizer step a sharding strategy does not take (its forward and
backward are DDP's), the overhead part what each wrapper costs per byte of its collectives (fitted on
the node's, or the shipped 2x H200, NVLink runs), the rest what the wire leaves exposed. On an
NVSwitch or inside an NVL quad nearly all of the communication hides, so a sharding strategy that
runs ahead of DDP there does so by the first two, which no choice of GPUs changes: the output says
which, so that "FSDP, DDP 21 % slower" can be read against the article's "DDP when it fits".
"""

from __future__ import annotations

from wirecheck.vocab.strategies import OPTIMIZER, strategy as _strategy


def parts(ddp, best) -> dict[str, float]:
    """DDP's step less the best's, in seconds, by term (their sum is the difference of the steps)."""
    return {"compute": ddp.compute_s - best.compute_s,
            "overhead": max(0.0, ddp.overhead_s) - max(0.0, best.overhead_s),
            "exposed": ddp.exposed_s - best.exposed_s}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.0f} ms"


def words(ddp_option, best_option) -> str:
    """'DDP's 301 ms step against fsdp's 237 ms: +36 ms compute (...), +31 ms overhead (...), -3 ms exposed ...'"""
    d, b = ddp_option.prediction, best_option.prediction
    name = best_option.strategy
    p = parts(d, b)
    shards = OPTIMIZER in _strategy(name).shards
    n = d.n_gpus
    compute = (f"{_ms(p['compute'])} compute (DDP steps the optimizer over every parameter, {name} over 1/{n})"
               if shards else f"{_ms(p['compute'])} compute")
    return (f"DDP's {d.step_s * 1e3:.0f} ms step against {name}'s {b.step_s * 1e3:.0f} ms: {compute}, "
            f"{_ms(p['overhead'])} overhead ({max(0.0, d.overhead_s) * 1e3:.0f} against {max(0.0, b.overhead_s) * 1e3:.0f} ms, "
            f"per byte of each one's collectives), {_ms(p['exposed'])} exposed communication")
