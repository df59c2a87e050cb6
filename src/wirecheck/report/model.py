"""Record files read into the figures a report shows: plain tables, no drawing, no HTML.

`RunView.of(run)` takes a `results.RunRecord` and pulls out what each section needs (the
node, the verdicts, collective sweeps and their floors, strategy runs against the memory
model and one GPU alone, NCCL's path, copy bandwidth, each GPU under load, error-counter
growth). Every table may be empty: a
`-k` selection, a simulated run or a run cut short has only some of them, and the sections
say so instead of failing. A fleet page reads many runs through the same function.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.report.burn_in import BurnInView, burn_in_view
from wirecheck.report.gpus import GpuPoint, gpu_points
from wirecheck.training.memory_model import predict
from wirecheck.records.file import RecordFileError, RunRecord, read_run
from wirecheck.core.verdict import FAIL, OUTCOMES, PASS, SKIP
from wirecheck.vocab import records as kinds
from wirecheck.vocab.ops import own_axes as _own_axes

# Classes whose traffic rides NVLink (wirecheck.node.placement.NVLINK_CLASSES), named here so a
# record written by another version still reads; the host-path class the wire check compares.
NVLINK_CLASSES = ("nvswitch", "nvl_pair", "nvl_quad", "nvl_group", "pair")
HOST_PATH_CLASS = "forced_pcie"
GB = 1e9


@dataclass
class SizePoint:
    bytes: int
    busbw: float  # bytes/s
    algbw: float
    time_s: float
    wrong: int | None  # None: not checked
    path: str | None = None  # how it was timed: eager calls or a CUDA-graph replay


@dataclass
class Sweep:
    placement: str
    klass: str
    op: str
    n_gpus: int
    points: list[SizePoint] = field(default_factory=list)  # by size
    error: str | None = None

    def at(self, size: int) -> SizePoint | None:
        return next((p for p in self.points if p.bytes == size), None)

    @property
    def largest(self) -> SizePoint | None:
        return self.points[-1] if self.points else None


@dataclass
class Floor:
    """A busbw limit as the run's verdict applied it (GB/s), at one size."""

    size: int
    min: float | None
    max: float | None
    outcome: str
    source: str | None


@dataclass
class StrategyPoint:
    placement: str
    klass: str
    strategy: str
    n_gpus: int
    n_params: int | None
    precision: str | None
    model_state_bytes: int | None  # the largest rank's params + grads + optimizer
    predicted_bytes: int | None  # memory_model, implementation accounting
    peak_bytes: int | None  # None in simulation
    tokens_per_s: float | None  # slowest rank
    mfu: float | None  # when the record has it (or the achieved FLOP/s and the GPU's peak)
    achieved_flops_per_gpu: float | None  # 6 N x tokens/s / ranks, when the runner reports it
    exposed_comm_s: float | None
    error: str | None
    scaling: float | None = None  # tokens/s per GPU over one GPU alone's, when the run measured that first


@dataclass
class SingleGpuPoint:
    """One GPU alone training the strategies' model (the dial's baseline)."""

    placement: str
    tokens_per_s: float | None
    mfu: float | None
    peak_bytes: int | None
    error: str | None


