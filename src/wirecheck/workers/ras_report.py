"""NCCL RAS's answers as fields: its status (JSON from NCCL 2.28.7, text before and beside) and its
readiness diagnostics (`ncclras -D`, NCCL 2.31), read into plain data a record keeps.

The formats are NCCL's own (NVIDIA/nccl src/ras/client_support.cc: rasClientRunInit, rasClientRunComms,
rasDumpCommsToJSON; src/ras/diagnostics*.cc; docs/userguide/source/troubleshooting/ras.rst). What a
reading holds, whichever format it came in:
- `communicators`: per communicator its hash, size, ranks answered and missing, status (INIT, RUNNING,
  FINALIZE, ABORT, NOCOMM) and errors (OK, MISMATCH, ERROR, INCOMPLETE); from JSON also each rank's host,
  pid, CUDA and NVML device, init and async error and collective counts; from text the table's groups;
- `findings`: what is wrong, one dict each: `kind` (DEAD: a process RAS considers dead; UNRESPONSIVE: a
  process or rank RAS could not reach; MISMATCH: ranks differ in status or collective counts, a stuck
  rank; ERROR: a rank's init or async error; TIMEOUT: RAS's own gathering timed out), the communicator,
  rank, host, pid, GPU (CUDA and NVML) where RAS names them, and `detail`;
- `timeouts`, `collection_s`, `nccl_version`.
`lines(reading)` says it in a few lines for a failure's message; `summary(reading)` in one.

NCCL 2.28.7 to 2.28.9 write a missing rank's JSON without the comma after `nvml_dev` (fixed in 2.29.2:
client_support.cc jsonWriteMissingRank); that one defect is repaired before parsing, and said.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEAD, UNRESPONSIVE, MISMATCH, ERROR, TIMEOUT = "DEAD", "UNRESPONSIVE", "MISMATCH", "ERROR", "TIMEOUT"
KINDS = (DEAD, UNRESPONSIVE, MISMATCH, ERROR, TIMEOUT)
STATUSES = ("NOCOMM", "INIT", "RUNNING", "FINALIZE", "ABORT")
# ncclResult_t: 0 ncclSuccess, 7 ncclInProgress (still initializing); anything else is an error (nccl.h).
NCCL_RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
                4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}
NOT_ERRORS = (0, 7)
RAW_KEPT = 16 * 1024  # characters of RAS's own answer a record keeps beside the fields

_MISSING_COMMA = re.compile(r'("nvml_dev": -?\d+)(\s*\n\s*"status")')


def finding(kind: str, detail: str, comm: str | None = None, **where: Any) -> dict:
    return {"kind": kind, "comm": comm, "rank": where.get("rank"), "host": where.get("host"), "pid": where.get("pid"),
            "gpu": where.get("gpu"), "nvml_gpu": where.get("nvml_gpu"), "detail": detail}


# ---- JSON (NCCL >= 2.28.7) ----------------------------------------------------------------------------

def parse_json(text: str) -> dict:
    """A `SET FORMAT json` status answer as a reading; ValueError when it is not RAS's JSON."""
    repaired = _MISSING_COMMA.sub(r"\1,\2", text)
    try:
        doc = json.loads(repaired)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise ValueError("JSON without `communicators`: not NCCL RAS's status")
    comms, findings = [], []
    for raw in doc["communicators"]:
        comm, found = _json_comm(raw if isinstance(raw, dict) else {})
        comms.append(comm)
        findings += found
    ras = doc.get("ras") if isinstance(doc.get("ras"), dict) else {}
    timeouts = _int(ras.get("timeouts_count")) or 0
    if timeouts:
        findings.append(finding(TIMEOUT, f"{timeouts} communication timeout(s) while RAS gathered the data"))
    return {"format": "json", "nccl_version": doc.get("nccl_version"), "repaired": repaired != text,
            "cuda_runtime_version": doc.get("cuda_runtime_version"), "cuda_driver_version": doc.get("cuda_driver_version"),
            "communicators": comms, "findings": findings, "timeouts": timeouts,
            "collection_s": ras.get("collection_time_sec")}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _rank_status(status: dict) -> str:
    """A rank's status as RAS's text names it (rasClientRunComms)."""
    if status.get("abort_flag"):
        return "ABORT"
    if status.get("finalize_called") or status.get("destroy_flag"):
        return "FINALIZE"
    return "RUNNING" if status.get("init_state") == 0 else "INIT"


