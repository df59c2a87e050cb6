"""What the sections of thresholds.yaml share: Limit (a floor and/or ceiling and where it came
from), GPU-count tables (2, 4, 8 ... or `any` -> Limit) with their lookup and reader, the reader of
a single figure and its source, and the placement classes whose floor sections must be present.

Kept apart from wirecheck.thresholds.file so that wirecheck.thresholds.training, which
wirecheck.thresholds.file imports, can use them without importing it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

from wirecheck.vocab.placements import CLASSES, CLASS_SINGLE
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, STAR, _At, _trace

ANY = "any"  # a GPU-count (or placement-class) key that matches whatever has no entry of its own

# Sections that must be present, even if empty ({} = judged by the derived floor only): a class
# left out by accident would otherwise judge nothing, silently.
COLLECTIVE_FLOOR_CLASSES = tuple(c for c in CLASSES if c != CLASS_SINGLE)  # one GPU has no collective


@dataclass(frozen=True)
class Limit:
    """A floor and/or ceiling in base units (bytes/s for bandwidth), with where it came from."""

    min: float | None
    max: float | None
    source: str
    yaml_path: str
    kind: str = "bandwidth"  # the quantity kind of min/max, for formatting (wirecheck.core.quantity)
    rule: str = "measured"  # which rule made it (wirecheck.core.verdict.RULES)
    # The entry's `hardware:` (wirecheck.node.hardware.MATCH_KEYS -> value): it applies to that hardware
    # only; None: to any node of its class.
    # (A plain dict kept out of eq/hash: a Limit stays hashable and JSON-able.)
    hardware: Mapping[str, Any] | None = field(default=None, compare=False)
    # What a calibrated entry says it resolves (its provenance's `resolution`, written by wirecheck calibrate):
    # {"step": the loss its floor catches in 95 % of runs, "false_alarms": ..., "history": the history rule's
    # step on the same runs' noise}, fractions; None: an entry that does not say.
    resolution: Mapping[str, float] | None = field(default=None, compare=False)


def describe_hardware(spec: Mapping[str, Any]) -> str:
    """{nvlink: 4, links: 18} -> "NVLink 4 x 18"; {gpu_model: NVIDIA H200} -> "NVIDIA H200"."""
    parts = []
    if "gpu_model" in spec:
        parts.append(str(spec["gpu_model"]))
    if "nvlink" in spec or "links" in spec:
        parts.append(f"NVLink {spec.get('nvlink', '?')} x {spec.get('links', '?')}")
    if "pcie_gen" in spec or "pcie_width" in spec:
        parts.append(f"PCIe Gen{spec.get('pcie_gen', '?')} x{spec.get('pcie_width', '?')}")
    return ", ".join(parts)


def applies(limit: Limit | None, hardware) -> tuple[Limit | None, str]:
    """(the limit, "") when it applies to `hardware` (a wirecheck.node.hardware.Hardware; None: not known,
    as in a record written before hardware was recorded: the entry applies); else (None, why not)."""
    if limit is None or not limit.hardware or hardware is None:
        return limit, ""
    ok, why = hardware.matches(limit.hardware)
    if ok:
        return limit, ""
    return None, f"{limit.yaml_path} was measured on {describe_hardware(limit.hardware)}, {why}"


def lookup(table: "CountTable | None", n_gpus: int, hardware=None) -> tuple[Limit | None, str]:
    """A GPU-count table's entry for `n_gpus` (exact, then `any`) that applies to `hardware`, or (None,
    why the entries there do not apply). An exact entry for other hardware falls to `any`."""
    notes = []
    for key in (n_gpus, ANY):
        found, why = applies((table or {}).get(key), hardware)
        if found is not None:
            return found, ""
        if why:
            notes.append(why)
    return None, "; ".join(notes)


# A GPU-count table: {2: Limit, 8: Limit, "any": Limit}.
CountTable = Mapping["int | str", Limit]


def _by_count(table: CountTable | None, n_gpus: int) -> Limit | None:
    if not table:
        return None
    return table.get(n_gpus) or table.get(ANY)


def _check_name(value: str, known: tuple[str, ...], what: str) -> None:
    """Callers passing an unknown class/op/strategy is a bug in the caller, not in the file."""
    if value not in known:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")


def _count_key(at: _At, key: Any) -> int | str:
    """A GPU-count key: 2, 4, 8 ... or `any` (`"*"`: the same, every count not named)."""
    if key in (ANY, STAR):
        return ANY
    if isinstance(key, int) and not isinstance(key, bool) and key >= 1:
        return key
    if isinstance(key, str) and key.isdigit() and int(key) >= 1:
        return int(key)
    raise at.child(key).error(
        f"GPU count key {str(key)!r} is not a whole number of GPUs",
        'key the entries by GPU count (2, 4, 8, ...) or `any` (or "*": every count not named)',
    )


def _count_table(at: _At, what: str, entry: Callable[[_At], Limit]) -> dict[int | str, Limit]:
    at.mapping(f"GPU count -> {what}", allow_empty=False)
    _trace(at.path, "counts", None)
    table: dict[int | str, Limit] = {}
    for key in at.value:
        n = _count_key(at, key)
        if n in table:
            raise at.child(key).error(f"GPU count {n} appears twice (as {key!r} and as another spelling: `any` and "
                                      '"*" are the same entry)', "keep one")
        # `"*"` lies under the counts written beside it, as in a section keyed by op.
        table[n] = entry(at.star(ANY) if key == STAR else at._member(key, star=True))
    return MappingProxyType(table)


# Keys any limit entry may carry beside its bounds and source: which rule made it, and (for a
# calibrated one) what it was calibrated on. Written by `wirecheck calibrate`.
FILE_RULES = ("measured", "calibrated")  # the rules a file can state; the others are made by code
ENTRY_EXTRAS = {
    "rule": "calibrated  (measured: the default, a reading on this hardware; calibrated: wirecheck calibrate)",
    "provenance": "{nodes: [...], gpus: [...], dates: [...], n: 5, spread: \"0.6 %\", resolution: {step: \"2.1 %\", "
                  "false_alarms: \"0.0 %\", history: \"0.6 %\", measured: ..., peers: ..., fleet: ...}}  (what a "
                  "calibrated limit was made from, and the losses it and the other rules catch on those runs)",
}
RESOLUTION_KEYS = ("step", "false_alarms", "history", "measured", "derived", "peers", "fleet")


def entry_resolution(f: dict[str, _At]) -> Mapping[str, float] | None:
    """The `resolution:` a calibrated entry's provenance states (wirecheck calibrate writes it), as fractions."""
    if "provenance" not in f or not isinstance(f["provenance"].value, dict) or "resolution" not in f["provenance"].value:
        return None
    at = f["provenance"].child("resolution")
    fields = at.fields("a limit's resolution", required={"step": '"2.1 %"'},
                       optional={"false_alarms": '"0.0 %"', "history": '"0.6 %"', "measured": '"12.6 %"',
                                 "derived": '"13.8 %"', "peers": '"11.3 %"', "fleet": '"11.3 %"'})
    return MappingProxyType({k: fields[k].quantity("percent") for k in RESOLUTION_KEYS if k in fields})


