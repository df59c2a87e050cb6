"""The unit costs of the time model: fixtures/pytest_wirecheck/unit_costs.yaml read into plain seconds and bytes/s.

The file is made by scripts/unit_costs.py from recorded runs; every figure there carries its
source, kept here so the plan can say where each of its numbers came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from wirecheck.core.paths import suite_paths
from wirecheck.vocab.ops import OPS
from wirecheck.vocab.placements import CLASSES
from wirecheck.thresholds.yaml_reader import _At, _read_yaml
from wirecheck.vocab.strategies import NAMES, REFERENCE

NVLINK, HOST_PATH = "nvlink", "host_path"  # the wire a strategy run's figure was taken on
FIX = "make the file again: .venv/bin/python scripts/unit_costs.py --write"


@dataclass(frozen=True)
class UnitCosts:
    path: Path
    cold: bool  # the figures without the bytecode cache (workers compiling torch each time)
    records: tuple[str, ...]
    session_start_s: float
    session_end_s: float
    per_test_s: float  # pytest's own share of any test (NVML-only tests cost this alone)
    group_start_s: float  # a worker group: spawn, import torch, join the process group, first call
    group_start_cold_s: float | None  # without the bytecode cache, where the file says
    per_size_s: float  # one collective size beyond its wire time
    benchmark_round_s: float  # one test_busbw benchmark round beyond its wire time
    busbw: Mapping[tuple[str, str, int], float]  # (class, op, GPU count) -> bytes/s measured at the floor size
    busbw_per_nvlink: Mapping[str, float]  # op -> bytes/s per NVLink of a pair (NVLink placements without a figure)
    nccl_probe_s: float  # one NCCL path probe, its fresh worker group included
    copy_start_s: float
    copy_host_bps: float  # a pinned host copy, either direction
    copy_peer_per_link_bps: float  # a peer copy, per NVLink of the pair
    training_s: Mapping[tuple[str, str], float]  # (wire, strategy) -> one run on 2 GPUs, start to its record
    gpu_figures_s: float  # the GPU load's first phase, its worker group's start included
    gpu_memory_pass_s: float
    gpu_sustained_extra_s: float  # beyond the level's duration
    # What a worker start saves from a spare worker that finished importing torch (wirecheck.workers.spares): a
    # start as a new interpreter less one from a spare, measured together; None where the file has no figure.
    spare_saving_s: float | None = None
    # One GPU alone training (test_single_gpu_training) in a new interpreter; None where the file has no figure (then
    # priced as the reference strategy's run on NVLink).
    single_gpu_s: float | None = None
    # On a one-GPU node, work in the pool's one worker (wirecheck.workers.pool's `alone`): the copies beyond their
    # copy time, and one GPU's training; None where the file has no figure (then priced as in new workers).
    one_gpu_copies_s: float | None = None
    one_gpu_single_s: float | None = None  # its one-time work done in the GPU load's shadow (the load's aside)
    one_gpu_single_unprepared_s: float | None = None  # the same training in a run that did not prepare it
    # A strategy run's local baseline (training/baseline.py), part of each training_s figure: what a run saves that
    # takes its GPUs' figures from an earlier run (training/local_baselines.py); None where the file has no figure.
    local_baseline_s: float | None = None
    # What a strategy run's process saves when forked after the zygote imported the trainers' modules (its set-up's
    # imports), by strategy; a strategy without a figure saves nothing.
    trainer_preload_s: Mapping[str, float] = field(default_factory=dict)
    # What a worker group's close saves by its workers leaving without Python's finalisation; None: no figure.
    worker_exit_saving_s: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # key path -> where the figure came from

    def single_gpu(self) -> float:
        """One GPU alone training; without its own figure, the reference strategy's run on NVLink."""
        return self.single_gpu_s if self.single_gpu_s is not None else self.training(NVLINK, REFERENCE)

    def training(self, wire: str, strategy: str) -> float:
        """A strategy run on `wire`; a strategy without a figure costs the slowest recorded one."""
        return self.training_s.get((wire, strategy)) or max(self.training_s.values())


def default_path() -> Path:
    return suite_paths().unit_costs


def _figure(at: _At, kind: str, sources: dict, cold: bool = False) -> float:
    """A figure's value; with `cold`, its value without the bytecode cache where it has one."""
    f = at.fields("a unit cost", required={"value": '"4.2 s"', "source": '"which records, how"'},
                  optional={"without_bytecode_cache": '"8 s"'})
    sources[at.yaml_path] = f["source"].source()
    if cold and "without_bytecode_cache" in f:
        return f["without_bytecode_cache"].quantity(kind)
    return f["value"].quantity(kind)


