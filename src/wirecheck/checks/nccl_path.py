"""NCCL's path as evidence: the transport NCCL connected each pair of GPUs with, from its own log.

The wire check compares bandwidths; this one reads what NCCL says it did. Between GPUs that
share NVLink (NV# > 0) NCCL must connect with its peer-to-peer transport over an NVLink path;
with NCCL_P2P_DISABLE=1 (forced host path) it must not use peer-to-peer at all. Pairs without
NVLink (across NVL quads, PCIe nodes) are recorded, not judged: P2P over PCIe and SHM are both
legitimate there. A mismatch names the pair and quotes NCCL's line.
"""

from __future__ import annotations

from itertools import combinations

from wirecheck.checks import check
from wirecheck.nccl.log import NVLINK_PATH_TYPES, pair_key, transports_by_pair
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip

SOURCE = ("NCCL's transport selection: P2P between GPUs that can reach each other (over NVLink where "
          "the topology has it); NCCL_P2P_DISABLE=1 disables the P2P transport (NCCL environment-variable docs)")


def _pair_name(gpus: list[int], a: int, b: int) -> str:
    return f"GPU{gpus[a]}-GPU{gpus[b]} (ranks {a}-{b})"


def _describe(entries: list[dict], path_type: str | None) -> str:
    kinds = sorted({f"{e['transport']}/{e['detail']}".rstrip("/") for e in entries})
    return ", ".join(kinds) + (f" over {path_type}" if path_type else "")


@check("nccl_path")
def nccl_path(thresholds, *, placement: str, gpus: list, nv: dict, p2p_disabled: bool, evidence: dict | None,
              simulated: bool, error: str | None = None) -> Verdict:
    """`gpus`: the placement's GPU indices in rank order; `nv`: "a-b" (GPU indices, a < b) -> NV#;
    `evidence`: wirecheck.nccl.log.summarize() of every rank's log."""
    what = "NCCL transport per GPU pair"
    if simulated:
        return skip(what, placement, "simulation: gloo on CPU stands in for NCCL; there is no NCCL path to read")
    if error:
        return Verdict("", what, placement, FAIL, details={"problems": [f"the NCCL probe did not complete: {error}"]})
    connections = (evidence or {}).get("connections") or []
    if not connections:
        lines = (evidence or {}).get("info_lines", 0)
        return Verdict("", what, placement, FAIL, source=SOURCE,
                       hint="is NCCL_DEBUG_SUBSYS overridden, or did this NCCL change its log format?",
                       details={"evidence": evidence,
                                "problems": [f"NCCL logged no connection line ({lines} INFO lines read)"]})
    by_pair = transports_by_pair(connections)
    path_types = (evidence or {}).get("path_types") or {}
    expected = "no P2P (NCCL_P2P_DISABLE=1)" if p2p_disabled else "P2P over NVLink between NVLink-connected GPUs"
    problems, seen = [], {}
    for a, b in combinations(range(len(gpus)), 2):
        key = pair_key(a, b)
        entries = by_pair.get(key, [])
        links = nv.get(pair_key(*sorted((gpus[a], gpus[b]))), 0)
        path_type = path_types.get(key) or path_types.get(pair_key(b, a))
        name = _pair_name(gpus, a, b)
        seen[f"{gpus[a]}-{gpus[b]}"] = _describe(entries, path_type) if entries else "not connected"
        if p2p_disabled:
            bad = [e for e in entries if e["transport"] == "P2P"]
            if bad:
                problems.append(f"{name}: P2P although NCCL_P2P_DISABLE=1: '{bad[0]['line']}'")
            continue
        if links <= 0:
            continue  # no NVLink between them: any transport is legitimate
        if not entries:
            problems.append(f"{name}: NV{links}, but NCCL logged no connection between them (all_to_all connects every pair)")
            continue
        not_p2p = [e for e in entries if e["transport"] != "P2P"]
        if not_p2p:
            e = not_p2p[0]
            problems.append(f"{name}: NV{links}, but NCCL used {e['transport']}/{e['detail']}, not P2P over NVLink: '{e['line']}'")
        elif path_type is not None and path_type not in NVLINK_PATH_TYPES:
            problems.append(f"{name}: NV{links}, but NCCL's path between them is {path_type}, not NVLink; "
                            f"it connected with '{entries[0]['line']}'")
    measured = {"pairs": seen, "path_types_logged": bool(path_types)}
    if problems:
        return Verdict("", what, placement, FAIL, measured=measured, limit={"expected": expected}, source=SOURCE,
                       hint=f"NCCL did not take the expected path ({expected})", details={"problems": problems})
    shown = "; ".join(f"GPU{k.replace('-', '-GPU')}: {v}" for k, v in seen.items())
    note = "" if path_types else " (NCCL logged no topology paths: judged on the transport alone)"
    return Verdict("", what, placement, PASS, measured=measured, limit={"expected": expected}, source=SOURCE,
                   note=f"{shown} as expected ({expected}){note}")
