"""A limit and the tables that hold them: `Limit` (a floor and/or ceiling, typed, with where it came from
and which rule made it), the entry it is written as (bounds, source, `rule:`, `provenance:`, `hardware:`),
and `Table`, the kind a check declares for a floor or ceiling keyed by axes (placement class, op,
strategy, fabric, copy direction, GPU model, GPU count), read and looked up here for every table alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from wirecheck.core.quantity import EXAMPLES, Quantity
from wirecheck.core.verdict import source_rule
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, STAR, _At, _trace

ANY = "any"  # a GPU-count (or placement-class) key that matches whatever has no entry of its own


@dataclass(frozen=True)
class Limit:
    """A floor and/or ceiling (`Quantity` values in base units), with where it came from."""

    min: float | None
    max: float | None
    source: str
    yaml_path: str
    kind: str = "bandwidth"  # the quantity kind of min/max (wirecheck.core.quantity)
    rule: str = "measured"  # which rule made it (wirecheck.core.verdict.RULES)
    # The entry's `hardware:` (wirecheck.node.hardware.MATCH_KEYS -> value): it applies to that hardware only;
    # None: to any node of its class. (Kept out of eq/hash: a Limit stays hashable and JSON-able.)
    hardware: Mapping[str, Any] | None = field(default=None, compare=False)
    # What a calibrated entry says it resolves (its provenance's `resolution`, written by wirecheck calibrate):
    # {"step": the loss its floor catches in 95 % of runs, "false_alarms": ..., "history": the history rule's
    # step on the same runs' noise}, fractions; None: an entry that does not say.
    resolution: Mapping[str, float] | None = field(default=None, compare=False)

    def __post_init__(self):
        for bound in ("min", "max"):
            value = getattr(self, bound)
            if value is not None and not isinstance(value, Quantity):
                object.__setattr__(self, bound, Quantity(value, self.kind))


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
    """(the limit, "") when it applies to `hardware` (wirecheck.node.hardware.Hardware; None: unknown, as in a
    record written before hardware was recorded: the entry applies); else (None, why not)."""
    if limit is None or not limit.hardware or hardware is None:
        return limit, ""
    ok, why = hardware.matches(limit.hardware)
    if ok:
        return limit, ""
    return None, f"{limit.yaml_path} was measured on {describe_hardware(limit.hardware)}, {why}"


def lookup(table: "Mapping | None", n_gpus: int, hardware=None) -> tuple[Limit | None, str]:
    """A GPU-count table's entry for `n_gpus` (exact, then `any`) that applies to `hardware`, or (None, why
    the entries there do not apply). An exact entry for other hardware falls to `any`."""
    notes = []
    for key in (n_gpus, ANY):
        found, why = applies((table or {}).get(key), hardware)
        if found is not None:
            return found, ""
        if why:
            notes.append(why)
    return None, "; ".join(notes)


def check_name(value: str, known: tuple[str, ...], what: str) -> None:
    """Callers passing an unknown class/op/strategy is a bug in the caller, not in the file."""
    if value not in known:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")


# --- an entry: {min: ..., max: ..., source: ..., rule: ..., provenance: ..., hardware: ...} ------------------

FILE_RULES = ("measured", "guess", "calibrated")  # the rules a file can state; the others are made by code
ENTRY_EXTRAS = {
    "rule": "calibrated  (measured: a reading on this hardware; guess: none yet, its source starts `guess:`; "
            "calibrated: wirecheck calibrate; without it the source says which of the first two)",
    "provenance": "{nodes: [...], gpus: [...], dates: [...], n: 5, spread: \"0.6 %\", resolution: {step: \"2.1 %\", "
                  "false_alarms: \"0.0 %\", history: \"0.6 %\", measured: ..., peers: ..., fleet: ...}}  (what a "
                  "calibrated limit was made from, and the losses it and the other rules catch on those runs)",
}
RESOLUTION_KEYS = ("step", "false_alarms", "history", "measured", "derived", "peers", "fleet")
HARDWARE_HINT = "{nvlink: 4, links: 18}  (or {gpu_model: NVIDIA H200}, {pcie_gen: 5, pcie_width: 16}: what it was measured on)"
_HARDWARE_KEYS = {"gpu_model": "NVIDIA H200  (the name NVML reports)", "nvlink": "4  (the NVLink generation: 3, 4, 5)",
                  "links": "18  (NVLinks per GPU)", "pcie_gen": "5", "pcie_width": "16"}


def hardware_spec(at: _At) -> Mapping[str, Any]:
    """An entry's `hardware:` -> {key: value}: the GPU model, NVLink generation and link count, PCIe
    generation and width it was measured on."""
    f = at.fields("the hardware an entry was measured on", {}, _HARDWARE_KEYS)
    if not f:
        raise at.error("names no hardware", f"write e.g. hardware: {HARDWARE_HINT}, or remove it (any node of the class)")
    return {key: (v.text() if key == "gpu_model" else v.count(minimum=1)) for key, v in f.items()}


def entry_resolution(f: dict[str, _At]) -> Mapping[str, float] | None:
    """The `resolution:` a calibrated entry's provenance states (wirecheck calibrate writes it), as fractions."""
    if "provenance" not in f or not isinstance(f["provenance"].value, dict) or "resolution" not in f["provenance"].value:
        return None
    at = f["provenance"].child("resolution")
    fields = at.fields("a limit's resolution", required={"step": '"2.1 %"'},
                       optional={"false_alarms": '"0.0 %"', "history": '"0.6 %"', "measured": '"12.6 %"',
                                 "derived": '"13.8 %"', "peers": '"11.3 %"', "fleet": '"11.3 %"'})
    return MappingProxyType({k: fields[k].quantity("percent") for k in RESOLUTION_KEYS if k in fields})


