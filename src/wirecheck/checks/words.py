"""What a check says, in one place: its `Words`, declared with the check (`@check("name", words=Words(...))`).

- `what`: the figure judged, a sentence over the check's facts (`"{op} busbw at {size_bytes:size}"`), or several
  by key where the check judges different figures (`{"copy": ..., "read": ...}`);
- `means`, `todo`: what a failure says about the node and the first thing to do: the failure block's two
  lines, the report's, `wirecheck codes` and docs/failure-codes.md;
- `say`: the check's other sentences by key, with their facts: a skip's reason, what its problems mean, a
  fact the figures cannot say ("suspect the NVLinks of GPU{a} or GPU{b}").

A check gives facts, never words: `words.judged(op=op, size_bytes=size)` and `words.say("no_limit", why=why)`
fill the sentences (wirecheck.core.render.fill: `{name:FORMAT}` writes a fact in one of render.FORMATS), and
the verdict's line around them (measured, bound, by how much, rule) is wirecheck.core.render's. Rewording a
check is editing its Words; every face (the message, the failure block, judge, the report, the drain reason,
the catalog of failure codes) changes with it.

`words_for(check, details)` is what the faces read: the check's declared Words, the cause's where a figure
failed for what ran beside it (`CAUSES`), else GENERIC (a site's check without words).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from wirecheck.core.render import fill


@dataclass(frozen=True)
class Words:
    """Everything a check says (module docstring)."""

    what: str | Mapping[str, str]
    means: str
    todo: str
    say: Mapping[str, str] = field(default_factory=dict)

    def judged(self, which: str | None = None, /, **facts) -> str:
        """The figure judged, with its facts; `which` picks one of several."""
        if isinstance(self.what, str):
            if which is not None:
                raise KeyError(f"one `what` sentence, no {which!r}")
            return fill(self.what, **facts)
        if which not in self.what:
            raise KeyError(f"no `what` sentence {which!r}; declared: {', '.join(self.what)}")
        return fill(self.what[which], **facts)

    def said(self, which: str, /, **facts) -> str:
        """The check's sentence `which`, with its facts."""
        if which not in self.say:
            raise KeyError(f"no sentence {which!r}; declared: {', '.join(self.say) or 'none'}")
        return fill(self.say[which], **facts)


GENERIC = Words("{what}", "the measured value is outside the limit the thresholds file sets for it",
                "read the message above; the README's \"What the suite checks\" says what this check covers")

# The sentences every check of a kind says alike: a simulated run has no NVML, no NCCL, no profile to hold.
SIMULATION_NVML = "simulation: no NVML on CPU ranks"
SIMULATION_INVENTORY = "simulation: the inventory is read from the live node only; no GPU was looked at"

# Verdicts made outside a check function (a diagnosis names the part behind a failure: wirecheck.diagnose),
# whose words the faces still read by name.
WORDS: dict[str, Words] = {
    "diagnosis": Words(
        "{what}",
        "the follow-up probes of a failure named the part behind it (found), or the failure came back and no probe "
        "singled out a part (not localized)",
        "act on the part named (the GPU, the pair's link, the NVLink, the slot) with its evidence above; not "
        "localized: keep the node drained and run `wirecheck diagnose RUN.jsonl --run` again, then NVIDIA's field "
        "diagnostics"),
}

# A figure can fail for what ran beside it rather than for the GPU: the verdict's details say so, and
# the words are then the cause's (a GEMM of another process on the GPU halves its HBM figure).
CAUSES = {"foreign_processes": "no_foreign_processes"}


def declare(name: str, words: Words) -> None:
    """`name`'s words (checks.check does it as a check registers): a check has one Words. Its module imported
    again (a test run in-process drops and re-imports the checks) declares the same words again: no conflict."""
    if name in WORDS and WORDS[name] != words:
        raise ValueError(f"check {name!r}: its words are declared twice, and differently")
    WORDS[name] = words


def forget(name: str) -> None:
    WORDS.pop(name, None)


def words_for(check: str | None, details: dict | None = None) -> Words:
    for key, cause in CAUSES.items():
        if (details or {}).get(key) and cause in WORDS:
            return WORDS[cause]
    return WORDS.get(check or "", GENERIC)