def load_unit_costs(path: str | Path | None = None, cold: bool = False) -> UnitCosts:
    """The unit costs file; a missing or malformed one is a ValueError naming the key and the fix.
    `cold`: the figures of runs whose workers had no bytecode cache (compiling torch in each), where
    the file has them."""
    path = Path(path) if path else default_path()
    if not path.is_file():
        raise ValueError(f"{path}: no unit costs file there; {FIX}")
    root = _At(str(path), (), _read_yaml(path))
    top = root.fields("unit costs", required={k: "..." for k in (
        "records", "startup_records", "gpu_load_records", "session", "per_test", "worker_group_start", "collective", "nccl_path_probe",
        "copy_bandwidth", "training", "gpu_health")}, optional={"spare_workers": "{new_interpreter: ..., from_spare: ...}", "single_gpu_run": '{value: "6.9 s", source: ...}',
                   "one_gpu_pool": "{copies: ..., single_gpu_run: ...}", "local_baseline": '{value: "2.7 s", source: ...}',
                   "trainer_preload": '{ddp: {value: "1.4 s", source: ...}}',
                   "worker_exit_saving": '{value: "0.4 s", source: ...}'})
    sources: dict[str, str] = {}
    session = top["session"].fields("session costs", required={"start": "...", "end": "..."})
    collective = top["collective"].fields("collective costs", required={
        "per_size": "...", "benchmark_round": "...", "busbw_at_floor": "...", "busbw_per_nvlink": "..."})
    per_link = {op: _figure(at, "bandwidth", sources) for op, at in _keyed(collective["busbw_per_nvlink"], OPS, "collective").items()}
    busbw = {}
    for klass, ops in _keyed(collective["busbw_at_floor"], CLASSES, "placement class").items():
        for op, counts in _keyed(ops, OPS, "collective").items():
            for n in counts.mapping("GPU counts"):
                if isinstance(n, bool) or not isinstance(n, int):
                    raise counts.child(n).error("is not a GPU count", "key the figures by GPU count, e.g. 2:")
                busbw[(klass, op, n)] = _figure(counts.child(n), "bandwidth", sources)
    copies = top["copy_bandwidth"].fields("copy costs", required={"start": "...", "host": "...", "peer_per_link": "..."})
    training = {}
    for wire, strategies in _keyed(top["training"], (NVLINK, HOST_PATH), "wire").items():
        for strategy, at in _keyed(strategies, NAMES, "strategy").items():
            training[(wire, strategy)] = _figure(at, "time", sources, cold)
    if not training:
        raise top["training"].error("holds no strategy run", FIX)
    gpu = top["gpu_health"].fields("GPU load costs", required={
        "figures": "...", "memory_pass": "...", "sustained_beyond_duration": "..."})
    group_start = _figure(top["worker_group_start"], "time", sources)
    group_cold = _figure(top["worker_group_start"], "time", sources, cold=True)
    spare_saving = None
    if "spare_workers" in top:
        spare = top["spare_workers"].fields("spare worker costs", required={"new_interpreter": "...", "from_spare": "..."})
        spare_saving = max(0.0, _figure(spare["new_interpreter"], "time", sources) - _figure(spare["from_spare"], "time", sources))
    preload = _keyed(top["trainer_preload"], NAMES, "strategy") if "trainer_preload" in top else {}
    one_gpu = {}
    if "one_gpu_pool" in top:
        one_gpu = top["one_gpu_pool"].fields("one-GPU pool costs", required={"copies": "...", "single_gpu_run": "..."},
                                             optional={"single_gpu_run_unprepared": "..."})
    return UnitCosts(
        path=path,
        cold=cold,
        records=tuple(str(r) for r in top["records"].value or ()),
        session_start_s=_figure(session["start"], "time", sources),
        session_end_s=_figure(session["end"], "time", sources),
        per_test_s=_figure(top["per_test"], "time", sources),
        group_start_s=group_cold if cold else group_start,
        group_start_cold_s=group_cold if group_cold != group_start else None,
        per_size_s=_figure(collective["per_size"], "time", sources),
        benchmark_round_s=_figure(collective["benchmark_round"], "time", sources),
        busbw=busbw,
        busbw_per_nvlink=per_link,
        nccl_probe_s=_figure(top["nccl_path_probe"], "time", sources, cold),
        copy_start_s=_figure(copies["start"], "time", sources, cold),
        copy_host_bps=_figure(copies["host"], "bandwidth", sources),
        copy_peer_per_link_bps=_figure(copies["peer_per_link"], "bandwidth", sources),
        training_s=training,
        # the GPU load's first phase starts its workers: without the cache, as slowly as any group
        gpu_figures_s=_figure(gpu["figures"], "time", sources) + ((group_cold - group_start) if cold else 0.0),
        gpu_memory_pass_s=_figure(gpu["memory_pass"], "time", sources),
        gpu_sustained_extra_s=_figure(gpu["sustained_beyond_duration"], "time", sources),
        spare_saving_s=spare_saving,
        single_gpu_s=_figure(top["single_gpu_run"], "time", sources) if "single_gpu_run" in top else None,
        one_gpu_copies_s=_figure(one_gpu["copies"], "time", sources) if one_gpu else None,
        one_gpu_single_s=_figure(one_gpu["single_gpu_run"], "time", sources) if one_gpu else None,
        one_gpu_single_unprepared_s=(_figure(one_gpu["single_gpu_run_unprepared"], "time", sources)
                                     if "single_gpu_run_unprepared" in one_gpu else None),
        local_baseline_s=_figure(top["local_baseline"], "time", sources) if "local_baseline" in top else None,
        trainer_preload_s={strategy: _figure(at, "time", sources) for strategy, at in preload.items()},
        worker_exit_saving_s=(_figure(top["worker_exit_saving"], "time", sources) if "worker_exit_saving" in top
                              else None),
        sources=sources,
    )


def _keyed(at: _At, known, what: str) -> dict[str, _At]:
    return at.keyed(tuple(known), what, "expected one of")
