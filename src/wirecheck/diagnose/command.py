"""`wirecheck diagnose`'s work: read a record, list its suspects and their probes; with run=True, run each
probe and write the findings as a record of their own (verdicts of check `diagnosis`) through the one
record writer (records.run.RunWriter), so that `judge`, `report` and a drain hook read it as any other.
"""

from __future__ import annotations

import time
from pathlib import Path

from wirecheck.diagnose import collective_probe, copy_probe, gpu_probe, hang, plan
from wirecheck.diagnose.context import Context
from wirecheck.diagnose.findings import NOT_LOCALIZED, Finding, exit_code
from wirecheck.diagnose.suspects import (COLLECTIVE, HANG, HOST_COPY, SLOW_GPU, WRONG_COLLECTIVE, WRONG_GPU, Suspect,
                                         suspects)
from wirecheck.records.file import RunRecord
from wirecheck.records.run import COMPLETE, RunWriter, thresholds_fields

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
        writer.close()
    return findings, writer.path, code
