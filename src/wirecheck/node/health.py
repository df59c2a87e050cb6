"""Error counters over a run: what grew between two NVML readings.

Counters are never judged as absolutes (idle H200s show non-zero CRC-data counts, PCIe
replays accumulate since boot): only their growth while the suite loaded the links counts.
The deltas are plain data, so the check (wirecheck.checks.health) can judge a recorded run.
"""

from __future__ import annotations

from wirecheck.node.nvml import GpuHealth, is_supported

# Counter kinds and which thresholds.yaml `health:` limit applies to each.
REPLAY, RECOVERY, CRC, PCIE_REPLAY = "nvlink_replay", "nvlink_recovery", "nvlink_crc", "pcie_replay"


def _delta(before, after) -> int | None:
    if not (is_supported(before) and is_supported(after)):
        return None
    return after - before


def counter_deltas(before: GpuHealth, after: GpuHealth) -> tuple[list[dict], list[str]]:
    """([{"counter", "kind", "grew_by"}] for every readable counter, names of unreadable ones)."""
    found, unreadable = [], []
    links_before = {c.link: c for c in before.nvlink_counters}
    for now in after.nvlink_counters:
        then = links_before.get(now.link)
        if then is None:
            continue
        for name, kind in (("replay", REPLAY), ("recovery", RECOVERY)):
            d = _delta(getattr(then, name), getattr(now, name))
            if d is None:
                unreadable.append(f"NVLink {now.link} {name}")
            else:
                found.append({"counter": f"NVLink {now.link} {name}", "kind": kind, "grew_by": d})
        crc = [_delta(getattr(then, n), getattr(now, n)) for n in ("crc_flit", "crc_data")]
        if None in crc:
            unreadable.append(f"NVLink {now.link} CRC")
        else:
            found.append({"counter": f"NVLink {now.link} CRC", "kind": CRC, "grew_by": sum(crc)})
    d = _delta(before.pcie_replay_counter, after.pcie_replay_counter)
    if d is None:
        unreadable.append("PCIe replay")
    else:
        found.append({"counter": "PCIe replay", "kind": PCIE_REPLAY, "grew_by": d})
    return found, unreadable


def allowed_growth(kind: str, seconds: float, limits) -> float:
    """Events a counter of `kind` may grow by over `seconds` (DCGM's rules, from thresholds.yaml)."""
    return {
        REPLAY: lambda: limits.nvlink_replay,
        RECOVERY: lambda: limits.nvlink_recovery,
        CRC: lambda: limits.nvlink_crc_rate * seconds,
        PCIE_REPLAY: lambda: limits.pcie_replay_rate * seconds,
    }[kind]()
