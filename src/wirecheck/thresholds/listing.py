"""Every limit a node would be held to, before anything runs (`wirecheck limits`).

The same lookups the checks make (wirecheck.checks), for each placement and op, each GPU figure,
host and peer copies and training: the bound, its unit, the rule that made it (measured, guess, derived,
calibrated, site, simulated, peers) and its source; a check no limit judges is listed with the reason; at acceptance the
history and drift rules over each figure they judge. Beside each bound its resolution: the loss it
catches in 95 % of runs and its false alarms, as a calibrated entry states it or as the recorded noise
of the reference nodes measured it (wirecheck.thresholds.sensitivity, fixtures/pytest_wirecheck/resolution.yaml); a
bound no run measured says so. The node is a topology plus its hardware (wirecheck.node.hardware): from
NVML, a profile, a recorded topology or a run's record. Which checks a level runs follows the tests'
`levels` markers (tests/).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Mapping

from wirecheck.core.levels import ACCEPTANCE, BURN_IN, QUICK, check_level
from wirecheck.core.paths import suite_paths
from wirecheck.core.quantity import Quantity, in_unit
from wirecheck.vocab.ops import OPS, all_axes
from wirecheck.node.hardware import Hardware
from wirecheck.node.placement import CLASS_PAIR, COLLECTIVE_CLASSES, TRAINING_CLASSES, enumerate_placements, link_ceiling
from wirecheck.node.topology import Topology
from wirecheck.core.resolution import Resolution
from wirecheck.thresholds import declared, sensitivity
from wirecheck.thresholds.file import load_thresholds
from wirecheck.thresholds.limits import Limit
from wirecheck.vocab import strategies

# The unit each quantity kind is shown in (as the verdicts record it); the limits stay typed (Quantity) until shown.
UNITS = {"bandwidth": "GB/s", "compute": "TFLOP/s", "time": "µs", "size": "MiB", "throughput": "tokens/s", "percent": "%"}


def figure_checks() -> dict[str, tuple[str, str]]:
    """GPU figure -> (the check that declares its floor, as the listing names it: "gemm_throughput (fp8)"
    where a check declares several, its quantity kind)."""
    owners = declared.floor_checks()
    out = {}
    for figure, floor in declared.floors().items():
        owner = owners[figure]
        several = sum(1 for o in owners.values() if o == owner) > 1
        out[figure] = (f"{owner} ({figure.split('_', 1)[-1]})" if several else owner, floor.kind)
    return out
# What each level runs (the tests' levels markers): quick one large all_reduce per class and the GPU
# figures; acceptance everything; a burn-in the GPU figures and busbw of every placement, under load.
LEVEL_CHECKS = {
    QUICK: {"busbw_all_reduce", "gpu"},
    ACCEPTANCE: {"busbw", "busbw_all_reduce", "latency", "half_peak", "copy", "gpu", "training"},
    BURN_IN: {"busbw", "busbw_all_reduce", "gpu"},
}


@dataclass(frozen=True)
class Row:
    check: str
    where: str
    min: Quantity | None  # typed, in base units; shown in `unit`
    max: Quantity | None
    unit: str
    rule: str | None  # None: not judged (the source says why)
    source: str
    yaml_path: str | None
    measured_on: dict | None = None  # a table entry's `hardware:`, the hardware it was measured on
    # what the bound catches: {"step", "false_alarm", "how", "coarse", "cries_wolf"} (core.resolution.Resolution), or
    # None: no run measured it for this figure and rule
    resolution: dict | None = None
    bound_text: str | None = None  # a bound that is no number (the history rule's: a median less a margin)
    key: str | None = None  # the thresholds key of the figure's floor (records.figures.Figure.yaml_path)

    @property
    def judged(self) -> bool:
        return self.rule is not None

    def shown(self, bound: str) -> float | None:
        """`min` or `max` in the row's unit."""
        return in_unit(getattr(self, bound), self.unit)

    def as_json(self) -> dict:
        return {**asdict(self), "min": self.shown("min"), "max": self.shown("max"), "judged": self.judged}


