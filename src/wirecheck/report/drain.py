"""The report's drain section: what the drain hooks decided on this node, from the state file they keep
beside their records (drain-events.jsonl, wirecheck.cli.drain_hook): each check that failed and passed its
re-test (flaky: not drained), each failure that drained, when, and the line the scheduler got. A record
outside a hook's folder has none; the section says where they come from.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from wirecheck.records import drain_policy as dp
from wirecheck.report.html import Section, note, table

EVENTS = "drain-events.jsonl"  # wirecheck.cli.drain_hook.EVENTS (the cli is above the report: named here too)
SHOWN = 20  # the newest events; the file keeps them all


def _when(at: float) -> str:
    return _dt.datetime.fromtimestamp(at, _dt.timezone.utc).isoformat(timespec="seconds")


def _decision(event: dict) -> str:
    if event.get("event") == dp.FLAKY:
        return "flaky: drained (too many)" if event.get("drained") else "flaky: not drained"
    return "failed: drained, or held by the guard"


def drain_section(view) -> Section:
    s = Section("drain", "Drain decisions on this node: re-tests, flaky checks, failures")
    path = Path(view.run.path).parent / EVENTS
    events = dp.read_events(path)
    if not events:
        return s.fold(f"No drain decisions beside this record ({path.name}): the Slurm prolog, health check and "
                          "node-problem-detector plugin keep one there, a line per check that failed and passed its "
                          "re-test (flaky, not drained) and per failure that drained.")
    flaky = [e for e in events if e.get("event") == dp.FLAKY]
    s.add(note(f"{len(flaky)} flaky re-test(s) and {len(events) - len(flaky)} failure(s) in {path}; the newest "
               f"{min(SHOWN, len(events))} below."))
    newest = sorted(events, key=lambda e: e["at"], reverse=True)[:SHOWN]
    s.add(table(["when (UTC)", "decision", "hook", "GPUs", "line"],
                [[_when(e["at"]), _decision(e),
                  e.get("hook") or "-", ", ".join(e.get("gpus") or []) or "-", e.get("line") or e.get("first") or "-"]
                 for e in newest], ["warn" if e.get("event") == dp.FLAKY else "fail" for e in newest]))
    return s
