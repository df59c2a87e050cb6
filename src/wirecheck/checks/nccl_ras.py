"""NCCL RAS's readiness reading (`ncclras -D`, NCCL >= 2.31) as a verdict beside the inventory: where the
ranks of the run's NCCL job differ in GPU inventory, driver, ECC, NVLinks or NCCL_* settings, it warns.

A readiness reading never fails a node: RAS's own docs say its diagnostics "do not exercise NCCL data paths";
the suite's checks judge the node, this says what would make a job's ranks behave apart. Its absence (an
older NCCL, RAS off, a simulation) is a skip naming why.
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.verdict import PASS, WARN, Verdict, skip

READINESS = Words(
    what="NCCL RAS readiness",
    means="the ranks of one NCCL job differ in GPU inventory, driver, ECC, NVLinks or NCCL_* settings (NCCL RAS's "
          "readiness diagnostics): a job's collectives may hang or slow on the odd rank",
    todo="read the lines above: align the driver and NCCL_* environment of the ranks named, drain a GPU with "
         "uncorrected ECC errors (`nvidia-smi -q -d ECC`), check `nvidia-smi nvlink -s` for inactive links",
    say={"simulation": "simulation: no NCCL, no RAS",
         "not_read": "not read: {why}",
         "busy": "RAS was busy with another diagnostics request (BUSY); not read",
         "lines": "{checked} result line(s) from {address}",
         "notes": "; not read: {notes}",
         "apart": "NCCL RAS found the ranks of one job apart"})


@check("ras_readiness", words=READINESS)
def ras_readiness(thresholds, *, reading: dict | None, simulated: bool = False) -> Verdict:
    """`reading`: wirecheck.workers.ras.ask_diagnostics's (answered, absent, differ, notes, lines, busy)."""
    what = READINESS.judged()
    if simulated:
        return skip(what, None, READINESS.said("simulation"))
    if not reading or not reading.get("answered"):
        return skip(what, None, READINESS.said("not_read", why=(reading or {}).get("absent") or "not asked"))
    if reading.get("busy"):
        return skip(what, None, READINESS.said("busy"))
    notes = reading.get("notes") or []
    note = (READINESS.said("lines", checked=len(reading.get("lines") or []), address=reading.get("address"))
            + (READINESS.said("notes", notes="; ".join(notes)) if notes else ""))
    differ = reading.get("differ") or []
    if differ:
        return Verdict("", what, None, WARN, details={"problems": list(differ), "warning": differ[0]}, note=note,
                       hint=READINESS.said("apart"))
    return Verdict("", what, None, PASS, note=note)