def _json_comm(raw: dict) -> tuple[dict, list[dict]]:
    """One communicator: its fields, and what is wrong with it, judged as rasClientRunComms judges."""
    hash_ = raw.get("hash")
    ranks = []
    for r in raw.get("ranks") or []:
        status = r.get("status") if isinstance(r.get("status"), dict) else {}
        ranks.append({"rank": r.get("rank"), "host": r.get("host"), "pid": r.get("pid"), "gpu": r.get("cuda_dev"),
                      "nvml_gpu": r.get("nvml_dev"), "status": _rank_status(status),
                      "init_state": status.get("init_state"), "async_error": status.get("async_error"),
                      "collective_counts": dict(r.get("collective_counts") or {})})
    missing = []
    for r in raw.get("missing_ranks") or []:
        status = r.get("status") if isinstance(r.get("status"), dict) else {}
        missing.append({"rank": r.get("rank"), "host": r.get("host"), "pid": r.get("pid"), "gpu": r.get("cuda_dev"),
                        "nvml_gpu": r.get("nvml_dev"), "unresponsive": bool(status.get("unresponsive")),
                        "considered_dead": bool(status.get("considered_dead"))})
    found: list[dict] = []
    for m in missing:
        where = {k: m[k] for k in ("rank", "host", "pid", "gpu", "nvml_gpu")}
        if m["considered_dead"]:
            found.append(finding(DEAD, "considered dead: unreachable over the RAS network for 60 s", hash_, **where))
        elif m["unresponsive"]:
            found.append(finding(UNRESPONSIVE, "did not answer RAS: hung, stopped or dead", hash_, **where))
        else:
            found.append(finding(MISMATCH, "answered RAS but is no member of this communicator any more", hash_, **where))
    statuses = sorted({r["status"] for r in ranks})
    if len(statuses) > 1:
        for r in ranks:
            found.append(finding(MISMATCH, f"status {r['status']} while others are {', '.join(s for s in statuses if s != r['status'])}",
                                 hash_, **{k: r[k] for k in ("rank", "host", "pid", "gpu", "nvml_gpu")}))
    found += _count_mismatch(ranks, hash_)
    for r in ranks:
        for field_ in ("init_state", "async_error"):
            value = r[field_]
            if isinstance(value, int) and value not in NOT_ERRORS:
                found.append(finding(ERROR, f"{field_.replace('_', ' ')} {NCCL_RESULTS.get(value, value)}", hash_,
                                     **{k: r[k] for k in ("rank", "host", "pid", "gpu", "nvml_gpu")}))
    errors = sorted({f["kind"] for f in found})
    comm = {"hash": hash_, "secondary_hash": raw.get("secondary_hash"), "size": raw.get("size"),
            "ranks_count": raw.get("ranks_count"), "missing_ranks_count": raw.get("missing_ranks_count"),
            "status": statuses[-1] if len(statuses) == 1 else "MIXED" if statuses else "NOCOMM",
            "errors": [_text_error(k) for k in errors] or ["OK"], "ranks": ranks, "missing_ranks": missing}
    return comm, found


def _text_error(kind: str) -> str:
    return {DEAD: "INCOMPLETE", UNRESPONSIVE: "INCOMPLETE"}.get(kind, kind)


def _count_mismatch(ranks: list[dict], comm: str | None) -> list[dict]:
    """Ranks behind the others in a collective's count: a stuck rank (when repeated queries agree)."""
    found = []
    ops = sorted({op for r in ranks for op in r["collective_counts"]})
    for op in ops:
        counts = [(r, r["collective_counts"].get(op)) for r in ranks if isinstance(r["collective_counts"].get(op), int)]
        top = max((c for _, c in counts), default=None)
        if top is None or all(c == top for _, c in counts):
            continue
        for r, c in counts:
            if c < top:
                found.append(finding(MISMATCH, f"has launched {op} up to operation {c}, others {top}", comm,
                                     **{k: r[k] for k in ("rank", "host", "pid", "gpu", "nvml_gpu")}))
    return found


# ---- text (every RAS) ---------------------------------------------------------------------------------

_VERSION = re.compile(r"^NCCL version (\S+)")
_CUDA = re.compile(r"^CUDA runtime version (-?\d+), driver version (-?\d+)")
_COLLECTED = re.compile(r"^Communicators\.\.\.\s*\(([\d.]+)s\)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$")
_COMM_TITLE = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) ([A-Z]+)\s*$")
_PROCESS = re.compile(r"Process (\d+) on node (\S+) managing GPUs? ([\d,]+)(?: \(NVML ([\d,]+)\))?")
_RANK = re.compile(r"^Rank (\d+)(?: (.+?))? -- GPU (\d+)(?: \(NVML (\d+)\))? managed by process (\d+) on node (\S+)")
_RANK_UNKNOWN = re.compile(r"^Rank (\d+)(?: (.+?))? -- \[process information not found\]")
_MISSING_LIST = re.compile(r"^The missing ranks?: ([\d, ]+)")
_TIMEOUTS = re.compile(r"Encountered (\d+) communication timeouts?")


