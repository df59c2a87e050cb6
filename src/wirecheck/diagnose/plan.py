"""The follow-up probes of each suspect, as a plan people read (`wirecheck diagnose RUN.jsonl` without
--run prints it): what runs, on which GPUs, and what each outcome would point at. Plain text from the
suspects (wirecheck.diagnose.suspects); nothing runs here.
"""

from __future__ import annotations

from itertools import combinations

from wirecheck.checks.words import words_for
from wirecheck.diagnose.suspects import (COLLECTIVE, HANG, HOST_COPY, OTHER, SLOW_GPU, WRONG_COLLECTIVE, WRONG_GPU,
                                        Suspect)


def pairs_of(gpus: tuple[int, ...]) -> list[tuple[int, int]]:
    return list(combinations(sorted(gpus), 2))


def _gpus(gpus) -> str:
    return ", ".join(f"GPU{g}" for g in gpus) or "the node's GPUs"


def _pairs(gpus) -> str:
    return ", ".join(f"GPU{a}-GPU{b}" for a, b in pairs_of(gpus))


def steps(s: Suspect) -> list[str]:
    """The probes for one suspect, in the order --run makes them."""
    if s.kind == COLLECTIVE:
        return [f"repeat {s.op} on {s.where} at the floor size: does the failure come back?",
                f"all_reduce on every pair inside it ({_pairs(s.gpus)}): each pair's busbw against the pair floor "
                "and against the median of the other pairs; the path per pair (NV# or the PCIe path; on GPUs NCCL's own, from its log)",
                "per-link NVLink state and error counters (CRC, replay, recovery) of each pair's GPUs read before and "
                "after its load: which link's counters grew",
                f"the GPUs' own health figures ({_gpus(s.gpus)}): uncorrected ECC, remapped rows, PCIe replays"]
    if s.kind == WRONG_COLLECTIVE:
        return [f"repeat {s.op} on {s.where} with every element checked: which rank's output is wrong",
                f"{s.op} on every pair inside it ({_pairs(s.gpus)}), checked: wrong on every pair of one GPU points "
                "at the GPU, on one pair only at the link between them"]
    if s.kind == HOST_COPY:
        return [f"host<->device copies on {_gpus(s.gpus)} alone, then on every GPU behind the same PCIe switch "
                "together: a shared uplink halves each",
                "the GPU's PCIe link read while the copies run (generation, width) against what it is capable of"]
    if s.kind == SLOW_GPU:
        return [f"the GPU load (HBM, GEMM) on {_gpus(s.gpus)} alone",
                "the same load with every other GPU loaded: slow only with its neighbours loaded points at the "
                "chassis (cooling or power delivery), slow alone at the GPU"]
    if s.kind == WRONG_GPU:
        return [f"the GPU load on {_gpus(s.gpus)} alone, its results compared with the reference: wrong again "
                "alone is the GPU"]
    if s.kind == HANG:
        return ["from the record and the ranks' logs: which rank, op and step failed first (no probe runs)"]
    details = s.verdict.get("details") if isinstance(s.verdict.get("details"), dict) else None
    return [f"no probe localizes {s.check}; to do: {words_for(s.check, details).todo}"]


def probed(suspects: list[Suspect]) -> bool:
    """Whether --run has anything to localize: a suspect of a kind with probes (or a hang, read from the record)."""
    return any(s.kind != OTHER for s in suspects)


def render(suspects: list[Suspect]) -> str:
    """The plan for every suspect, numbered."""
    if not suspects:
        return "nothing to localize: the record has no failure"
    lines = []
    for n, s in enumerate(suspects, 1):
        lines.append(f"{n}. {s.label}: {s.failed}" if s.failed else f"{n}. {s.label}")
        lines += [f"   - {step}" for step in steps(s)]
    return "\n".join(lines)

