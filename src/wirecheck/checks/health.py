"""Error-counter growth over the run (NVLink replay/recovery/CRC, PCIe replay)."""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.checks import check
from wirecheck.node.health import allowed_growth
from wirecheck.core.verdict import Verdict, no_problems, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Count, Qty, Source, spec


@dataclass(frozen=True)
class HealthLimits:
    """How much each error counter may grow over a run (DCGM's health-watch rules)."""

    WHAT = "error-counter growth limits"
    nvlink_replay: int = spec(Count(), "0")  # events, over the whole run
    nvlink_recovery: int = spec(Count(), "0")
    nvlink_crc_rate: float = spec(Qty('"100 /s"', "rate"))  # CRC flit + data errors per second, per link
    pcie_replay_rate: float = spec(Qty('"8 /min"', "rate"))  # replays per second, per GPU
    source: str = spec(Source())
    yaml_path: str


HEALTH = Rule("health", HealthLimits, '{nvlink_replay: 0, nvlink_recovery: 0, nvlink_crc_rate: "100 /s", '
              'pcie_replay_rate: "8 /min", source: ...}')


@check("counter_growth", limits=(HEALTH,))
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
