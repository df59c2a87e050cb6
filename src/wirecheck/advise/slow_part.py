"""What a slow part costs a synchronous data-parallel step on this node.

Every rank of a data-parallel step waits for the slowest one: a GPU that computes x below its peers
stretches the step's compute (and the strategy's overhead with it) by 1 / (1 - x) on every step; a
link that moves data x below its floor stretches every collective over it by the same factor, and
what the compute can no longer hide of it shows. The cost is the predicted step with the slow part
against the step without it, so a compute-bound DDP step pays about x for a GPU and little for a
link its overlap still hides ("GPU3 at -12 % costs every DDP step on this node about 14 %").

`slow_parts(verdicts)`: the failing verdicts of a record that name a part (a GPU, or a placement's
collective or copy bandwidth) and how far below it is:
below its peers' median (`details.below_median`) or below its floor (measured under `limit.min`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GPU, LINK = "gpu", "link"


@dataclass(frozen=True)
class SlowPart:
    where: str  # "GPU3", a placement id
    what: str  # the verdict's `what`
    deficit: float  # 0.12 = 12 % below
    against: str  # "its peers' median" or "its floor"
    kind: str  # GPU or LINK


def slow_parts(verdicts: list[dict]) -> list[SlowPart]:
    out = []
    for v in verdicts:
        if v.get("outcome") != "fail" or not v.get("where"):
            continue
        details, limit, measured = v.get("details") or {}, v.get("limit") or {}, v.get("measured")
        deficit, against = None, ""
        if isinstance(details.get("below_median"), (int, float)) and details["below_median"] > 0:
            deficit, against = float(details["below_median"]), "its peers' median"
        elif isinstance(measured, (int, float)) and isinstance(limit.get("min"), (int, float)) and 0 < measured < limit["min"]:
            deficit, against = 1 - measured / limit["min"], "its floor"
        if deficit is None or not 0 < deficit < 1:
            continue
        where = str(v["where"])
        check = str(v.get("check") or "")
        if where.upper().startswith("GPU"):
            kind = GPU
        elif "busbw" in check or "bandwidth" in check:  # a collective or a copy over a link
            kind = LINK
        else:  # a whole job's figure (throughput, memory): not one part of the node
            continue
        out.append(SlowPart(str(v["where"]), v.get("what") or v.get("check") or "", deficit, against, kind))
    return out


def step_cost(prediction, part: SlowPart) -> float:
    """The share a synchronous step grows by with `part` slow (0.14 = 14 % longer)."""
    stretch = 1 / (1 - part.deficit)
    if part.kind == GPU:
        slow = replace(prediction, compute_s=prediction.compute_s * stretch, overhead_s=prediction.overhead_s * stretch,
                       window_s=prediction.window_s * stretch)
    else:
        slow = replace(prediction, comm_s=prediction.comm_s * stretch, overlapped_s=prediction.overlapped_s * stretch)
    return slow.step_s / prediction.step_s - 1


def cost_line(part: SlowPart, strategy: str, prediction) -> str:
    return (f"{part.where} at -{part.deficit:.0%} ({part.what}, below {part.against}) costs every {strategy} step "
            f"on this node about {step_cost(prediction, part):.0%}")
