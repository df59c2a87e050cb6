"""Judge a fleet: every node's own verdicts again (the same check functions as `wirecheck judge`),
its record complete, each key figure against its peers (the fleet rule), each GPU's health figures
against the fleet's other GPUs of its model, and the multi-node runs' verdicts, whose pair schedule
names slow nodes and links.

Pure data in, data out: `wirecheck fleet report` prints it, `--json` keeps it, `--html` draws it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from wirecheck.core import exit_codes, problems
from wirecheck.checks import fleet as fleet_checks
from wirecheck.fleet.changes import FleetChange, absorb, fleet_changes
from wirecheck.fleet.figures import KINDS_READ, Figure, GpuFigure, gpu_figures, node_figures
from wirecheck.fleet.records import Fleet, NodeRun, scope as records_scope
from wirecheck.checks import CHECKS
from wirecheck.checks.judge import rejudge_run
from wirecheck.records.file import RecordFileError, RunRecord, read_run
from wirecheck.records.run import judged_under, judging_under
from wirecheck.records.same_run import run_key
from wirecheck.thresholds.file import Thresholds, ThresholdsError
from wirecheck.core.peer_stats import Reference, leave_one_out
from wirecheck.core.verdict import FAIL, OUTCOMES, PASS, SKIP, Verdict
from wirecheck.vocab import records as kinds


@dataclass
class NodeResult:
    """One node, judged. Of its own verdicts (judged again) it keeps the counts, the failures and the
    warnings only: a fleet of thousands of nodes holds that much per node, not every verdict."""
    node: str
    path: str | None
    record: Verdict  # node_record: there and complete
    counts: dict[str, int] = field(default_factory=dict)  # its own verdicts judged again, per outcome
    own_failed: list[Verdict] = field(default_factory=list)  # those that failed
    warnings: list[Verdict] = field(default_factory=list)  # those that passed with a warning
    judged: bool = False  # a record was read and its verdicts judged again
    as_recorded: bool = False  # ... or taken as recorded: judged under the fleet's thresholds by this wirecheck
    outliers: list[Verdict] = field(default_factory=list)  # fleet_outlier, one per figure
    pairs: list[Verdict] = field(default_factory=list)  # pair_node verdicts of multi-node runs
    figures: dict[str, Figure] = field(default_factory=dict)
    unexpected: bool = False
    gpu_figures: list[GpuFigure] = field(default_factory=list)
    gpus: list[Verdict] = field(default_factory=list)  # fleet_gpu_outlier, one per GPU and figure
    damaged: tuple = ()  # its record's lines that could not be read (records.file.DamagedLine)
    versions: dict = field(default_factory=dict)  # the driver and CUDA its record's header names
    in_changes: list[Verdict] = field(default_factory=list)  # its history failures a fleet-wide change explains
    scope: str | None = None  # what its run set out to check (fleet.records.scope); None: no record read
    gpu_models: tuple = ()  # the GPU models its record's header names (); none named, or no record read)
    run: tuple | None = None  # which run its record holds (records.same_run.run_key); None: no record read
    started: str | None = None  # its header's start, to name a copy by
    host: str | None = None  # its header's host

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in [self.record, *self.own_failed, *self.outliers, *self.gpus, *self.pairs] if v.outcome == FAIL]

    @property
    def ok(self) -> bool:
        return not self.failed

    def count(self, outcome: str) -> int:
        return self.counts.get(outcome, 0)

    @property
    def state(self) -> str:
        """What the summary counts it as: PASS, or the first reason it failed (MISSING, CUT, DAMAGED, BROKEN,
        own checks, below peers, GPUs below fleet, SLOW pairs)."""
        if self.record.outcome == FAIL:
            return self.record_status
        if self.own_failed:
            return "own checks"
        if any(v.outcome == FAIL for v in self.outliers):
            return "below peers"
        if any(v.outcome == FAIL for v in self.gpus):
            return "GPUs below fleet"
        if any(v.outcome == FAIL for v in self.pairs):
            return "slow in pairs"
        return "PASS"

    @property
    def worst_below(self) -> float | None:
        """How far its worst fleet figure is under the fleet's median (a fraction), for "the worst nodes"."""
        below = [v.details.get("below") for v in [*self.outliers, *self.gpus] if v.outcome != SKIP]
        below = [b for b in below if isinstance(b, (int, float))]
        return max(below) if below else None

    @property
    def record_status(self) -> str:
        """The node's record in one word: complete, MISSING, CUT (cut short), DAMAGED (lines unreadable), PARTIAL
        (narrowed, or stopped at a failure), DUPLICATE (a copy of another node's record) or BROKEN."""
        if self.record.outcome == FAIL:
            if self.path is None:
                return "MISSING"
            kind = self.record.problem
            if kind == problems.NARROWED:
                return "PARTIAL"
            if kind == problems.DUPLICATE:
                return "DUPLICATE"
            return "DAMAGED" if kind == problems.DAMAGED else "CUT" if kind == problems.CUT_SHORT else "BROKEN"
        return "complete"

    @property
    def pairs_status(self) -> str:
        """The node in the multi-node pair schedule: SLOW, ok, n/a (no pair judged) or - (not in one)."""
        if not self.pairs:
            return "-"
        if any(v.outcome == FAIL for v in self.pairs):
            return "SLOW"
        return "ok" if any(v.outcome == PASS for v in self.pairs) else "n/a"