def _resolution(limit, rule: str | None, key: str | None) -> dict | None:
    """A bound's resolution: what its calibrated entry states, else what the recorded noise measured for this
    very bound. The recorded table floors' are the shipped file's values (scripts/bench/sensitivity.py): a bound
    another file writes at the same key has none (a site's 3000 GB/s is not the shipped floor's 10.6 % step)."""
    stated = limit.resolution if limit is not None else None
    if stated and "step" in stated:
        return Resolution(stated["step"], stated.get("false_alarms", 0.0), "as calibrated").as_dict()
    if limit is not None and _shipped_bounds().get(limit.yaml_path.split(": ", 1)[-1], (limit.min, limit.max)) != \
            (limit.min, limit.max):
        return None
    # the recorded file keeps a table floor's as `measured` whether a run or a guess made it
    found = sensitivity.measured(key, "measured" if rule == "guess" else rule) if key and rule else None
    return found.as_dict() if found else None


@functools.lru_cache(maxsize=1)
def _shipped_bounds() -> dict[str, tuple]:
    """YAML path -> (min, max) of every table entry of the shipped thresholds.yaml, through the one loader: the
    bounds whose resolutions scripts/bench/sensitivity.py recorded."""
    out: dict[str, tuple] = {}

    def walk(value) -> None:
        if isinstance(value, Limit):
            out[value.yaml_path.split(": ", 1)[-1]] = (value.min, value.max)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)

    walk(load_thresholds(suite_paths().thresholds).values)
    return out


def _row(check: str, where: str, limit, kind: str, why: str, key: str | None = None) -> Row:
    """`key`: the thresholds key of the figure's floor (records.figures.Figure.yaml_path), whose measured
    resolution the row shows."""
    unit = UNITS[kind]
    if limit is None:
        return Row(check, where, None, None, unit, None, why or f"no {check} limit for {where} in the file", None)
    return Row(check, where, limit.min, limit.max, unit, limit.rule, limit.source, limit.yaml_path,
               dict(limit.hardware) if limit.hardware else None, _resolution(limit, limit.rule, key), key=key)


def node_limits(thresholds, topology: Topology, hardware: Hardware | None, level: str = ACCEPTANCE,
                simulated: bool = False) -> list[Row]:
    """Every limit of `level` on the node `topology` and `hardware` describe."""
    wanted = LEVEL_CHECKS[check_level(level)]
    speed = hardware.nvlink_speed if hardware else None
    if hardware is None:  # a record without the hardware reading: its GPU model still picks the GPU floors
        names = {g.name for g in topology.gpus if g.name}
        model = names.pop() if len(names) == 1 else None
    else:
        model = hardware.gpu_model
    rows: list[Row] = []
    placements = [p for p in enumerate_placements(topology) if p.klass in COLLECTIVE_CLASSES or p.klass == CLASS_PAIR]
    measured = placements
    if "busbw" not in wanted:  # the quick level: one all_reduce on each class's largest placement
        largest: dict = {}
        for p in placements:
            if p.klass != CLASS_PAIR and (p.klass not in largest or p.n_gpus > largest[p.klass].n_gpus):
                largest[p.klass] = p
        measured = [p for p in placements if largest.get(p.klass) is p]
    for p in measured:
        ceiling = link_ceiling(topology, p, speed)
        for op in OPS:
            if "busbw" in wanted or (op == "all_reduce" and "busbw_all_reduce" in wanted):
                limit, why = thresholds.busbw_rule(p.klass, op, p.n_gpus, simulated, ceiling, hardware)
                rows.append(_row(f"busbw {op}", p.id, limit, "bandwidth", why,
                                 f"collectives.floors.{p.klass}.{op}.{p.n_gpus}"))
            if p.klass == CLASS_PAIR:
                continue  # per-pair link checks judge bandwidth only
            further = all_axes(op)[1:]
            if "busbw" in wanted and further:  # one rule for all of them (collectives.axes_floor): one row
                limit, why = thresholds.busbw_rule(p.klass, op, p.n_gpus, simulated, ceiling, hardware, further[0])
                rows.append(_row(f"busbw {op} at {_axes_words(further)}", p.id, limit, "bandwidth", why))
            if "latency" in wanted:
                limit, why = thresholds.latency_rule(p.klass, op, p.n_gpus, simulated, hardware)
                rows.append(_row(f"small_message_latency {op}", p.id, limit, "time", why))
            if "half_peak" in wanted:
                limit, why = thresholds.half_peak_rule(p.klass, op, p.n_gpus, simulated, hardware)
                rows.append(_row(f"half_peak_size {op}", p.id, limit, "size", why))
    if "copy" in wanted and not simulated:
        rows += _copies(thresholds, topology, hardware, placements)
    if "gpu" in wanted:
        health = thresholds.gpu_health
        for figure, (name, kind) in figure_checks().items():
            limit, why = health.floor_rule(figure, model, simulated, hardware)
            rows.append(_row(name, "every GPU", limit, kind, why, f"gpu_health.floors.{model}.{figure}"))
        peers = health.peers(simulated)
        rows.append(Row("GPU figures below their peers", "every GPU", None, None, "%", "peers",
                        f"more than {peers.max_below_median * 100:g} % and {peers.mad_k:g} scaled MADs below the median of "
                        f"the node's other GPUs of the model; {peers.source}", peers.yaml_path,
                        resolution=_coarsest(rows, "peers", model),
                        bound_text=f"> {peers.max_below_median * 100:g} % below the others' median"))
    if "training" in wanted:
        rows += _training(thresholds, placements, hardware, model, simulated)
    if check_level(level) == ACCEPTANCE and not simulated and thresholds.history_rule is not None:
        rows += _history(thresholds, rows)
    return rows


