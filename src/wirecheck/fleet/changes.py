"""A change across the fleet, said once: when most nodes' history or drift verdicts fail on the same figure
at once (a driver, a firmware, a BIOS setting or a power cap that moved every GPU of a model), the fleet
report names one change, not that many node failures to drain.

Each node judged its own figures against its own past (tests/test_history.py); a node that slows alone
fails there and stays a node failure. Where at least `fleet.min_nodes` nodes and more than half of those
that measured the figure failed it together, the failures are one finding: the figure, the GPU model,
how many nodes, their median loss against their own median, the driver and firmware they ran (from the
records' headers) and the runs before (where a record the history names can be read). The nodes' other
failures stay theirs. Pure data, from the judged nodes (wirecheck.fleet.judging).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from wirecheck.records.file import RecordFileError, read_run

OWN_PAST_CHECKS = ("history", "drift")
SHARE = 0.5  # more than half of the nodes that measured the figure


@dataclass
class FleetChange:
    key: str  # the figure's thresholds key: "gpu_health.floors.NVIDIA H200.gemm_bf16"
    figure: str
    nodes: list[str]
    measured_on: int  # nodes whose records hold the figure
    loss: float  # the median loss against their own past (a fraction)
    began: str | None  # the earliest run a drift verdict dates the fall from, or None
    versions: dict = field(default_factory=dict)  # what they ran: {"driver": {"580.1": 48}, ...}
    before: dict = field(default_factory=dict)  # what the run before ran, where its record could be read

    def describe(self) -> str:
        now = "; ".join(f"{k} {', '.join(sorted(v))}" for k, v in self.versions.items() if v)
        was = "; ".join(f"{k} {', '.join(sorted(v))}" for k, v in self.before.items() if v)
        changed = [k for k in self.versions if self.before.get(k) and set(self.before[k]) != set(self.versions[k])]
        what = (f"{' and '.join(changed)} changed ({was} before, {now} now)" if changed
                else f"running {now}" + (f" (the runs before: {was})" if was else "") if now else "")
        began = f", falling since {self.began}" if self.began else ""
        return (f"{self.figure} ({self.key}) fell on {len(self.nodes)} of {self.measured_on} nodes at once, "
                f"a median {self.loss * 100:.1f} % below their own history{began}"
                + (f"; {what}" if what else "")
                + ": a change across the fleet (a driver, firmware, BIOS setting or power cap), not "
                  f"{len(self.nodes)} node failures; find what changed on the fleet, then either undo it or let the "
                  "nodes' histories start again from it (their next runs make the new median)")

    def as_dict(self) -> dict:
        return {"key": self.key, "figure": self.figure, "nodes": self.nodes, "measured_on": self.measured_on,
                "loss": self.loss, "began": self.began, "versions": self.versions, "before": self.before,
                "message": self.describe()}


def _loss(v) -> float | None:
    d = v.details or {}
    if v.check == "drift":
        return d.get("loss")
    median, measured = d.get("median"), v.measured
    if isinstance(median, (int, float)) and isinstance(measured, (int, float)) and median > 0:
        return 1 - measured / median
    return None


def _measures(node, key: str) -> bool:
    """Whether a node's record holds the figure: a GPU figure where it has GPUs of that model measuring it
    (its record's GPU figures), any other figure wherever a record was judged."""
    parts = key.split(".")
    if parts[0] == "gpu_health" and len(parts) == 4:
        return any(g.model == parts[2] and g.key == parts[3] for g in node.gpu_figures)
    return node.judged


def absorb(nodes: list, changes: list[FleetChange]) -> None:
    """Take the failures a change explains out of its nodes' own failures (and their fail counts): the change is
    the fleet's finding, the nodes keep only what failed on them alone."""
    keys = {c.key: set(c.nodes) for c in changes}
    for n in nodes:
        mine = [v for v in n.own_failed if v.check in OWN_PAST_CHECKS and n.node in keys.get((v.inputs or {}).get("key"), ())]
        if mine:
            n.own_failed = [v for v in n.own_failed if v not in mine]
            n.counts["fail"] = max(0, n.counts.get("fail", 0) - len(mine))
            n.in_changes = mine


def _versions_before(failures: list) -> dict:
    """The driver and CUDA of the run just before, from the record the first readable history names."""
    for _, v in failures:
        history = (v.inputs or {}).get("history") or []
        if not history:
            continue
        path = history[-1].get("record")
        try:
            header = read_run(path).run if path else None
        except (RecordFileError, OSError, ValueError):
            continue
        if header:
            versions = header.get("versions") or {}
            return {k: {str(versions[k])} for k in ("driver", "cuda") if versions.get(k)}
    return {}


def fleet_changes(nodes: list, min_nodes: int) -> list[FleetChange]:
    """The figures more than half of the nodes that measured them failed against their own past together
    (and at least `min_nodes`). `nodes`: wirecheck.fleet.judging.NodeResult, judged."""
    failed: dict[str, list] = {}
    for n in nodes:
        for v in n.own_failed:
            if v.check in OWN_PAST_CHECKS and (v.inputs or {}).get("key"):
                failed.setdefault(v.inputs["key"], []).append((n, v))
    out = []
    for key, failures in sorted(failed.items()):
        names = sorted({n.node for n, _ in failures})
        on = len({n.node for n in nodes if _measures(n, key)} | set(names))
        if len(names) < max(min_nodes, 2) or len(names) <= SHARE * on:
            continue
        losses = [x for _, v in failures if (x := _loss(v)) is not None]
        began = sorted(d for _, v in failures if (d := (v.details or {}).get("began")))
        versions: dict[str, dict] = {}
        for n, _ in failures:
            for k, value in (n.versions or {}).items():
                versions.setdefault(k, {})
                versions[k][str(value)] = versions[k].get(str(value), 0) + 1
        out.append(FleetChange(key, str(failures[0][1].inputs.get("figure")), names, on,
                               statistics.median(losses) if losses else 0.0, began[0] if began else None,
                               {k: v for k, v in versions.items()}, _versions_before(failures)))
    return out
