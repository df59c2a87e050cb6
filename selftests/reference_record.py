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


def with_evidence(dst: Path) -> Path:
    """The device record plus NCCL's path (the composed logs of selftests/data/nccl) and copy figures
    as the 2x H200 machine gave them (shared/research: 52.5-53.6 / 55.2-55.3 / 392.6-393.4 GB/s),
    each with the verdict its check gives: the report's evidence sections on plausible data."""
    from wirecheck import checks
    from wirecheck.nccl import log as nccl_log
    from wirecheck.thresholds.file import load_thresholds

    th = load_thresholds(PROJECT / "thresholds.yaml")
    convert(dst)
    objs = [json.loads(line) for line in dst.read_text().splitlines()]
    end = objs.pop()
    data = Path(__file__).parent / "data" / "nccl"
    for pid, forced in (("nvswitch-2gpu-0.1", False), ("forced_pcie-2gpu-0.1", True)):
        s = nccl_log.summarize(p.read_text() for p in sorted(data.glob(f"composed-{pid}.rank*.log")))
        objs.append({"type": "measurement", "kind": "nccl_path", "placement": pid, "what": "NCCL path", "value": None,
                     "unit": None, "details": {**s, "error": None, "gpus": [0, 1], "log_files": [f"{pid}/nccl.1.log"],
                                               "env": {"NCCL_P2P_DISABLE": "1"} if forced else {}}, "time": end["finished"]})
        v = checks.nccl_path.nccl_path(th, placement=pid, gpus=[0, 1], nv={"0-1": 18}, p2p_disabled=forced,
                                       evidence={k: s[k] for k in ("connections", "path_types", "info_lines")},
                                       simulated=False)
        objs.append({"type": "verdict", "test": f"tests/test_nccl_path.py::test_nccl_path[{pid}]", "time": end["finished"],
                     **v.as_record()})
    link = {"gen": 5, "width": 16, "gen_max": 5, "width_max": 16}
    copies = {"size": 2**30, "warmup_iters": 2, "iters": 10, "torch": "2.11.0", "error": None,
              "host": [{"gpu": g, "h2d_bytes_per_s": h2d, "d2h_bytes_per_s": d2h,
                        "pcie": {"link": link, "under_load": True, "error": None}}
                       for g, h2d, d2h in ((0, 53.6e9, 55.3e9), (1, 52.5e9, 55.2e9))],
              "peer": [{"src": 0, "dst": 1, "bytes_per_s": 392.6e9, "peer_access": True},
                       {"src": 1, "dst": 0, "bytes_per_s": 393.4e9, "peer_access": True}]}
    objs.append({"type": "measurement", "kind": "copy_bandwidth", "placement": None, "what": "copy bandwidth",
                 "value": None, "unit": None, "details": copies, "time": end["finished"]})
    for h in copies["host"]:
        pcie = {**link, "under_load": True, "error": None}
        for direction in ("h2d", "d2h"):
            v = checks.copy_bandwidth.host_copy(th, gpu=h["gpu"], direction=direction, fabric="nvswitch",
                                                bytes_per_s=h[f"{direction}_bytes_per_s"], pcie=pcie, simulated=False)
            objs.append({"type": "verdict", "test": f"tests/test_copy_bandwidth.py::test_host_copy[gpu{h['gpu']}-{direction}]",
                         "time": end["finished"], **v.as_record()})
    v = checks.copy_bandwidth.peer_copy(th, pair="pair-0.1", fabric="nvswitch", nv=18, link_speed_bytes_per_s=26.562e9,
                                        directions=copies["peer"], simulated=False)
    objs.append({"type": "verdict", "test": "tests/test_copy_bandwidth.py::test_peer_copy[pair-0.1]",
                 "time": end["finished"], **v.as_record()})
    objs.append(end)
    dst.write_text("".join(json.dumps(x) + "\n" for x in objs))
    return dst