@dataclass
class RunView:
    run: RunRecord
    placements: dict[str, dict]  # id -> {"class", "gpus"}
    verdicts: list[dict]
    sweeps: dict[tuple[str, str], Sweep]  # (placement, op)
    floors: dict[tuple[str, str], Floor]
    strategies: dict[tuple[str, str], StrategyPoint]
    nccl_paths: dict[str, dict]  # placement -> nccl_log.summarize() + error, log files
    copies: dict | None  # the copy-bandwidth worker's result
    counters: list[dict]  # counter_growth verdicts
    gpus: dict[int, GpuPoint] = field(default_factory=dict)  # the GPU health checks, per GPU
    single_gpu: dict[str, SingleGpuPoint] = field(default_factory=dict)  # placement -> one GPU alone
    burn_in: BurnInView | None = None  # a burn-in's rounds and time series (report/burn_in.py)

    # -- the run --------------------------------------------------------------------------
    @property
    def header(self) -> dict:
        return self.run.run

    @property
    def simulated(self) -> bool:
        return self.run.simulated

    @property
    def kind(self) -> str:
        """What the run measured on: "simulation", "no GPU" (not simulated, but NVML read no GPU: bare
        `pytest --profile NAME` on a machine without a driver measured nothing) or "hardware"."""
        if self.simulated:
            return "simulation"
        if self.header.get("unavailable") or self.header.get("gpus") == []:
            return "no GPU"
        return "hardware"

    @property
    def started(self) -> _dt.datetime | None:
        return parse_time(self.header.get("started"))

    @property
    def status(self) -> str:
        """complete | interrupted | cut short (no end record)."""
        if self.run.end is None:
            return "cut short"
        return str(self.run.end.get("status") or "complete")

    @property
    def verdict_counts(self) -> dict[str, int]:
        return {o: sum(v.get("outcome") == o for v in self.verdicts) for o in OUTCOMES}

    @property
    def failures(self) -> list[dict]:
        return [v for v in self.verdicts if v.get("outcome") == FAIL]

    def klass(self, placement: str | None) -> str:
        return (self.placements.get(placement or "") or {}).get("class") or (placement or "").split("-", 1)[0]

    def gpus_of(self, placement: str) -> tuple[int, ...]:
        return tuple((self.placements.get(placement) or {}).get("gpus") or ())

    def nvlink_twin(self, placement: str) -> str | None:
        """The NVLink placement on the same GPUs as a host-path one (what the wire check compares)."""
        gpus = self.gpus_of(placement)
        twins = [pid for pid, p in self.placements.items()
                 if pid != placement and tuple(p.get("gpus") or ()) == gpus and p.get("class") in NVLINK_CLASSES]
        # A class placement (nvswitch-2gpu-0.1) runs every collective; a per-pair check (pair-0.1) only all_reduce.
        return min(twins, key=lambda pid: self.klass(pid) == "pair", default=None)

    @property
    def ops(self) -> list[str]:
        seen: list[str] = []
        for _, op in self.sweeps:
            if op not in seen:
                seen.append(op)
        return seen

    # -- building -----------------------------------------------------------------------
    @classmethod
    def of(cls, run: RunRecord) -> RunView:
        placements = {p["id"]: {"class": p.get("class"), "gpus": p.get("gpus")} for p in run.run.get("placements") or []}
        view = cls(run, placements, list(run.verdicts), {}, {}, {}, {}, None, [])
        for m in run.measurements:
            kind = m.get("kind")
            if kind == kinds.COLLECTIVE:
                view._add_collective(m)
            elif kind == kinds.STRATEGY:
                view._add_strategy(m)
            elif kind == kinds.NCCL_PATH:
                view.nccl_paths[m.get("placement")] = m.get("details") or {}
            elif kind == kinds.COPY_BANDWIDTH:
                view.copies = m.get("details") or {}
            elif kind == kinds.SINGLE_GPU_TRAINING:
                view._add_single_gpu(m)
        for s in view.sweeps.values():
            s.points.sort(key=lambda p: p.bytes)
        for v in view.verdicts:
            if v.get("check") == "busbw":
                view._add_floor(v)
            elif v.get("check") == "counter_growth":
                view.counters.append(v)
        view.gpus = gpu_points(run.measurements, view.verdicts)
        view.burn_in = burn_in_view(run.measurements, view.verdicts)
        return view

    def _add_single_gpu(self, m: dict) -> None:
        d = m.get("details") or {}
        figures = d.get("figures") or {}
        self.single_gpu[m.get("placement") or "single"] = SingleGpuPoint(
            m.get("placement") or "single", m.get("value"), figures.get("mfu"), figures.get("peak_allocated_bytes"),
            d.get("error"))

    def _add_collective(self, m: dict) -> None:
        d = m.get("details") or {}
        placement, op = m.get("placement"), d.get("op")
        if not placement or not op or not _own_axes(d):
            return  # an op's further dtypes and reductions: their verdicts say what they measured
        sweep = self.sweeps.setdefault((placement, op), Sweep(placement, d.get("placement_class") or self.klass(placement),
                                                              op, int(d.get("n_gpus") or len(self.gpus_of(placement)))))
        if d.get("error"):
            sweep.error = d["error"]
            return
        if d.get("busbw") is None or d.get("bytes") is None:
            return
        wrong = d.get("wrong_by_rank") or {}
        checked = wrong and all(w is not None for w in wrong.values())
        sweep.points.append(SizePoint(int(d["bytes"]), float(d["busbw"]), float(d.get("algbw") or 0.0),
                                      float(d.get("time_s") or 0.0), sum(wrong.values()) if checked else None,
                                      d.get("path")))

    def _add_strategy(self, m: dict) -> None:
        d = m.get("details") or {}
        ranks = [r for r in d.get("ranks") or [] if isinstance(r, dict)]
        placement = m.get("placement")
        strategy = d.get("strategy") or next((r.get("strategy") for r in ranks if r.get("strategy")), None)
        if not placement or not strategy:
            return
        settings = d.get("settings") or {}
        n_gpus = int(d.get("n_gpus") or len(ranks) or 1)
        n_params = next((r.get("n_params") for r in ranks if r.get("n_params")), None)
        precision = settings.get("precision") or next((r.get("precision") for r in ranks if r.get("precision")), None)
        states = [sum((r.get("model_state_bytes") or {}).values()) for r in ranks if r.get("model_state_bytes")]
        predicted = None
        if n_params and precision:
            try:
                predicted = predict(strategy, n_params, n_gpus, accounting="implementation", precision=precision).total
            except ValueError:
                predicted = None  # a strategy or precision this memory model does not know
        achieved = _worst(ranks, "achieved_flops_per_gpu", min)
        mfu = _worst(ranks, "mfu", min) if _worst(ranks, "mfu", min) is not None else d.get("mfu")
        peak = d.get("peak_flops_per_gpu") or _worst(ranks, "peak_flops_per_gpu", min)
        if mfu is None and achieved and peak:
            mfu = achieved / peak
        self.strategies[(placement, strategy)] = StrategyPoint(
            placement, self.klass(placement), strategy, n_gpus, n_params, precision,
            max(states) if states else None, predicted,
            _worst(ranks, "peak_allocated_bytes", max), _worst(ranks, "tokens_per_s", min),
            mfu, achieved, _worst(ranks, "exposed_comm_s", max), d.get("error"),
            (d.get("figures") or {}).get("scaling_efficiency"))

    def _add_floor(self, v: dict) -> None:
        inputs, limit = v.get("inputs") or {}, v.get("limit") or {}
        placement, op = inputs.get("placement") or v.get("where"), inputs.get("op")
        if placement and op and inputs.get("size_bytes") and _own_axes(inputs):
            self.floors[(placement, op)] = Floor(int(inputs["size_bytes"]), limit.get("min"), limit.get("max"),
                                                 v.get("outcome", SKIP), v.get("source"))


