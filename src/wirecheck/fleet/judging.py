"""Judge a fleet: every node's own verdicts again (the same check functions as `wirecheck judge`),
its record complete, each key figure against its peers (the fleet rule), each GPU's health figures
against the fleet's other GPUs of its model, and the multi-node runs' verdicts, whose pair schedule
names slow nodes and links.

Pure data in, data out: `wirecheck fleet report` prints it, `--json` keeps it, `--html` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.core import exit_codes
from wirecheck.checks import fleet as fleet_checks
from wirecheck.fleet.figures import Figure, GpuFigure, gpu_figures, node_figures
from wirecheck.fleet.records import Fleet, NodeRun
from wirecheck.checks.judge import rejudge_run
from wirecheck.records.file import RecordFileError, RunRecord
from wirecheck.thresholds.file import Thresholds, ThresholdsError
from wirecheck.core.verdict import FAIL, PASS, Verdict


@dataclass
class NodeResult:
    node: str
    path: str | None
    record: Verdict  # node_record: there and complete
    verdicts: list[Verdict] = field(default_factory=list)  # its own checks, judged again
    recorded: list[Verdict] = field(default_factory=list)  # the same, as recorded (for "changed")
    outliers: list[Verdict] = field(default_factory=list)  # fleet_outlier, one per figure
    pairs: list[Verdict] = field(default_factory=list)  # pair_node verdicts of multi-node runs
    figures: dict[str, Figure] = field(default_factory=dict)
    unexpected: bool = False
    gpu_figures: list[GpuFigure] = field(default_factory=list)
    gpus: list[Verdict] = field(default_factory=list)  # fleet_gpu_outlier, one per GPU and figure

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in [self.record, *self.verdicts, *self.outliers, *self.gpus, *self.pairs] if v.outcome == FAIL]

    @property
    def ok(self) -> bool:
        return not self.failed

    def count(self, outcome: str) -> int:
        return sum(v.outcome == outcome for v in self.verdicts)

    @property
    def record_status(self) -> str:
        """The node's record in one word: complete, MISSING, CUT (cut short) or BROKEN."""
        if self.record.outcome == FAIL:
            return "MISSING" if self.path is None else "CUT" if "cut short" in self.record.message else "BROKEN"
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
                and all(not r.failed and r.complete for r in self.network))

    @property
    def exit_code(self) -> int:
        return exit_codes.verdict(failed=not self.ok, simulated=self.simulated)


def _node(n: NodeRun, thresholds: Thresholds) -> NodeResult:
    path = str(n.path) if n.path else None
    result = NodeResult(n.node, path, fleet_checks.node_record(thresholds, node=n.node, path=path, problem=n.problem),
                        unexpected=n.unexpected)
    if n.run is not None:
        result.recorded, result.verdicts = rejudge_run(n.run, thresholds)
        floor = thresholds.collective_settings(n.run.simulated).floor_size
        result.figures = node_figures(n.run, floor)
        result.gpu_figures = gpu_figures(n.run)
    return result


def _judge_gpus(nodes: list[NodeResult], thresholds: Thresholds, simulated: bool) -> None:
    """Each GPU's figure against every other GPU of its model in the fleet (its own node's too)."""
    having: dict[tuple[str, str], dict[str, float]] = {}  # (model, figure key) -> {"node/GPUk": value}
    for n in nodes:
        for f in n.gpu_figures:
            having.setdefault((f.model, f.key), {})[f"{n.node}/GPU{f.gpu}"] = f.value
    for n in nodes:
        for f in n.gpu_figures:
            me = f"{n.node}/GPU{f.gpu}"
            peers = {who: v for who, v in having[(f.model, f.key)].items() if who != me}
            if not peers:
                continue
            n.gpus.append(_as_data(n.path, fleet_checks.fleet_gpu_outlier, thresholds, node=n.node, gpu=f.gpu,
                                   bus_id=f.bus_id, gpu_model=f.model, figure=f.label, value=f.value, unit=f.unit,
                                   peers=peers, simulated=simulated))


def _network(run: RunRecord, thresholds: Thresholds) -> NetworkResult:
    problem = None
    if run.end is None:
        problem = "cut short (no end line): rank 0 of the multi-node run died or hung"
    elif run.end.get("signal"):
        problem = (f"the multi-node run was stopped by {run.end['signal']} (a job time limit, a closed session or "
                   "Ctrl-C) before it finished: what it measured is below, the rest was never measured; run it again")
    elif run.end.get("status") != "complete":
        problem = f"the multi-node run ended with status {run.end.get('status')} (a rank broke; see the failure below)"
    _, verdicts = rejudge_run(run, thresholds)
    if problem:
        verdicts.append(Verdict("measurement_completed", "multi-node run", run.path.name, FAIL, problem))
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
    (the step broke before rank 0 wrote a line) rather than reading as a fleet without a network."""
    nodes = [_as_data(n.path, _node, n, thresholds) for n in fleet.nodes]
    # The fleet rule: each node's figure against every other node that has it.
    keys = sorted({k for n in nodes for k in n.figures})
    for key in keys:
        having = {n.node: n.figures[key] for n in nodes if key in n.figures}
        for n in nodes:
            if key not in n.figures:
                continue
            fig = n.figures[key]
            peers = {other: f.value for other, f in having.items() if other != n.node}
            n.outliers.append(_as_data(n.path, fleet_checks.fleet_outlier,
                                       thresholds, node=n.node, figure=fig.label, kind=fig.kind, value=fig.value,
                                       peers=peers, unit=fig.unit, simulated=fleet.simulated))
    _judge_gpus(nodes, thresholds, fleet.simulated)
    network = [_as_data(run.path, _network, run, thresholds) for run in fleet.network]
    by_name = {n.node: n for n in nodes}
    for net in network:
        for v in net.verdicts:
            if v.check == "pair_node" and v.where in by_name:
                by_name[v.where].pairs.append(v)
    expected = (fleet_checks.network_record(thresholds, directory=str(fleet.directory), found=len(network))
                if expect_network else None)
    return FleetResult(str(fleet.directory), str(thresholds.path), fleet.simulated, nodes, network,
                       fleet.missing_unnamed, expected)


def named_by_pairs(result: FleetResult) -> list[str]:
    return sorted({v.where for net in result.network for v in net.verdicts if v.check == "pair_node" and v.outcome == FAIL})


def slow_links(result: FleetResult) -> list[str]:
    return sorted({v.where for net in result.network for v in net.verdicts if v.check == "pair_link" and v.outcome == FAIL})


def named_by_fleet_rule(result: FleetResult) -> list[str]:
    return sorted(n.node for n in result.nodes if any(v.outcome == FAIL for v in n.outliers))


def gpus_below_fleet(result: FleetResult) -> list[str]:
    """"node/GPUk" of every GPU below the fleet's GPUs of its model in some figure."""
    return sorted({v.where for n in result.nodes for v in n.gpus if v.outcome == FAIL})