def _axes_words(further) -> str:
    """How the listing names an op's further dtypes and reductions (wirecheck.vocab.ops.FURTHER_AXES)."""
    return "every other dtype and reduction" if any(a.reduction for a in further) else "every other dtype"


def _coarsest(rows: list[Row], rule: str, model: str | None) -> dict | None:
    """The worst resolution `rule` has over the GPU figures of `model` the recorded noise measured: one row
    stands for them all."""
    found = [r for f in declared.floors() if (r := sensitivity.measured(f"gpu_health.floors.{model}.{f}", rule))]
    return max(found, key=lambda r: (r.cries_wolf, r.step)).as_dict() if found else None


def _figure_name(key: str) -> str:
    """The short name the history rule knows a figure by (records.figures.Figure.figure), from its floor's key."""
    parts = key.split(".")
    if parts[0] == "training" and parts[1] == "single_gpu_throughput_floors":
        return "single_gpu_throughput"
    return parts[3]


def _history(thresholds, rows: list[Row]) -> list[Row]:
    """Per figure the history rule judges on this node: its bound (the median of the GPU's or placement's own
    last runs less a margin from their noise) and what it catches on the recorded noise; then the drift rule."""
    rule = thresholds.history
    out = []
    for r in rows:
        if not r.key or not r.judged or _figure_name(r.key) not in rule.figures:
            continue
        least = rule.least_margin(_figure_name(r.key))
        noise = (f"the {rule.false_alarms * 100:g} % prediction bound of their noise" if rule.false_alarms
                 else f"{rule.mad_k:g} x their spread")
        measured = sensitivity.measured(r.key, "history")
        out.append(Row(f"history {r.check}", r.where, None, None, "%", "history", rule.source, rule.yaml_path,
                       resolution=measured.as_dict() if measured else None, key=r.key,
                       bound_text=f"median of its last {rule.runs} runs less max({least * 100:g} %, {noise})"))
    if rule.drift is not None:
        d = rule.drift
        out.append(Row("drift", "each GPU or placement", None, None, "%", "history", d.source, d.yaml_path,
                       bound_text=f"warns from {d.warn_at * 100:g} %, fails from {d.fail_at * 100:g} % below the median "
                                  f"of its oldest {d.baseline} of {d.runs} runs, after a CUSUM over {d.h:g}"))
    return out


def _copies(thresholds, topology: Topology, hardware: Hardware | None, placements) -> list[Row]:
    copy = thresholds.copy_bandwidth
    rows = []
    pcie, _ = hardware.pcie_peak() if hardware else (None, "")
    for direction in ("h2d", "d2h"):
        limit, why = copy.limit_rule(topology.fabric, direction, pcie, hardware)
        rows.append(_row(f"host_copy {direction}", "every GPU", limit, "bandwidth", why,
                         f"copy_bandwidth.floors.{topology.fabric}.{direction}"))
    for p in placements:
        if p.klass != CLASS_PAIR:
            continue
        a, b = p.gpus
        nv = topology.nv_between(a, b)
        ceiling = nv * hardware.nvlink_speed if hardware and hardware.nvlink_speed and nv else None
        limit, why = copy.limit_rule(topology.fabric, "peer", ceiling, hardware)
        rows.append(_row("peer_copy", p.id, limit, "bandwidth", why))
    return rows


