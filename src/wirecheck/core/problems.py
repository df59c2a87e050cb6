"""What went wrong other than a figure outside its limit, as a field: the kind of problem a verdict, a record
or a run had. Readers decide by the kind (the fleet counts a node's record CUT or BROKEN, `node-state` says
busy or harness fault), never by searching the words that describe it: those are free to change.

A verdict carries its kind in `Verdict.problem` (None: nothing but its figures to say); a verdict recorded
before the field has none, and its readers go by what the structure says (its check, its outcome).

`wirecheck validate` ends a run that had one of the run's problems (busy, a fault of the harness, NVML
unreadable) with one state line before its last line: `wirecheck-state: {"problem": KIND, ...facts}`, JSON
for `node-state`, which gets validate's output and nothing else when no record could be written.
"""

from __future__ import annotations

import json

# A record, as the fleet reads a node's: cut short (no end line: killed, hung, out of disk), stopped before
# its end (a signal, pytest's own stop), narrowed (-k, -m, a test id, or -x at a failure: part of its level
# ran), missing (the node wrote none), unreadable (empty, or no record at all), damaged (lines that are not
# text: the rest is judged, the record as a whole is not), duplicate (a copy of another node's record: the same
# run, judged once under the other name).
CUT_SHORT = "cut_short"
STOPPED = "stopped"
NARROWED = "narrowed"
MISSING = "missing"
UNREADABLE = "unreadable"
DAMAGED = "damaged"
DUPLICATE = "duplicate"
# A run that judged nothing of the node: the harness could not write (exit 74) or crashed (70), another run
# held the GPUs (75), a driver is installed but NVML cannot read the GPUs (11).
HARNESS_FAULT = "harness_fault"
HARNESS_CRASH = "harness_crash"
BUSY = "busy"
NVML_UNREADABLE = "nvml_unreadable"
# A measurement: a figure the workers could not measure (their error is the problem), a worker group that
# hung, raised or died.
NOT_MEASURED = "not_measured"
BROKEN = "broken"

KINDS = (CUT_SHORT, STOPPED, NARROWED, MISSING, UNREADABLE, DAMAGED, DUPLICATE, HARNESS_FAULT, HARNESS_CRASH, BUSY, NVML_UNREADABLE,
         NOT_MEASURED, BROKEN)

STATE_PREFIX = "wirecheck-state: "


def state_line(kind: str, **facts) -> str:
    """The line validate prints before its last one for a run that had problem `kind`; `facts`: plain data."""
    if kind not in KINDS:
        raise ValueError(f"unknown problem kind {kind!r}; known: {', '.join(KINDS)}")
    return STATE_PREFIX + json.dumps({"problem": kind, **facts}, sort_keys=True, default=str)


def read_state(output: str) -> dict:
    """The last state line of validate's `output`, as data ({} when there is none, or it is damaged)."""
    for line in reversed(output.splitlines()):
        if line.startswith(STATE_PREFIX):
            try:
                state = json.loads(line[len(STATE_PREFIX):])
            except ValueError:
                return {}
            return state if isinstance(state, dict) and state.get("problem") in KINDS else {}
    return {}
