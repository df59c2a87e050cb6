"""The training set: on which placements each strategy trains in a run.

A strategy run is the slowest work of an acceptance run (fresh processes, set-up, warm-up, timed steps:
12-20 s each on 2 GPUs), and most runs of the full grid repeat what the collectives already judge: a
pair's wire is held to its floor by the collectives on every pair, a second 2-GPU set across quads by
those of its own. So each strategy trains where it tells something (`SELECTED`, the default):

- the largest placement of each training class short of the whole node (the whole node where the class has
  nothing smaller: a 2-GPU node): every strategy on each kind of wire, once;
- the class's 4-GPU placement (`ARTICLE_GPUS`): the article measured the strategy dial on 4 GPUs (an NVSwitch
  4-GPU set, a full H200 NVL quad, and across quads), so the dial, the staircase and the throughput floors
  are compared with it at the same size;
- the NVLink twin of each forced_pcie placement (the same GPUs with NCCL's P2P path on): the slow wire's
  cost and the flattening dial compare every strategy on both;
- DDP alone on the placement that spans the whole node, where the rules above leave it out: its tokens/s over
  one GPU's is the node's scaling efficiency at its full size (the record's `scaling_efficiency`).

`ALL` (`--training all`) keeps the full grid: every strategy on the first placement of each training class
and GPU count. The set is computed from the run's placements alone (after CUDA_VISIBLE_DEVICES, a site's
hook and --placement), so a narrowed run trains what is left of it; the record's header keeps it
(`as_header`), so the history compares figures of runs that trained alike. Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.node.placement import CLASS_FORCED_PCIE, Placement, TRAINING_CLASSES, nvlink_twin
from wirecheck.vocab.strategies import LOCAL_BASELINE_ONCE_PER_GPU, NAMES, REFERENCE, TRAINER_WORKERS_PRELOADED

SELECTED, ALL = "selected", "all"
TRAINING_SETS = (SELECTED, ALL)
DEFAULT_SET = SELECTED
# The GPU count the article compared the strategies at: Mistral-7B on 4 GPUs over NVSwitch, one H200 NVL quad,
# and across quads (the strategy dial, its figures 1-3).
ARTICLE_GPUS = 4

WHY_LARGEST = "the largest {klass} placement short of the whole node"
WHY_ONLY = "the largest {klass} placement (none smaller)"
WHY_ARTICLE = f"the article's {ARTICLE_GPUS}-GPU comparison"
WHY_TWIN = "the NVLink twin of {forced} (the slow wire's cost)"
WHY_SCALING = "the whole node: DDP's scaling"
WHY_ALL = "--training all: the full grid"


@dataclass(frozen=True)
class Trained:
    """One placement of the training set: the strategies it trains, and why it is in the set."""

    placement: Placement
    strategies: tuple[str, ...]
    why: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"placement": self.placement.id, "strategies": list(self.strategies), "why": list(self.why)}


def candidates(placements: list[Placement]) -> list[Placement]:
    """The first placement of each training class and GPU count, in the run's order: the full grid."""
    seen, out = set(), []
    for p in placements:
        if p.klass in TRAINING_CLASSES and (p.klass, p.n_gpus) not in seen:
            seen.add((p.klass, p.n_gpus))
            out.append(p)
    return out


def check_set(which: str, where: str = "--training") -> str:
    if which not in TRAINING_SETS:
        raise ValueError(f"{where} {which!r}: expected one of {', '.join(TRAINING_SETS)} ({SELECTED}: each strategy "
                         f"where it tells something; {ALL}: every strategy on every training placement)")
    return which


def training_set(placements: list[Placement], which: str = DEFAULT_SET) -> list[Trained]:
    """Where each strategy trains among `placements` (every placement of the run: the whole node is what they
    cover), in their order; `which`: SELECTED or ALL (module docstring)."""
    check_set(which)
    grid = candidates(placements)
    if which == ALL:
        return [Trained(p, NAMES, (WHY_ALL,)) for p in grid]
    node = {g for p in placements for g in p.gpus}
    why: dict[str, list[str]] = {}  # placement id -> reasons it trains every strategy
    for klass in dict.fromkeys(p.klass for p in grid):
        mine = [p for p in grid if p.klass == klass]
        smaller = [p for p in mine if set(p.gpus) != node]
        largest = max(smaller or mine, key=lambda p: p.n_gpus)
        why.setdefault(largest.id, []).append((WHY_LARGEST if smaller else WHY_ONLY).format(klass=klass))
        four = next((p for p in mine if p.n_gpus == ARTICLE_GPUS), None)
        if four is not None:
            why.setdefault(four.id, []).append(WHY_ARTICLE)
    by_id = {p.id: p for p in placements}
    for forced in [p for p in grid if p.klass == CLASS_FORCED_PCIE and p.id in why]:
        twin = nvlink_twin(placements, forced)
        if twin is not None:
            why.setdefault(twin.id, []).append(WHY_TWIN.format(forced=forced.id))
    out = []
    for p in placements:
        if p.id in why:
            out.append(Trained(by_id[p.id], NAMES, tuple(why[p.id])))
        elif p in grid and set(p.gpus) == node and p.n_gpus > 1:
            out.append(Trained(p, (REFERENCE,), (WHY_SCALING,)))
    return out


def strategies_on(trained: list[Trained]) -> dict[str, tuple[str, ...]]:
    """placement id -> the strategies the set trains there."""
    return {t.placement.id: t.strategies for t in trained}


def as_header(trained: list[Trained], which: str) -> dict:
    """What the record's header keeps: which set, each placement with its strategies and why, how often a GPU's
    local baseline is measured (training/local_baselines.py) and how the strategy runs' workers start and end
    (vocab.strategies.TRAINER_WORKERS_PRELOADED)."""
    return {"set": which, "placements": [t.as_dict() for t in trained],
            "local_baseline": LOCAL_BASELINE_ONCE_PER_GPU, "trainer_workers": TRAINER_WORKERS_PRELOADED}
