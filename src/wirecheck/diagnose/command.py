"""`wirecheck diagnose`'s work: read a record, list its suspects and their probes; with run=True, run each
probe and write the findings as a record of their own (verdicts of check `diagnosis`) through the one
record writer (records.run.RunWriter), so that `judge`, `report` and a drain hook read it as any other.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from wirecheck.diagnose import collective_probe, copy_probe, gpu_probe, hang, plan
from wirecheck.diagnose.context import Context, ProbeSet, gpus_set
from wirecheck.diagnose.findings import NOT_LOCALIZED, Finding, exit_code
from wirecheck.diagnose.suspects import (COLLECTIVE, HANG, HOST_COPY, SLOW_GPU, WRONG_COLLECTIVE, WRONG_GPU, Suspect,
                                         suspects)
from wirecheck.nccl import path as nccl_path
from wirecheck.records.file import RunRecord
from wirecheck.records.run import COMPLETE, RunWriter, thresholds_fields
from wirecheck.vocab.ops import OPS
from wirecheck.workers.pool import WorkerPool

KIND = "diagnosis"  # the header's `kind`: a record of findings about another record


def probe(ctx: Context, s: Suspect) -> Finding:
    """The finding for one suspect (its probes run here)."""
    if s.kind in (COLLECTIVE, WRONG_COLLECTIVE):
        return collective_probe.diagnose(ctx, s)
    if s.kind == SLOW_GPU:
        return gpu_probe.diagnose_slow(ctx, s)
    if s.kind == WRONG_GPU:
        return gpu_probe.diagnose_wrong(ctx, s)
    if s.kind == HANG:
        return hang.diagnose(s)
    if s.kind == HOST_COPY:
        return copy_probe.diagnose(ctx, s)
    return Finding(s, NOT_LOCALIZED, evidence=plan.steps(s))


def probe_sets(ctx: Context, found: list[Suspect]) -> list[ProbeSet]:
    """The GPU sets the suspects' probes run on: each collective suspect's placement and the pairs inside it,
    and every GPU of the node where a GPU is suspected (the GPU load alone and with its neighbours; a node
    of one GPU has no set to group, and the load starts a group of its own)."""
    sets: list[ProbeSet] = []
    for s in found:
        if s.kind in (COLLECTIVE, WRONG_COLLECTIVE):
            sets += collective_probe.probe_sets(s)
        elif s.kind in (SLOW_GPU, WRONG_GPU) and len(gpu_probe.all_gpus(ctx, s)) > 1:
            sets.append(gpus_set(gpu_probe.all_gpus(ctx, s)))
    return list(dict.fromkeys(sets))


def probe_pool(ctx: Context, found: list[Suspect]) -> WorkerPool:
    """One worker pool for every probe of the record (wirecheck.workers.pool): a sub-group per set of
    `probe_sets`, made at its one start; on GPUs NCCL logs each sub-group's set-up into a folder of the
    command's (the path a pair took: collective_probe). The caller closes it."""
    settings = ctx.thresholds.collective_settings(ctx.simulated)
    starting = None
    if not ctx.simulated:
        log_root = Path(tempfile.mkdtemp(prefix="nccl-", dir=ctx.log_dir))
        starting = nccl_path.logging_start(log_root, list(OPS), min(settings.sizes),
                                           fix="set TMPDIR to a folder only root can write")
    return WorkerPool(probe_sets(ctx, found), backend=ctx.backend, simulated=ctx.simulated,
                      timeout_s=settings.timeout_s, starting=starting, log_dir=ctx.log_dir)


def diagnose(run: RunRecord, ctx: Context, out: str | Path | None, folder: str | Path = ".wirecheck",
             say=print) -> tuple[list[Finding], Path | None, int]:
    """Every suspect's finding, said as it comes and written to a record (`out`, else a new file in `folder`);
    (findings, the record's path, the exit code). A clean record writes no record."""
    found = suspects(run)
    if not found:
        return [], None, exit_code([])
    started = time.monotonic()
    writer = RunWriter(out, folder=folder, prefix="diagnosis", started=started)
    writer.header({"kind": KIND, "diagnosed": str(run.path), "diagnosed_host": run.run.get("host"),
                   "simulated": ctx.simulated, **thresholds_fields(ctx.thresholds.path),
                   "gpus": run.run.get("gpus") or [], "placements": run.run.get("placements") or []})
    findings = []
    ctx.pool = probe_pool(ctx, found)
    try:
        for s in found:
            say(f"diagnosing {s.label} ...")
            finding = probe(ctx, s)
            findings.append(finding)
            writer.verdict(finding.verdict(), test=f"diagnose::{s.kind}")
            say(finding.verdict().message)
        code = exit_code(findings)
        writer.end(COMPLETE, code)
    finally:
        ctx.pool.close()
        writer.close()
    return findings, writer.path, code
