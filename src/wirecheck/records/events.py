"""A run's verdicts as health events that a cluster's own remediation acts on: NVIDIA NVSentinel's
`HealthEvent`s and gpud's component health states.

One event per failed or warned verdict, and one healthy event per check and component class that passed,
naming the GPUs it passed on and failed on nowhere in the run. Each has the component class (GPU, NVLINK,
PCIE, MEMORY, NIC, NODE: wirecheck.core.failure_codes), the entities (each GPU's index, UUID, serial and PCI
bus id), whether it is fatal, the stable failure code, the recommended action and the message; a failure's
metadata also holds what was measured, its unit, the limit and the NVLinks it names. A healthy event carries
the check name, class and GPU entities of an earlier failure's event, so NVSentinel, which clears a stored
event by agent, class, check name and entity, clears it when the check passes again.

The action follows the drain decision (wirecheck.cli.drain_hook's DECISIONS; without one, what the record
says: a failure drains, an uncorrectable memory fault replaces the GPU):
- drain: fatal, processed (EXECUTE_REMEDIATION), RUN_FIELDDIAG (gpud: HARDWARE_INSPECTION): take the node
  out and diagnose it before it serves again;
- replace: fatal, processed, CONTACT_SUPPORT (gpud: HARDWARE_INSPECTION): the GPU goes back to the vendor;
- flaky (failed, then passed its re-test) and guard_hold (the fleet guard held the drain): STORE_ONLY with
  NONE: kept and shown, never cordoning;
- a warning: not fatal, STORE_ONLY, NONE (gpud: Degraded, IGNORE_NO_ACTION_REQUIRED).
A run that says nothing about the node (unknown: a fault of the harness, a simulation, a busy node, a run
stopped without a failed check) yields no event at all, healthy or not.

NVSentinel's JSON is its proto's (NVIDIA/NVSentinel data-models/protobufs/health_event.proto, proto3's JSON
mapping: lowerCamelCase field names, enums by name, Timestamp as RFC 3339): `{"version": 1, "events": [...]}`,
a `HealthEvents` as `PlatformConnector.HealthEventOccurredV1` takes it. gpud's is its API's (leptonai/gpud
api/v1/types.go: `[{"component", "states": [HealthState]}]`, a GPUdComponentHealthStates).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from wirecheck.core import exit_codes
from wirecheck.core import failure_codes as fc
from wirecheck.records import drain_policy
from wirecheck.records.file import RunRecord
from wirecheck.vocab.placements import CLASS_NETWORK, CLASS_SINGLE, CLASSES, NVLINK_CLASSES

AGENT = "wirecheck"
HEALTHY, DRAIN, UNKNOWN, FLAKY, GUARD_HOLD, REPLACE = "healthy", "drain", "unknown", "flaky", "guard_hold", "replace"
DECISIONS = (HEALTHY, DRAIN, UNKNOWN, FLAKY, GUARD_HOLD, REPLACE)
FORMATS = ("nvsentinel", "gpud")

# NVSentinel's RecommendedAction and ProcessingStrategy (health_event.proto) by the drain decision.
ACTION = {DRAIN: "RUN_FIELDDIAG", REPLACE: "CONTACT_SUPPORT", FLAKY: "NONE", GUARD_HOLD: "NONE"}
STRATEGY = {DRAIN: "EXECUTE_REMEDIATION", REPLACE: "EXECUTE_REMEDIATION", FLAKY: "STORE_ONLY", GUARD_HOLD: "STORE_ONLY"}
# gpud's RepairActionType (api/v1/types.go) by the same.
REPAIR = {DRAIN: "HARDWARE_INSPECTION", REPLACE: "HARDWARE_INSPECTION", FLAKY: "IGNORE_NO_ACTION_REQUIRED",
          GUARD_HOLD: "IGNORE_NO_ACTION_REQUIRED"}


@dataclass
class Event:
    """One health event, before either format is written."""

    component: str  # failure_codes.COMPONENTS
    check: str
    healthy: bool
    fatal: bool
    message: str
    codes: list[str]
    action: str  # NVSentinel's RecommendedAction name
    strategy: str  # NVSentinel's ProcessingStrategy name
    repair: str  # gpud's RepairActionType
    health: str  # gpud's Healthy, Degraded, Unhealthy
    entities: list[tuple[str, str]]  # (entityType, entityValue)
    time: str  # RFC 3339, UTC
    metadata: dict = field(default_factory=dict)


def says_nothing(run: RunRecord) -> str | None:
    """Why a run says nothing about its node (a simulation, a fault of the harness, a bug of ours, a busy node),
    or None: whatever a decision says, such a run yields no event."""
    end = run.end or {}
    if run.simulated:
        return "a simulation: no GPU of the node was validated"
    if end.get("status") in ("fault", "busy") or end.get("exit_status") in (exit_codes.HARNESS_CRASH,
                                                                             exit_codes.HARNESS_FAULT, exit_codes.NODE_BUSY):
        return f"not a verdict on the node (end status {end.get('status')}, exit {end.get('exit_status')})"
    return None


def decision_of(run: RunRecord) -> str:
    """What the record alone says, where no drain hook decided: unknown for a run that says nothing about the
    node (says_nothing) or stopped without a failure, replace for an uncorrectable memory fault, drain for
    another failure, else healthy."""
    end = run.end or {}
    if says_nothing(run):
        return UNKNOWN
    failed = [v for v in run.verdicts if v.get("outcome") == "fail"]
    if failed:
        return REPLACE if drain_policy.hard_memory_failure(failed) else DRAIN
    return HEALTHY if end.get("status") == "complete" else UNKNOWN


def _rfc3339(text: str | None) -> str:
    try:
        when = datetime.fromisoformat(str(text))
    except (TypeError, ValueError):
        when = datetime.now(timezone.utc)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Node:
    """What a verdict's `where` and inputs say about its GPUs and wire, from the run's header."""

    def __init__(self, header: dict):
        self.gpus = {g.get("index"): g for g in header.get("gpus") or [] if isinstance(g, dict)}
        self.placements = {p.get("id"): p for p in header.get("placements") or [] if isinstance(p, dict)}

    def gpu_indices(self, v: dict) -> list[int]:
        details = v.get("details") if isinstance(v.get("details"), dict) else {}
        where = str(v.get("where") or "")
        if isinstance(details.get("gpus"), list) and details["gpus"]:
            return [g for g in details["gpus"] if isinstance(g, int)]
        if m := re.fullmatch(r"GPU(\d+)", where):
            return [int(m.group(1))]
        if where in self.placements:
            return [g for g in self.placements[where].get("gpus") or [] if isinstance(g, int)]
        tail = where.rsplit("-", 1)[-1]
        return [int(g) for g in tail.split(".")] if re.fullmatch(r"\d+(\.\d+)+", tail) else []

    def wire(self, v: dict) -> str | None:
        klass = (self.placements.get(v.get("where")) or {}).get("class") or str(v.get("where") or "").split("-")[0]
        if klass not in CLASSES:
            return None
        if klass == CLASS_NETWORK:
            return fc.NIC
        if klass == CLASS_SINGLE:
            return fc.GPU
        return fc.NVLINK if klass in NVLINK_CLASSES else fc.PCIE

    def entities(self, gpus: list[int]) -> list[tuple[str, str]]:
        """The GPUs' entities: index, UUID, serial, PCI bus id (a GPU's, so that a healthy event of the same GPUs
        matches them all)."""
        out: list[tuple[str, str]] = []
        for index in gpus:
            g = self.gpus.get(index, {})
            out.append(("GPU", str(index)))
            for kind, key in (("GPU_UUID", "uuid"), ("GPU_SERIAL", "serial"), ("PCI", "bus_id")):
                if g.get(key):
                    out.append((kind, str(g[key])))
        return list(dict.fromkeys(out))


def _component(v: dict, node: _Node) -> str:
    details = v.get("details") if isinstance(v.get("details"), dict) else {}
    if details.get("component") in fc.COMPONENTS:
        return details["component"]  # a check that knows better (DCGM's memory test: MEMORY)
    return fc.component_of(v.get("check"), node.wire(v))


def _codes(v: dict) -> list[str]:
    code = fc.code(v.get("check"), v.get("outcome"))
    details = v.get("details") if isinstance(v.get("details"), dict) else {}
    return [c for c in [code] + [f"DCGM_FR:{i}" for i in details.get("dcgm_error_ids") or []] if c]


def events(run: RunRecord, decision: str | None = None, record_name: str | None = None) -> tuple[list[Event], str]:
    """The run's health events, and the decision they follow (the drain hook's, else decision_of); none for an
    unknown decision."""
    decision = decision or decision_of(run)
    if decision not in DECISIONS:
        raise ValueError(f"decision {decision!r}; known: {', '.join(DECISIONS)}")
    if decision == UNKNOWN or says_nothing(run):
        return [], UNKNOWN
    node = _Node(run.run)
    meta = {"record": record_name or run.path.name, "decision": decision, "host": str(run.run.get("host") or ""),
            "run_started": str(run.run.get("started") or "")}
    unwell: list[Event] = []
    failed_on: dict[tuple[str, str], set] = {}  # (component, check) -> GPUs it failed or warned on (None: the node)
    passed: dict[tuple[str, str], list[tuple[dict, list[int]]]] = {}  # (component, check) -> (verdict, its GPUs)
    for v in run.verdicts:
        outcome = v.get("outcome")
        key = (_component(v, node), str(v.get("check") or "check"))
        gpus = node.gpu_indices(v)
        if outcome == "pass":
            passed.setdefault(key, []).append((v, gpus))
            continue
        if outcome not in ("fail", "warn"):
            continue
        failed_on.setdefault(key, set()).update(gpus or [None])
        failed = outcome == "fail"
        codes = _codes(v)
        said = DRAIN if failed and decision == HEALTHY else decision  # a failure never reads as healthy
        unwell.append(Event(
            component=key[0], check=key[1], healthy=False, fatal=failed and said in (DRAIN, REPLACE),
            message=str(v.get("message") or v.get("what") or ""), codes=codes,
            action=ACTION[said] if failed else "NONE", strategy=STRATEGY[said] if failed else "STORE_ONLY",
            repair=REPAIR[said] if failed else "IGNORE_NO_ACTION_REQUIRED",
            health="Unhealthy" if failed else "Degraded", entities=node.entities(gpus), time=_rfc3339(v.get("time")),
            metadata={**meta, "code": codes[0] if codes else "", "where": str(v.get("where") or "node"),
                      "test": str(v.get("test") or ""), **_figures(v)}))
    # Healthy first: a consumer that clears by check and GPU (NVSentinel matches agent, component class, check
    # name and entity) then reads this run's failures after them, whatever it cleared.
    return [*_healthy(passed, failed_on, node, meta), *unwell], decision


def _figures(v: dict) -> dict:
    """What a failed or warned verdict measured, against what, for automation that acts on the figure."""
    out = {}
    if v.get("measured") is not None:
        out["measured"] = v["measured"] if isinstance(v["measured"], (int, float, str)) else json.dumps(v["measured"])
    if v.get("unit"):
        out["unit"] = v["unit"]
    if isinstance(v.get("limit"), dict) and v["limit"]:
        out["limit"] = json.dumps(v["limit"], sort_keys=True)
    links = sorted({str(d["link"]) for d in (v.get("inputs") or {}).get("deltas") or []
                    if isinstance(d, dict) and d.get("link") is not None})
    if links:  # a link number names no GPU on its own: said here, not as an entity
        out["nvlinks"] = ",".join(links)
    return out


def _healthy(passed: dict, failed_on: dict, node: _Node, meta: dict) -> list[Event]:
    """One healthy event per check and component class, naming the GPUs it passed on and failed or warned on
    nowhere in the run: the same check name, class and entities as the event of an earlier failure, so it
    clears that one. A check that passed on the node (no GPU) names no entity; one that failed on the node
    has none."""
    out = []
    for (component, check), passes in passed.items():
        bad = failed_on.get((component, check), set())
        if None in bad:
            continue
        verdicts = [v for v, _ in passes]
        gpus = sorted({g for _, on in passes for g in on} - bad)
        node_level = any(not on for _, on in passes)
        if not gpus and not (node_level and not bad):
            continue
        where = ", ".join(f"GPU{g}" for g in gpus) or "the node"
        out.append(Event(
            component=component, check=check, healthy=True, fatal=False,
            message=f"{check} passed on {where} ({component}, {len(verdicts)} verdict(s))", codes=[],
            action="NONE", strategy="EXECUTE_REMEDIATION", repair="IGNORE_NO_ACTION_REQUIRED", health="Healthy",
            entities=node.entities(gpus), time=_rfc3339(max(str(v.get("time") or "") for v in verdicts)),
            metadata={**meta, "where": where}))
    return out


def nvsentinel(found: list[Event], node_name: str) -> dict:
    """A HealthEvents message in proto3's JSON mapping (health_event.proto)."""
    return {"version": 1, "events": [{
        "version": 1, "agent": AGENT, "componentClass": e.component, "checkName": e.check, "isFatal": e.fatal,
        "isHealthy": e.healthy, "message": e.message, "recommendedAction": e.action, "errorCode": list(e.codes),
        "entitiesImpacted": [{"entityType": t, "entityValue": value} for t, value in e.entities],
        "metadata": {k: str(v) for k, v in e.metadata.items()}, "generatedTimestamp": e.time, "nodeName": node_name,
        "processingStrategy": e.strategy} for e in found]}


def gpud(found: list[Event]) -> list[dict]:
    """GPUdComponentHealthStates (gpud api/v1/types.go): per component class its states."""
    by_component: dict[str, list[dict]] = {}
    for e in found:
        name = f"{AGENT}-{e.component.lower()}"
        state = {"time": e.time, "component": name, "name": e.check, "run_mode": "manual", "health": e.health,
                 "reason": e.message,
                 "extra_info": {"codes": ",".join(e.codes), "entities": ";".join(f"{t}={v}" for t, v in e.entities),
                                **{k: str(v) for k, v in e.metadata.items()}}}
        if not e.healthy:
            state["error"] = ", ".join(e.codes) or e.check
            state["suggested_actions"] = {"description": e.message, "repair_actions": [e.repair]}
        by_component.setdefault(name, []).append(state)
    return [{"component": name, "states": states} for name, states in sorted(by_component.items())]