def entry_rule(f: dict[str, _At], at: _At, own: Callable[[str], bool]) -> str:
    """The `rule:` of a limit entry: as it states it, else as its source says (`guess:` or a measurement), else
    `site` (a bound set over another file's entry with neither of its own); a rule its source contradicts is
    refused, and a calibrated one must say what it was made from. `own(key)`: the key describes this bound."""
    if own("rule"):
        rule = f["rule"].choice(FILE_RULES)
        if own("source") and (rule == "guess") != (source_rule(f["source"].value) == "guess"):
            said = "a guess" if rule != "guess" else "no guess"
            raise f["rule"].error(f"rule: {rule}, but its source is {said} ({str(f['source'].value)[:60]!r})",
                                  "a limit no run measured is rule: guess with a source starting `guess:`; make the "
                                  "two agree, or drop rule: and the source says which")
    else:
        rule = source_rule(f["source"].value) if own("source") else "site"
    if own("provenance"):
        f["provenance"].mapping("provenance fields (nodes, gpus, dates, n, spread)", allow_empty=False)
    elif rule == "calibrated":
        raise at.error("rule: calibrated without provenance",
                       "add provenance: {nodes: [...], gpus: [...], dates: [...], n: ..., spread: ...} "
                       "(wirecheck calibrate writes it)")
    return rule


# A bound as an entry's error shows it (a peak memory, a small message's time), else the kind's own example.
_ENTRY_EXAMPLES = {"size": "40 GiB", "time": "30 µs"}


