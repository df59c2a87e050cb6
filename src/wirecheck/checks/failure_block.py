"""A failed verdict as the operator reads it at the end of a run: one block, set as the failing test's
report (fixtures/pytest_wirecheck/last_screen.py), so pytest's terminal, its short summary and --junitxml all show it.

    busbw FAILED on nvswitch-2gpu-0.1: all_reduce busbw at 1 GiB
      measured  1.2 GB/s, 99.9 % below
      limit     >= 5000.0 GB/s (simulated limit; thresholds.yaml: collectives.simulated_floors.all_reduce.any)
      means     the GPUs of this placement move data slower than their fabric allows
      to do     compare `wirecheck topo` with the expected wiring ...
      code      WC2021 (docs/failure-codes.md)

What failed, where, measured against what limit (by how much, which rule, where it is written), what it
means and what to do: a few lines. Where the limit's number comes from (its `source`) is the limit's, said
once per limit with -v (the run's last lines) and by `wirecheck limits`, never in every block. A verdict of
problems (wrong elements, links down) lists them as `found`, and a note or a hint the figures cannot say
follows as `note`. Every word is wirecheck.core.render's or the check's own (wirecheck.checks.words); this
module only lays them out. A warn verdict (nothing failed, something to say) is shown the same way, headed
WARNS.
"""

from __future__ import annotations

from wirecheck.checks.words import words_for
from wirecheck.core import render as words
from wirecheck.core.verdict import WARN, Verdict


def reason(verdict: Verdict) -> str:
    """One short line for pytest's short summary (cut to the terminal's width after the test id)."""
    return words.summary(verdict)


def render(verdict: Verdict, test: str | None = None) -> list[str]:
    """The block's lines, without trailing newlines: the layout here, every word from render or the check's words."""
    said = words_for(verdict.check, verdict.details)
    where = verdict.place or verdict.where or "the node"
    # Not "FAILED ...": scripts read pytest's short summary lines by that word.
    outcome = "WARNS" if verdict.outcome == WARN else "FAILED"
    lines = [f"{verdict.check or 'check'} {outcome} on {where}: {verdict.what}"]

    def field(name: str, text: str) -> None:
        first, *rest = str(text).splitlines() or [""]
        lines.append(f"  {name:9} {first}")
        lines.extend(f"  {'':9} {line}" for line in rest)

    problems = (verdict.details or {}).get("problems") or []
    if verdict.measured is not None and not problems:
        by = words.margin(verdict)
        field("measured", words.measured_text(verdict) + (f", {by}" if by else ""))
    if verdict.limit or verdict.yaml_path:
        rule = words.rule_text(verdict)
        where_written = "; ".join(x for x in (rule, verdict.yaml_path) if x)
        field("limit", words.bound_text(verdict) + (f" ({where_written})" if where_written else ""))
    for problem in problems:
        field("found", problem)
    remarks = [x for x in (verdict.hint, verdict.note) if x]
    if remarks:
        field("note", "; ".join(remarks))
    field("means", said.means)
    field("to do", said.todo)
    if verdict.code:
        field("code", f"{verdict.code} (docs/failure-codes.md)")
    if test:
        field("test", test)
    return lines


def provenance_lines(verdicts: list[Verdict]) -> list[str]:
    """Where each failed verdict's limit is written and where its number comes from, once per limit: what -v
    adds after the run's failure blocks (and `wirecheck judge -v` after its lines)."""
    return [f"{written}: {source}" for written, source in words.provenances(verdicts)]
