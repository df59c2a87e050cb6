"""The stable figures of a recorded run, each with the thresholds key it is judged at and whose
it is: what `wirecheck calibrate` makes floors from and what the history rule compares night to night.

A figure is read from the inputs of the verdict that judged it (the record keeps them, so nothing
is measured again): the GPU figures the checks declare floors for (HBM copy and read, GEMM bf16 and
fp8, the sustained median), host copies, busbw at the floor size per placement, small-message latency
per placement (judged by a ceiling), training throughput (a strategy per placement, one GPU alone). Its subject is what it belongs to: a GPU by its serial or UUID from the run header
(an index or a bus id names a slot, and a GPU swapped into the slot is another GPU), a placement
by its id and the identities of its GPUs. Records written before headers kept UUIDs and serials
name a GPU by host and bus id only (`identified` False).

Which verdicts hold a GPU figure, which figure, and its quantity kind and unit are what the checks
declare (their Floors, wirecheck.thresholds.declared, and `figure=`): this floor sits below both and
is handed them (`GpuFigures`, built by wirecheck.checks.gpu_figures() for calibrate and history), so a
new GPU check's floor is calibrated and held to its history with no edit here.

Each figure also carries how much it moved within its own run (`within`: the standard error of the
median of its repeats, wirecheck.core.resolution.within_of), from the verdict's `noise` input or, in a
record written before verdicts kept it, from the run's measurement lines (the GPU figures' per-call
spread, the sustained load's windows, a strategy's step times): the history rule's margin and the
resolution of every rule rest on it beside the noise from run to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import math
import statistics

from wirecheck.core import quantity
from wirecheck.core.resolution import within_of
from wirecheck.records.file import RecordFileError, RunRecord, read_run
from wirecheck.vocab import records as kinds
from wirecheck.vocab.ops import own_axes as _own_axes

# The unit a figure shows in (messages, a calibrated file) by its quantity kind, and the scale from base
# units to it: every figure but the GPU figures, whose own declared unit says theirs (Figure.unit).
UNITS = {"bandwidth": ("GB/s", 1e-9), "compute": ("TFLOP/s", 1e-12), "throughput": ("tokens/s", 1.0),
         "time": ("µs", 1e6)}
# Where a GPU figure's verdict keeps its value in base units at full precision, by quantity kind (the
# inputs of the shipped GPU checks); a check without one is read from its verdict's `measured`, in the
# unit it was recorded in (rounded through that unit, as the report reads it).
BASE_INPUTS = {"bandwidth": "bytes_per_s", "compute": "flops_per_s"}


def display(kind: str, unit: str | None = None) -> tuple[str, float]:
    """(unit, display units per base unit) of a figure of `kind`: its own `unit` (a GPU figure's, as
    its Floor declares it), else its kind's (UNITS)."""
    if unit is None:
        return UNITS[kind]
    return unit, 1.0 / quantity.UNITS[quantity.KIND_ALIASES.get(kind, kind)][unit]


@dataclass(frozen=True)
class GpuFigures:
    """The per-GPU figures as the checks declare them, handed in from wirecheck.checks (gpu_figures()).
    `floors`: figure -> its declared Floor (read for .kind, .unit and .scale); `checks`: the name of each
    check that declares a Floor -> the figure one of its verdicts is about, from its inputs."""

    floors: Mapping[str, Any]
    checks: Mapping[str, Callable[[dict], str]]


@dataclass(frozen=True)
class Figure:
    key: tuple  # the thresholds key path of its floor: ("gpu_health", "floors", "NVIDIA H200", "hbm_copy")
    figure: str  # its short name: hbm_copy, h2d, all_reduce, ddp, single_gpu_throughput
    kind: str  # bandwidth | compute | throughput (wirecheck.core.quantity)
    value: float  # base units (bytes/s, FLOP/s, tokens/s)
    subject: str  # whose it is: "GPU serial 1652..." / "GPU uuid GPU-..." / "placement nvswitch-2gpu-0.1 on GPUs ..."
    where: str  # where the run named it: GPU0, a placement id
    slot: str  # the slot it sits in: "host 00000000:00:06.0" (a GPU), "host placement-id"
    gpu_models: tuple  # the GPU models it ran on
    gpus: tuple  # the GPUs' identities (serial or UUID; host + bus id where the record has neither)
    identified: bool  # every GPU named by serial or UUID
    host: str
    started: str  # the run's start (ISO 8601)
    record: str  # the record file
    outcome: str  # its verdict's outcome in that run
    workload: dict | None = None  # training figures: what was trained (shape, micro_batch, precision), where known
    level: str | None = None  # the run's --level (the sustained load's length follows it)
    # a strategy's throughput: the run's training set (the header's training.set: the runs before it, and the
    # order they ran in, differ between sets); None in records from before the set
    training_set: str | None = None
    bound: str = "min"  # min: a floor judges it (higher is better); max: a ceiling (latency)
    trusted: bool = True  # False: its verdict failed for more than its table limit (limit_only)
    unit: str | None = None  # the unit it shows in, where its declaration says it (a GPU figure); None: its kind's
    within: float | None = None  # its relative standard error within its run (its repeats); None: not recorded

    @property
    def yaml_path(self) -> str:
        return ".".join(str(k) for k in self.key)

    def shown(self, value: float | None = None) -> str:
        unit, scale = display(self.kind, self.unit)
        number = (self.value if value is None else value) * scale
        return f"{number:,.0f} {unit}" if self.kind == "throughput" else f"{number:.1f} {unit}"