@dataclass(frozen=True)
class Entry:
    """How a table's entries are written: the quantity kind, the bounds allowed and required, and whether an
    entry may name its hardware (a table keyed by GPU model is that model's)."""

    kind: str
    bounds: tuple[str, ...] = ("min", "max")
    required: tuple[str, ...] = ()
    what: str = "a limit entry"
    positive: bool = False
    hardware: bool = True

    def read(self, at: _At) -> Limit:
        example = f'"{_ENTRY_EXAMPLES.get(self.kind, EXAMPLES[self.kind])}"'
        bounds = {k: example for k in self.bounds}
        if self.hardware:
            required = {"source": SOURCE_HINT} | {k: example for k in self.required}
            optional = {k: v for k, v in bounds.items() if k not in self.required} | ENTRY_EXTRAS | {"hardware": HARDWARE_HINT}
        else:  # a per-model floor: its bound first, as the GPU-health floors were always written
            required = {k: example for k in self.required} | {"source": SOURCE_HINT}
            optional = ENTRY_EXTRAS
        f = at.fields(self.what, required, optional)
        if not any(k in f for k in ("min", "max")):
            raise at.error("has neither min nor max", f"add min: {example} (a floor) or max: {example} (a ceiling)")
        low, high = (f[k].quantity(self.kind, positive=self.positive) if k in f else None for k in ("min", "max"))
        if low is not None and high is not None and low > high:
            raise at.error(f"min {f['min'].value} is above max {f['max'].value}", "no value could pass; swap them or fix one")
        # A file laid over another (`extends:`) merges an entry key by key: a bound it sets there keeps the lower
        # file's source, rule and provenance, which were for that file's value. Only what the bound's own file
        # says of it counts (`at.file`: the file that wrote the entry last).
        here = [k for k in ("min", "max") if k in f and f[k].file == at.file]

        def own(key: str) -> bool:
            return key in f and (not here or f[key].file == at.file)

        source = f["source"].source()
        if not own("source"):
            source = (f"none: {Path(at.file).name} sets {' and '.join(here)} here without a source: of its own (the one "
                      f"under it, in {Path(f['source'].file).name}, was for that file's value)")
        return Limit(min=low, max=high, source=source, yaml_path=at.cite, kind=self.kind,
                     rule=entry_rule(f, at, own), hardware=hardware_spec(f["hardware"]) if "hardware" in f else None,
                     resolution=entry_resolution(f) if own("provenance") else None)


