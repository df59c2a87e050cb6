"""Every text a verdict is read as, made from its structure in one place: the line around a check's words.

A verdict carries what was judged (`what`, on `where`, named in full as `place`), the measured value
with its `unit` and display format `fmt`, the `bound` it was judged against (kind, value(s) in
`limit`, the same unit), the `rule`, `source` and `yaml_path` of the limit, and what the structure
cannot say: `details["problems"]` (what was found wrong, one line each), a `note` (a fact shown with
the verdict whatever its outcome) and a `hint` (a fact the figures cannot say, shown when it fails or
warns). `what`, the problems, the note and the hint are the check's own sentences (wirecheck.checks.words,
filled here by `fill`); the faces around them are all here:

- `message(v)`: the verdict's one line (recorded with it, asserted by the test, shown by judge): what on
  where, measured against its bound, by how much (`margin`), the rule that made the limit (`rule_text`);
- `measured_text(v)`, `bound_text(v)`: the failure block's fields and the report's cells (and what a fleet
  page shows of a node's figure);
- `provenance(v)`, `provenances(vs)`: where a limit is written and where its number comes from, shown once
  per limit (the page's disclosure, -v), never in the line;
- `relation(v)`: "40 % < 90 % of the power limit", the short form: pytest's short summary line
  (`summary(v)`), judge's figures line and the drain reason (`drain_reason(v)`), which a Slurm
  node's Reason and the Kubernetes node condition carry;
- `diagnosis_node(...)`, `diagnosis_path(...)`, `diagnosis_pair(...)`: a fleet diagnosis' line and evidence
  from what its pairs showed (result, the good partners slow and fine, busbw against the reference), which
  its verdict's message, its culprit (the drain reason) and the fleet report's text and page show.

Nothing reads a message back to find its parts: change a word here and every face changes with it.
This module reads verdicts by their attributes only, so that core/verdict.py can call it when a
verdict is made (no import circle).
"""

from __future__ import annotations

import json
import math
import string
from types import SimpleNamespace
from typing import Any, Callable

from wirecheck.core.quantity import DEGREES_C, UNITS, format_bw, format_bytes, format_time

# What a limit is, as `bound` says it (a record written before the field is read by its limit's keys).
BOUNDS = ("floor", "ceiling", "range", "expected", "peers")


