"""What a probe found for one suspect, as a verdict of check `diagnosis`, and what the findings of a run
add up to (the command's exit code, wirecheck.core.exit_codes).

found: a part is named (a GPU, a pair's link, one NVLink of a GPU, a GPU's slot) with its evidence;
not reproduced: the failure did not come back under the probes (the repeat passed, nothing stood out);
not localized: it came back (or could not be ruled out) but no probe singled out a part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.core import exit_codes, render
from wirecheck.core.verdict import FAIL, PASS, Verdict
from wirecheck.diagnose.suspects import Suspect

CHECK = "diagnosis"
FOUND, NOT_REPRODUCED, NOT_LOCALIZED = "found", "not reproduced", "not localized"
RESULTS = (FOUND, NOT_REPRODUCED, NOT_LOCALIZED)


@dataclass
class Finding:
    suspect: Suspect
    result: str  # RESULTS
    part: str | None = None  # "GPU5", "GPU5-GPU6", "GPU5 NVLink 11", "the slot of GPU1"
    culprit: str | None = None  # one line for the drain reason: "GPU5 NVLink 11 CRC +412 under pair load"
    evidence: list[str] = field(default_factory=list)  # what the probes measured, one line each
    figures: dict = field(default_factory=dict)  # the probes' numbers, for the record

    def __post_init__(self):
        if self.result not in RESULTS:
            raise ValueError(f"diagnosis result {self.result!r}; expected one of {RESULTS}")
        if self.result == FOUND and not (self.part and self.culprit):
            raise ValueError("a found diagnosis names its part and culprit")

    def verdict(self) -> Verdict:
        """Found and not localized fail (the failure is real); not reproduced passes (it did not come back)."""
        s = self.suspect
        head = render.diagnosis_finding(s.label, self.result, self.culprit if self.result == FOUND else None)
        message = "\n".join(render.diagnosis_lines(head, self.evidence))
        return Verdict(CHECK, f"diagnosis of {s.label}", self.part or s.where,
                       PASS if self.result == NOT_REPRODUCED else FAIL, message, measured=self.result,
                       inputs={"kind": s.kind, "check": s.check, "where": s.where, "gpus": list(s.gpus), "op": s.op,
                               "failed": s.failed},
                       details={"result": self.result, "part": self.part, "culprit": self.culprit,
                                "evidence": list(self.evidence), "figures": self.figures})


def exit_code(findings: list[Finding]) -> int:
    """NOTHING_TO_LOCALIZE without findings; DIAGNOSIS_FOUND when any part was named; else
    DIAGNOSIS_NOT_LOCALIZED when any failure came back unexplained; else DIAGNOSIS_NOT_REPRODUCED."""
    results = {f.result for f in findings}
    if not results:
        return exit_codes.NOTHING_TO_LOCALIZE
    if FOUND in results:
        return exit_codes.DIAGNOSIS_FOUND
    if NOT_LOCALIZED in results:
        return exit_codes.DIAGNOSIS_NOT_LOCALIZED
    return exit_codes.DIAGNOSIS_NOT_REPRODUCED
