"""A failed verdict as the operator reads it at the end of a run: one block, set as the failing test's
report (fixtures/last_screen.py), so pytest's terminal, its short summary and --junitxml all show it.

    busbw FAILED on nvswitch-2gpu-0.1: all_reduce busbw at 1 GiB
      measured  1.2 GB/s
      limit     >= 5000.0 GB/s  (thresholds.yaml: collectives.simulated_floors.all_reduce.any)
      source    selftest: raised
      means     the GPUs of this placement move data slower than their fabric allows
      to do     compare `wirecheck topo` with the expected wiring ...
      code      WC2021 (docs/failure-codes.md)
      detail    all_reduce busbw at 1 GiB on nvswitch-2gpu-0.1: measured 1.2 GB/s < floor 5000.0 GB/s (...)

The numbers are the verdict's own (as recorded), written by wirecheck.core.render in the check's own format
(the one that wrote its message); `means` and `to do` come from advice.py. A warn verdict (nothing failed,
something to say) is shown the same way, headed WARNS.
"""

from __future__ import annotations

from wirecheck.checks.advice import advice_for
from wirecheck.core import render as words
from wirecheck.core.verdict import WARN, Verdict


def reason(verdict: Verdict) -> str:
    """One short line for pytest's short summary (cut to the terminal's width after the test id)."""
    return words.summary(verdict)


def render(verdict: Verdict, test: str | None = None) -> list[str]:
    """The block's lines, without trailing newlines: the layout here, every word from wirecheck.core.render."""
    advice = advice_for(verdict.check, verdict.details)
    where = verdict.place or verdict.where or "the node"
    # Not "FAILED ...": scripts read pytest's short summary lines by that word.
    said = "WARNS" if verdict.outcome == WARN else "FAILED"
    lines = [f"{verdict.check or 'check'} {said} on {where}: {verdict.what}"]

    def field(name: str, text: str) -> None:
        first, *rest = str(text).splitlines() or [""]
        lines.append(f"  {name:9} {first}")
        lines.extend(f"  {'':9} {line}" for line in rest)

    if verdict.measured is not None:
        field("measured", words.measured_text(verdict))
    if verdict.limit or verdict.yaml_path:
        field("limit", words.bound_text(verdict) + (f"  ({verdict.yaml_path})" if verdict.yaml_path else ""))
    if verdict.source:
        field("source", verdict.source)
    field("means", advice.means)
    field("to do", advice.todo)
    if verdict.code:
        field("code", f"{verdict.code} (docs/failure-codes.md)")
    field("detail", verdict.message.strip())
    if test:
        field("test", test)
    return lines

