"""A fleet diagnosis record (`wirecheck fleet diagnose --run`) as a section of the fleet report: its text
lines and its page section. Read from the record's structure (each verdict's result, its line and its
evidence, as wirecheck.core.render wrote them), never from the report's own judging: the diagnosis was made
later, from pairs measured on purpose. Nothing here splits a message into its parts.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from wirecheck.core import exit_codes, render
from wirecheck.records.file import RecordFileError, read_run

RESULT_OF_EXIT = {exit_codes.DIAGNOSIS_FOUND: "found", exit_codes.DIAGNOSIS_NOT_REPRODUCED: "not reproduced",
                  exit_codes.DIAGNOSIS_NOT_LOCALIZED: "not localized", exit_codes.NOTHING_TO_LOCALIZE: "nothing to localize"}


@dataclass
class DiagnosisView:
    path: Path
    exit_status: int | None
    verdicts: list[dict]  # the diagnosis verdicts, as recorded

    @property
    def result(self) -> str:
        return RESULT_OF_EXIT.get(self.exit_status, f"ended with exit status {self.exit_status}")


def read_diagnosis(path: str | Path) -> DiagnosisView:
    """The record `wirecheck fleet diagnose` wrote; a RecordFileError naming the option for anything else."""
    run = read_run(path)
    if run.run.get("kind") != "diagnosis" or not run.run.get("fleet"):
        raise RecordFileError(f"--diagnosis {path}: not a fleet diagnosis record (`wirecheck fleet diagnose ... --run` "
                              "writes one; a node's `wirecheck diagnose` record is shown by `wirecheck report`)")
    return DiagnosisView(Path(path), (run.end or {}).get("exit_status"),
                         [v for v in run.verdicts if v.get("check") == "diagnosis"])


def _finding(v: dict) -> tuple[str, list[str]] | None:
    """A verdict's line and evidence, from its details; None for a record written before they were kept
    apart (its message is then shown whole)."""
    d = v.get("details") or {}
    if not isinstance(d.get("summary"), str):
        return None
    return d["summary"], [str(e) for e in d.get("evidence") or []]


def text_lines(view: DiagnosisView) -> list[str]:
    lines = [f"fleet diagnosis {view.path.name}: {view.result} (exit {view.exit_status})"]
    for v in view.verdicts:
        found = _finding(v)
        shown = render.diagnosis_lines(*found) if found else str(v.get("message", "")).splitlines()
        lines += ["  " + line for line in shown]
    return lines


def html_section(view: DiagnosisView) -> str:
    items = []
    for v in view.verdicts:
        found = _finding(v)
        bad = (v.get("details") or {}).get("result") != "not reproduced"
        if found is None:
            body = f"<span style='white-space:pre-line'>{html.escape(str(v.get('message', '')))}</span>"
        else:
            head, evidence = found
            body = f"<b>{html.escape(head)}</b>" + (
                "<ul>" + "".join(f"<li>{html.escape(e)}</li>" for e in evidence) + "</ul>" if evidence else "")
        items.append(f"<li class='{'bad' if bad else 'ok'}'>{body}</li>")
    return (f"<h2>Fleet diagnosis: {html.escape(view.result)}</h2><p>{html.escape(str(view.path))} (exit "
            f"{view.exit_status})</p><ul>{''.join(items)}</ul>")