@dataclass
class NetworkResult:
    path: str
    nodes: list[str]
    complete: bool
    problem: str | None
    verdicts: list[Verdict]
    measurements: list[dict]
    simulated: bool

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome == FAIL]


@dataclass
class FleetResult:
    directory: str
    thresholds: str
    simulated: bool
    nodes: list[NodeResult]
    network: list[NetworkResult]
    missing_unnamed: int = 0
    network_record: Verdict | None = None  # judged only when a multi-node run was expected
    changes: list[FleetChange] = field(default_factory=list)  # figures most nodes failed against their past at once
    notes: list[str] = field(default_factory=list)  # what the report says once, before its summary

    @property
    def network_missing(self) -> bool:
        return self.network_record is not None and self.network_record.outcome == FAIL

    @property
    def failures(self) -> list[tuple[str, Verdict]]:
        """(who, verdict) for every failed verdict the report lists: nodes by name, multi-node runs by
        record path, the missing multi-node record as "network". A pair_node failure is listed on
        its node already."""
        out = [(n.node, v) for n in self.nodes for v in n.failed]
        if self.network_missing:
            out.append(("network", self.network_record))
        out += [(net.path, v) for net in self.network for v in net.failed if v.check != "pair_node"]
        return out

    @property
    def ok(self) -> bool:
        return (all(n.ok for n in self.nodes) and not self.missing_unnamed and not self.network_missing
                and all(not r.failed and r.complete for r in self.network) and not self.changes)

    @property
    def exit_code(self) -> int:
        return exit_codes.verdict(failed=not self.ok, simulated=self.simulated)


def node_result(thresholds: Thresholds, n: NodeRun, under: tuple | None = None) -> NodeResult:
    """A node's record judged on its own: the record there and complete, its verdicts (kept as counts,
    failures and warnings) and its key figures. collect() calls it as each record is read (its
    `digest`), so the record itself need not be kept. `under` (records.run.judging_under of the
    fleet's thresholds): a record whose header says its verdicts were judged under exactly that
    (the same thresholds bytes, the same wirecheck code) keeps them as recorded; any other is judged
    again with the fleet's thresholds."""
    path = str(n.path) if n.path else None
    result = NodeResult(n.node, path, fleet_checks.node_record(thresholds, node=n.node, path=path, problem=n.problem,
                                                                  problem_kind=n.problem_kind),
                        unexpected=n.unexpected, damaged=n.damaged)
    if n.run is not None:
        trusted = under is not None and judged_under(n.run.run) == under
        if n.run.skipped and not _counts_agree(n.run):
            n.run = read_run(n.path)  # read lean, but its counts disagree with its end line: read it all
        verdicts = _as_recorded(n.path, n.run) if trusted else None
        result.as_recorded = verdicts is not None
        if verdicts is None:
            verdicts = _as_data(n.path, rejudge_run, n.run, thresholds)[1]
        result.judged = True
        result.scope = records_scope(n.run)
        result.run, result.host, result.started = run_key(n.run.run), n.run.run.get("host"), n.run.run.get("started")
        result.gpu_models = tuple(sorted({str(g.get("name")) for g in n.run.run.get("gpus") or []
                                          if isinstance(g, dict) and g.get("name")}))
        versions = n.run.run.get("versions") or {}
        result.versions = {k: versions[k] for k in ("driver", "cuda") if versions.get(k)}
        result.counts = {o: 0 for o in (FAIL, PASS, SKIP)}
        for v in verdicts:
            result.counts[v.outcome] = result.counts.get(v.outcome, 0) + 1
        result.own_failed = [v for v in verdicts if v.outcome == FAIL]
        result.warnings = [v for v in verdicts if v.details.get("warning")]
        floor = thresholds.collective_settings(n.run.simulated).floor_size
        result.figures = _as_data(n.path, node_figures, n.run, floor)
        result.gpu_figures = _as_data(n.path, gpu_figures, n.run)
    return result


