"""The time model: a run's tests walked in their order, as the session runs them, each priced.

A measurement is made by the first test that needs it and shared by the rest (fixtures/
pytest_wirecheck/measurements.py), and a worker group is started when the placement changes (wirecheck.workers.pool),
so the walk keeps the same state: the shared group's placement, the sweeps and strategy runs made,
the GPU load's phases. A test costs pytest's per-test share plus what it is the first to need:
- a collective sweep: each size's overhead plus its wire time, calls x bytes x the op's busbw
  factor / busbw (measured at the floor size where the unit costs have it for the class, op and GPU
  count; the thresholds' floor otherwise, so a count without a record is priced at its floor; on
  NVLink without either, the narrowest pair's NV# x the measured busbw per link; for an op with
  neither, the floor derived from the header's hardware, as the check would), and a worker
  group's start when the shared group was on another placement; an op's further dtype and
  reduction (an axis sweep) is priced as its op at the floor size (every size with --sweep full);
- test_busbw's benchmark rounds (the first taken from its sweep, the others only where the run kept them, as the
  header says); NCCL's path (read from the pool's logs: a pool start where none of its environment ran yet; before
  the pool, a probe in a group of its own); the copy-bandwidth measurement (a start, host copies per GPU, peer
  copies per NVLink pair at the pair's NV#); a strategy run (its recorded run on that wire, whatever the GPU count: see README; one GPU alone
  as the reference strategy's run); the GPU load's phases (figures, the level's sustained duration, the level's
  memory passes); a burn-in's loop (tests/test_burn_in.py: its worker group's start, its --duration from the
  run's header, and the memory test after each of its rounds).
Each worker start (a pool's, the GPU load's, the copies', a strategy run's, the burn-in's) is priced less
what spare workers save, where the run takes them (the header's spare_workers): the part of their
`import torch` done since they were started, at the previous start (the run's, for the first).
The walk prices the hardware run: a collection in simulation holds the same tests.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from wirecheck.core.levels import thresholds_key
from wirecheck.measure.sweep import calls_per_size
from wirecheck.node.hardware import Hardware
from wirecheck.node.placement import Placement, nvlink_twin
from wirecheck.plan.costs import HOST_PATH, NVLINK, UnitCosts
from wirecheck.records.run import POOL
from wirecheck.vocab.strategies import (LOCAL_BASELINE_ONCE_PER_GPU as ONCE_PER_GPU, NAMES, REFERENCE,
                                        SINGLE_GPU_PREPARED_IN_LOAD, TRAINER_WORKERS_PRELOADED)
from wirecheck.vocab.ops import DTYPES, OPS, REDUCTIONS, axes as op_axes, busbw_factor, feasible_sizes
from wirecheck.vocab.placements import CLASS_BY_NAME, CLASS_PAIR
from wirecheck.vocab.work import (ALL_RUNS, AXES_FULL_SWEEP, AXIS_SWEEP, BENCHMARK, BENCHMARK_FIRST_ROUND_SWEPT,
                                  BENCHMARK_SWEPT_ONLY, BURN_IN_LOOP, COPIES, FIGURES, FLOOR_SWEEP, INNER_PAIR_SWEEP,
                                  PAIR_SWEEPS, PROBE, REFERENCE_RUN, RUN, SINGLE_GPU_RUN, SUSTAINED, SWEEP,
                                  TWIN_ALL_RUNS, TWIN_RUN, TWIN_SWEEP)

# What each test makes first when it is the first to need it is the test's own declaration
# (`@pytest.mark.work(...)`, wirecheck.vocab.work), read when the suite is collected (plan/collect.py):
# {test function: {"work": (kinds...), "opt_in": why or None}}; a function without one is unknown.

# The id a test gets where the topology has no placement of its classes (fixtures/pytest_wirecheck/placements.py):
# it skips.
NO_PLACEMENT = "none"
# Kinds of work, for each group's line and the summary by kind.
K_TEST, K_START, K_SIZE, K_ROUND, K_PROBE, K_READ, K_COPY, K_RUN, K_GPU, K_BURN = (
    "pytest's share", "worker group starts", "collective sizes", "benchmark rounds", "NCCL path probes",
    "NCCL path reads", "copy-bandwidth measurements", "strategy runs", "GPU load phases", "burn-in rounds")


@dataclass(frozen=True)
class ParsedTest:
    nodeid: str
    module: str  # file stem: test_collectives
    function: str
    placement: Placement | None
    params: tuple[str, ...]  # the other parameters: op, strategy, step, gpuN, ...


def parse_test(nodeid: str, placements: dict[str, Placement]) -> ParsedTest:
    path, _, rest = nodeid.partition("::")
    function, _, params = rest.partition("[")
    params = params[:-1] if params.endswith("]") else params
    placement = None
    # the placement id leads the parameters (it may hold dashes itself): the longest known id that fits
    for pid in sorted(placements, key=len, reverse=True):
        if params == pid or params.startswith(pid + "-"):
            placement, params = placements[pid], params[len(pid) + 1:]
            break
    return ParsedTest(nodeid, path.rsplit("/", 1)[-1].removesuffix(".py"), function, placement,
                  tuple(p for p in params.split("-") if p))


@dataclass
class Group:
    """Tests of one function on one placement class and GPU count (or one function, for the others)."""

    module: str
    function: str
    klass: str | None
    n_gpus: int | None
    tests: int = 0
    placements: set = field(default_factory=set)
    params: dict = field(default_factory=dict)  # kind of parameter -> its distinct values
    work: Counter = field(default_factory=Counter)  # kind -> count
    seconds: Counter = field(default_factory=Counter)  # kind -> seconds
    sizes: set = field(default_factory=set)  # sizes per sweep it made
    uses: dict = field(default_factory=dict)  # names of the groups whose measurements it reads (ordered)
    skips: str | None = None  # why its tests skip without working (opt-in, no placement here)
    known: bool = True

    @property
    def total_s(self) -> float:
        return sum(self.seconds.values())

    @property
    def name(self) -> str:
        where = f" {self.klass} {self.n_gpus}gpu" if self.klass else ""
        return f"{self.function}{where}"

    def add(self, kind: str, seconds: float, count: int = 1) -> None:
        self.work[kind] += count
        self.seconds[kind] += seconds


GEMM_PRECISIONS = ("bf16", "fp8")  # test_gemm_throughput's parameters (wirecheck.checks.gpu_health's GEMM floors)


def _param_kind(value: str) -> str:
    if value in OPS:
        return "ops"
    if value in DTYPES or value in GEMM_PRECISIONS:
        return "dtypes"
    if value in REDUCTIONS:
        return "reductions"
    if value in NAMES:
        return "strategies"
    if value.startswith("gpu") and value[3:].isdigit():
        return "GPUs"
    return "variants"


@dataclass
class Plan:
    level: str
    source: str
    header: dict
    tests: int
    groups: list[Group]
    session_s: float
    costs: UnitCosts
    # (op, class, GPU count, busbw) whose sizes were priced at the thresholds' slowest floor (_Walk.busbw)
    slowest_priced: tuple[tuple[str, str, int, float], ...] = ()
    # (rounds, seconds) of test_busbw's benchmark rounds a run that keeps or compares them would add to this one's
    rounds_if_kept: tuple[int, float] = (0, 0.0)

    @property
    def total_s(self) -> float:
        return self.session_s + sum(g.total_s for g in self.groups)

    def by_kind(self) -> dict[str, tuple[int, float]]:
        """kind -> (count, seconds) over the whole plan, most expensive first."""
        count, seconds = Counter(), Counter()
        for g in self.groups:
            count.update(g.work)
            seconds.update(g.seconds)
        return {k: (count[k], seconds[k]) for k, _ in seconds.most_common()}

    @property
    def unknown(self) -> list[Group]:
        return [g for g in self.groups if not g.known]


class _Walk:
    """The session's state, as far as costs go."""

    def __init__(self, thresholds, costs: UnitCosts, placements: list[Placement], header: dict, level: str, sweep: str):
        self.th, self.costs, self.placements, self.level, self.sweep_name = thresholds, costs, placements, level, sweep
        self.settings = thresholds.collective_settings(False)
        self.header = header
        self.strategies = NAMES  # every strategy the run holds (predict: those its tests name)
        self.matrix = header.get("matrix") or []
        # How the run's workers live: "pool" (the header says so from the pool on: one worker per GPU for
        # the run, a sub-group per placement, wirecheck.workers.pool), else a group per placement, started at
        # each placement switch, the NCCL probe and the GPU load in groups of their own (the records
        # before the pool).
        self.pooled = header.get("workers") == POOL
        # The live group: the pool's environment (a placement's extra env, sorted), or before the pool the
        # placement id of the shared group; None while none runs.
        self.pool: tuple | str | None = None
        # Each pool environment a pool of the run has started with, and the group that started it first: a pool
        # makes and logs the communicator of every placement of its environment the run uses at its start, and the
        # NCCL path is read from those logs (tests/test_nccl_path.py).
        self.logged: dict[tuple, Group] = {}
        self.gpu_module: str | None = None  # before the pool: the module whose GPU load group is up
        self.gpu_phases: set = set()
        self.group: Group | None = None
        self.made: dict = {}  # a measurement's key -> the group that made it
        # Spare workers (wirecheck.workers.spares): a run whose header says "on" takes each group's ranks
        # from spares that started importing torch at the previous group's start (at the run's start for
        # the first), which saves what of the import they have done by then.
        self.spares = header.get("spare_workers") == "on" and costs.spare_saving_s is not None
        self.clock_s = costs.session_start_s  # the run's seconds so far, as priced
        self.spares_since_s = 0.0  # when the waiting spares were started
        # The local baseline (training/local_baselines.py): a run whose header says "once per GPU" measures it in
        # the first strategy run on each GPU only; a later run whose GPUs all have one saves its price.
        training = header.get("training") or {}
        self.local_once = training.get("local_baseline") == ONCE_PER_GPU and costs.local_baseline_s is not None
        self.local_gpus: set[int] = set()
        # A run whose header says its strategy runs' workers are forked after the trainers' imports (with spare
        # workers) and leave without Python's finalisation saves both in each strategy run.
        self.trainer_workers = training.get("trainer_workers") == TRAINER_WORKERS_PRELOADED
        # A run whose header says so takes each test_busbw's first benchmark round from its sweep: one round less;
        # one that kept or compared no round made that one alone.
        self.benchmark_made = header.get("benchmark")
        # A run whose header says so prepares a one-GPU node's training in its GPU load's shadow; one before it paid
        # that work in the training (the unprepared figure, where the unit costs have one).
        unprepared = costs.one_gpu_single_unprepared_s
        self.one_gpu_single_s = (costs.one_gpu_single_s if header.get("single_gpu") == SINGLE_GPU_PREPARED_IN_LOAD
                                 or unprepared is None else unprepared)
        # (op, class, GPU count, busbw) priced at the thresholds' slowest floor: nothing measured, no floor for
        # the class, and no hardware to derive one from (a `topo -m` text gives no NVLink speed). The plan says
        # so: that price can be far slower than what the node's own checks would allow.
        self.slowest_priced: set[tuple[str, str, int, float]] = set()
        self.rounds_if_kept = [0, 0.0]  # what a run keeping test_busbw's rounds adds where this one makes none

    def _add(self, kind: str, seconds: float, count: int = 1) -> None:
        self.group.add(kind, seconds, count)
        self.clock_s += seconds

    def started(self) -> float:
        """What a group's start saves here by taking spare workers (0 without them); the spares taken
        are replaced now."""
        if not self.spares:
            return 0.0
        saved = min(self.costs.spare_saving_s, max(0.0, self.clock_s - self.spares_since_s))
        self.spares_since_s = self.clock_s
        return saved

    def _first(self, key) -> bool:
        """True when `key` is not measured yet (the current group makes it); else the group reads it."""
        maker = self.made.get(key)
        if maker is None:
            self.made[key] = self.group
            return True
        if maker is not self.group:
            self.group.uses.setdefault(maker.name, None)
        return False

    # -- pricing -----------------------------------------------------------------------------
    def busbw(self, p: Placement, op: str) -> float:
        """What the wire moves: measured for this class, op and GPU count; else the class's floor; else, on
        NVLink, the placement's narrowest pair x the measured busbw per link; else the floor derived from
        the node's hardware (a new op whose table floors are still to be measured, as reduce); else the
        slowest floor."""
        measured = self.costs.busbw.get((p.klass, op, p.n_gpus))
        if measured:
            return measured
        limit = self.th.busbw_limit(p.klass, op, p.n_gpus, False)
        if limit is not None and limit.min:
            return limit.min
        per_link = self.costs.busbw_per_nvlink.get(op)
        if p.nvlink and per_link and p.n_gpus > 1:
            return self._narrowest(p) * per_link
        derived = self._derived_floor(p, op)
        if derived:
            return derived
        slowest = self._slowest_floor(op)
        self.slowest_priced.add((op, p.klass, p.n_gpus, slowest))
        return slowest

    def _narrowest(self, p: Placement) -> int:
        return min(self._nv(a, b) for a in p.gpus for b in p.gpus if a != b)

    def _derived_floor(self, p: Placement, op: str) -> float | None:
        """The floor the busbw check would derive on this node (the header's hardware: its NVLink speed,
        its PCIe link), without a table entry."""
        hardware = Hardware.from_dict(self.header.get("hardware"))
        if hardware is None:
            return None
        ceiling = (self._narrowest(p) * hardware.nvlink_speed if p.nvlink and hardware.nvlink_speed and p.n_gpus > 1
                   else None)
        limit = self.th.busbw_limit(p.klass, op, p.n_gpus, False, ceiling, hardware)
        return limit.min if limit is not None and limit.min else None

    def _slowest_floor(self, op: str) -> float:
        """The slowest floor the thresholds give `op`; for an op with no floor anywhere yet (a new row
        whose floors are still to be measured), the slowest floor of any op: the slowest wire the file
        admits."""
        own = self.th.slowest_busbw_floor(op, False)
        if own is not None:
            return own.min
        floors = [lim.min for other in OPS if (lim := self.th.slowest_busbw_floor(other, False)) is not None]
        if not floors:
            raise ValueError("the thresholds hold no busbw floor for any collective (collectives.floors): "
                             "the plan prices a sweep by one; add the floors of at least one op")
        return min(floors)

    def wire_s(self, p: Placement, op: str, size: int, calls: int) -> float:
        return calls * size * busbw_factor(op, p.n_gpus) / self.busbw(p, op)

    def calls(self, size: int) -> int:
        """Collectives one measurement makes at `size`."""
        return calls_per_size(self.settings, size)

    # -- work ---------------------------------------------------------------------------------
    def shared(self, p: Placement) -> None:
        """On the run's pool: it starts when none runs or the one running has another environment (before
        the pool: a group per placement)."""
        env = tuple(sorted(p.env.items())) if self.pooled else p.id
        if self.pool != env:
            self._add(K_START, self.costs.group_start_s - self.started())
            self.pool = env
            if self.pooled:
                self.logged.setdefault(env, self.group)

    def sweep(self, p: Placement | None, op: str, floor_only: bool = False, axes=None) -> None:
        """`axes`: the op at a further dtype and reduction (wirecheck.vocab.ops.Axes); None, its own."""
        if p is None or not self._first(("sweep", p.id, op, floor_only, axes)):
            return
        self.shared(p)
        sizes = (self.settings.floor_size,) if floor_only else self.settings.sizes_for(self.sweep_name)
        sizes = feasible_sizes(op, sizes, p.n_gpus, axes.dtype if axes else None)
        self.group.sizes.add(len(sizes))
        self._add(K_SIZE, sum(self.costs.per_size_s + self.wire_s(p, op, s, self.calls(s)) for s in sizes), len(sizes))

    def benchmark(self, p: Placement, op: str) -> None:
        self.shared(p)
        s = self.settings
        one = self.costs.benchmark_round_s + self.wire_s(p, op, s.floor_size, s.iters)
        if self.benchmark_made == BENCHMARK_SWEPT_ONLY:
            self.rounds_if_kept[0] += s.benchmark_rounds - 1
            self.rounds_if_kept[1] += (s.benchmark_rounds - 1) * one
            return
        rounds = s.benchmark_rounds - 1 if self.benchmark_made == BENCHMARK_FIRST_ROUND_SWEPT else s.benchmark_rounds
        self._add(K_ROUND, rounds * one, rounds)

    def probe(self, p: Placement | None) -> None:
        """NCCL's path. On the pool: read by the pytest process from the log a pool of the run wrote when it made the
        placement's communicator at its start (no call, no group of its own: its cost is the test's pytest share);
        the pool starts here only where none of the placement's environment has yet. Before the pool: a probe in a
        fresh group of its own, which closed the shared one."""
        if not self.pooled:
            self.pool = None
            self._add(K_PROBE, self.costs.nccl_probe_s)
            return
        if p is None:
            return
        env = tuple(sorted(p.env.items()))
        if env not in self.logged:
            self.shared(p)
        elif self.logged[env] is not self.group:
            self.group.uses.setdefault(self.logged[env].name, None)
        self._add(K_READ, 0.0)

    def one_gpu_pool(self, figure: float | None) -> bool:
        """Whether work that needs the GPU alone runs in the pool's one worker: a one-GPU node whose pool runs (the
        GPU load's) and a unit cost for it (wirecheck.workers.pool's `alone`)."""
        gpus = {g for p in self.placements for g in p.gpus}
        return self.pooled and self.pool == () and len(gpus) == 1 and figure is not None

    def copies(self) -> None:
        if not self._first(("copies",)):
            return
        settings = self.th.copy_bandwidth.settings
        gpus = sorted({g for p in self.placements for g in p.gpus})
        pairs = [p.gpus for p in self.placements if p.klass == CLASS_PAIR]
        one = sum(2 * settings.size / self.costs.copy_host_bps for _ in gpus)
        one += sum(2 * settings.size / (self._nv(a, b) * self.costs.copy_peer_per_link_bps) for a, b in pairs)
        if self.one_gpu_pool(self.costs.one_gpu_copies_s):
            beyond = self.costs.one_gpu_copies_s
        else:
            self.pool = None  # the copies' own process has the GPUs alone
            beyond = self.costs.copy_start_s - self.started()
        self._add(K_COPY, beyond + (settings.warmup_iters + settings.iters) * one)

    def _nv(self, a: int, b: int) -> int:
        try:
            cell = str(self.matrix[a][b])
        except (IndexError, TypeError):
            return 1
        return int(cell[2:]) if cell.startswith("NV") and cell[2:].isdigit() else 1

    def run(self, p: Placement | None, strategy: str, single: bool = False) -> None:
        """A strategy run in fresh workers; `single`: one GPU alone, no process group (its own figure, else priced
        as the reference strategy's run on NVLink)."""
        if p is None or not self._first(("single" if single else "run", p.id, strategy)):
            return
        if single and self.one_gpu_pool(self.one_gpu_single_s):
            self._add(K_RUN, self.one_gpu_single_s)  # in the one-GPU pool's worker: no start
            return
        self.pool = None  # each strategy runs in fresh workers; the shared group is closed first
        seconds = self.costs.single_gpu() if single else self.costs.training(NVLINK if p.nvlink else HOST_PATH, strategy)
        if not single and self.local_once:
            if set(p.gpus) <= self.local_gpus:
                seconds -= self.costs.local_baseline_s
            self.local_gpus |= set(p.gpus)
        if not single and self.trainer_workers:
            seconds -= self.costs.worker_exit_saving_s or 0.0
            if self.spares:
                seconds -= self.costs.trainer_preload_s.get(strategy, 0.0)
        self._add(K_RUN, seconds - self.started())

    def gpu_phase(self, module: str, phase: str) -> None:
        """A GPU load phase, on the pool without an environment of its own (started here when not running);
        before the pool, in a group of its own per test module."""
        if not self.pooled and self.gpu_module != module:
            self.gpu_module, self.gpu_phases = module, set()
        if not self._first(("gpu", module, phase)):
            return
        started = self.pool == () if self.pooled else bool(self.gpu_phases)
        self.gpu_phases.add(phase)
        self.pool = () if self.pooled else None
        if self.pooled:
            self.logged.setdefault((), self.group)
        g, c, level = self.th.gpu_health.settings(False), self.costs, thresholds_key(self.level)
        start = 0.0 if started else c.group_start_s
        saved = 0.0 if started else self.started()
        if phase == FIGURES:
            seconds = c.gpu_figures_s - (c.group_start_s if started else saved)
        elif phase == SUSTAINED:
            seconds = start - saved + g.sustained_duration_s(level) + c.gpu_sustained_extra_s
        else:
            seconds = start - saved + g.memory_passes(level) * c.gpu_memory_pass_s
        self._add(K_GPU, seconds)

    def burn_in(self) -> None:
        """The burn-in's loop: a worker group's start, then rounds (each with its memory test) until --duration
        is spent; the last round is cut to fit, its memory test runs past the end."""
        if not self._first(("burn-in",)):
            return
        self.pool = None  # the loop closes the shared group for its own
        g, c = self.th.gpu_health.settings(False), self.costs
        duration = float(self.header.get("duration_s") or 0.0)
        memory_s = g.memory_passes("burn_in") * c.gpu_memory_pass_s
        rounds = math.ceil(duration / (g.sustained_duration_s("burn_in") + memory_s)) if duration else 0
        self._add(K_START, c.group_start_s - self.started())
        self._add(K_BURN, duration + (memory_s if rounds else 0.0), rounds)

    # -- a test -------------------------------------------------------------------------------
    def twin(self, p: Placement) -> Placement | None:
        return nvlink_twin(self.placements, p) if p is not None else None

    def test(self, t: ParsedTest, kinds: tuple[str, ...]) -> None:
        p = t.placement
        op = next((x for x in t.params if x in OPS), "all_reduce")
        strategy = next((x for x in t.params if x in NAMES), REFERENCE)
        for work in kinds:
            if work in (SWEEP, FLOOR_SWEEP):
                self.sweep(p, op, floor_only=work == FLOOR_SWEEP)
            elif work == AXIS_SWEEP:
                axes = op_axes(op, next((x for x in t.params if x in DTYPES), None),
                               next((x for x in t.params if x in REDUCTIONS), None))
                self.sweep(p, op, floor_only=self.sweep_name != AXES_FULL_SWEEP, axes=None if axes.first else axes)
            elif work == BENCHMARK:
                self.benchmark(p, op)
            elif work == TWIN_SWEEP:
                self.sweep(self.twin(p), "all_reduce")
            elif work == PAIR_SWEEPS:
                nv = self._nv(*p.gpus)
                for other in self.placements:
                    if other.klass == CLASS_PAIR and self._nv(*other.gpus) == nv:
                        self.sweep(other, "all_reduce")
            elif work == INNER_PAIR_SWEEP:
                inner = [o for o in self.placements if o.klass == "nvl_pair" and set(o.gpus) <= set(p.gpus)]
                self.sweep(inner[0] if inner else None, "all_reduce")
            elif work == PROBE:
                self.probe(p)
            elif work == COPIES:
                self.copies()
            elif work == RUN:
                self.run(p, strategy)
            elif work == REFERENCE_RUN:
                self.run(p, REFERENCE)
            elif work in (ALL_RUNS, TWIN_ALL_RUNS):
                for s in self.strategies:
                    self.run(p if work == ALL_RUNS else self.twin(p), s)
            elif work == TWIN_RUN:
                self.run(self.twin(p), strategy)
            elif work == SINGLE_GPU_RUN:
                self.run(p, REFERENCE, single=True)
            elif work == BURN_IN_LOOP:
                self.burn_in()
            else:
                self.gpu_phase(t.module, work)