# The checks of these figures (the GPU checks: those that declare a Floor, GpuFigures.checks). One that
# failed only its table limit (a GPU model or fabric the file had no right limit for: an A100 node against
# H200 floors) is what calibration is for, and still a reading of the GPU; any other failure (a wrong result,
# an XID, a foreign process, a GPU below its peers) is not.
OTHER_FIGURE_CHECKS = ("host_copy", "busbw", "small_message_latency", "throughput", "single_gpu_training")


def limit_only(v: dict, gpu: GpuFigures) -> bool:
    """A failed verdict of a calibrated figure that failed its table limit and nothing else."""
    if not isinstance(v.get("measured"), (int, float)):
        return False
    failed_by = (v.get("details") or {}).get("failed_by")
    if v.get("check") in gpu.checks:  # they also fail a GPU below its peers, or measured beside another process
        return failed_by is not None and list(failed_by) == ["floor"]
    return v.get("check") in OTHER_FIGURE_CHECKS and failed_by is None


def _gpu_value(v: dict, floor) -> float | None:
    """A GPU figure's value in base units (BASE_INPUTS), None where its verdict holds none."""
    i = v.get("inputs") or {}
    key = BASE_INPUTS.get(floor.kind)
    if key is not None and key in i:
        return i[key]
    factor = quantity.UNITS.get(quantity.KIND_ALIASES.get(floor.kind, floor.kind), {}).get(v.get("unit"))
    measured = v.get("measured")
    return measured * factor if factor is not None and isinstance(measured, (int, float)) else None


def noise_of(spread: float | None, calls: int | None) -> dict | None:
    """A figure's within-run noise as its verdict's `noise` input keeps it: how many repeats, their spread
    ((p90 - p10) / median) and the standard error of their median it gives; None without repeats."""
    within = within_of(spread, calls)
    return None if within is None else {"calls": calls, "spread": spread, "within": within}


def _scaled_within(values: list[float]) -> float | None:
    """The standard error of the median of `values` relative to it, from their scaled MAD (1.2533 x sd / sqrt n)."""
    values = [v for v in values if isinstance(v, (int, float)) and v > 0]
    if len(values) < 3:
        return None
    median = statistics.median(values)
    mad = 1.4826 * statistics.median(abs(v - median) for v in values) / median
    return 1.2533 * mad / math.sqrt(len(values)) if mad > 0 else None


def _recorded_within(run: RunRecord) -> dict:
    """The within-run noise a record's measurement lines give, for records whose verdicts do not keep it:
    ("gpu", index, figure) of the GPU load's figures and sustained load, ("train", placement, strategy)
    of a strategy run or one GPU alone (its timed steps)."""
    out: dict = {}
    for m in run.measurements:
        details = m.get("details") or {}
        result = details.get("result") or {}
        kind = m.get("kind")
        if kind == kinds.GPU_FIGURES and isinstance(result, dict):
            gpu = details.get("gpu")
            for part in ("copy", "read"):
                s = (result.get("hbm") or {}).get(part) or {}
                out[("gpu", gpu, f"hbm_{part}")] = within_of(s.get("spread"), s.get("calls"))
            for dtype in ("bf16", "fp8"):
                s = (result.get(f"gemm_{dtype}") or {}).get("throughput") or {}
                out[("gpu", gpu, f"gemm_{dtype}")] = within_of(s.get("spread"), s.get("calls"))
        elif kind == kinds.GPU_SUSTAINED and isinstance(result, dict):
            window = result.get("window_s") or 0
            windows = [w.get("flops_per_s") for w in result.get("windows") or []
                       if isinstance(w, dict) and (w.get("seconds") or 0) >= 0.5 * window]
            out[("gpu", details.get("gpu"), "sustained_bf16")] = _scaled_within(windows)
        elif kind in (kinds.STRATEGY, kinds.SINGLE_GPU_TRAINING):
            ranks = details.get("ranks") or ([details] if details.get("step_times_s") else [])
            steps = (ranks[0] or {}).get("step_times_s") if ranks and isinstance(ranks[0], dict) else None
            strategy = details.get("strategy") if kind == kinds.STRATEGY else "single_gpu_throughput"
            out[("train", m.get("placement"), strategy)] = _scaled_within(steps or [])
    return out