class _Outcome:
    """A recorded verdict that passed or skipped without a warning, as node_result counts it: its outcome
    and details only. Making a Verdict of each of a node's ~150 verdicts was a third of a fleet report's
    time; only the failures and warnings are kept, and those are made in full."""
    __slots__ = ("outcome", "details")
    details: dict

    def __init__(self, outcome: str):
        self.outcome, self.details = outcome, {}


def _as_recorded(path, run: RunRecord) -> list | None:
    """The run's verdicts as its record has them (failures and warnings as Verdicts), or None where one
    is not as this wirecheck writes them (an unknown outcome or check, a field that is no verdict's):
    then it is judged again, which names what is wrong. Lines LeanLines skipped count by outcome."""
    out = [_Outcome(outcome) for outcome in (PASS, SKIP) for _ in range(run.skipped.get(outcome, 0))]
    for rec in run.verdicts:
        outcome, details = rec.get("outcome"), rec.get("details")
        if outcome not in OUTCOMES or rec.get("check") not in CHECKS or not isinstance(details, dict):
            return None
        if outcome in (PASS, SKIP) and not details.get("warning"):
            out.append(_Outcome(outcome))
            continue
        try:
            out.append(Verdict.from_record(rec))
        except Exception:  # noqa: BLE001 (a damaged verdict: judging it again names the file and the verdict)
            return None
    return out


# A record taken as recorded is read for what the fleet keeps of it: the counts of the verdicts that
# passed or skipped, the failures and warnings, and the figures (wirecheck.fleet.figures). Half of its
# bytes are verdicts that passed, and a third collective sizes the fleet does not compare: parsing
# them was most of a fleet report's time. These patterns are how this wirecheck writes those lines
# (json.dumps of the record's dicts, keys in its order); a record of any other wirecheck is judged
# again and read in full, and a line that does not match them exactly is parsed.
_PASSED = re.compile(r'\{"type": "verdict", "test": "(?:[^"\\]|\\.)*", "time": "[^"\\]*", "check": "([a-z0-9_]+)", '
                     r'"what": "(?:[^"\\]|\\.)*", "where": (?:null|"(?:[^"\\]|\\.)*"), "outcome": "(pass|skip)", ')
# ... and how it ends: the words' fields (core.verdict.Verdict's last fields, in order), each a plain
# string or null, then its problem kind and failure code (a record written before them has neither). No string of the line holds an unescaped '"fmt": ', so its last one is the verdict's
# own; a line with no '"warning"' anywhere has no warning to keep (the fleet keeps passes with one).
_WORDS = '"fmt": '
_ENDS = re.compile(r'"fmt": (?:null|"[^"\\]*"), "bound": (?:null|"[^"\\]*"), "place": (?:null|"(?:[^"\\]|\\.)*"), '
                   r'"note": "(?:[^"\\]|\\.)*", "hint": "(?:[^"\\]|\\.)*"(?:, "problem": (?:null|"[a-z_]*"))?'
                   r'(?:, "code": (?:null|"[A-Z0-9]*"))?\}')
_MEASUREMENT = re.compile(r'\{"type": "measurement", "kind": "([a-z0-9_]+)", ')