def _training(thresholds, placements, hardware: Hardware | None, model: str | None, simulated: bool) -> list[Row]:
    training = thresholds.training_limits(simulated)
    rows = []
    seen = set()
    for p in placements:
        if p.klass not in TRAINING_CLASSES or p.n_gpus < 2 or (p.klass, p.n_gpus) in seen:
            continue
        seen.add((p.klass, p.n_gpus))
        for strategy in strategies.NAMES:
            limit, why = training.throughput_rule(p.klass, strategy, p.n_gpus, hardware)
            rows.append(_row(f"throughput {strategy}", p.id, limit, "throughput", why,
                             f"training.throughput_floors.{p.klass}.{strategy}.{p.n_gpus}"))
    limit = training.single_gpu_floor(model)
    rows.append(_row("single_gpu_training", "one GPU", limit, "throughput",
                     f"no training.single_gpu_throughput_floors entry for {model!r}",
                     f"training.single_gpu_throughput_floors.{model}"))
    return rows


SHORT_SOURCE = 100  # characters of a source in the table (the JSON has it whole)


def _bound(r: Row) -> str:
    if not r.judged:
        return "not judged"
    if r.bound_text:
        return r.bound_text
    parts = [f"{op} {_num(r.shown(bound))}" for op, bound in ((">=", "min"), ("<=", "max")) if getattr(r, bound) is not None]
    return " and ".join(parts) + f" {r.unit}" if parts else "-"


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def _catches(r: Row) -> str:
    """The resolution column: the loss caught in 95 % of runs, or why there is none."""
    if not r.judged:
        return ""
    if not r.resolution:
        return "not measured"
    res = Resolution.from_dict(r.resolution)
    return res.short()


def _short(text: str) -> str:
    return text if len(text) <= SHORT_SOURCE else text[:SHORT_SOURCE - 3].rstrip() + "..."


def text(rows: list[Row], title: str) -> list[str]:
    """A table for people: one line per limit (placements held to the same limit on one line), the rule,
    the loss it catches in 95 % of runs on the recorded noise, the YAML path and the start of the source
    beside the bound; `--json` has every source whole."""
    merged: dict[tuple, list[str]] = {}
    for r in rows:
        merged.setdefault((r.check, _bound(r), r.rule, _catches(r), r.yaml_path, r.source), []).append(r.where)
    lines = []
    for (check, bound, rule, catches, yaml_path, source), wheres in merged.items():
        where = wheres[0] if len(wheres) == 1 else f"{wheres[0]} (+{len(wheres) - 1} alike)"
        lines.append((check, where, bound, rule or "-", catches or "-",
                      f"{yaml_path}: {_short(source)}" if yaml_path else _short(source)))
    heads = ("check", "where", "bound", "rule", "catches (95 %)")
    widths = [max([len(h)] + [len(line[k]) for line in lines]) for k, h in enumerate(heads)]
    out = [title, ""]
    out.append("  ".join(f"{h:{w}}" for h, w in zip(heads, widths)) + "  source")
    out += ["  ".join(f"{v:{w}}" for v, w in zip(line[:5], widths)) + f"  {line[5]}" for line in lines]
    by_rule: dict[str, int] = {}
    for r in rows:
        if r.judged:
            by_rule[r.rule] = by_rule.get(r.rule, 0) + 1
    judged = sum(by_rule.values())
    coarse = sum(1 for r in rows if r.judged and r.resolution and Resolution.from_dict(r.resolution).coarse)
    out += ["", f"{judged} limits ({', '.join(f'{n} {rule}' for rule, n in sorted(by_rule.items()))}); "
                f"{len(rows) - judged} checks without a limit (the reason is their source); --json for every source whole",
            f"catches: the loss each bound fails in 95 % of runs on the recorded noise (a calibrated entry: its own runs; "
            f"{coarse} coarser than 10 %: a smaller loss passes them; 'not measured': no recorded run of this hardware, or "
            f"another value than the shipped one's (a site's own); "
            f"scripts/bench/sensitivity.py, docs/records.md#sensitivity)"]
    return out