# --- a table -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """One key level of a table: its names (a function: the vocabulary may grow; None: any name, a GPU model
    as NVML names it), what one is called and how an error says so."""

    name: str  # the lookup's argument, for messages: "op", "klass", "model"
    names: Callable[[], tuple[str, ...]] | None
    word: str  # "placement class"
    fix: str = ""  # "ops are"; "{what}" stands for the table's `what`
    extra: tuple[str, ...] = ()  # names allowed beside the known ones (`any` placement class)

    def known(self) -> tuple[str, ...]:
        return tuple(self.names()) if self.names else ()

    def read(self, at: _At, what: str) -> dict[Any, _At]:
        if self.names is None:
            out = {}
            for name in at.mapping(f"{self.word} entries"):
                out[name] = child = at.child(name)
                if not isinstance(name, str) or not name.strip():
                    raise child.error("a GPU model must be its name as NVML reports it", 'e.g. "NVIDIA H200"')
            return out
        return at.keyed(self.known() + self.extra, self.word, self.fix.format(what=what))


COUNT = "count"  # the last axis of a table keyed by GPU count: 2, 4, 8 ... or `any` (`"*"`: every count not named)


@dataclass(frozen=True)
class Table:
    """A floor and/or ceiling keyed by `axes` (the last may be COUNT), read from `key`, each entry as `entry`
    says; `rule` for every entry (simulated tables); `simulated`: the table simulation reads instead, and
    `none_simulated` why a name has none there; `derived`: the rule that makes a limit where the table has
    none, `(thresholds, names, n_gpus, hardware, unmatched, **physics) -> (Limit | None, why)`; `present`:
    the first axis's names the file must write (maybe as {}); `cover`: (axis, why) whose every name needs an
    entry somewhere, so a name added to the vocabulary without its limit is named when the file loads (not
    in a file a run recorded: it names what that run measured, and a name added since has no verdict there);
    `plausible(at, table, values)`: limits no node could meet, refused."""

    key: str
    axes: tuple[Any, ...]
    entry: Entry
    what: str
    rule: str | None = None
    simulated: "Table | None" = None
    none_simulated: str = ""
    derived: Callable | None = None
    present: Callable[[], tuple[str, ...]] | None = None
    cover: tuple[str, str] | None = None
    match_hardware: bool = True
    plausible: Callable | None = None
    example: str = "{...}"
    optional: bool = False

    @property
    def place(self) -> str:
        return self.key

    @property
    def counted(self) -> bool:
        return bool(self.axes) and self.axes[-1] == COUNT

    def read(self, at: _At, values: Mapping[str, Any], cover: bool = True) -> Mapping[tuple, Any]:
        names = [a for a in self.axes if a != COUNT]
        table: dict[tuple, Any] = {}

        def walk(here: _At, depth: int, prefix: tuple) -> None:
            if depth == len(names):
                table[prefix] = self._counts(here, prefix) if self.counted else self._entry(here, prefix)
                return
            found = names[depth].read(here, self.what)
            if depth == 0 and self.present:
                for name in self.present():
                    if name not in found:
                        unjudged = "judge it by the derived floor only" if self.derived else "leave it unjudged"
                        raise here.error(f"missing placement class {name!r}",
                                         f"add a {name}: section (or {name}: {{}} to {unjudged})")
            for name, child in found.items():
                walk(child, depth + 1, prefix + (name,))

        walk(at, 0, ())
        if cover:
            self._covered(at, table)
        if self.plausible:
            self.plausible(at, table, values)
        return MappingProxyType(table)

    def _entry(self, at: _At, names: tuple) -> Limit:
        model = names[0] if self.axes and self.axes[0] != COUNT and self.axes[0].names is None else None
        entry = self.entry(names) if callable(self.entry) else self.entry
        limit = entry.read(at)
        if model is not None:  # keyed by the model: that is the hardware it was measured on (or guessed for)
            limit = replace(limit, hardware={"gpu_model": model})
        return replace(limit, rule=self.rule) if self.rule else limit

    def _counts(self, at: _At, names: tuple) -> Mapping:
        what = self.what
        at.mapping(f"GPU count -> {what}", allow_empty=False)
        _trace(at.path, "counts", None)
        counts: dict[Any, Limit] = {}
        for key in at.value:
            n = _count_key(at, key)
            if n in counts:
                raise at.child(key).error(f"GPU count {n} appears twice (as {key!r} and as another spelling: `any` and "
                                          '"*" are the same entry)', "keep one")
            # `"*"` lies under the counts written beside it, as in a section keyed by op.
            counts[n] = self._entry(at.star(ANY) if key == STAR else at._member(key, star=True), names)
        return MappingProxyType(counts)

    def _covered(self, at: _At, table: Mapping[tuple, Any]) -> None:
        if not self.cover:
            return
        axis_name, example = self.cover
        i = [a.name for a in self.axes if a != COUNT].index(axis_name)
        axis = self.axes[i]
        have = {names[i] for names in table}
        for name in axis.known():
            if name not in have:
                raise at.error(f"no {self.what} for the {axis.word} {name!r}: it would not be judged, and nothing would "
                               "say so", example.format(name=name))

    def check(self, names: tuple) -> None:
        for axis, name in zip(self.axes, names):
            if axis != COUNT and axis.names is not None:
                check_name(name, axis.known() + axis.extra, axis.word)

    def resolve(self, thresholds, names: tuple, n_gpus: int | None, simulated: bool, hardware,
                **physics: Any) -> tuple[Limit | None, str]:
        """(the limit for `names` and `n_gpus`, "") or (None, why there is none): in simulation the simulated
        table's; else the entry (exact count, then `any`) measured on this `hardware`; else the derived rule's."""
        self.check(names)
        if simulated:
            if self.simulated is None:
                return None, ""
            found, why = self.simulated._find(thresholds.values, names[1:], n_gpus, None)
            words = {a.name: n for a, n in zip(self.axes, names) if a != COUNT}
            return (found, "") if found else (None, self.none_simulated.format(**words) or why)
        found, why = self._find(thresholds.values, names, n_gpus, hardware if self.match_hardware else None)
        if found is not None or self.derived is None:
            return found, why
        return self.derived(thresholds, names, n_gpus, hardware, why, **physics)

    def _find(self, values: Mapping[str, Any], names: tuple, n_gpus: int | None, hardware) -> tuple[Limit | None, str]:
        entries = values[self.key]
        entry = entries.get(names)
        if entry is None and names and ANY in getattr(self.axes[0], "extra", ()):
            entry = entries.get((ANY,) + names[1:])
        return lookup(entry, n_gpus, hardware) if self.counted else applies(entry, hardware)


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
