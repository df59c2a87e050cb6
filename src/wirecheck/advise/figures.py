"""What the prediction reads: the node's figures from its records, or a profile's from elsewhere.

From records (`from_records`): the header's GPUs (model, memory) and placements; every collective
size measured, as one curve per (op, placement class, GPU count), the median where several records
measured a size; every strategy run (the slowest rank's median step, the ranks' mean local step:
the same step with the communication removed); the one-GPU baseline: a `single_gpu_training` run
when a record has one, else the local steps of the strategy runs (the same unwrapped step, timed
on each rank of the run), split into forward and backward and the optimizer step (profiles.yaml
`defaults.optimizer_step`). From a profile: `profile_figures.from_profile`. No torch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from wirecheck.advise.curves import Curve, curve_of
from wirecheck.core.quantity import QuantityError, parse_quantity
from wirecheck.node.placement import CLASS_NETWORK, CLASS_PAIR, CLASS_SINGLE, Placement
from wirecheck.records.file import read_run
from wirecheck.vocab import records as kinds
from wirecheck.vocab.ops import own_axes as _own_axes

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
NOT_JOB_CLASSES = (CLASS_SINGLE, CLASS_PAIR, CLASS_NETWORK)  # per-GPU and per-link checks, not a job's placement


class FiguresError(ValueError):
    """Input advise cannot predict from: the message names the file or key and the fix. `usage`: the
    command line asked for what is not there (an unknown --profile), not a file that is wrong."""

    def __init__(self, message: str, usage: bool = False):
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class StrategyRun:
    strategy: str
    klass: str
    placement: str
    n_gpus: int
    step_s: float  # slowest rank's median step
    local_s: float  # the ranks' mean local step (communication removed)
    tokens_per_step: int  # all ranks
    n_params: int
    shape: dict
    micro_batch: int
    precision: str
    source: str

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_s


@dataclass(frozen=True)
class Compute:
    """One GPU's training rate: its achieved model FLOP/s (6 x params x tokens/s) over the whole step of one
    GPU (forward, backward and the optimizer over all parameters), and the optimizer's share of that step.

    A strategy that shards the optimizer steps 1/N of the parameters on each rank: its compute is the
    one-GPU step less (1 - 1/N) of the optimizer step (`strategy_step_s`). Without that, ZeRO-1 and FSDP
    ran faster than their own local step on the 2x H200 NVLink runs (FSDP 115 ms against 117 ms), a
    negative overhead that put a step below its compute."""

    flops_per_s: float
    source: str
    mfu: float | None = None
    precision: str = "bf16"  # the precision it was measured (or its peak taken) in
    optimizer_s_per_param: float | None = None  # the optimizer step's seconds per parameter (None: unknown)
    optimizer_source: str = ""
    optimizer_short: str = ""  # the figures without their source
    reference: tuple | None = None  # (params, tokens per GPU) of the step the rate was measured on
    fb_flops_per_s: float | None = None  # forward and backward alone: the rate with the optimizer step taken out

    def step_s(self, n_params: float, tokens_per_gpu: float) -> float:
        """Forward and backward scale with the tokens, the optimizer step with the parameters only: at a small
        micro-batch it is a larger share of the step than in the measured one."""
        if self.fb_flops_per_s is None:
            return 6.0 * n_params * tokens_per_gpu / self.flops_per_s
        return 6.0 * n_params * tokens_per_gpu / self.fb_flops_per_s + self.optimizer_s(n_params)

    def optimizer_s(self, n_params: float) -> float:
        return (self.optimizer_s_per_param or 0.0) * n_params

    def sharded_saving_s(self, strategy: str, n_params: float, n_gpus: int) -> float:
        """What a rank does not spend on the optimizer step when the strategy shards the optimizer."""
        from wirecheck.vocab.strategies import OPTIMIZER, strategy as _strategy

        if OPTIMIZER not in _strategy(strategy).shards or n_gpus < 2:
            return 0.0
        return self.optimizer_s(n_params) * (1 - 1 / n_gpus)

    def strategy_step_s(self, strategy: str, n_params: float, tokens_per_gpu: float, n_gpus: int) -> float:
        """One rank's compute in a strategy's step: forward and backward of the whole model on its micro-batch,
        and the optimizer over the parameters it owns."""
        return self.step_s(n_params, tokens_per_gpu) - self.sharded_saving_s(strategy, n_params, n_gpus)

    def strategy_optimizer_s(self, strategy: str, n_params: float, n_gpus: int) -> float:
        """One rank's own optimizer step in a strategy's step (its shard's, where it shards the optimizer)."""
        return self.optimizer_s(n_params) - self.sharded_saving_s(strategy, n_params, n_gpus)

    def describe_optimizer(self, n_params: float) -> str:
        if self.optimizer_s_per_param is None:
            return "the optimizer step's share unknown for this GPU: every strategy's compute is the one-GPU step"
        return (f"a strategy that shards the optimizer computes that less (1 - 1/N) of the optimizer step, "
                f"{self.optimizer_s(n_params) * 1e3:.0f} ms here ({self.optimizer_short})")


@dataclass
class NodeFigures:
    kind: str  # "record" or "profile"
    description: str
    gpu_model: str
    gpu_memory: int  # bytes
    gpu_count: int
    placements: list[Placement]
    curves: dict = field(default_factory=dict)  # (op, klass, n) -> Curve
    compute: Compute | None = None
    runs: list[StrategyRun] = field(default_factory=list)
    verdicts: list[dict] = field(default_factory=list)
    physics: tuple = ()  # a profile's classes predicted from its physics, not measured figures (profile_figures)

    def job_placements(self, n_gpus: int) -> list[Placement]:
        """One placement per class of n_gpus GPUs (the class decides the wire; the first listed is named)."""
        seen, out = set(), []
        for p in self.placements:
            if p.n_gpus == n_gpus and p.klass not in NOT_JOB_CLASSES and p.klass not in seen:
                seen.add(p.klass)
                out.append(p)
        return out

    def alternatives(self, placement: Placement) -> list[Placement]:
        """The other placements of the same class and size (the second quad of an NVL node)."""
        return [p for p in self.placements
                if p.klass == placement.klass and p.n_gpus == placement.n_gpus and p.gpus != placement.gpus]

    def curve(self, op: str, klass: str, n_gpus: int) -> tuple[Curve | None, str]:
        """The curve of `op` on `klass` at n_gpus, else the nearest GPU count, else all_reduce's times the
        op's measured ratio to it on that wire (a profile's figures are all_reduce only; profiles.yaml
        `defaults.against_all_reduce`); with a note when it is not the exact one."""
        for want_op in dict.fromkeys((op, "all_reduce")):
            counts = sorted({n for (o, k, n) in self.curves if o == want_op and k == klass},
                            key=lambda n: (abs(n - n_gpus), -n))
            if counts:
                note = []
                curve = self.curves[(want_op, klass, counts[0])]
                if want_op != op:
                    ratio = against_all_reduce().get((wire_of(klass), op))
                    if ratio is not None:
                        curve = Curve(op, klass, curve.n_gpus, tuple((s, bw * ratio.busbw(s)) for s, bw in curve.points),
                                      curve.source)
                    note.append(f"{want_op}'s busbw" + (f" x {ratio.busbw(ratio.points[-1][0]):.2f}" if ratio else ""))
                if counts[0] != n_gpus:
                    note.append(f"at {counts[0]} GPUs")
                return curve, ", ".join(note)
        return None, f"no {op} curve on {klass}"


def wire_of(klass: str) -> str:
    """`nvlink` or `host`: which of profiles.yaml `defaults.against_all_reduce`'s wires a class runs on (a
    class that crosses quads is as slow as its PCIe hop)."""
    from wirecheck.node.placement import NVLINK_CLASSES

    return "nvlink" if klass in NVLINK_CLASSES else "host"


_RATIOS: dict = {}


def against_all_reduce(path: Path = PROFILES_FILE) -> dict:
    """(wire, op) -> a Curve of the op's busbw over all_reduce's by call size (profiles.yaml
    `defaults.against_all_reduce`); made once per reading of the file."""
    data = load_profiles(path)
    if id(data) in _RATIOS:
        return _RATIOS[id(data)]
    entry = (data.get("defaults") or {}).get("against_all_reduce") or {}
    where = f"{path}: defaults.against_all_reduce"
    out = {}
    try:
        for wire in ("nvlink", "host"):
            for op, by_size in (entry.get(wire) or {}).items():
                points = sorted((int(parse_quantity(size, "size", where=f"{where}.{wire}.{op}")), float(r))
                                for size, r in by_size.items())
                out[(wire, op)] = Curve(op, wire, 2, tuple(points), entry.get("source", ""))
    except (AttributeError, TypeError, ValueError, QuantityError) as exc:
        raise FiguresError(f"{where}: {exc}; write {{wire: {{op: {{\"16 MiB\": ratio, ...}}}}}}") from None
    _RATIOS[id(data)] = out
    return out


def _placements_of(header: dict, path) -> list[Placement]:
    out = []
    for p in header.get("placements") or []:
        try:
            out.append(Placement(p["class"], tuple(p["gpus"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise FiguresError(f"{path}: run header placement {p!r}: {exc}") from None
    return out


def _strategy_run(m: dict, d: dict, path) -> StrategyRun | None:
    """A strategy measurement as the model reads it; None for one recorded before the record kept
    what the model needs (tokens per step, the local step)."""
    ranks = d["ranks"]
    try:
        locals_ = [r["local_step_time_median_s"] for r in ranks if r.get("local_step_time_median_s")]
        r0 = ranks[0]
        return StrategyRun(
            d.get("strategy") or r0["strategy"], (m.get("placement") or "").split("-")[0], m.get("placement"),
            int(d.get("n_gpus") or len(ranks)), max(r["step_time_median_s"] for r in ranks),
            statistics.mean(locals_) if locals_ else float("nan"), int(r0["tokens_per_step"]),
            int(r0["n_params"]), dict(r0["shape"]), int(r0["micro_batch"]), r0.get("precision", "bf16"), Path(path).name)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def from_records(paths) -> NodeFigures:
    """The node's figures from one or more record files (the last run of each)."""
    records = []
    for path in paths:
        try:
            records.append(read_run(path))
        except (OSError, ValueError) as exc:
            raise FiguresError(f"--record {path}: {exc}") from None
    # The node is the one with the most GPUs among the records (a one-GPU record adds its baseline).
    main = max(records, key=lambda r: len(r.run.get("gpus") or []))
    gpus = main.run.get("gpus") or []
    if not gpus:
        raise FiguresError(f"--record {main.path}: the run header lists no GPUs; advise needs a hardware record")
    if any(r.simulated for r in records):
        sim = next(r for r in records if r.simulated)
        raise FiguresError(f"--record {sim.path}: a simulated run (CPU timings say nothing about a node's wires); "
                           "give a record of a run on GPUs")
    samples: dict[tuple, list] = {}
    runs: list[StrategyRun] = []
    single = []
    verdicts = []
    for rec in records:
        verdicts += rec.verdicts
        for m in rec.measurements:
            d = m.get("details") or {}
            if m.get("kind") == kinds.COLLECTIVE and isinstance(d.get("busbw"), (int, float)) \
                    and isinstance(d.get("bytes"), int) and d["bytes"] > 0 and _own_axes(d):
                key = (d.get("op"), d.get("placement_class"), int(d.get("n_gpus") or 0))
                samples.setdefault(key, []).append((d["bytes"], d["busbw"]))
            elif m.get("kind") == kinds.STRATEGY and d.get("ranks") and not d.get("error"):
                run = _strategy_run(m, d, rec.path)
                if run is not None:
                    runs.append(run)
            elif m.get("kind") == kinds.SINGLE_GPU_TRAINING and d.get("ranks") and not d.get("error"):
                r0 = d["ranks"][0]
                if not (r0.get("n_params") and r0.get("tokens_per_s")):
                    continue
                if r0.get("device_name") and r0["device_name"] != (gpus[0].get("name") or ""):
                    continue  # another GPU model's rate is not this node's
                single.append((6.0 * r0["n_params"] * r0["tokens_per_s"], (d.get("figures") or {}).get("mfu"),
                               r0["tokens_per_s"], f"{Path(rec.path).name} on {rec.run.get('host')}",
                               r0.get("precision", "bf16"),
                               (r0["n_params"], r0["tokens_per_step"]) if r0.get("tokens_per_step") else None))
    curves = {key: curve_of(*key, pts, f"measured: {key[1]} at {key[2]} GPUs") for key, pts in samples.items()
              if key[0] and key[1]}
    compute = None
    if single:
        flops = statistics.median(s[0] for s in single)
        mfus = [s[1] for s in single if s[1]]
        compute = Compute(flops, f"measured: one GPU alone, {statistics.median(s[2] for s in single):,.0f} tokens/s "
                                 f"({', '.join(sorted({s[3] for s in single}))})",
                          statistics.median(mfus) if mfus else None, single[0][4], reference=single[0][5])
    elif runs:
        rates = [6.0 * r.n_params * (r.tokens_per_step / r.n_gpus) / r.local_s for r in runs if r.local_s == r.local_s]
        if rates:
            compute = Compute(statistics.median(rates),
                              f"measured: the strategy runs' local steps (the same step without communication, on "
                              f"each rank; {len(rates)} runs), no one-GPU run in the records",
                              precision=runs[0].precision,
                              reference=(statistics.median(r.n_params for r in runs),
                                         statistics.median(r.tokens_per_step / r.n_gpus for r in runs)))
    compute = with_optimizer(compute, gpus[0].get("name") or "")
    return NodeFigures("record", f"the node's records: {', '.join(Path(r.path).name for r in records)} "
                                 f"(host {main.run.get('host')}, {len(gpus)}x {gpus[0].get('name')})",
                       gpus[0].get("name") or "", int(min(g.get("memory_bytes") or 0 for g in gpus)), len(gpus),
                       _placements_of(main.run, main.path), curves, compute, runs, verdicts)


def with_optimizer(compute: Compute | None, gpu_model: str, path: Path = PROFILES_FILE) -> Compute | None:
    """The compute with its optimizer step per parameter: profiles.yaml `defaults.optimizer_step` (bytes a
    fused AdamW moves per parameter over the GPU model's HBM bandwidth)."""
    if compute is None:
        return None
    entry = (load_profiles(path).get("defaults") or {}).get("optimizer_step") or {}
    hbm = (entry.get("hbm") or {}).get(gpu_model)
    if hbm is None or compute.reference is None:
        return compute
    where = f"{path}: defaults.optimizer_step"
    try:
        bandwidth = parse_quantity(hbm, "bandwidth", where=f"{where}.hbm.{gpu_model}")
        per_param = float(entry["bytes_per_param"])
    except (KeyError, TypeError, ValueError, QuantityError) as exc:
        raise FiguresError(f"{where}: {exc}") from None
    from dataclasses import replace

    short = f"fused AdamW, {per_param:.0f} B per parameter at {bandwidth / 1e9:.0f} GB/s HBM"
    n_ref, t_ref = compute.reference
    fb_s = compute.step_s(n_ref, t_ref) - per_param / bandwidth * n_ref
    if fb_s <= 0:
        raise FiguresError(f"{where}: the optimizer step at {hbm} is longer than the measured step of "
                           f"{compute.step_s(n_ref, t_ref) * 1e3:.0f} ms; check hbm.{gpu_model}")
    return replace(compute, optimizer_s_per_param=per_param / bandwidth, optimizer_short=short,
                   fb_flops_per_s=6.0 * n_ref * t_ref / fb_s,
                   optimizer_source=f"{short}: {entry.get('source', '')}")


@dataclass(frozen=True)
class Tie:
    error: float  # a share of tokens/s
    source: str


def tie_errors(path: Path = PROFILES_FILE) -> dict[str, Tie]:
    """profiles.yaml `defaults.tie`: the prediction's error between two strategies, for fits from the node's own
    runs (`own_runs`) and for the shipped fits (`shipped_fits`)."""
    entry = (load_profiles(path).get("defaults") or {}).get("tie") or {}
    try:
        return {key: Tie(float(entry[key]["error"]), str(entry[key]["source"])) for key in ("own_runs", "shipped_fits")}
    except (KeyError, TypeError, ValueError) as exc:
        raise FiguresError(f"{path}: defaults.tie needs own_runs and shipped_fits, each with error and source "
                           f"({exc!r})") from None


_LOADED: dict = {}


def load_profiles(path: Path = PROFILES_FILE) -> dict:
    """The parsed file, read again only when it changed (a recommendation reads its tie errors, every
    micro-batch line one; callers only read it)."""
    try:
        key = (str(path), path.stat().st_mtime_ns)
        if key not in _LOADED:
            _LOADED[key] = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise FiguresError(f"{path}: cannot read it: {exc}") from None
    return _LOADED[key]


def measured_profiles(path: Path = PROFILES_FILE) -> dict:
    """profiles.yaml `profiles:`: the measured figures of some of thresholds.yaml's profiles, by its names."""
    return load_profiles(path).get("profiles") or {}
