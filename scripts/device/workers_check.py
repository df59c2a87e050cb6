"""On a GPU node: a killed rank and a hung collective, through the real launcher and NCCL.

    python scripts/device/workers_check.py kill|hang [--gpus 0,1] [--logs DIR] [--backend gloo]

kill: 2 NCCL ranks all_reduce 1 GiB in a loop; rank 1 is SIGKILLed mid-collective (from a thread of its
      own, as the OOM killer would). The failure must come back within the call's deadline + 5 s, name
      rank 1's death as the root cause, and a fresh group on the same GPUs must then measure all_reduce
      at 1 GiB correctly.
hang: rank 1 never joins a 1 MiB all_gather; rank 0 waits inside it. The hang must come back within its
      deadline (the thresholds' minimum, 10 s) + 5 s, with both ranks' stacks; then a fresh group works.

Deadlines are computed as the suite computes them (wirecheck.measure.sweep.floor_deadlines, thresholds.yaml workers:).
Prints one `RESULT <check> PASS|FAIL <seconds> ...` line per check; exit status 1 if any failed.
`--backend gloo` runs the same logic on CPU processes (a dry run of this script, not a GPU check).
The environment is passed through to the workers untouched (NCCL_NVLS_ENABLE=0 and friends).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THIS = "workers_check"  # the workers import this file by name: its directory is on the parent's sys.path


# ---- worker functions (run inside the ranks) -------------------------------------------------------


def all_reduce_until_killed(ctx, victim: int, after_s: float, size: int) -> int:
    import torch
    import torch.distributed as dist

    if ctx.rank == victim:
        def kill() -> None:
            time.sleep(after_s)
            print(f"rank {victim}: SIGKILL now, mid all_reduce", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()
    t = torch.ones(size // 4, device=ctx.device)
    while True:
        dist.all_reduce(t)
        if ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)


def never_join(ctx, size: int) -> int:
    import torch
    import torch.distributed as dist

    if ctx.rank == 1:
        while True:
            time.sleep(3600)  # stuck elsewhere: never reaches the collective
    out = torch.empty(size // 4, device=ctx.device)
    inp = torch.ones(size // 4 // ctx.world_size, device=ctx.device)
    dist.all_gather_into_tensor(out, inp)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    return ctx.rank


# ---- the checks (run in the parent, which never touches CUDA) -------------------------------------


def _deadline(op: str, placement_class: str, size: int, calls: int):
    from wirecheck.vocab.ops import busbw_factor
    from wirecheck.workers import deadlines
    from wirecheck.thresholds.file import load_thresholds

    th = load_thresholds(ROOT / "thresholds.yaml")
    floor = th.busbw_limit(placement_class, op, 2, False) or th.slowest_busbw_floor(op, False)
    return deadlines.collective_deadline(th.workers.deadline_rule(False), th.collective_settings(False).timeout_s,
                                         op, size, busbw_factor(op, 2), calls,
                                         floor.min if floor else None, f"{placement_class} floor"), th


BACKEND = "nccl"


def _group(gpus, logs: Path):
    from wirecheck.workers.launcher import WorkerGroup

    return WorkerGroup("nvswitch-2gpu-0.1", 2, BACKEND, gpus=gpus if BACKEND == "nccl" else None, log_dir=logs)


def _fresh_group_measures(gpus, logs: Path) -> tuple[bool, str]:
    from wirecheck.measure import collectives
    from wirecheck.core.quantity import format_bytes

    size = 1 << 30 if BACKEND == "nccl" else 4 << 20
    t0 = time.monotonic()
    with _group(gpus, logs) as group:
        started = time.monotonic() - t0
        ranks = group.run(collectives.MEASURE_WORKER,
                          {"op": "all_reduce", "sizes": [size], "warmup_iters": 5, "iters": 20}, timeout_s=120)
    (r,) = collectives.combine("all_reduce", 2, ranks)
    return r.ok, (f"fresh group started in {started:.1f} s, all_reduce {format_bytes(size)} busbw "
                  f"{r.busbw / 1e9:.2f} GB/s, wrong elements {r.wrong}, port {group.port}")


def check_kill(gpus, logs: Path) -> bool:
    from wirecheck.workers.launcher import WorkerCrash, WorkerError

    size = 1 << 30
    deadline, _ = _deadline("all_reduce", "nvswitch", size, 26)
    t0 = time.monotonic()
    group = _group(gpus, logs)
    started = time.monotonic() - t0
    t1 = time.monotonic()
    try:
        group.run(f"{THIS}:all_reduce_until_killed", {"victim": 1, "after_s": 2.0, "size": size},
                  timeout_s=deadline, what="all_reduce at 1 GiB")
        print("the loop returned: rank 1 was not killed", flush=True)
        return False
    except WorkerError as exc:
        elapsed = time.monotonic() - t1
        err = exc
    finally:
        group.close()
    f = err.failure
    print(str(err)[:3000], flush=True)
    print(f"start {started:.1f} s; the kill came 2.0 s into the call; reported {elapsed:.2f} s after the call began, "
          f"{elapsed - 2.0:.2f} s after the kill; deadline {deadline.seconds:g} s ({deadline.note})", flush=True)
    print("ranks: " + "; ".join(f"rank {r.rank} {r.kind} ({r.summary})" for r in f.ranks), flush=True)
    ok = (isinstance(err, WorkerCrash) and f.root.rank == 1 and f.root.returncode == -signal.SIGKILL
          and elapsed <= deadline.seconds + 5)
    fresh_ok, fresh = _fresh_group_measures(gpus, logs)
    print(fresh, flush=True)
    ok = ok and fresh_ok
    print(f"RESULT kill {'PASS' if ok else 'FAIL'} {elapsed:.2f} root=rank{f.root.rank}:{f.root.kind} "
          f"deadline={deadline.seconds:g} logs={f.log_dir}", flush=True)
    return ok


def check_hang(gpus, logs: Path) -> bool:
    from wirecheck.workers.launcher import WorkerError, WorkerTimeout

    size = 1 << 20
    deadline, _ = _deadline("all_gather", "nvswitch", size, 26)
    group = _group(gpus, logs)
    t0 = time.monotonic()
    try:
        group.run(f"{THIS}:never_join", {"size": size}, timeout_s=deadline, what="all_gather at 1 MiB")
        print("the call returned: nothing hung", flush=True)
        return False
    except WorkerError as exc:
        elapsed = time.monotonic() - t0
        err = exc
    finally:
        group.close()
    f = err.failure
    print(str(err)[:4000], flush=True)
    print(f"reported {elapsed:.2f} s after the call began; deadline {deadline.seconds:g} s ({deadline.note})", flush=True)
    ok = (isinstance(err, WorkerTimeout) and {r.rank for r in f.ranks} == {0, 1}
          and all(r.evidence.strip() for r in f.ranks) and elapsed <= deadline.seconds + 5)
    fresh_ok, fresh = _fresh_group_measures(gpus, logs)
    print(fresh, flush=True)
    ok = ok and fresh_ok
    print(f"RESULT hang {'PASS' if ok else 'FAIL'} {elapsed:.2f} deadline={deadline.seconds:g} logs={f.log_dir}",
          flush=True)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=("kill", "hang"))
    parser.add_argument("--gpus", default="0,1")
    parser.add_argument("--logs", default=str(ROOT / ".wirecheck" / "workers-check" / "logs"))
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    args = parser.parse_args()
    global BACKEND
    BACKEND = args.backend
    gpus = tuple(int(g) for g in args.gpus.split(","))
    logs = Path(args.logs)
    return 0 if {"kill": check_kill, "hang": check_hang}[args.check](gpus, logs) else 1


if __name__ == "__main__":
    sys.exit(main())
