"""Error-counter growth over the run (NVLink replay/recovery/CRC, PCIe replay)."""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.node.health import allowed_growth
from wirecheck.core.verdict import Verdict, no_problems, skip


@check("counter_growth")
def counter_growth(thresholds, *, gpu: int, bus_id: str | None, seconds: float, deltas: list,
                   unreadable: list) -> Verdict:
    """No error counter grew past its allowance while the suite loaded the links.
    `deltas`: [{"counter", "kind", "grew_by"}] from wirecheck.node.health.counter_deltas."""
    what, where = "error-counter growth", f"GPU{gpu}"
    limits = thresholds.health
    if not deltas:
        return skip(what, where, f"no error counter readable ({', '.join(unreadable)})")
    bad = []
    for d in deltas:
        allowed = allowed_growth(d["kind"], seconds, limits)
        if d["grew_by"] > allowed:
            bad.append(f"{d['counter']} +{d['grew_by']} in {seconds:.0f} s (allowed {allowed:g})")
    return no_problems(what, where, bad, measured={d["counter"]: d["grew_by"] for d in deltas if d["grew_by"]},
                       intro=f"GPU{gpu} ({bus_id}): error counters grew during the run",
                       source=limits.source, yaml_path=limits.yaml_path)
