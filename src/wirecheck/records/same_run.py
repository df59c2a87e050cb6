"""Which records hold one run, and which runs are like one another: the one rule for every command that
counts runs or compares them (judge, calibrate, fleet report, report's trend).

A copy of a record (saved under another name, or into the history folder beside the original) is the same
run: counted twice it narrows a noise band, doubles a verdict count or enters a fleet's medians twice. Two
records are one run when they name the same host and start and their headers are the same: a start is
kept to the second, and two simulated runs started together on one machine differ in what else their
headers say (their thresholds file, their GPUs, their environment), where a copy differs in nothing.

Runs are like one another when a figure of one may stand beside the other's: the same kind of run (a
node's validation, a multi-node run, a burn-in's level), simulated or not, at the same level, narrowed by
the same selection, on the same GPUs (their count, their models and, where both records name them, the
GPUs themselves by serial or UUID).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from wirecheck.records.figures import gpu_identity


def run_key(header: dict) -> tuple:
    """What names one run: its host, its start and a digest of its whole header."""
    digest = hashlib.sha256(json.dumps(header, sort_keys=True, default=str).encode()).hexdigest()
    return header.get("host"), header.get("started"), digest


def same_run_words(header: dict) -> str:
    """How a duplicate is named: by the host and start the two records share."""
    return f"host {header.get('host')}, started {header.get('started')}"


def _kind(header: dict) -> str:
    if header.get("multinode"):
        return "a multi-node run"
    return f"a `wirecheck {header['kind']}` run" if header.get("kind") else "a node's validation run"


def _simulated(header: dict) -> str:
    return "a simulation" if header.get("simulated") else "on hardware"


def _gpus(header: dict) -> list[dict]:
    return [g for g in header.get("gpus") or [] if isinstance(g, dict)]


def _models(gpus: list[dict]) -> str:
    counts = Counter(str(g.get("name") or "?") for g in gpus)
    return ", ".join(f"{n} x {model}" for model, n in sorted(counts.items())) or "no GPU listed"


def unlike(header: dict, other: dict) -> str | None:
    """Why the run of `other` (a header) is not like the run of `header`, in words (what differs, then its
    value in `other` and in this run); None where they are alike."""
    if _kind(other) != _kind(header):
        return f"another kind of run ({_kind(other)}; this one is {_kind(header)})"
    if bool(other.get("simulated")) != bool(header.get("simulated")):
        return f"simulated or not ({_simulated(other)}; this one is {_simulated(header)})"
    if other.get("level") != header.get("level"):
        return f"another level ({other.get('level') or 'none recorded'}; this run: {header.get('level') or 'none recorded'})"
    if tuple(other.get("selection") or ()) != tuple(header.get("selection") or ()):
        return (f"another selection ({' '.join(map(str, other.get('selection') or ())) or 'the whole level'}; this run: "
                f"{' '.join(map(str, header.get('selection') or ())) or 'the whole level'})")
    mine, theirs = _gpus(header), _gpus(other)
    if len(theirs) != len(mine) or _models(theirs) != _models(mine):
        return f"other GPUs ({_models(theirs)}; this run: {_models(mine)})"
    ids = [[gpu_identity(g, "") for g in gpus] for gpus in (mine, theirs)]
    if all(known for side in ids for _, known in side) and {i for i, _ in ids[0]} != {i for i, _ in ids[1]}:
        swapped = sorted({i for i, _ in ids[1]} - {i for i, _ in ids[0]})
        return f"other GPUs of the same models ({', '.join(swapped)} not in this run: a GPU was swapped)"
    return None
