"""The catalog of failure codes: each code of wirecheck.core.failure_codes with its check, the component it
is about, and what a failure means and what to do (the check's words, wirecheck.checks.words), as `wirecheck codes` prints it and
docs/failure-codes.md holds it (a self-test keeps that file equal to `markdown()`).
"""

from __future__ import annotations

from wirecheck.checks.words import words_for
from wirecheck.core import failure_codes as fc

HEADER = """# Failure codes

[Back to the README](../README.md)

Every failed or warned verdict carries a stable code, `WC` + the check's number + `1` for a failure or
`2` for a warning (`WC2021`: busbw failed): in its record line (`code`), the failure block, Prometheus
(`wirecheck_check_failures{check,code}`, `wirecheck_check_warnings{check,code}`) and the health events
(`wirecheck events`). A code never changes its meaning: numbers come from the declared table
`src/wirecheck/core/failure_codes.py`, a retired number is never given again, and
`selftests/test_failure_codes.py` holds the table to the ledger of every code ever issued
(`selftests/data/failure_codes.txt`). A site's own checks have no code.

`component` is what a health event names as affected; `by wire` is the component of the placement's
own wire (NVLINK on NVLink placements, PCIE on the host path, NIC across nodes, GPU for one GPU alone).
This page is written by `wirecheck codes --markdown`; `wirecheck codes WC2021` prints one entry.
"""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def rows() -> list[dict]:
    """One row per check of the table, in number order: its codes, component, meaning and first step."""
    out = []
    for check, entry in sorted(fc.TABLE.items(), key=lambda item: item[1].number):
        advice = words_for(check)
        out.append({"fail": fc.code(check, "fail"), "warn": fc.code(check, "warn"), "check": check,
                    "component": "by wire" if entry.component == fc.FABRIC else entry.component,
                    "means": advice.means, "todo": advice.todo})
    return out


def markdown() -> str:
    lines = [HEADER, "| fail | warn | check | component | what it means | what to do |", "|---|---|---|---|---|---|"]
    for row in rows():
        lines.append(f"| {row['fail']} | {row['warn']} | `{row['check']}` | {row['component']} | {_cell(row['means'])} "
                     f"| {_cell(row['todo'])} |")
    return "\n".join(lines) + "\n"


def describe(code: str) -> str | None:
    """One code's entry as text, or None for a code no check was given."""
    parsed = fc.parse(code)
    if parsed is None:
        return None
    check, kind = parsed
    row = next(r for r in rows() if r["check"] == check)
    said = "failed" if kind == "fail" else "warned (nothing failed; said before it fails)"
    return (f"{code.upper()}: {check} {said}; component {row['component']}\n"
            f"  means  {row['means']}\n  to do  {row['todo']}")