def _trim(value: float, decimals: int = 1) -> str:
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def number(value: Any) -> str:
    """4 significant digits, thousands grouped from 10,000 on: 0.005, 1.234, 327.5, 126,668; whole
    numbers as they are."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) and abs(value) < 10_000:
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if 1e4 <= abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _compute(flops: float) -> str:
    # CPU ranks in simulation compute GFLOP/s: shown with their digits, not as 0.0 TFLOP/s
    return f"{flops / 1e12:.1f} TFLOP/s" if abs(flops) >= 1e12 else f"{flops / 1e9:.3g} GFLOP/s"


# Display formats by name (a verdict records the name, so a record shows as it did): each takes the
# value in its kind's base unit (wirecheck.core.quantity: bytes/s, bytes, seconds, a fraction, ...).
FORMATS: dict[str, Callable[[float], str]] = {
    "bandwidth": format_bw,
    "size": format_bytes,
    "memory": lambda b: f"{b / 2**30:.2f} GiB",
    "time": format_time,
    "percent": lambda f: f"{_trim(f * 100)} %",
    "ratio": lambda x: f"{x:.2f}x",
    "params": lambda p: f"{p:.3g} params",
    "throughput": lambda t: f"{t:,.0f} tokens/s",
    "rate": lambda r: f"{_trim(r, 2)} /s",
    "compute": _compute,
    "temperature": lambda c: f"{c:g} {DEGREES_C}",
    "clock": lambda s: f"{int(round(s)) // 3600}:{int(round(s)) % 3600 // 60:02d}:{int(round(s)) % 60:02d}",  # H:MM:SS
    "number": number,  # a plain figure with its unit after it
    "tenths": lambda x: f"{x:,.1f}",  # a figure to a tenth, its unit after it (a GPU's history: 1203.3 TFLOP/s)
}

# The words around the figures, by bound and outcome: {m} the measured value, {b} the bound
# ({lo}, {hi} of a range), {q} the unit a format does not already say ("of the power limit").
RELATIONS = {
    "floor": {"pass": "measured {m} >= {b}{q}", "fail": "measured {m} < floor {b}{q}"},
    "ceiling": {"pass": "measured {m} <= {b}{q}", "fail": "measured {m} > ceiling {b}{q}"},
    "range": {"pass": "measured {m} >= {lo} and <= {hi}{q}"},
    "expected": {"pass": "{m}{q} as expected", "fail": "{m}{q}, expected {b}"},
}
SHORT = {"floor": {"pass": "{m} >= {b}{q}", "fail": "{m} < {b}{q}"},
         "ceiling": {"pass": "{m} <= {b}{q}", "fail": "{m} > {b}{q}"},
         "expected": {"pass": "{m}{q} as expected", "fail": "{m} != {b}{q}"},
         "peers": {"fail": "{m} < median {b} of its peers"}}
BOUND_TEXT = {"floor": ">= {b}{q}", "ceiling": "<= {b}{q}", "range": "{lo} to {hi}{q}", "expected": "expected {b}{q}"}
PEERS = "{m} is {side} the median {median} of {compared}"
PEERS_FAILED = ": more than the {allowed} allowed"
PEERS_PASSED = " (allowed {allowed})"
# How far a figure is from the bound it was judged against ({p}: a share of the bound, or percentage points
# of a percentage), and the rule that made the limit: the line's last words.
MARGIN = {"floor": {"fail": "{p} below", "pass": "{p} above"}, "ceiling": {"fail": "{p} above", "pass": "{p} below"}}
RULE_TEXT = "{rule} limit"
_LONGEST_VALUE = 300  # a measured list (the processes on a GPU) is cut here in the block's fields


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind_factor(v) -> tuple[Callable[[float], str] | None, float, str]:
    """The verdict's format, the factor from its unit to the format's base unit, and the unit words the
    format does not say ("of the power limit" beside a percentage)."""
    fmt, unit = getattr(v, "fmt", None), v.unit
    show = FORMATS.get(fmt) if fmt else None
    if show is None:
        return None, 1.0, unit or ""
    if fmt == "number":
        return show, 1.0, unit or ""
    kind = "size" if fmt == "memory" else fmt
    factors = UNITS.get(kind, {})
    if unit in factors:
        return show, factors[unit], ""
    return show, 1.0, unit or ""


def value_text(v, value: Any, with_unit: bool = True) -> str:
    """One value of the verdict (its measured value, a bound) as its format writes it."""
    if value is None:
        return "-"
    show, factor, words = _kind_factor(v)
    if _scalar(value):
        text = show(value * factor) if show else number(value)
    elif isinstance(value, dict):
        text = ", ".join(f"{k} {value_text(v, x, False)}" for k, x in value.items())
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str)
    if len(text) > _LONGEST_VALUE:
        text = text[:_LONGEST_VALUE] + " ..."
    said = isinstance(value, str) and value.endswith(str(words))  # "400 Gb/s" in Gb/s
    return text + (f" {words}" if with_unit and words and not said and (_scalar(value) or isinstance(value, str)) else "")


def figure(value: Any, unit: str | None, fmt: str | None) -> str:
    """A value of a verdict's kind outside a verdict (a peer's figure beside it), as the verdict writes its own."""
    return value_text(SimpleNamespace(fmt=fmt, unit=unit), value)


def bound_kind(v) -> str | None:
    """The verdict's `bound`, or for a record written before it, what its limit's keys say."""
    if getattr(v, "bound", None):
        return v.bound
    limit = v.limit if isinstance(v.limit, dict) else {}
    low, high = limit.get("min"), limit.get("max")
    if "peers_median" in limit or "median" in limit:
        return "peers"
    if low is not None and high is not None:
        return "range"
    if low is not None:
        return "floor"
    if high is not None:
        return "ceiling"
    if "expected" in limit:
        return "expected"
    return None


_SHORT_UNIT = 6  # a unit word longer than this ("of the power limit") is said once, after the bound


def _fill(v, template: str, b: Any = None, short: bool = False) -> str:
    limit = v.limit if isinstance(v.limit, dict) else {}
    words = _kind_factor(v)[2]
    each = bool(words) and len(words) <= _SHORT_UNIT  # "12 GB/s < 20 GB/s", but "40 % < 90 % of the power limit"
    q = f" {words}" if words and not each else ""
    m, b = value_text(v, v.measured, each), value_text(v, b, each)
    if short and " " in m and " " in b and m.rsplit(" ", 1)[1] == b.rsplit(" ", 1)[1]:
        m = m.rsplit(" ", 1)[0]  # the short form says a shared unit once: "12.34 < 360 GB/s"
    return template.format(m=m, b=b, q=q,
                           lo=value_text(v, limit.get("min"), each), hi=value_text(v, limit.get("max"), each))


def _failed_side(v) -> str | None:
    """Which side of its limit a figure fell on: "floor", "ceiling", or None (inside, or not a figure)."""
    limit = v.limit if isinstance(v.limit, dict) else {}
    low, high = limit.get("min"), limit.get("max")
    if not _scalar(v.measured):
        return None
    if _scalar(low) and v.measured < low:
        return "floor"
    if _scalar(high) and v.measured > high:
        return "ceiling"
    return None


def _peers(v) -> tuple[Any, Any, bool] | None:
    """(median, how far below it, named) of a verdict judged against its peers, or None."""
    limit, d = v.limit if isinstance(v.limit, dict) else {}, v.details or {}
    median = limit.get("peers_median", limit.get("median"))
    below = d.get("below_median", d.get("below"))
    if median is None or below is None:
        return None
    return median, below, bool(d.get("named_by_peers", v.outcome == "fail"))


def _peer_text(v) -> str | None:
    found = _peers(v)
    if found is None:
        return None
    median, below, named = found
    limit, d = v.limit or {}, v.details or {}
    side = f"{below * 100:.1f} % below" if below >= 0 else f"{-below * 100:.1f} % above"
    compared = d.get("compared_with") or f"its {len(d.get('peers') or {}) or '?'} peer(s)"
    allowed = f"{limit.get('max_below_median', 0) * 100:g} %" + (
        f" or {limit['mad_k']:g} x scaled MAD" if limit.get("mad_k") is not None else "")
    text = PEERS.format(m=value_text(v, v.measured), side=side, median=value_text(v, median), compared=compared)
    return text + (PEERS_FAILED if named else PEERS_PASSED).format(allowed=allowed)


def relation(v, short: bool = False) -> str | None:
    """The measured value against its bound, in words ("measured 40 % < floor 90 % of the power limit"),
    or short ("40 % < 90 % of the power limit"); None where there is no comparable bound."""
    kind = bound_kind(v)
    limit = v.limit if isinstance(v.limit, dict) else {}
    if kind in ("floor", "ceiling", "range", "peers") and _scalar(v.measured):
        side = _failed_side(v)
        if side:
            return _fill(v, (SHORT if short else RELATIONS)[side]["fail"], limit.get("min" if side == "floor" else "max"),
                         short)
        if kind == "peers" and short and _peers(v) and _peers(v)[2]:
            return _fill(v, SHORT["peers"]["fail"], _peers(v)[0], short)
        if kind == "range" and not short:
            return _fill(v, RELATIONS["range"]["pass"])
        if limit.get("min") is not None:
            return _fill(v, (SHORT if short else RELATIONS)["floor"]["pass"], limit["min"], short)
        if limit.get("max") is not None:
            return _fill(v, (SHORT if short else RELATIONS)["ceiling"]["pass"], limit["max"], short)
        return None
    if kind == "ceiling" and isinstance(v.measured, str):  # an ordered code (a PCIe path level)
        words = "fail" if v.outcome in ("fail", "warn") else "pass"
        return _fill(v, (SHORT if short else RELATIONS)["ceiling"][words], limit.get("max"), short)
    # a mapping measured (pairs and their transports) reads as its note in the line, in short as "k v != e"
    if kind == "expected" and "expected" in limit and v.measured is not None and (
            short or not isinstance(v.measured, (dict, list))):
        words = "fail" if v.outcome == "fail" else "pass"
        return _fill(v, (SHORT if short else RELATIONS)["expected"][words], limit["expected"], short)
    return None


def margin(v) -> str | None:
    """How far the figure is from its floor or ceiling ("3.4 % below"; a percentage's in points: "32.1 points
    below"); None where there is no single scalar bound."""
    limit = v.limit if isinstance(v.limit, dict) else {}
    kind = bound_kind(v)
    if kind not in ("floor", "ceiling") or not _scalar(v.measured):
        return None
    bound = limit.get("min" if kind == "floor" else "max")
    if not _scalar(bound):
        return None
    gap = abs(v.measured - bound)
    if getattr(v, "fmt", None) == "percent":
        p = f"{_trim(gap * 100)} points"
    elif bound:
        p = f"{_trim(gap / abs(bound) * 100)} %"
    else:
        return None
    return MARGIN[kind]["fail" if _failed_side(v) else "pass"].format(p=p)


def rule_text(v) -> str | None:
    """The rule that made the limit, as the line ends on it ("measured limit"), or None."""
    rule = getattr(v, "rule", None)
    return RULE_TEXT.format(rule=rule) if rule else None


def fill(template: str, /, **facts: Any) -> str:
    """A check's sentence (wirecheck.checks.words) with its facts: `{name}` as the fact is, `{name:FORMAT}`
    written by FORMATS (`{size_bytes:size}`: "1 GiB"; `{bytes_per_s:bandwidth}`), any other spec as
    format() takes it (`{ratio:.2f}`). A fact the sentence names and the check did not give is an error that
    names both."""
    try:
        return _SENTENCES.format(template, **facts)
    except KeyError as exc:
        raise KeyError(f"the sentence {template!r} names the fact {exc.args[0]!r}; given: "
                       f"{', '.join(sorted(facts)) or 'none'}") from None


class _Sentences(string.Formatter):
    def format_field(self, value: Any, spec: str) -> str:
        if spec in FORMATS:
            return FORMATS[spec](value)
        return format(value, spec)


_SENTENCES = _Sentences()


def cite(yaml_path: str | None, source: str | None) -> str:
    """Where a limit is written and where it comes from ("thresholds.yaml: x.y; source: ..."), or ""."""
    if yaml_path and source:
        return f"{yaml_path}; source: {source}"
    if yaml_path:
        return str(yaml_path)
    return f"source: {source}" if source else ""


def citation(v) -> str:
    return cite(v.yaml_path, v.source)


def subject(v) -> str:
    """What was judged, and where: "HBM read bandwidth on GPU3 (0000:1b:00.0)"."""
    place = getattr(v, "place", None) or v.where
    return f"{v.what} on {place}" if place else str(v.what)


def figure_name(v) -> str:
    """The figure's own name, without where or against what ("HBM copy (read+write)", "all_reduce"): the
    check's `figure` or `op` input, else `what`. A page that groups verdicts by figure reads this."""
    inputs = getattr(v, "inputs", None) or {}
    return str(inputs.get("figure") or inputs.get("op") or v.what)


def measured_text(v) -> str:
    return value_text(v, v.measured) if v.measured is not None else "-"


def bound_text(v) -> str:
    """The bound the verdict was judged against: ">= 90 % of the power limit", "expected 8", "-"."""
    kind = bound_kind(v)
    limit = v.limit if isinstance(v.limit, dict) else {}
    if not limit:
        return "-"
    parts = []
    if kind in BOUND_TEXT or kind == "peers":
        if kind == "range":
            parts.append(_fill(v, BOUND_TEXT["range"]))
        elif limit.get("min") is not None:
            parts.append(_fill(v, BOUND_TEXT["floor"], limit["min"]))
        elif limit.get("max") is not None:
            parts.append(_fill(v, BOUND_TEXT["ceiling"], limit["max"]))
    if "expected" in limit:
        parts.append(_fill(v, BOUND_TEXT["expected"], limit["expected"]) if _scalar(limit["expected"])
                     else f"expected {value_text(v, limit['expected'], False)}")
    if _peers(v):
        parts.append(f"at most {limit.get('max_below_median', 0) * 100:g} % below the peers' median "
                     f"{value_text(v, _peers(v)[0])}")
    parts += [f"{k} {number(x)}" for k, x in limit.items()
              if k not in ("min", "max", "expected", "peers_median", "median", "max_below_median") and x is not None]
    return "; ".join(parts) or "-"


def _listed(problems: list) -> str:
    return str(problems[0]) if len(problems) == 1 else "\n  " + "\n  ".join(map(str, problems))


def message(v) -> str:
    """The verdict's line: what on where, what was found (the figure against its bound, by how much, and the rule
    that made the limit; or the problems, listed below it), then its note and (failed or warned) its hint. Where
    the limit is written and where its number comes from is the limit's, said once per limit (`provenance`),
    never in the line."""
    head = subject(v)
    hint = getattr(v, "hint", "") or ""
    note = getattr(v, "note", "") or ""
    if v.outcome == "skip":
        return f"{head}: {hint or 'not judged'}"
    details = v.details or {}
    problems = details.get("problems") or []
    if problems:
        # what they mean first, then the list: a hint after the last of several problems would read as its own
        body = (f"{hint}: " if hint else "") + _listed(problems)
        hint = ""
    elif bound_kind(v) == "peers":
        # two limits: the model's floor and the peers' rule; the rule that failed it (or the floor's) last
        body = "; ".join(p for p in (relation(v), _peer_text(v)) if p) or measured_text(v)
        body += f" ({rule_text(v)})" if rule_text(v) else ""
    else:
        body = _judged(v, relation(v))
        if body is None and note:  # nothing to compare: the note says what was found
            body, note = note, ""
        elif body is None:
            body = measured_text(v) if v.measured not in (None, [], {}) else "failed" if v.outcome == "fail" else "ok"
    text = f"{head}: {body}"
    if note:
        text += f"; {note}"
    if hint and v.outcome in ("fail", "warn"):
        text += f"; {hint}"
    return text


def _judged(v, relation_text: str | None) -> str | None:
    """The figure against its bound, then by how much and the rule: "measured 598 < floor 619 TFLOP/s, 3.4 %
    below (measured limit)"."""
    if relation_text is None:
        return None
    by, rule = margin(v), rule_text(v)
    return relation_text + (f", {by}" if by else "") + (f" ({rule})" if rule else "")


def provenance(v) -> tuple[str, str] | None:
    """(where the limit is written, where its number comes from) of the verdict's limit, or None: what a page
    shows once per limit behind a disclosure, and the terminal with -v, never in every line."""
    if not (getattr(v, "yaml_path", None) or getattr(v, "source", None)):
        return None
    return str(v.yaml_path or "-"), str(v.source or "-")


def provenances(verdicts) -> list[tuple[str, str]]:
    """Each distinct limit's provenance among `verdicts`, in their order, once."""
    seen: dict[tuple[str, str], None] = {}
    for v in verdicts:
        found = provenance(v)
        if found is not None:
            seen.setdefault(found, None)
    return list(seen)


def summary(v) -> str:
    """One short line for pytest's short summary: the figure against its bound, else the message's first
    line (a list of problems, a hang)."""
    short = relation(v, short=True) if v.outcome in ("fail", "warn") else None
    if short:
        return f"{v.check} {short}"
    first = (v.message or message(v)).strip().splitlines()
    return first[0] if first else f"{v.check} {v.outcome}"


def gist(v) -> str:
    """What was wrong, in a few words, from the structure: the figure against its bound, else the first
    problem, else what was judged."""
    short = relation(v, short=True)
    if short:
        return short
    problems = (v.details or {}).get("problems") or []
    if problems:
        return str(problems[0]).splitlines()[0]
    if v.measured not in (None, [], {}):
        return f"{v.what}: {value_text(v, v.measured)}"
    return f"{v.what} {v.outcome}ed" if v.outcome == "fail" else str(v.what)


def drain_reason(v) -> str:
    """`<check> <where> <measured> < <limit>`: the line a scheduler keeps about a failed node (before
    wirecheck.records.reason makes it ASCII and cuts it to its reader's length)."""
    return f"{v.check or v.what or 'check'} {v.where or 'node'} {gist(v)}"


def judge_lines(v) -> list[str]:
    """`wirecheck judge`'s lines for one verdict judged again: outcome, check, where and the message; a
    failure's figures and where its limit is written below it (where its number comes from: `judge -v`)."""
    head = f"{v.outcome.upper():4} {v.check:22} {v.where or 'node':28}"
    lines = [f"{head} {v.message or message(v)}"]
    if v.outcome == "fail" and v.measured is not None:
        lines.append(f"     measured {measured_text(v)}; limit {bound_text(v)}"
                     + (f" ({v.yaml_path})" if getattr(v, "yaml_path", None) else ""))
    return lines


# ---- a fleet diagnosis (`wirecheck fleet diagnose`): each suspect's pairs with known-good partners ----------
# The finding's one line by what the pairs showed ({s} the node; {n} good partners measured, {k} of them slow,
# {slow} and {fine} their names; a path's {a}, {b}, its {busbw} and the reference {median}), then the part
# it names. wirecheck.fleet.diagnosis decides which; the words are only here.
DIAGNOSIS_PARTS = {"fleet_node": "the node (its NICs, its PCIe path to them, or its GPUs)",
                   "fleet_path": "the switch or cables between their leaves"}
DIAGNOSIS = {
    "no_reference": "node {s}: not localized: no pair of two known-good nodes was measured, so nothing says what a "
                    "pair should reach; run again with at least 2 good partners (--good)",
    "found": "node {s}: slow with {n} of {n} good partners: {part}",
    "some_slow": "node {s}: not localized: slow with {slow} ({k} of {n} good partners), fine with {fine}: those "
                 "partners' paths, or a node slow only at times",
    "only_partner_slow": "node {s}: not localized: slow with its only measured good partner {slow}: the node or the "
                         "path to it; pass more partners with --good",
    "none_measured": "node {s}: not localized: no pair with a good partner was measured",
    "not_reproduced": "node {s}: not reproduced: fine with {n} of {n} good partners",
    "path": "path {a}~{b}: slow only together ({busbw} against the reference {median}), each fine with its good "
            "partners: {part}",
    "also_path": "; slow only with {other}: the path {path}",  # a node's line, when a path of it was found
}
# One pair of a suspect as evidence: {partner}, its {busbw}, {side} ("12 % below") the reference {median}.
DIAGNOSIS_PAIRS = {
    "not measured": "with {partner}: not measured (the pair run broke before it, or it was not planned)",
    "measured": "with {partner}: {busbw}, {side} the reference {median}{floor}: {status}",
    "no_reference": "with {partner}: {busbw}, no reference measured to hold it against{floor}",
    "below_floor": "; below the pair floor",
    "suspect": "suspect {text}",  # a pair of two suspects, in each one's evidence
    "path": "{a}-{b}: {busbw}, {below} % below the reference",
}


def pair_bw(bytes_per_s: float | None) -> str:
    """A pair's busbw with three significant digits (simulated pairs run at a few hundredths of a GB/s)."""
    return "-" if bytes_per_s is None else f"{bytes_per_s / 1e9:.3g} GB/s"


def diagnosis_pair(partner: str, status: str, busbw: float | None, below: float | None, below_floor: bool,
                   median: float | None, between_suspects: bool = False) -> str:
    """One evidence line: the suspect's pair with `partner` (busbw and the reference median in bytes/s, `below`
    the fraction under the median, negative above it; `status` slow, fine or not measured)."""
    floor = DIAGNOSIS_PAIRS["below_floor"] if below_floor else ""
    if busbw is None:
        text = DIAGNOSIS_PAIRS["not measured"].format(partner=partner)
    elif below is None or median is None:
        text = DIAGNOSIS_PAIRS["no_reference"].format(partner=partner, busbw=pair_bw(busbw), floor=floor)
    else:
        side = f"{abs(below) * 100:.0f} % {'below' if below >= 0 else 'above'}"
        text = DIAGNOSIS_PAIRS["measured"].format(partner=partner, busbw=pair_bw(busbw), side=side,
                                                  median=pair_bw(median), floor=floor, status=status)
    return DIAGNOSIS_PAIRS["suspect"].format(text=text) if between_suspects else text


def diagnosis_node(node: str, result: str, slow: list[str], fine: list[str], reference: bool,
                   paths: list[tuple[str, str]] = ()) -> str:
    """A suspect node's line, from its result ("found", "not localized", "not reproduced"), the good partners it
    was slow and fine with, whether a reference was measured, and the paths of it found ((other end, pair key))."""
    n, k = len(slow) + len(fine), len(slow)
    words = dict(s=node, n=n, k=k, slow=", ".join(slow), fine=", ".join(fine), part=DIAGNOSIS_PARTS["fleet_node"])
    if not reference:
        case = "no_reference"
    elif result == "found":
        case = "found"
    elif result == "not reproduced":
        case = "not_reproduced"
    elif slow and fine:
        case = "some_slow"
    elif slow:
        case = "only_partner_slow"
    else:
        case = "none_measured"
    return DIAGNOSIS[case].format(**words) + "".join(DIAGNOSIS["also_path"].format(other=o, path=p) for o, p in paths)


def diagnosis_path(a: str, b: str, busbw: float, median: float) -> str:
    """A found path's line: the two suspects slow only together."""
    return DIAGNOSIS["path"].format(a=a, b=b, busbw=pair_bw(busbw), median=pair_bw(median),
                                    part=DIAGNOSIS_PARTS["fleet_path"])


def diagnosis_path_evidence(a: str, b: str, busbw: float, below: float) -> str:
    return DIAGNOSIS_PAIRS["path"].format(a=a, b=b, busbw=pair_bw(busbw), below=f"{below * 100:.0f}")


def diagnosis_finding(label: str, result: str, culprit: str | None) -> str:
    """One suspect of a node's own diagnosis (`wirecheck diagnose`): "busbw on pair-0.1: found: <culprit>"."""
    return f"{label}: {result}" + (f": {culprit}" if culprit else "")


def diagnosis_what(kind: str, subject: str) -> str:
    """What a fleet diagnosis verdict judged: "diagnosis of node gpu04 across nodes"."""
    return f"diagnosis of {'node' if kind == 'fleet_node' else 'the path'} {subject} across nodes"


def diagnosis_part(kind: str, subject: str) -> str:
    """The part a found fleet diagnosis names: the node itself, or "the path a~b"."""
    return subject if kind == "fleet_node" else f"the path {subject}"


def diagnosis_lines(line: str, evidence: list[str]) -> list[str]:
    """A diagnosis as lines: its one line, then each piece of evidence indented (the verdict's message, the
    fleet report's text and page)."""
    return [line] + [f"  {e}" for e in evidence]