@dataclass(frozen=True)
class LeanLines:
    """read_run's `lines_of` for a fleet report: a run taken as recorded (judged under `under`, not a
    multi-node run, whose record is kept whole) is read lean: `skip` tags "pass" / "skip" a verdict line
    of a known check that passed or skipped without a warning, and "measurement" one the fleet does
    not read (a collective at another size than the floor's, the NVLink and PCIe counters, the NCCL
    path...). Any other run is parsed in full, to be judged again."""
    under: tuple  # records.run.judging_under of the fleet's thresholds
    floor_sizes: tuple[int, ...]  # the collective sizes the fleet compares (collectives.floor_size, on hardware and simulated)

    def __call__(self, header: dict):
        return self.skip if judged_under(header) == self.under and not header.get("multinode") else None

    def skip(self, line: str) -> str | None:
        if not line.endswith("}"):
            return None  # torn, or not as written: the full parse says what it is
        if line.startswith('{"type": "verdict"'):
            passed = _PASSED.match(line)
            if (passed is not None and passed.group(1) in CHECKS and '"warning"' not in line
                    and _ENDS.fullmatch(line, line.rfind(_WORDS)) is not None):
                return passed.group(2)
            return None
        measured = _MEASUREMENT.match(line)
        if measured is None:
            return None
        kind = measured.group(1)
        if kind in KINDS_READ:
            return None
        if kind == kinds.COLLECTIVE and any(f'"requested_bytes": {size}' in line for size in self.floor_sizes):
            return None  # perhaps at the floor size: parsed, and node_figures says
        return "measurement"


def _counts_agree(run: RunRecord) -> bool:
    """The verdicts read and skipped are as many per outcome as the run's end line says it wrote; where
    they are not (a line lost, or one the patterns would miscount), the record is read again in full,
    so that a lean read never says other than a full one. A run cut short has no end to compare with."""
    if run.end is None:
        return True
    said = run.end.get("verdicts")
    if not isinstance(said, dict):
        return False
    read: dict[str, int] = dict(run.skipped)
    read.pop("measurement", None)
    for v in run.verdicts:
        read[v.get("outcome")] = read.get(v.get("outcome"), 0) + 1
    return {k: n for k, n in read.items() if n} == {k: n for k, n in said.items() if n}


@dataclass(frozen=True)
class Digest:
    """collect()'s `digest` for judge_fleet: each node's record judged as it is read, then dropped;
    `lines`, read_run's `skip` for it (None: every line parsed)."""
    thresholds: Thresholds
    under: tuple | None
    lines: LeanLines | None

    def __call__(self, n: NodeRun) -> NodeResult:
        return node_result(self.thresholds, n, under=self.under)


def digest(thresholds: Thresholds, trust_recorded: bool = True, lean: bool = True) -> Digest:
    """`trust_recorded=False` judges every record again, whatever it was judged under, and `lean=False`
    parses every line (self-tests compare them)."""
    under = judging_under(thresholds.path) if trust_recorded else None
    floors = tuple(sorted({thresholds.collective_settings(simulated).floor_size for simulated in (False, True)}))
    return Digest(thresholds, under, LeanLines(under, floors) if under is not None and lean else None)


def _others(values: list[tuple[str, float]]):
    """For each (who, value): the statistics of all the other values (fleet_statistics), from one sort."""
    ordered = sorted(values, key=lambda wv: wv[1])[:4]  # the three slowest besides any one of them
    refs = leave_one_out([v for _, v in values]) if len(values) > 1 else [Reference(0.0, 0.0, 0)]
    for (who, value), ref in zip(values, refs):
        yield who, value, ref, [wv for wv in ordered if wv[0] != who]


def _judge_figures(nodes: list[NodeResult], thresholds: Thresholds, simulated: bool) -> None:
    """The fleet rule: each node's figure against every other node that has it on GPUs of the same models (an
    H100 node's placement has the id an H200 node's has, not its speed)."""
    by_name = {n.node: n for n in nodes}
    having: dict[tuple[str, tuple], list[tuple[str, float]]] = {}
    for n in nodes:
        for key, fig in n.figures.items():
            having.setdefault((key, fig.models), []).append((n.node, fig.value))
    mixed = Counter(key for key, _ in having)  # a figure measured on more than one set of models says its models
    for key, models in sorted(having):
        for who, value, ref, slowest in _others(having[(key, models)]):
            n = by_name[who]
            fig = n.figures[key]
            label = f"{fig.label} ({', '.join(models) or 'GPUs not named'})" if mixed[key] > 1 else fig.label
            n.outliers.append(_as_data(n.path, fleet_checks.fleet_outlier, thresholds, node=n.node, figure=label,
                                       kind=fig.kind, value=fig.value, unit=fig.unit, simulated=simulated,
                                       fleet=fleet_checks.fleet_statistics(ref, slowest)))


