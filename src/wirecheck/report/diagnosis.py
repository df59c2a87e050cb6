"""The report's diagnosis section: what `wirecheck diagnose --run` found for each failure (verdicts of
check `diagnosis`: the part, the result, the evidence), read from the record like every other section.
A run's own record has none; the section says how to make them.
"""

from __future__ import annotations

from wirecheck.report.html import Section, note, outcome, pre, table

CHECK = "diagnosis"


def diagnosis_section(view) -> Section:
    s = Section("diagnosis", "Diagnosis: the failing part")
    found = [v for v in view.verdicts if v.get("check") == CHECK]
    if not found:
        return s.fold("No diagnosis in this record: `wirecheck diagnose RUN.jsonl --run` localizes a run's "
                          "failures and writes its findings to a record of their own, which this page shows.")
    rows = []
    for v in found:
        d = v.get("details") or {}
        rows.append([(v.get("inputs") or {}).get("failed") or v.get("what"), outcome(v.get("outcome")), d.get("result"),
                     d.get("part") or "-", d.get("culprit") or "-"])
    s.add(table(["failure", "outcome", "result", "part", "culprit"], rows, [v.get("outcome") for v in found]))
    for v in found:
        s.add(pre(v.get("message") or ""))
    return s
