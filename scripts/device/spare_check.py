"""On a GPU node: a spare worker (wirecheck.workers.spares) becomes a rank that sees the GPUs its rank's
environment names, and what a group's start costs with and without one.

    python scripts/device/spare_check.py [--repeats 3]

devices  a spare that imported torch is given CUDA_VISIBLE_DEVICES="" (gloo): the rank must count 0 GPUs;
         another is given GPU 0 (NCCL): the rank must count 1 and name it. CUDA read its variables at the
         rank's first call, not at the spare's import.
start    a one-rank NCCL group on GPU 0, started as a new interpreter and from a spare that had time to
         import torch, alternately, --repeats times each: the start's seconds (spawn to ready).

Prints one `RESULT <check> PASS|FAIL ...` line per check; exit 1 if any failed. The environment is passed
through to the workers untouched (NCCL_NVLS_ENABLE=0 and friends).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THIS = "spare_check"  # the workers import this file by name: its directory is on the parent's sys.path


def devices(ctx) -> dict:
    """In a rank: what CUDA sees now."""
    import os

    import torch

    count = torch.cuda.device_count()
    return {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "count": count,
            "names": [torch.cuda.get_device_name(i) for i in range(count)]}


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from wirecheck.workers import spares
    from wirecheck.workers.launcher import WorkerGroup

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    failed = 0

    def result(check: str, ok: bool, text: str) -> None:
        nonlocal failed
        failed += not ok
        print(f"RESULT {check} {'PASS' if ok else 'FAIL'} {text}", flush=True)

    stock = spares.SpareStock(1, replenish=True)
    spares.install(stock)
    stock.fill()
    time.sleep(8)  # the spare imports torch meanwhile
    with WorkerGroup("spare-none", 1, "gloo", env={"CUDA_VISIBLE_DEVICES": ""}) as g:
        (seen,) = g.run(f"{THIS}:devices", None, 60)
        spare = g.info[0].get("spare")
    result("devices-none", spare is not None and seen["count"] == 0,
           f"from a spare {spare}: CUDA_VISIBLE_DEVICES={seen['visible']!r}, {seen['count']} GPU(s) seen")
    time.sleep(8)
    with WorkerGroup("spare-gpu0", 1, "nccl", gpus=(0,)) as g:
        (seen,) = g.run(f"{THIS}:devices", None, 60)
        spare = g.info[0].get("spare")
    result("devices-gpu0", spare is not None and seen["count"] == 1,
           f"from a spare {spare}: CUDA_VISIBLE_DEVICES={seen['visible']!r}, {seen['count']} GPU(s): {seen['names']}")

    times: dict[str, list[float]] = {"new interpreter": [], "spare": []}
    for _ in range(args.repeats):
        for how in times:
            if how == "spare":
                time.sleep(8)  # the refilled spare imports torch meanwhile
            t0 = time.monotonic()
            g = WorkerGroup(f"start-{how.replace(' ', '-')}", 1, "nccl", gpus=(0,), use_spares=how == "spare")
            times[how].append(time.monotonic() - t0)
            took = g.info[0].get("spare")
            g.close()
            if (took is not None) != (how == "spare"):
                result("start", False, f"a group meant to start as a {how} got spare={took}")
    med = {how: statistics.median(t) for how, t in times.items()}
    result("start", med["spare"] < med["new interpreter"],
           "; ".join(f"{how}: median {med[how]:.2f} s of {', '.join(f'{x:.2f}' for x in t)}" for how, t in times.items()))
    print(stock.describe())
    stock.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