def _judge_gpus(nodes: list[NodeResult], thresholds: Thresholds, simulated: bool) -> None:
    """Each GPU's figure against every other GPU of its model in the fleet (its own node's too)."""
    having: dict[tuple[str, str], list[tuple[str, float]]] = {}  # (model, figure key) -> [("node/GPUk", value)]
    mine: dict[str, tuple[NodeResult, GpuFigure]] = {}
    for n in nodes:
        for f in n.gpu_figures:
            who = f"{n.node}/GPU{f.gpu}"
            having.setdefault((f.model, f.key), []).append((who, f.value))
            mine[f"{who}\0{f.model}\0{f.key}"] = (n, f)
    for (model, key), values in having.items():
        if len(values) < 2:
            continue  # the only GPU of its model: nothing to hold it against
        nodes_with = len({who.rsplit("/", 1)[0] for who, _ in values})
        for who, _, ref, slowest in _others(values):
            n, f = mine[f"{who}\0{model}\0{key}"]
            n.gpus.append(_as_data(n.path, fleet_checks.fleet_gpu_outlier, thresholds, node=n.node, gpu=f.gpu,
                                   bus_id=f.bus_id, gpu_model=f.model, figure=f.label, value=f.value, unit=f.unit,
                                   simulated=simulated,
                                   fleet=fleet_checks.fleet_statistics(ref, slowest, nodes=nodes_with)))
    for n in nodes:  # in the node's own order: GPU by GPU, as its record has them
        order = {(f"{n.node}/GPU{f.gpu}", f.label): k for k, f in enumerate(n.gpu_figures)}
        n.gpus.sort(key=lambda v: order.get((v.where, v.details.get("figure")), 0))


def _judge_copies_once(nodes: list[NodeResult], thresholds: Thresholds) -> None:
    """Two records of one run (a node's record copied under another node's name) are judged once: as the node its
    header names as host (its short name, in any case: a Slurm node name against an FQDN host). A copy fails as
    DUPLICATE (that node wrote no run of its own here) and leaves its verdicts and figures out: counted twice they
    would enter every median twice. Where the host names none of them, every copy fails: which node ran it is
    not known, and a guess could pass the copy and fail the node that ran it."""
    runs: dict[tuple, list[NodeResult]] = {}
    for n in nodes:
        if n.run is not None and n.record.outcome != FAIL:
            runs.setdefault(n.run, []).append(n)
    for same in runs.values():
        if len(same) < 2:
            continue
        kept = next((n for n in same if _short(n.node) == _short(n.host)), None)
        for n in same:
            if n is kept:
                continue
            others = ", ".join(Path(o.path).name for o in same if o is not n)
            judged = f"judged once as {kept.node}" if kept else f"none of them named by its host {n.host}: none judged"
            problem = (f"record {Path(n.path).name} is the same run as {others} (host {n.host}, started {n.started}): a "
                       f"copy, {judged}; {n.node} has no run of its own here: run wirecheck on it")
            n.record = fleet_checks.node_record(thresholds, node=n.node, path=n.path, problem=problem,
                                                problem_kind=problems.DUPLICATE)
            n.counts, n.own_failed, n.warnings, n.figures, n.gpu_figures = {}, [], [], {}, []


def _short(host) -> str:
    return str(host or "").split(".", 1)[0].lower()


def _hold_other_scopes(nodes: list[NodeResult], thresholds: Thresholds) -> None:
    """A node whose run checked other than what most of the fleet's ran (another level, a -k): its passes are not
    the fleet's acceptance of it, so its record fails as PARTIAL. A fleet that all ran one narrowed selection is
    judged on it; with no scope shared by more than half the nodes, none is held."""
    scopes = Counter(n.scope for n in nodes if n.scope is not None and n.record.outcome != FAIL)
    if not scopes:
        return
    common, count = scopes.most_common(1)[0]
    if count * 2 <= sum(scopes.values()):
        return
    for n in nodes:
        if n.scope is not None and n.scope != common and n.record.outcome != FAIL:
            problem = (f"record {Path(n.path).name}: it ran {n.scope}, where {count} of the fleet's nodes ran {common}: "
                       "not the same checks; run that on this node")
            n.record = fleet_checks.node_record(thresholds, node=n.node, path=n.path, problem=problem,
                                                problem_kind=problems.NARROWED)


