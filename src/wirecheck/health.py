"""Error counters over a run: what grew between two NVML readings, against the limits.

Counters are never judged as absolutes (idle H200s show non-zero CRC-data counts, PCIe
replays accumulate since boot): only their growth while the suite loaded the links counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.nvml import GpuHealth, is_supported


@dataclass(frozen=True)
class Growth:
    counter: str  # "NVLink 3 replay", "PCIe replay"
    grew_by: int
    allowed: float  # events over the run
    seconds: float

    @property
    def ok(self) -> bool:
        return self.grew_by <= self.allowed

    def __str__(self) -> str:
        return f"{self.counter} +{self.grew_by} in {self.seconds:.0f} s (allowed {self.allowed:g})"


def _delta(before, after) -> int | None:
    if not (is_supported(before) and is_supported(after)):
        return None
    return after - before


def counter_growth(before: GpuHealth, after: GpuHealth, seconds: float, limits) -> tuple[list[Growth], list[str]]:
    """(every counter that could be read with its growth and allowance, names of unreadable ones)."""
    found, unreadable = [], []
    links_before = {c.link: c for c in before.nvlink_counters}
    for now in after.nvlink_counters:
        then = links_before.get(now.link)
        if then is None:
            continue
        for name, allowed in (("replay", limits.nvlink_replay), ("recovery", limits.nvlink_recovery)):
            d = _delta(getattr(then, name), getattr(now, name))
            if d is None:
                unreadable.append(f"NVLink {now.link} {name}")
            else:
                found.append(Growth(f"NVLink {now.link} {name}", d, allowed, seconds))
        crc = [_delta(getattr(then, n), getattr(now, n)) for n in ("crc_flit", "crc_data")]
        if None in crc:
            unreadable.append(f"NVLink {now.link} CRC")
        else:
            found.append(Growth(f"NVLink {now.link} CRC", sum(crc), limits.nvlink_crc_rate * seconds, seconds))
    d = _delta(before.pcie_replay_counter, after.pcie_replay_counter)
    if d is None:
        unreadable.append("PCIe replay")
    else:
        found.append(Growth("PCIe replay", d, limits.pcie_replay_rate * seconds, seconds))
    return found, unreadable