def parse_text(text: str) -> dict:
    """A plain-text status answer as a reading; ValueError when it holds no communicator table."""
    lines = text.splitlines()
    reading: dict = {"format": "text", "nccl_version": None, "communicators": [], "findings": [], "timeouts": 0,
                     "collection_s": None}
    for line in lines:
        if m := _VERSION.match(line):
            reading["nccl_version"] = m.group(1)
        elif m := _CUDA.match(line):
            reading["cuda_runtime_version"], reading["cuda_driver_version"] = int(m.group(1)), int(m.group(2))
        elif m := _COLLECTED.match(line.strip()):
            reading["collection_s"] = float(m.group(1))
        elif m := _ROW.match(line):
            reading["communicators"].append({
                "group": int(m.group(1)), "comms": int(m.group(2)), "nodes_per_comm": int(m.group(3)),
                "ranks_per_node": m.group(4), "size": int(m.group(5)), "ranks_in_group": int(m.group(6)),
                "status": m.group(7), "errors": m.group(8).split(",")})
    if not reading["communicators"] and not any("No communicator data collected" in line for line in lines):
        raise ValueError("no communicator table (`Group  Comms ...`): not NCCL RAS's status")
    for block in _blocks(lines):
        reading["findings"] += _block_findings(block)
    reading["timeouts"] = sum(int(f["detail"].split()[0]) for f in reading["findings"] if f["kind"] == TIMEOUT)
    return reading


def _blocks(lines: list[str]) -> list[dict]:
    """The Errors and Warnings sections' blocks: a title line (INCOMPLETE, DEAD, TIMEOUT, `#g-c (hash) KIND`)
    and its indented lines, up to a blank line."""
    blocks, section, current = [], None, None
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() in ("Errors", "Warnings") and set(nxt.strip()) == {"="}:
            section, current = line.strip(), None
            continue
        if section is None or set(line.strip()) == {"="}:
            continue
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            current = {"section": section, "title": line.strip(), "body": []}
            blocks.append(current)
        elif current is not None:
            current["body"].append(line.strip())
    return blocks


def _gpus(text: str | None) -> list[int]:
    return [int(g) for g in text.split(",")] if text else []


def _block_findings(block: dict) -> list[dict]:
    title, body = block["title"], block["body"]
    if title == TIMEOUT:
        m = _TIMEOUTS.search(" ".join(body))
        return [finding(TIMEOUT, f"{m.group(1) if m else '?'} communication timeout(s) while RAS gathered the data")]
    if title in ("INCOMPLETE", DEAD):
        kind = DEAD if title == DEAD else UNRESPONSIVE
        said = body[0] if body else title
        out = []
        for line in body:
            if m := _PROCESS.search(line):  # a process may manage several GPUs: "GPUs 2,3 (NVML 6,7)"
                gpus = _gpus(m.group(3))
                nvml = _gpus(m.group(4)) or gpus
                out.append(finding(kind, said, None, pid=int(m.group(1)), host=m.group(2),
                                   gpu=gpus[0] if len(gpus) == 1 else gpus, nvml_gpu=nvml[0] if len(nvml) == 1 else nvml))
        return out or [finding(kind, said)]
    m = _COMM_TITLE.match(title)
    if not m:
        return []
    comm, kind = f"0x{m.group(3).lower().lstrip('0') or '0'}", m.group(4)  # as the JSON writes a hash ("0x%lx")
    kind = UNRESPONSIVE if kind == "INCOMPLETE" else kind
    said = body[0] if body else kind
    out = []
    for line in body:
        if r := _RANK.match(line):
            out.append(finding(kind, f"{said}{': ' + r.group(2) if r.group(2) else ''}", comm, rank=int(r.group(1)),
                               gpu=int(r.group(3)), nvml_gpu=int(r.group(4) or r.group(3)), pid=int(r.group(5)),
                               host=r.group(6)))
        elif r := _RANK_UNKNOWN.match(line):
            out.append(finding(kind, f"{said}{': ' + r.group(2) if r.group(2) else ''} (process not found)", comm,
                               rank=int(r.group(1))))
        elif r := _MISSING_LIST.match(line):
            out += [finding(kind, said, comm, rank=int(x)) for x in r.group(1).replace(" ", "").split(",") if x]
    return out or [finding(kind, " ".join(body) or kind, comm)]