def _network(run: RunRecord, thresholds: Thresholds) -> NetworkResult:
    problem, kind = None, None
    if run.end is None:
        problem, kind = "cut short (no end line): rank 0 of the multi-node run died or hung", problems.CUT_SHORT
    elif run.end.get("signal"):
        problem, kind = (f"the multi-node run was stopped by {run.end['signal']} (a job time limit, a closed session "
                         "or Ctrl-C) before it finished: what it measured is below, the rest was never measured; run it "
                         "again"), problems.STOPPED
    elif run.end.get("status") != "complete":
        problem, kind = (f"the multi-node run ended with status {run.end.get('status')} (a rank broke; see the failure "
                         "below)"), problems.BROKEN
    _, verdicts = rejudge_run(run, thresholds)
    if problem:
        verdicts.append(Verdict("measurement_completed", "multi-node run", run.path.name, FAIL, problem, problem=kind))
    return NetworkResult(str(run.path), list(run.run["multinode"].get("nodes", [])), problem is None, problem, verdicts,
                         run.measurements, run.simulated)


def _as_data(path, fn, *args, **kwargs):
    """fn(*args, **kwargs) on what a record holds: records come from the nodes, and one changed or
    damaged so that the judging cannot take a value is a RecordFileError naming the file, not a
    traceback."""
    try:
        return fn(*args, **kwargs)
    except (RecordFileError, ThresholdsError):
        raise
    except Exception as exc:  # noqa: BLE001
        raise RecordFileError(f"{path}: a value in it is not as wirecheck records it ({type(exc).__name__}: "
                              f"{str(exc)[:300]}); the record was changed or damaged") from None


def judge_fleet(fleet: Fleet, thresholds: Thresholds, expect_network: bool = False) -> FleetResult:
    """`expect_network`: the job ran the multi-node step, so a directory without its record fails
    (the step broke before rank 0 wrote a line) rather than reading as a fleet without a network.
    Nodes collected with `digest(thresholds)` are judged already; any other node is judged here.
    Linear in nodes: each figure is sorted once and every verdict keeps the fleet's statistics."""
    nodes = []
    for n in fleet.nodes:
        result = n.digest if isinstance(n.digest, NodeResult) else node_result(thresholds, n)
        result.unexpected = n.unexpected  # set by collect after the record was read
        nodes.append(result)
    _judge_copies_once(nodes, thresholds)
    _hold_other_scopes(nodes, thresholds)
    _judge_figures(nodes, thresholds, fleet.simulated)
    _judge_gpus(nodes, thresholds, fleet.simulated)
    changes = fleet_changes(nodes, thresholds.fleet(fleet.simulated).min_nodes)
    absorb(nodes, changes)
    network = [_as_data(run.path, _network, run, thresholds) for run in fleet.network]
    by_name = {n.node: n for n in nodes}
    for net in network:
        for v in net.verdicts:
            if v.check == "pair_node" and v.where in by_name:
                by_name[v.where].pairs.append(v)
    expected = (fleet_checks.network_record(thresholds, directory=str(fleet.directory), found=len(network))
                if expect_network else None)
    notes = [line for line in (_models_line(nodes),) if line]
    return FleetResult(str(fleet.directory), str(thresholds.path), fleet.simulated, nodes, network,
                       fleet.missing_unnamed, expected, changes, notes)


def _models_line(nodes: list[NodeResult]) -> str | None:
    """A fleet of more than one GPU model, said once: its figures are held against their own model's only."""
    models = Counter(n.gpu_models for n in nodes if n.gpu_models)
    if len(models) < 2:
        return None
    each = "; ".join(f"{' + '.join(m)} on {k} node(s)" for m, k in sorted(models.items(), key=lambda mk: -mk[1]))
    return (f"GPU models: {len(models)} in this fleet ({each}): each node's and GPU's figures are held against "
            "nodes and GPUs of the same model(s) only")


def named_by_pairs(result: FleetResult) -> list[str]:
    return sorted({v.where for net in result.network for v in net.verdicts if v.check == "pair_node" and v.outcome == FAIL})


def slow_links(result: FleetResult) -> list[str]:
    return sorted({v.where for net in result.network for v in net.verdicts if v.check == "pair_link" and v.outcome == FAIL})


def named_by_fleet_rule(result: FleetResult) -> list[str]:
    return sorted(n.node for n in result.nodes if any(v.outcome == FAIL for v in n.outliers))


def gpus_below_fleet(result: FleetResult) -> list[str]:
    """"node/GPUk" of every GPU below the fleet's GPUs of its model in some figure."""
    return sorted({v.where for n in result.nodes for v in n.gpus if v.outcome == FAIL})

