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
from wirecheck.checks.words import Words
from wirecheck.nccl.log import NVLINK_PATH_TYPES, pair_key, transports_by_pair
from wirecheck.core import problems as problems_kind
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip

SOURCE = ("NCCL's transport selection: P2P between GPUs that can reach each other (over NVLink where "
          "the topology has it); NCCL_P2P_DISABLE=1 disables the P2P transport (NCCL environment-variable docs)")


NCCL_PATH = Words(
    what="NCCL transport per GPU pair",
    means="NCCL connected these GPUs over another path than their wiring (no P2P over NVLink, or P2P where it was "
          "disabled)",
    todo="read the NCCL line quoted above; check NCCL_P2P_* and NCCL_SHM_* in the environment, peer access "
         "(`nvidia-smi topo -p2p r`) and the container's IPC settings",
    say={"simulation": "simulation: gloo on CPU stands in for NCCL; there is no NCCL path to read",
         "incomplete": "the NCCL probe did not complete: {error}",
         "no_lines": "NCCL logged no connection line ({lines} INFO lines read)",
         "log_format": "is NCCL_DEBUG_SUBSYS overridden, or did this NCCL change its log format?",
         "no_p2p": "no P2P (NCCL_P2P_DISABLE=1)",
         "p2p_nvlink": "P2P over NVLink between NVLink-connected GPUs",
         "pair": "GPU{a}-GPU{b} (ranks {rank_a}-{rank_b})",
         "over": " over {path_type}",
         "not_connected": "not connected",
         "p2p_anyway": "{pair}: P2P although NCCL_P2P_DISABLE=1: '{line}'",
         "no_connection": "{pair}: NV{links}, but NCCL logged no connection between them (all_to_all connects every "
                          "pair)",
         "other_transport": "{pair}: NV{links}, but NCCL used {transport}/{detail}, not P2P over NVLink: '{line}'",
         "other_path": "{pair}: NV{links}, but NCCL's path between them is {path_type}, not NVLink; it connected with "
                       "'{line}'",
         "not_expected": "NCCL did not take the expected path ({expected})",
         "as_expected": "{shown} as expected ({expected}){note}",
         "no_paths": " (NCCL logged no topology paths: judged on the transport alone)"})


def _pair_name(gpus: list[int], a: int, b: int) -> str:
    return NCCL_PATH.said("pair", a=gpus[a], b=gpus[b], rank_a=a, rank_b=b)


def _describe(entries: list[dict], path_type: str | None) -> str:
    kinds = sorted({f"{e['transport']}/{e['detail']}".rstrip("/") for e in entries})
    return ", ".join(kinds) + (NCCL_PATH.said("over", path_type=path_type) if path_type else "")


@check("nccl_path", words=NCCL_PATH)
def nccl_path(thresholds, *, placement: str, gpus: list, nv: dict, p2p_disabled: bool, evidence: dict | None,
              simulated: bool, error: str | None = None) -> Verdict:
    """`gpus`: the placement's GPU indices in rank order; `nv`: "a-b" (GPU indices, a < b) -> NV#;
    `evidence`: wirecheck.nccl.log.summarize() of every rank's log."""
    what = NCCL_PATH.judged()
    if simulated:
        return skip(what, placement, NCCL_PATH.said("simulation"))
    if error:
        return Verdict("", what, placement, FAIL, problem=problems_kind.BROKEN,
                       details={"problems": [NCCL_PATH.said("incomplete", error=error)]})
    connections = (evidence or {}).get("connections") or []
    if not connections:
        lines = (evidence or {}).get("info_lines", 0)
        return Verdict("", what, placement, FAIL, source=SOURCE,
                       hint=NCCL_PATH.said("log_format"),
                       details={"evidence": evidence, "problems": [NCCL_PATH.said("no_lines", lines=lines)]})
    by_pair = transports_by_pair(connections)
    path_types = (evidence or {}).get("path_types") or {}
    expected = NCCL_PATH.said("no_p2p" if p2p_disabled else "p2p_nvlink")
    problems, seen = [], {}
    for a, b in combinations(range(len(gpus)), 2):
        key = pair_key(a, b)
        entries = by_pair.get(key, [])
        links = nv.get(pair_key(*sorted((gpus[a], gpus[b]))), 0)
        path_type = path_types.get(key) or path_types.get(pair_key(b, a))
        name = _pair_name(gpus, a, b)
        seen[f"{gpus[a]}-{gpus[b]}"] = _describe(entries, path_type) if entries else NCCL_PATH.said("not_connected")
        if p2p_disabled:
            bad = [e for e in entries if e["transport"] == "P2P"]
            if bad:
                problems.append(NCCL_PATH.said("p2p_anyway", pair=name, line=bad[0]["line"]))
            continue
        if links <= 0:
            continue  # no NVLink between them: any transport is legitimate
        if not entries:
            problems.append(NCCL_PATH.said("no_connection", pair=name, links=links))
            continue
        not_p2p = [e for e in entries if e["transport"] != "P2P"]
        if not_p2p:
            e = not_p2p[0]
            problems.append(NCCL_PATH.said("other_transport", pair=name, links=links, transport=e["transport"],
                                           detail=e["detail"], line=e["line"]))
        elif path_type is not None and path_type not in NVLINK_PATH_TYPES:
            problems.append(NCCL_PATH.said("other_path", pair=name, links=links, path_type=path_type,
                                           line=entries[0]["line"]))
    measured = {"pairs": seen, "path_types_logged": bool(path_types)}
    if problems:
        return Verdict("", what, placement, FAIL, measured=measured, limit={"expected": expected}, source=SOURCE,
                       hint=NCCL_PATH.said("not_expected", expected=expected), details={"problems": problems})
    shown = "; ".join(f"GPU{k.replace('-', '-GPU')}: {v}" for k, v in seen.items())
    note = "" if path_types else NCCL_PATH.said("no_paths")
    return Verdict("", what, placement, PASS, measured=measured, limit={"expected": expected}, source=SOURCE,
                   note=NCCL_PATH.said("as_expected", shown=shown, expected=expected, note=note))
