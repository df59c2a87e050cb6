"""Each GPU's and placement's figures over its own history, as this run's history and drift verdicts judged
them: what the report draws beside the verdict. Plain data, no drawing.

The verdicts carry their history (values, dates, records: tests/test_history.py put them there), so a
record alone draws its GPUs' trends, without the folder: the drift verdict's window (the longer one) for
the series, the history verdict for the bound tonight was held to (the median of its last runs less its
margin) and the loss it catches, the drift verdict for its reference, its bound and where a fall began.
Values are in the unit the figure shows in (records.figures.display).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.core.resolution import Resolution
from wirecheck.records.figures import display


@dataclass
class HistorySeries:
    """One subject's (GPU's or placement's) figure: its earlier runs, this run, and how it was judged."""

    subject: str
    where: str
    figure: str
    key: str
    unit: str
    past: list[tuple[str, float]] = field(default_factory=list)  # (date, value), oldest first
    value: float | None = None
    started: str | None = None  # this run's start
    history: dict | None = None  # {outcome, bound, median, margin, resolution, message}
    drift: dict | None = None  # {outcome, reference, bound, began, loss, message}

    @property
    def outcome(self) -> str:
        """The worse of the two verdicts."""
        order = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
        found = [j["outcome"] for j in (self.history, self.drift) if j]
        return max(found, key=lambda o: order.get(o, 0)) if found else "skip"

    @property
    def judged(self) -> bool:
        return any(j and j["outcome"] != "skip" for j in (self.history, self.drift))


def _subject_series(out: dict, v: dict, started: str | None) -> HistorySeries | None:
    i = v.get("inputs") or {}
    if not i.get("subject") or not i.get("key") or not isinstance(i.get("value"), (int, float)):
        return None
    unit, scale = display(str(i.get("kind")), i.get("unit"))
    s = out.setdefault((i["subject"], i["key"]), HistorySeries(str(i["subject"]), str(i.get("where") or "?"),
                                                               str(i.get("figure")), str(i["key"]), unit))
    s.value = float(i["value"]) * scale
    s.started = started
    past = [(str(h.get("date") or ""), float(h["value"]) * scale) for h in i.get("history") or []
            if isinstance(h, dict) and isinstance(h.get("value"), (int, float))]
    if len(past) > len(s.past):
        s.past = past
    return s


def history_series(verdicts: list[dict], started: str | None) -> list[HistorySeries]:
    """The history and drift verdicts of a run, one series per subject and figure, failures first."""
    out: dict = {}
    for v in verdicts:
        check = v.get("check")
        if check not in ("history", "drift"):
            continue
        s = _subject_series(out, v, started)
        if s is None:
            continue
        limit = (v.get("limit") or {}).get("min")
        details = v.get("details") or {}
        judged = {"outcome": v.get("outcome") or "skip", "bound": limit, "message": v.get("message") or ""}
        if check == "history":
            resolution = Resolution.from_dict(details.get("resolution"))
            s.history = {**judged, "median": details.get("median"), "margin": details.get("margin"),
                         "resolution": resolution}
        else:
            s.drift = {**judged, "reference": details.get("reference"), "began": details.get("began"),
                       "loss": details.get("loss")}
    order = {"fail": 0, "warn": 1, "pass": 2, "skip": 3}
    return sorted(out.values(), key=lambda s: (order.get(s.outcome, 4), s.where, s.figure))
