"""The one line a scheduler keeps about a node that failed, from the run's record.

`wirecheck: <check> <where> <measured> < <limit>` for the first failed verdict (`+N more` when others
failed too), e.g. `wirecheck: busbw nvswitch-8gpu-0.1.2.3.4.5.6.7 312.4 < 360 GB/s (+2 more)`; for a
failed worker group without a verdict (a rank that died or hung), its kind, placement and operation.

The line is plain printable ASCII on one line, cut to the length its reader keeps: it goes into
`scontrol update Reason=...` and into a Kubernetes node condition, and a record is data from a node
(possibly another user's), so nothing in it may reach them as a control character or an escape.
"""

from __future__ import annotations

import unicodedata

from wirecheck.core import render
from wirecheck.core.verdict import Verdict
from wirecheck.records.file import RunRecord

PREFIX = "wirecheck: "
ELLIPSIS = "..."

# Letters the suite writes that have no ASCII decomposition of their own (NFKD leaves them as they are).
_ASCII = {"\u00b5": "u", "\u03bc": "u", "\u00b0": "", "\u00bd": "1/2", "\u00d7": "x", "\u2265": ">=", "\u2264": "<=",
          "\u2014": "-", "\u2013": "-", "\u2212": "-", "\u2192": "->"}


def ascii_text(text: str) -> str:
    """`text` as printable ASCII on one line: known letters spelled out, accents dropped, anything else
    (control characters, other scripts) a space, runs of spaces one."""
    spelled = "".join(_ASCII.get(c, c) for c in str(text))
    plain = unicodedata.normalize("NFKD", spelled).encode("ascii", "ignore").decode("ascii")
    return " ".join("".join(c if c.isprintable() else " " for c in plain).split())


def cut(line: str, limit: int, keep_end: str = "") -> str:
    """`line` + `keep_end` in at most `limit` characters: the line is cut (ending in ...), never `keep_end`."""
    if len(line) + len(keep_end) <= limit:
        return line + keep_end
    room = max(0, limit - len(keep_end) - len(ELLIPSIS))
    return (line[:room].rstrip() + ELLIPSIS + keep_end)[:limit]


def verdict_reason(verdict: dict) -> str:
    """`<check> <where> <measured> < <limit>` for one failed verdict (a record's line), without the prefix:
    wirecheck.core.render's drain reason of the verdict's structure (never its message)."""
    try:
        return render.drain_reason(Verdict.from_record(verdict))
    except Exception:  # noqa: BLE001 (a record is data: a damaged verdict still names its check)
        return f"{verdict.get('check') or verdict.get('what') or 'check'} {verdict.get('where') or 'node'} failed"


def group_failure_reason(measurement: dict) -> str | None:
    """`<kind> <placement> <operation>: rank <r> <summary>` for a measurement whose worker group failed."""
    details = measurement.get("details") if isinstance(measurement.get("details"), dict) else {}
    failure = details.get("failure")
    if isinstance(failure, dict):
        root = failure.get("root") if isinstance(failure.get("root"), dict) else {}
        return (f"{failure.get('kind') or 'failed'} {failure.get('label') or measurement.get('placement')} "
                f"{failure.get('what') or measurement.get('what')}: rank {root.get('rank')} {root.get('summary') or ''}")
    if details.get("error"):
        return f"failed {measurement.get('placement') or 'node'} {measurement.get('what')}: {details['error']}"
    return None


def failure_line(run: RunRecord, limit: int) -> str | None:
    """The line for the run's first failure: its first failed verdict, else its first failed worker
    group; None when the record holds neither."""
    failed = [v for v in run.verdicts if v.get("outcome") == "fail"]
    if failed:
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return cut(PREFIX + ascii_text(verdict_reason(failed[0])), limit, more)
    for m in run.measurements:
        reason = group_failure_reason(m)
        if reason:
            return cut(PREFIX + ascii_text(reason), limit)
    return None


def line(text: str, limit: int) -> str:
    """Any other line for the same readers: the prefix, ASCII, one line, cut."""
    return cut(PREFIX + ascii_text(text), limit)
