"""On a GPU node: NCCL RAS asked through the suite's own worker groups, and its evidence in a record.

    python scripts/device/ras_check.py OUTDIR [--backend gloo]

group:   a one-rank NCCL worker group (wirecheck.workers.launcher.WorkerGroup, the suite's) makes its
         communicator with one all_reduce; RAS is asked while the group runs (`WorkerGroup.ask_ras`: JSON where
         the library answers it, text otherwise), then RAS's readiness diagnostics (`ncclras -D`, NCCL 2.31; an
         older NCCL says it has none); where /usr/bin/ncclras (or ncclras on PATH) is installed, its own
         `ncclras -v` text is kept beside ours and read with the same parser.
timeout: a one-rank group whose call this script makes hang: the rank queues a GPU kernel that spins for
         HANG_S seconds and an all_reduce behind it, then waits for both; the call's deadline (DEADLINE_S) runs
         out, the group asks RAS before it kills the rank, and the failure (WorkerTimeout) carries RAS's reading;
         `measurement_completed` judges it. After the kill, RAS is asked again: nothing listens any more (said).
Everything goes into OUTDIR/ras.jsonl: a record whose header says `"kind": "ras_check"` and names the fault this
script injected (the failed verdict is that forced hang, not a finding on the node), the readings as `nccl_ras`
measurements, the readiness and the forced timeout's verdicts; and OUTDIR/ras-*.txt: RAS's own words.
Prints `RESULT <step> PASS|FAIL ...` lines; exit 1 if a step failed.
`--backend gloo` runs the same steps on a CPU process (a dry run of this script: gloo has no RAS, which the
readings then say), with a Python sleep instead of the GPU kernel.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THIS = "ras_check"  # the workers import this file by name: its directory is on the parent's sys.path
HANG_S = 60.0  # the kernel's spin: far past the deadline
DEADLINE_S = 8.0  # the forced hang's deadline
MAX_CLOCK_HZ = 2.5e9  # above any data-centre GPU's SM clock (H200: 1.98 GHz): the spin lasts at least HANG_S


# ---- worker functions (run inside the rank) ---------------------------------------------------------

def one_all_reduce(ctx) -> dict:
    """Make the communicator (torch makes NCCL's lazily, at the first collective) and report what ran."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1024, device=ctx.device)
    dist.all_reduce(t)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if ctx.device.type == "cuda" else None
    return {"pid": os.getpid(), "sum": float(t.sum()), "torch": torch.__version__, "nccl": nccl,
            "device": str(ctx.device)}


def all_reduce_behind_a_spinning_kernel(ctx, hang_s: float) -> None:
    """The hang this script forces: an all_reduce queued behind a kernel that spins `hang_s`, then waited for."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1024, device=ctx.device)
    dist.all_reduce(t)  # the communicator exists before the hang
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
        torch.cuda._sleep(int(hang_s * MAX_CLOCK_HZ))  # cycles: at least hang_s at any clock up to MAX_CLOCK_HZ
        dist.all_reduce(t)
        torch.cuda.synchronize(ctx.device)
    else:
        time.sleep(hang_s)
        dist.all_reduce(t)


# ---- the steps (in the parent, which never touches CUDA) ------------------------------------------

def _ncclras_text(out: Path) -> dict | None:
    """NVIDIA's own client's verbose text (ncclras -v), kept and read with our parser; None where not installed."""
    from wirecheck.workers import ras_report

    binary = shutil.which("ncclras") or ("/usr/bin/ncclras" if Path("/usr/bin/ncclras").exists() else None)
    if binary is None:
        print("ncclras: not installed (no ncclras on PATH, no /usr/bin/ncclras)", flush=True)
        return None
    proc = subprocess.run([binary, "-v", "-t", "3"], capture_output=True, text=True, timeout=30)
    (out / "ras-ncclras-v.txt").write_text(proc.stdout + proc.stderr)
    try:
        reading = {**ras_report.parse_text(proc.stdout), "answered": True, "address": f"{binary} -v"}
    except ValueError as exc:
        print(f"ncclras -v (exit {proc.returncode}) gave no status: {exc}; {proc.stderr.strip()[:200]}", flush=True)
        return None
    print("ncclras -v, read by wirecheck: " + " | ".join(ras_report.lines(reading)), flush=True)
    return reading


def step_group(writer, backend: str, out: Path) -> bool:
    from wirecheck import checks
    from wirecheck.records.file import Measurement
    from wirecheck.vocab import records as kinds
    from wirecheck.workers import ras, ras_report
    from wirecheck.workers.launcher import WorkerGroup

    with WorkerGroup("ras-check-1gpu", 1, backend, gpus=(0,) if backend == "nccl" else None, log_dir=out / "logs",
                     use_spares=False) as group:
        (info,) = group.run(f"{THIS}:one_all_reduce", {}, timeout_s=120, what="one all_reduce")
        t0 = time.monotonic()
        status = group.ask_ras()
        asked_s = time.monotonic() - t0
        diagnostics = ras.ask_diagnostics({**os.environ, **group.env})
        theirs = _ncclras_text(out) if backend == "nccl" else None
    (out / "ras-status-raw.txt").write_text(status.get("raw") or status.get("absent") or "")
    print(f"worker: {info}", flush=True)
    print("RAS during a one-rank group: " + " | ".join(ras_report.lines(status)) + f" ({asked_s:.2f} s)", flush=True)
    print(f"RAS diagnostics: {'answered' if diagnostics['answered'] else diagnostics['absent']}", flush=True)
    writer.measurement(Measurement(kinds.NCCL_RAS, "ras-check-1gpu", "NCCL RAS during a one-rank group", asked_s, "s",
                                   {**status, "worker": info}))
    writer.measurement(Measurement(kinds.NCCL_RAS, None, "NCCL RAS readiness", None, None, diagnostics))
    if theirs is not None:
        writer.measurement(Measurement(kinds.NCCL_RAS, "ras-check-1gpu", "ncclras -v, read", None, None, theirs))
    verdict = checks.nccl_ras.ras_readiness(None, reading=diagnostics, simulated=backend != "nccl")
    writer.verdict(verdict, "ras_check::readiness")
    print(f"verdict: {verdict.outcome} {verdict.message}", flush=True)
    comms = status.get("communicators") or []
    # NCCL: RAS answers for the group's communicator, nothing wrong; gloo (the dry run): nothing answers, said
    ok = (status["answered"] and len(comms) >= 1 and not status["findings"]) if backend == "nccl" else \
        (not status["answered"] and bool(status["absent"]))
    print(f"RESULT group {'PASS' if ok else 'FAIL'} answered={status['answered']} format={status.get('format')} "
          f"communicators={len(comms)} findings={len(status.get('findings') or [])}", flush=True)
    return bool(ok)


def step_timeout(writer, backend: str, out: Path) -> bool:
    from wirecheck import checks
    from wirecheck.records.file import Measurement
    from wirecheck.vocab import records as kinds
    from wirecheck.workers import ras, ras_report
    from wirecheck.workers.launcher import WorkerGroup, WorkerTimeout

    group = WorkerGroup("ras-check-hang", 1, backend, gpus=(0,) if backend == "nccl" else None, log_dir=out / "logs",
                        use_spares=False, ras_evidence=True)
    env = {**os.environ, **group.env}
    t0 = time.monotonic()
    try:
        group.run(f"{THIS}:all_reduce_behind_a_spinning_kernel", {"hang_s": HANG_S}, timeout_s=DEADLINE_S,
                  what="all_reduce behind a spinning kernel")
        print("the call returned: nothing hung", flush=True)
        return False
    except WorkerTimeout as exc:
        err, elapsed = exc, time.monotonic() - t0
    finally:
        group.close()
    after = ras.ask_status(env, wait_s=3)  # the rank is gone, and RAS with it
    reading = err.failure.ras or {}
    (out / "ras-timeout-raw.txt").write_text(reading.get("raw") or reading.get("absent") or "")
    print(str(err)[:4000], flush=True)
    print(f"reported {elapsed:.1f} s after the call began (deadline {DEADLINE_S:g} s)", flush=True)
    print("RAS after the kill: " + ras_report.summary(after), flush=True)
    writer.measurement(Measurement(kinds.NCCL_RAS, "ras-check-hang", "NCCL RAS after the kill", None, None, after))
    verdict = checks.measurement_completed(None, what="all_reduce behind a spinning kernel (forced by ras_check)",
                                           placement="ras-check-hang", error=str(err), ras=reading)
    writer.verdict(verdict, "ras_check::forced_timeout")
    ok = (verdict.outcome == "fail" and "ras" in verdict.inputs and elapsed <= DEADLINE_S + 15
          and (reading.get("answered") if backend == "nccl" else bool(reading.get("absent")))
          and not after.get("answered"))
    print(f"RESULT timeout {'PASS' if ok else 'FAIL'} {elapsed:.1f}s answered={reading.get('answered')} "
          f"format={reading.get('format')} communicators={len(reading.get('communicators') or [])} "
          f"after_kill={'absent' if not after.get('answered') else 'answered'}", flush=True)
    return bool(ok)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from wirecheck.core import code_digest, exit_codes
    from wirecheck.records.run import COMPLETE, RunWriter, run_header

    writer = RunWriter(out / "ras.jsonl")
    writer.header(run_header(simulated=args.backend != "nccl", simulation_source="gloo dry run of ras_check"
                             if args.backend != "nccl" else None, thresholds=ROOT / "thresholds.yaml",
                             versions=code_digest.versions(), placements=[], kind="ras_check",
                             injected=["a hang this script forces (an all_reduce behind a GPU kernel spinning "
                                       f"{HANG_S:g} s, deadline {DEADLINE_S:g} s): its failed verdict is the "
                                       "injected fault, not a finding on the node"]))
    results = {name: step(writer, args.backend, out) for name, step in (("group", step_group), ("timeout", step_timeout))}
    writer.end(COMPLETE, exit_codes.OK if all(results.values()) else exit_codes.FAILED)
    writer.close()
    print(f"record {out / 'ras.jsonl'}", flush=True)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