def _worst(ranks: list[dict], key: str, pick) -> Any:
    values = [r[key] for r in ranks if r.get(key) is not None]
    return pick(values) if values else None


def parse_time(text: str | None) -> _dt.datetime | None:
    if not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def view_of(path: str | Path) -> RunView:
    """A record file as a RunView. Records come from other nodes and shared folders: what one holds
    is data, and a value the model cannot take (a number no measurement has, a field of another
    kind) is a RecordFileError naming the file, never a traceback."""
    run = read_run(path)
    try:
        return RunView.of(run)
    except Exception as exc:  # noqa: BLE001 (anything a changed or damaged record makes the model raise)
        text = str(exc)
        raise RecordFileError(f"{path}: a line is not as wirecheck writes it ({type(exc).__name__}: "
                              f"{text[:300]}{'...' if len(text) > 300 else ''}); the record was changed or damaged") from None


def load_runs(paths: list[str | Path]) -> list[RunView]:
    """Every file must be a record (RecordFileError otherwise: the command says which and stops)."""
    return [view_of(p) for p in paths]


def load_history(directory: str | Path, exclude: list[Path] = ()) -> tuple[list[RunView], list[tuple[Path, str]]]:
    """Every record file (*.jsonl) under `directory`, and the files skipped with the reason.

    A history directory also holds other things (benchmark JSON, logs, a file cut mid-write),
    so a file that is not a record is listed, not fatal.
    """
    root = Path(directory)
    if not root.is_dir():
        raise RecordFileError(f"--history {root}: not a directory")
    excluded = {Path(p).resolve() for p in exclude}
    views, skipped = [], []
    for path in sorted(root.rglob("*.jsonl")):
        if path.resolve() in excluded:
            continue
        try:
            view = view_of(path)
        except RecordFileError as exc:
            skipped.append((path, str(exc)))
            continue
        if view.run.run.get("kind") == "diagnosis":  # findings about another run, not a run of the node
            skipped.append((path, "a diagnosis record (wirecheck diagnose): not a run of the node"))
            continue
        views.append(view)
    return views, skipped


__all__ = ["RunView", "Sweep", "SizePoint", "Floor", "StrategyPoint", "SingleGpuPoint", "load_runs", "load_history", "parse_time",
           "NVLINK_CLASSES", "HOST_PATH_CLASS", "PASS", "FAIL", "SKIP"]