def _within(inputs: dict, recorded: dict, key: tuple) -> float | None:
    noise = inputs.get("noise")
    if isinstance(noise, dict) and isinstance(noise.get("within"), (int, float)):
        return float(noise["within"])
    return recorded.get(key)


def gpu_identity(gpu: dict, host: str) -> tuple[str, bool]:
    """A GPU's identity in a run header: its serial, else its UUID, else host and bus id (not identified)."""
    if gpu.get("serial"):
        return f"serial {gpu['serial']}", True
    if gpu.get("uuid"):
        return f"uuid {gpu['uuid']}", True
    return f"{host} {gpu.get('bus_id') or 'GPU' + str(gpu.get('index'))}", False


def run_figures(run: RunRecord, gpu: GpuFigures) -> list[Figure]:
    """Every stable figure the run's verdicts hold (unmeasured ones, and those measured beside a
    foreign process or with an error, left out); the GPU figures those `gpu` declares."""
    header = run.run
    host = str(header.get("host") or "?")
    started = str(header.get("started") or "")
    gpus = {g.get("index"): g for g in header.get("gpus") or [] if isinstance(g, dict)}
    placements = {p.get("id"): p for p in header.get("placements") or [] if isinstance(p, dict)}

    def gpu_of(index) -> tuple[str, bool, str, str]:
        g = gpus.get(index, {"index": index})
        ident, known = gpu_identity(g, host)
        return ident, known, str(g.get("name") or "?"), f"{host} {g.get('bus_id') or 'GPU' + str(index)}"

    def placement_of(pid: str) -> tuple[str, bool, tuple, tuple]:
        members = (placements.get(pid) or {}).get("gpus") or []
        idents = [gpu_of(i) for i in members]
        return (f"placement {pid} on {', '.join(i[0] for i in idents) or 'unknown GPUs'}",
                bool(idents) and all(i[1] for i in idents), tuple(sorted({i[2] for i in idents})),
                tuple(i[0] for i in idents))

    trained = {}  # (placement, strategy) -> workload, from the strategy runs' own records (older verdicts lack it)
    for m in run.measurements:
        ranks = (m.get("details") or {}).get("ranks") or [] if m.get("kind") == kinds.STRATEGY else []
        if ranks and "micro_batch" in ranks[0]:
            trained[(m.get("placement"), ranks[0].get("strategy"))] = {
                k: ranks[0].get(k) for k in ("shape", "micro_batch", "precision")}

    recorded = _recorded_within(run)
    out: list[Figure] = []
    for v in run.verdicts:
        i = v.get("inputs") or {}
        check, outcome = v.get("check"), v.get("outcome")
        # A skip with its figure counts (a GPU model without a floor yet: what calibrate and history are for)
        if outcome not in ("pass", "fail", "skip") or i.get("simulated"):
            continue
        common = dict(host=host, started=started, record=str(run.path), outcome=outcome, level=header.get("level"),
                      trusted=outcome != "fail" or limit_only(v, gpu))
        if check in gpu.checks:
            figure = gpu.checks[check](i)
            floor = gpu.floors.get(figure)
            value = _gpu_value(v, floor) if floor is not None else None
            if not value or i.get("foreign_processes") or i.get("error"):
                continue
            ident, known, _, slot = gpu_of(i.get("gpu"))
            model = str(i.get("gpu_model") or "?")
            out.append(Figure(("gpu_health", "floors", model, figure), figure, floor.kind, float(value), ident,
                              str(v.get("where")), slot, (model,), (ident,), known, **common, unit=floor.unit,
                              within=_within(i, recorded, ("gpu", i.get("gpu"), figure))))
        elif check == "host_copy" and i.get("bytes_per_s") and not i.get("error"):
            ident, known, model, slot = gpu_of(i.get("gpu"))
            direction = str(i.get("direction"))
            out.append(Figure(("copy_bandwidth", "floors", str(i.get("fabric")), direction), direction, "bandwidth",
                              float(i["bytes_per_s"]), f"{ident} {direction}", str(v.get("where")),
                              f"{slot} {direction}", (model,), (ident,), known, **common))
        elif check == "busbw" and i.get("busbw_bytes_per_s") and _own_axes(i):
            # an op's further dtypes and reductions are judged by its floor (collectives.axes_floor), not
            # calibrated into it: its own measurement is the figure
            subject, known, models, idents = placement_of(i.get("placement"))
            out.append(Figure(("collectives", "floors", str(i.get("placement_class")), str(i.get("op")),
                               int(i.get("n_gpus") or 0)), str(i.get("op")), "bandwidth",
                              float(i["busbw_bytes_per_s"]), f"{subject} {i.get('op')}", str(i.get("placement")),
                              f"{host} {i.get('placement')} {i.get('op')}", models, idents, known, **common))
        elif check == "small_message_latency" and v.get("measured"):
            subject, known, models, idents = placement_of(i.get("placement"))
            op = str(i.get("op"))
            out.append(Figure(("collectives", "latency", "ceilings", str(i.get("placement_class")), op,
                               int(i.get("n_gpus") or 0)), f"{op}_latency", "time", float(v["measured"]) * 1e-6,
                              f"{subject} {op} latency", str(i.get("placement")),
                              f"{host} {i.get('placement')} {op} latency", models, idents, known, **common,
                              bound="max"))
        elif check == "throughput" and i.get("tokens_per_s"):
            subject, known, models, idents = placement_of(i.get("placement"))
            out.append(Figure(("training", "throughput_floors", str(i.get("placement_class")), str(i.get("strategy")),
                               int(i.get("n_gpus") or 0)), str(i.get("strategy")), "throughput",
                              float(i["tokens_per_s"]), f"{subject} {i.get('strategy')}", str(i.get("placement")),
                              f"{host} {i.get('placement')} {i.get('strategy')}", models, idents, known, **common,
                              workload=i.get("workload") or trained.get((i.get("placement"), i.get("strategy"))),
                              training_set=(header.get("training") or {}).get("set"),
                              within=_within(i, recorded, ("train", i.get("placement"), i.get("strategy")))))
        elif check == "single_gpu_training" and i.get("tokens_per_s"):
            subject, known, models, idents = placement_of(i.get("placement"))
            model = str(i.get("gpu_model") or (models[0] if models else "?"))
            out.append(Figure(("training", "single_gpu_throughput_floors", model), "single_gpu_throughput",
                              "throughput", float(i["tokens_per_s"]), subject, str(i.get("placement")),
                              f"{host} {i.get('placement')}", (model,), idents, known, **common,
                              workload=i.get("workload"),
                              within=_within(i, recorded, ("train", i.get("placement"), "single_gpu_throughput"))))
    return out


