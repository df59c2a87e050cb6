"""The 2x H200 device run of 2026-11-30 (fixtures/reference/.../run5-suite, record schema 1) rewritten
in today's record schema, so the report's hardware sections are tested on real readings: NVLink
against the host path, peak memory, the per-pair figures, error-counter growth.

Only the layout changes (schema-1 `record` lines become `measurement` and `verdict` lines, limits
in bytes/s become GB/s); every number is the device's. The header says where it came from.
"""

from __future__ import annotations

import json
from pathlib import Path

from e2e import PROJECT

RUN5 = PROJECT / "fixtures/reference/h200-sxm-2/wirecheck-2026-11-30/run5-suite/suite.jsonl"

# schema-1 record kind -> today's check name (the report reads check names)
CHECKS = {"bandwidth": "busbw", "correctness": "collective_correct", "memory": "model_state", "throughput": "throughput",
          "wire_check": "wire_check", "slow_wire": "slow_wire", "training": "steps_complete", "topology": "topology",
          "inventory": "inventory"}
KINDS = {"CRC": "nvlink_crc", "replay": "nvlink_replay", "recovery": "nvlink_recovery"}


def _placement(pid: str) -> dict:
    klass, _, rest = pid.partition("-")
    gpus = [int(g) for g in rest.rsplit("-", 1)[-1].split(".")]
    return {"id": pid, "class": klass, "gpus": gpus}


def _limit_gb(limit: dict, unit: str | None) -> dict:
    out = {k: v for k, v in limit.items() if k in ("min", "max", "expected")}
    if unit == "GB/s":
        out = {k: (v / 1e9 if isinstance(v, (int, float)) and k in ("min", "max") else v) for k, v in out.items()}
    return out


def convert(dst: Path, src: Path = RUN5) -> Path:
    lines = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    head, body = lines[0], lines[1:]
    placements = {}
    out = []
    for r in body:
        if r.get("placement"):
            placements.setdefault(r["placement"], _placement(r["placement"]))
        if r.get("test") == "(measurement)":
            details = dict(r.get("details") or {})
            if r["kind"] == "collective":
                details.setdefault("placement_class", r["placement"].split("-", 1)[0])
            out.append({"type": "measurement", "kind": r["kind"], "placement": r["placement"], "what": r["what"],
                        "value": r["value"], "unit": r["unit"], "details": details, "time": r["time"]})
            continue
        limit = r.get("limit") or {}
        verdict = {"type": "verdict", "test": r["test"], "time": r["time"], "check": CHECKS.get(r["kind"], r["kind"]),
                   "what": r["what"], "where": r["placement"], "outcome": r["verdict"], "message": r["what"],
                   "measured": r["value"], "unit": r["unit"], "limit": _limit_gb(limit, r["unit"]),
                   "source": limit.get("source"), "yaml_path": limit.get("yaml_path"), "inputs": {}, "details": {}}
        if r["kind"] == "bandwidth":
            op = r["what"].split()[0]
            verdict["inputs"] = {"placement": r["placement"], "op": op, "size_bytes": 2**30}
        elif r["kind"] == "health" and "counter" in r["what"]:
            gpu = int(r["what"].split()[0].removeprefix("GPU"))
            verdict.update(check="counter_growth", where=f"GPU{gpu}")
            verdict["inputs"] = {"gpu": gpu, "deltas": [
                {"counter": name, "kind": next((k for word, k in KINDS.items() if word in name), "pcie_replay"),
                 "grew_by": n} for name, n in (r["value"] or {}).items()]}
        out.append(verdict)
    header = {"type": "run", "schema": 2, "host": head["host"], "started": body[0]["time"],
              "simulated": False, "simulation_source": None, "unavailable": None, "profile": head.get("profile"),
              "thresholds": head.get("thresholds"), "versions": head["versions"], "env": head["env"],
              "fabric": head["fabric"],
              "gpus": [{"index": i, "name": n, "bus_id": None, "memory_bytes": 150754820096, "nvlinks_active": 18}
                       for i, n in enumerate(head["gpus"])],
              "groups": head["groups"], "matrix": [["X", "NV18"], ["NV18", "X"]],
              "placements": list(placements.values()),
              "converted_from": str(src.relative_to(PROJECT))}
    end = {"type": "end", "finished": body[-1]["time"], "status": "complete", "exit_status": 0, "simulated": False,
           "tests": {"passed": 105, "skipped": 6}, "verdicts": {}, "wall_s": 256.0}
    dst.write_text("".join(json.dumps(x) + "\n" for x in [header, *out, end]))
    return dst