# ---- readiness diagnostics (`ncclras -D`, NCCL >= 2.31) -------------------------------------------------

_DIAG = re.compile(r"^(?:(\S+):(\d+) )?NCCL DIAG (?:\[(OK|INFO)\]\s+)?(.*)$")
# The checks the readiness reading warns on when ranks differ (ras.rst "RAS Diagnostics"; labels from
# src/ras/diagnostics_gpu.cc, diagnostics_env.cc).
READINESS_CHECKS = ("GPU inventory", "CUDA driver version", "NVIDIA graphics driver version", "ECC", "NVLink",
                    "NCCL environment")
# An [INFO] line that only says something could not be read is a note, not a difference between ranks.
_NOT_A_DIFFERENCE = re.compile(r"unavailable|diagnostics incomplete|topology-dependent data was unavailable")


def parse_diagnostics(text: str) -> dict:
    """`ncclras -D` / `echo diagnostics | nc` as {lines: [{host, pid, tag, check, text}], differ: [...],
    notes: [...], completed: str|None, busy: bool}; ValueError when it holds no `NCCL DIAG` line."""
    out: dict = {"lines": [], "differ": [], "notes": [], "completed": None, "busy": False}
    for line in text.splitlines():
        if line.strip().startswith("BUSY:"):
            out["busy"] = True
            continue
        m = _DIAG.match(line.strip())
        if not m:
            continue
        host, pid, tag, body = m.group(1), m.group(2), m.group(3), m.group(4).strip()
        if tag is None:
            if body.startswith("RAS diagnostics completed") or body.startswith("NCCL diagnostics completed"):
                out["completed"] = body
            continue
        check, _, said = body.partition(": ")
        entry = {"host": host, "pid": int(pid) if pid else None, "tag": tag, "check": check, "text": said}
        out["lines"].append(entry)
        if tag == "INFO":
            (out["notes"] if _NOT_A_DIFFERENCE.search(said) or check not in READINESS_CHECKS else out["differ"]).append(
                f"{check}: {said}")
    if not out["lines"] and not out["busy"]:
        raise ValueError("no `NCCL DIAG [OK]|[INFO]` line: not RAS diagnostics")
    return out


# ---- what a reading says ------------------------------------------------------------------------------

def _where(f: dict) -> str:
    parts = []
    if f.get("rank") is not None:
        parts.append(f"rank {f['rank']}")
    gpu, nvml = f.get("gpu"), f.get("nvml_gpu")
    if gpu is not None:
        parts.append(f"GPU {gpu}" + (f" (NVML {nvml})" if nvml not in (None, gpu) else ""))
    if f.get("pid") is not None:
        parts.append(f"pid {f['pid']}" + (f" on {f['host']}" if f.get("host") else ""))
    return ", ".join(parts)


def summary(reading: dict) -> str:
    """One line: the communicators' state, or why RAS was not read."""
    if not reading.get("answered"):
        return f"NCCL RAS not read: {reading.get('absent') or 'not asked'}"
    comms = reading.get("communicators") or []
    version = f", NCCL {reading['nccl_version']}" if reading.get("nccl_version") else ""
    head = f"NCCL RAS ({reading.get('address')}, {reading.get('format')}{version})"
    if not comms:
        return f"{head}: no communicator"
    if reading.get("format") == "text":
        states = "; ".join(f"group {c['group']}: {c['comms']} comm(s) of {c['size']} rank(s) {c['status']} "
                           f"{','.join(c['errors'])}" for c in comms)
    else:
        states = "; ".join(f"{c['hash']} ({c.get('size')} rank(s), {c.get('missing_ranks_count') or 0} missing) "
                           f"{c['status']} {','.join(c['errors'])}" for c in comms)
    return f"{head}: {states}"


def lines(reading: dict, limit: int = 12) -> list[str]:
    """The summary and each finding (`limit` at most), for a failure's message and a verdict's problems."""
    out = [summary(reading)]
    found = reading.get("findings") or []
    for f in found[:limit]:
        where = _where(f)
        out.append(f"  RAS {f['kind']}{' ' + f['comm'] if f.get('comm') else ''}: {where + ': ' if where else ''}"
                   f"{f['detail']}")
    if len(found) > limit:
        out.append(f"  ... {len(found) - limit} more RAS finding(s) in the record")
    if reading.get("repaired"):
        out.append("  (RAS's JSON lacked a comma after a missing rank's nvml_dev, NCCL 2.28.7-2.28.9's defect; repaired)")
    return out
