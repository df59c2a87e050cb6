"""On a GPU node: what a strategy run's process gains from a spare forked after the zygote imported the trainers'
modules (wirecheck.workers.zygote.TRAINER_MODULES), against one forked before.

    python scripts/device/preload_check.py [--repeats 2] [--strategies ddp fsdp zero1]

Each strategy trains on GPU 0 alone (a one-rank NCCL group, the thresholds' hardware settings, no local
baseline) in a fresh group whose rank is forked from the run's zygote, as the suite's strategy runs are: first
with a zygote never asked to preload, then, for a new stock whose zygote was asked, alternately --repeats times.
Prints one `RESULT` line per run: the group's start, the call, its close, the wrap phase (the trainer's import and
construction) and the whole run; then the medians. The environment is passed through untouched.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REHEARSAL = "REHEARSAL on a CPU machine (gloo, the simulated model): not a GPU node's figures"


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from wirecheck.thresholds.file import load_thresholds
    from wirecheck.training.strategy_run import RUN_STRATEGY_WORKER
    from wirecheck.workers import spares
    from wirecheck.workers.launcher import WorkerGroup

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--strategies", nargs="+", default=["ddp", "fsdp", "zero1"])
    parser.add_argument("--cpu", action="store_true", help="a rehearsal on a CPU machine: gloo, the simulated settings")
    args = parser.parse_args()
    settings = load_thresholds(ROOT / "thresholds.yaml").training_settings(args.cpu)
    if args.cpu:  # scripts/unit_costs.py refuses a log that says so: no node's figure
        print(REHEARSAL, flush=True)
    backend, gpus = ("gloo", None) if args.cpu else ("nccl", (0,))
    results: dict[tuple[str, bool], list[dict]] = {}

    def one(strategy: str, preloaded: bool) -> None:
        stock = spares.SpareStock(0, replenish=False)
        spares.install(stock)
        try:
            stock.fill()  # starts the zygote
            deadline = time.monotonic() + 120
            while not stock.zygote.ready():
                assert time.monotonic() < deadline, "zygote not ready"
                time.sleep(0.05)
            if preloaded:
                stock.preload_trainers()
                time.sleep(6.0)  # idle: its import is done well before the group asks for a fork
            else:
                time.sleep(6.0)  # the same wait, nothing imported
            kwargs = {**settings.run_kwargs(strategy), "local_baseline": False}
            t0 = time.monotonic()
            group = WorkerGroup(f"preload-{strategy}", 1, backend, gpus=gpus, join_process_group=False)
            t1 = time.monotonic()
            (rank,) = group.run(RUN_STRATEGY_WORKER, kwargs, timeout_s=600, what=f"{strategy} training steps")
            t2 = time.monotonic()
            group.close()
            t3 = time.monotonic()
            spare = group.info[0].get("spare") is not None
        finally:
            spares.install(None)
            stock.close()
        row = {"start": t1 - t0, "call": t2 - t1, "close": t3 - t2, "wrap": rank["phase_s"]["wrap"],
               "setup": rank["phase_s"]["setup"], "all": t3 - t0, "tokens_per_s": rank["tokens_per_s"], "spare": spare}
        results.setdefault((strategy, preloaded), []).append(row)
        print(f"RESULT {strategy} {'preloaded' if preloaded else 'plain'}: "
              + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)

    for strategy in args.strategies:
        for _ in range(args.repeats):
            one(strategy, False)
            one(strategy, True)
    for (strategy, preloaded), rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in ("start", "call", "close", "wrap", "setup", "all")}
        print(f"MEDIAN {strategy} {'preloaded' if preloaded else 'plain'}: "
              + ", ".join(f"{k} {v:.2f}" for k, v in med.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