def history_figures(folder: str | Path, gpu: GpuFigures,
                    exclude: str | Path | None = None) -> tuple[list[Figure], list[str]]:
    """The figures of every hardware run recorded under `folder` (searched recursively), but
    `exclude` (the run being judged), and the files left out with why. A figure its run failed (its
    own check other than by its table limit, or its history check) is left out too: a GPU that degrades
    keeps failing against its good nights instead of becoming its own baseline. A night the drift rule
    failed is kept: the drift rule measures a fall against its oldest runs, and leaving its own nights out
    would narrow the noise it reads until it fails clean ones (scripts/bench/sensitivity.py saw that)."""
    figures: list[Figure] = []
    skipped: list[str] = []
    gone = Path(exclude).resolve() if exclude else None
    for path in sorted(Path(folder).rglob("*.jsonl")):
        if gone is not None and path.resolve() == gone:
            continue
        try:
            run = read_run(path)
        except (RecordFileError, OSError) as exc:
            skipped.append(f"{path}: {exc}")
            continue
        if run.simulated:
            continue
        failed_history = {((v.get("inputs") or {}).get("subject"), (v.get("inputs") or {}).get("key"))
                          for v in run.verdicts if v.get("check") == "history" and v.get("outcome") == "fail"}
        figures += [f for f in run_figures(run, gpu) if f.trusted and (f.subject, f.yaml_path) not in failed_history]
    return figures, skipped