def entry_rule(f: dict[str, _At], at: _At) -> str:
    """The `rule:` of a limit entry (default measured); a calibrated one must say what it was made from."""
    rule = f["rule"].choice(FILE_RULES) if "rule" in f else "measured"
    if "provenance" in f:
        f["provenance"].mapping("provenance fields (nodes, gpus, dates, n, spread)", allow_empty=False)
    elif rule == "calibrated":
        raise at.error("rule: calibrated without provenance",
                       "add provenance: {nodes: [...], gpus: [...], dates: [...], n: ..., spread: ...} "
                       "(wirecheck calibrate writes it)")
    return rule
HARDWARE_HINT = "{nvlink: 4, links: 18}  (or {gpu_model: NVIDIA H200}, {pcie_gen: 5, pcie_width: 16}: what it was measured on)"
_HARDWARE_KEYS = {"gpu_model": "NVIDIA H200  (the name NVML reports)", "nvlink": "4  (the NVLink generation: 3, 4, 5)",
                  "links": "18  (NVLinks per GPU)", "pcie_gen": "5", "pcie_width": "16"}


def hardware_spec(at: _At) -> Mapping[str, Any]:
    """An entry's `hardware:` -> {key: value}: the GPU model, NVLink generation and link count, PCIe
    generation and width it was measured on."""
    f = at.fields("the hardware an entry was measured on", {}, _HARDWARE_KEYS)
    if not f:
        raise at.error("names no hardware", f"write e.g. hardware: {HARDWARE_HINT}, or remove it (any node of the class)")
    out: dict[str, Any] = {}
    for key, field_at in f.items():
        if key == "gpu_model":
            out[key] = field_at.text()
        else:
            out[key] = field_at.count(minimum=1)
    return out


