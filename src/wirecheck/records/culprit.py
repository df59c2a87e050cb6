"""The part a diagnosis named, for the drain reason: `wirecheck diagnose --run` writes verdicts of check
`diagnosis` (wirecheck.diagnose.findings), each with its one-line culprit in details; this reads the
first found one back, so that the line a scheduler keeps (records.reason) can name the part instead of
the check, e.g. "GPU5 NVLink 11 CRC +412 under pair load". Plain text here; reason.py makes it the
scheduler's line (prefix, ASCII, length).
"""

from __future__ import annotations

from wirecheck.records.file import RunRecord

DIAGNOSIS = "diagnosis"
FOUND = "found"


def diagnosed_culprit(run: RunRecord) -> str | None:
    """The culprit of the record's first diagnosis that found a part (`(+N more)` when it found several);
    None for a record without one (a run's own record, or a diagnosis that named nothing)."""
    found = [v for v in run.verdicts if v.get("check") == DIAGNOSIS and isinstance(v.get("details"), dict)
             and v["details"].get("result") == FOUND and v["details"].get("culprit")]
    if not found:
        return None
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return str(found[0]["details"]["culprit"]) + more


def diagnosed_culprits(run: RunRecord) -> dict[str, str]:
    """Per node, the culprit of the first found diagnosis that names it: `wirecheck fleet diagnose` lists the
    nodes a finding is about in details["nodes"] (a node slow with every good partner; both ends of a slow
    path). A node's own `wirecheck diagnose` record names none: {}."""
    out: dict[str, str] = {}
    for v in run.verdicts:
        d = v.get("details") if v.get("check") == DIAGNOSIS else None
        if isinstance(d, dict) and d.get("result") == FOUND and d.get("culprit") and isinstance(d.get("nodes"), list):
            for node in d["nodes"]:
                out.setdefault(str(node), str(d["culprit"]))
    return out