def _placements(header: dict) -> list[Placement]:
    out = []
    for entry in header.get("placements") or []:
        klass = entry.get("class")
        if klass in CLASS_BY_NAME:
            out.append(Placement(klass, tuple(entry.get("gpus") or ()), dict(CLASS_BY_NAME[klass].env)))
    return out


def predict(tests, header: dict, thresholds, costs: UnitCosts, level: str, source: str = "",
            sweep: str = "quick", *, work) -> Plan:
    """The plan of a run of `tests` (ids in run order) on the node `header` describes (a record's run
    line: placements, link matrix) at `level`, priced with `costs` and the thresholds' run settings.
    `work`: what each test function declared ({function: {"work": kinds, "opt_in": why}}, from
    plan.collect); a function it lacks is priced at pytest's share and listed as unknown."""
    placements = _placements(header)
    walk = _Walk(thresholds, costs, placements, header, level, sweep)
    by_id = {p.id: p for p in placements}
    tests = list(tests)
    # A test that runs every strategy runs those of the run's own (a record made before a strategy was
    # added ran one fewer): the strategies its tests name, in table order.
    named = {x for nodeid in tests for x in parse_test(nodeid, by_id).params if x in NAMES}
    walk.strategies = tuple(s for s in NAMES if s in named) or NAMES
    groups: dict[tuple, Group] = {}
    for nodeid in tests:
        t = parse_test(nodeid, by_id)
        p = t.placement
        key = (t.module, t.function, p.klass if p else None, p.n_gpus if p else None)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(t.module, t.function, *key[2:],
                                        known=t.function in work)
        group.tests += 1
        if p is not None:
            group.placements.add(p.id)
        for value in t.params:
            group.params.setdefault(_param_kind(value), set()).add(value)
        walk.group = group
        walk._add(K_TEST, costs.per_test_s)
        declared = work.get(t.function) or {}
        if declared.get("opt_in"):
            group.skips = declared["opt_in"]
        elif p is None and t.params[:1] == (NO_PLACEMENT,):  # none-all_reduce too: the op after it
            group.skips = "skipped: no placement of its classes on this topology"
        else:
            walk.test(t, tuple(declared.get("work") or ()))
    return Plan(level, source, header, len(tests), list(groups.values()), costs.session_start_s + costs.session_end_s,
                costs, tuple(sorted(walk.slowest_priced)), tuple(walk.rounds_if_kept))
