"""Error-counter growth over the run (NVLink replay/recovery/CRC, PCIe replay)."""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.node.health import allowed_growth
from wirecheck.core.verdict import Verdict, no_problems, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Count, Qty, Source, spec

COUNTER_GROWTH = Words(
    what="error-counter growth",
    means="NVLink or PCIe error counters grew during the run: a link is flaky even if bandwidth looked fine",
    todo="`nvidia-smi nvlink -e` / `nvidia-smi -q -d PCIE` on that GPU; reseat, then replace what keeps counting",
    say={"unreadable": "no error counter readable ({counters})",
         "grew": "{counter} +{grew_by} in {seconds:.0f} s (allowed {allowed:g})"})


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


@check("counter_growth", words=COUNTER_GROWTH, limits=(HEALTH,))
def counter_growth(thresholds, *, gpu: int, bus_id: str | None, seconds: float, deltas: list,
                   unreadable: list) -> Verdict:
    """No error counter grew past its allowance while the suite loaded the links.
    `deltas`: [{"counter", "kind", "grew_by"}] from wirecheck.node.health.counter_deltas."""
    what, where = COUNTER_GROWTH.judged(), f"GPU{gpu}"
    limits = thresholds.health
    if not deltas:
        return skip(what, where, COUNTER_GROWTH.said("unreadable", counters=", ".join(unreadable)))
    bad = []
    for d in deltas:
        allowed = allowed_growth(d["kind"], seconds, limits)
        if d["grew_by"] > allowed:
            bad.append(COUNTER_GROWTH.said("grew", counter=d["counter"], grew_by=d["grew_by"], seconds=seconds,
                                           allowed=allowed))
    return no_problems(what, where, bad, measured={d["counter"]: d["grew_by"] for d in deltas if d["grew_by"]},
                       place=f"GPU{gpu} ({bus_id})" if bus_id else None, source=limits.source,
                       yaml_path=limits.yaml_path)