# The kinds of limit the sections share, each read in one place: a bounds entry (a floor and/or
# ceiling with its unit, source, rule and hardware: every table of busbw, latency, n½, copies and
# tokens/s), one figure with its source (an efficiency, a ratio, a tolerance) and the below-the-median
# rule (fleet figures, a GPU against its peers).


def _bounds_entry(at: _At, kind: str, allowed: tuple[str, ...], required: tuple[str, ...] = (),
                  what: str = "a limit entry", positive: bool = False) -> Limit:
    """{min: ..., max: ..., source: ..., hardware: ...} -> Limit. At least one bound; min <= max."""
    example = {"bandwidth": '"290 GB/s"', "size": '"40 GiB"', "throughput": '"20000 tokens/s"', "time": '"30 µs"'}[kind]
    spec_required = {"source": SOURCE_HINT} | {k: example for k in required}
    spec_optional = {k: example for k in allowed if k not in required} | ENTRY_EXTRAS | {"hardware": HARDWARE_HINT}
    f = at.fields(what, spec_required, spec_optional)
    if not any(k in f for k in ("min", "max")):
        raise at.error("has neither min nor max", f"add min: {example} (a floor) or max: {example} (a ceiling)")
    low = f["min"].quantity(kind, positive=positive) if "min" in f else None
    high = f["max"].quantity(kind, positive=positive) if "max" in f else None
    if low is not None and high is not None and low > high:
        raise at.error(
            f"min {f['min'].value} is above max {f['max'].value}", "no value could pass; swap them or fix one"
        )
    hardware = hardware_spec(f["hardware"]) if "hardware" in f else None
    return Limit(min=low, max=high, source=f["source"].source(), yaml_path=at.cite, kind=kind, rule=entry_rule(f, at),
                 hardware=hardware, resolution=entry_resolution(f))


def as_rule(table: Mapping, rule: str) -> Mapping:
    """A parsed table (nested mappings of Limit) with every Limit's rule set to `rule` (simulated ones)."""
    out = {}
    for key, value in table.items():
        out[key] = replace(value, rule=rule) if isinstance(value, Limit) else as_rule(value, rule)
    return MappingProxyType(out)


def _ratio_section(at: _At, key: str, kind: str, example: str, of: str | None = None) -> tuple[float, str]:
    """{KEY: "8 x", source: ...} -> (the value in base units, its source): one figure and where it came
    from. `of`: the figure is an efficiency, a share of `of` (above 0, at most 100 %)."""
    f = at.fields(f"{key} and source", required={key: example, "source": SOURCE_HINT})
    return (efficiency(f[key], of) if of else f[key].quantity(kind)), f["source"].source()


def efficiency(at: _At, of: str) -> float:
    """A share of a peak or link ("60 %" -> 0.6): above 0 and at most 100 %, as no floor can exceed `of`."""
    value = at.quantity("percent", positive=True)
    if value > 1:
        raise at.error("is above 100 %", f"a floor cannot exceed {of}; write at most 100 %")
    return value


def median_rule(at: _At, what: str, example: str, named: str) -> tuple[float, float, str]:
    """{max_below_median: "5 %", mad_k: "3 x", source: ...} -> (share, k, source): a `named` (node, GPU)
    is named below its peers' median by more than the share AND k scaled MADs."""
    f = at.fields(what, required={"max_below_median": example, "mad_k": '"3 x"', "source": SOURCE_HINT})
    below = f["max_below_median"].quantity("percent")
    if below >= 1:
        raise f["max_below_median"].error("is 100 % or more", f"no {named} could ever be named; write less than 100 %")
    return below, f["mad_k"].quantity("ratio"), f["source"].source()
