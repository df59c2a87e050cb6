"""The sections of thresholds.yaml that are not limits, as typed models (wirecheck.thresholds.fields): the
node profiles, and how the collectives, the training runs, the per-GPU load, the copies and the workers run
(sizes, iterations, timeouts, the model shape), per mode (hardware / simulated). No check reads them; the
plugin, the plan and the workers do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any, Mapping

from wirecheck.core.precision import NAMES as PRECISIONS
from wirecheck.core.precision import why_unsupported
from wirecheck.measure.curve import SWEEP_NAMES, SweepSpec, geometric_sizes
from wirecheck.node.topology import BRIDGED, FABRICS, PCIE, PCIE_LEVELS
from wirecheck.thresholds.fields import Call, Count, Nested, Qty, Raw, Share, Source, Text, Word, read, spec
from wirecheck.thresholds.limits import check_name
from wirecheck.thresholds.yaml_reader import _At
from wirecheck.workers.deadlines import DeadlineRule

TIME, SIZE = (lambda example: Qty(example, "time", positive=True)), (lambda example: Qty(example, "size", positive=True))
# A call's `timeout`: the ceiling of its deadline. Below a second no worker call (a process round trip, NCCL's
# connection set-up) can finish, so every call would "hang" and the node would be drained for a unit typo.
CEILING = (lambda example: Qty(example, "time", positive=True, at_least=(
    1.0, '"{value}" is below 1 s: no worker call finishes that fast, every call would be taken for a hang',
    "write the seconds a call may take at most, e.g. {example}")))


# --- profiles ------------------------------------------------------------------------------------------


def _capability(at: _At) -> str:
    text = f"{at.value:.1f}" if isinstance(at.value, float) else str(at.value)
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise at.error(f"{text!r} is not a compute capability", 'write e.g. "9.0"')
    return f"{int(major)}.{int(minor)}"


@dataclass(frozen=True)
class Profile:
    """An expected node inventory (--profile NAME); the hardware fields are what NVML would report on such a
    node, for the derived limits (None: not described, the limits that need it fall back and say so)."""

    WHAT = "profile fields"
    name: str
    gpu_count: int = spec(Count(minimum=1), "8")
    gpu_model: str = spec(Text(), "NVIDIA H200  (the name NVML reports)")  # as NVML names it
    fabric: str = spec(Word(words=FABRICS), "nvswitch  (or bridged, pcie)")
    nvlinks_per_gpu: int = spec(Count(), "18")
    pcie_gen: int = spec(Count(minimum=1), "5")
    pcie_width: int = spec(Count(minimum=1), "16")
    # bytes: one GPU's total as NVML reports it (nvidia-smi's MiB), so that a profile and a record of such a node
    # agree; a datasheet's "141 GB" is neither GB nor GiB (an H200 reads 143771 MiB = 150.75 GB = 140.4 GiB).
    gpu_memory: int = spec(Qty('"143771 MiB"  (NVML\'s total, as nvidia-smi shows it)', "memory", positive=True))
    source: str = spec(Source())
    yaml_path: str
    nvlink_speed: float | None = spec(Qty('"26.562 GB/s"', "bandwidth", positive=True), default=None)  # per link, direction
    nvlinks_per_peer: int | None = spec(Raw("6"), default=None)  # bridged only
    group_size: int | None = spec(Raw("4"), default=None)  # bridged only
    nic_ports: int | None = spec(Count(), "8", default=None)  # InfiniBand/RoCE ports; None: not judged
    nic_rate: float | None = spec(Qty('"50 GB/s"  (400 Gb/s NDR, per port per direction)', "bandwidth", positive=True),
                                  default=None)
    # The farthest topo -m path (PIX..SYS) from any GPU to its nearest NIC it is built with; None: a warning only.
    gpu_nic_path: str | None = spec(Word(words=PCIE_LEVELS), "PIX  (a NIC under each GPU's own PCIe switch)", default=None)
    # A recorded topology (a NAME in fixtures/pytest_wirecheck/topologies) wired as this node type: what a
    # --profile dry run simulates.
    topology: str | None = spec(Text(), "h100-sxm-8-nics  (a recorded topology, wired as this node: what a --profile "
                                        "dry run simulates)", default=None)
    compute_capability: str | None = spec(Call('"9.0"  (as CUDA names it: 8.0 A100, 8.9 L40S, 9.0 H100/H200, 10.0 B200)',
                                               _capability), default=None)
    sm_count: int | None = spec(Count(minimum=1), "132", default=None)
    sm_clock_max_mhz: float | None = spec(Qty('"1980 MHz"', "frequency", positive=True), key="sm_clock_max", default=None)
    mem_bus_width: int | None = spec(Count(minimum=1), "6144  (bits)", default=None)
    mem_clock_max_mhz: float | None = spec(Qty('"3201 MHz"', "frequency", positive=True), key="mem_clock_max",
                                           default=None)
    power_limit_w: float | None = spec(Qty('"700 W"', "power", positive=True), key="power_limit", default=None)
    nvlink_gen: int | None = spec(Raw("4  (NVLink 3 A100, 4 H100/H200, 5 B200)"), default=None)

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        links, fabric, count = v["nvlinks_per_gpu"], v["fabric"], v["gpu_count"]
        v["gpu_memory"] = int(v["gpu_memory"])
        for key in ("sm_clock_max_mhz", "mem_clock_max_mhz"):
            if v.get(key) is not None:
                v[key] /= 1e6
        if "nvlink_speed" not in f and links > 0:
            raise at.error(f"nvlinks_per_gpu is {links} but nvlink_speed is missing",
                           'add nvlink_speed: "26.562 GB/s" (per link, per direction)')
        if fabric == BRIDGED:
            for key, example in (("nvlinks_per_peer", "6"), ("group_size", "4")):
                if key not in f:
                    raise at.error(f"a bridged profile needs {key!r}", f"add {key}: {example}")
            per_peer = v["nvlinks_per_peer"] = f["nvlinks_per_peer"].count(minimum=1)
            group = v["group_size"] = f["group_size"].count(minimum=2)
            if count % group:
                raise f["group_size"].error(f"{count} GPUs do not split into groups of {group}", "fix gpu_count or group_size")
            if per_peer * (group - 1) > links:
                raise f["nvlinks_per_peer"].error(f"{per_peer} links to each of {group - 1} peers exceed nvlinks_per_gpu "
                                                  f"{links}", "fix nvlinks_per_peer, group_size or nvlinks_per_gpu")
        else:
            for key in ("nvlinks_per_peer", "group_size"):
                if key in f:
                    raise f[key].error(f"only bridged (NVL) fabrics have {key}, this one is {fabric}",
                                       f"remove {key} or set fabric: bridged")
        if fabric == PCIE and links:
            raise f["nvlinks_per_gpu"].error(f"a pcie fabric has no NVLink but nvlinks_per_gpu is {links}", "write 0 or fix fabric")
        if "nvlink_gen" in f:
            if not links:
                raise f["nvlink_gen"].error("a node without NVLink has no NVLink generation", "remove nvlink_gen")
            v["nvlink_gen"] = f["nvlink_gen"].count(minimum=1)
        return v


def read_profiles(at: _At) -> Mapping[str, Profile]:
    at.mapping("node profiles (name -> inventory)", allow_empty=False)
    return MappingProxyType({str(name): read(Profile, at.child(name), name=str(name)) for name in at.value})


# --- collectives ---------------------------------------------------------------------------------------


def whole_bytes(at: _At) -> int:
    value = at.quantity("size", positive=True)
    if value != int(value):
        raise at.error(f'"{at.value}" is not a whole number of bytes', 'write e.g. "8 B" or "1 GiB"')
    return int(value)


def _sweep(at: _At) -> SweepSpec:
    """{from, to, step}: nccl-tests' -b/-e/-f."""
    f = at.fields("a size sweep (nccl-tests -b/-e/-f)", required={"from": '"8 B"', "to": '"1 GiB"', "step": '"2 x"'})
    start, stop = whole_bytes(f["from"]), whole_bytes(f["to"])
    step = f["step"].quantity("ratio")
    if step != int(step) or step < 2:
        raise f["step"].error(f'"{f["step"].value}" is not a whole factor of at least 2',
                              'write e.g. "2 x" (nccl-tests -f takes a whole factor)')
    if stop < start:
        raise f["to"].error(f'"{f["to"].value}" is below from "{f["from"].value}"', "swap them")
    sizes = geometric_sizes(start, stop, int(step))
    if sizes[-1] != stop:  # silently stopping short could drop the floor size or the top of the curve
        raise f["to"].error(f"is not from x step^k: the sweep would stop at {sizes[-1]} B",
                            f"write to: {sizes[-1]} B or {sizes[-1] * int(step)} B (or change from/step)")
    return SweepSpec(start, stop, int(step))


def _sweeps(at: _At) -> Mapping[str, SweepSpec]:
    at.fields("sweeps", required={name: '{from: "8 B", to: "1 GiB", step: "2 x"}' for name in SWEEP_NAMES})
    return MappingProxyType({name: _sweep(at.child(name)) for name in SWEEP_NAMES})


@dataclass(frozen=True)
class CollectiveSettings:
    WHAT = "collective run settings"
    # "quick" (the default run) and "full" (the whole curve)
    sweeps: Mapping[str, SweepSpec] = spec(Call('{quick: {from: "8 B", to: "1 GiB", step: "8 x"}, full: {from: "8 B", '
                                                'to: "4 GiB", step: "2 x"}}', _sweeps))
    floor_size: int = spec(SIZE('"1 GiB"'))  # bytes; floors are judged at this size only (in every sweep)
    warmup_iters: int = spec(Count(), "5")
    iters: int = spec(Count(minimum=1), "20")
    timeout_s: float = spec(CEILING('"120 s"'), key="timeout")
    benchmark_rounds: int = spec(Count(minimum=1), "3")
    # Sizes up to this are also timed as CUDA-graph replays (the faster path counts); None: eager only
    # (always so in simulation: gloo has no graphs).
    graph_up_to: int | None = spec(Raw('"64 MiB"'), default=None)
    # Replays of the captured calls between the timing events: the first replay's launch is shared by all.
    graph_replays: int = spec(Raw("5"), default=1)

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        simulated = v.pop("simulated")
        for key in ("graph_up_to", "graph_replays"):
            if simulated and key in f:
                raise f[key].error("simulation runs on gloo, which has no CUDA graphs", f"remove {key}")
        v["floor_size"] = int(v["floor_size"])
        for name, sweep in v["sweeps"].items():
            if v["floor_size"] not in sweep.sizes:  # floors are judged only at floor_size: never measured, never judged
                raise f["floor_size"].error(f'"{f["floor_size"].value}" is not one of the sizes the {name} sweep measures',
                                            f"make sweeps.{name} pass through it (from x step^k) or pick one of its sizes")
        v["graph_up_to"] = whole_bytes(f["graph_up_to"]) if "graph_up_to" in f else None
        v["graph_replays"] = f["graph_replays"].count(minimum=1) if "graph_replays" in f else 1
        return v

    @property
    def sizes(self) -> tuple[int, ...]:
        """The default (quick) sweep, in bytes."""
        return self.sweeps["quick"].sizes

    def sizes_for(self, sweep: str) -> tuple[int, ...]:
        return self.sweep(sweep).sizes

    def sweep(self, name: str) -> SweepSpec:
        check_name(name, SWEEP_NAMES, "sweep")
        return self.sweeps[name]


def collective_settings(simulated: bool):
    def read_settings(at: _At) -> CollectiveSettings:
        if isinstance(at.value, dict) and "sizes" in at.value:  # the list of sizes became geometric sweeps
            raise at.child("sizes").error(
                "a list of sizes is no longer read; the sizes come from sweeps",
                'write sweeps: {quick: {from: "8 B", to: "1 GiB", step: "8 x"}, full: {from: "8 B", to: "4 GiB", step: "2 x"}}')
        return read(CollectiveSettings, at, simulated=simulated)
    return Call("{sweeps: {quick: {...}, full: {...}}, floor_size: ..., ...}", read_settings)


# --- training ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    WHAT = "model shape"
    n_layer: int = spec(Count(minimum=1), "20")
    n_head: int = spec(Count(minimum=1), "16")
    d_model: int = spec(Count(minimum=1), "2048")
    vocab_size: int = spec(Count(minimum=1), "32000")
    seq_len: int = spec(Count(minimum=1), "1024")

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        if v["d_model"] % v["n_head"]:
            raise f["n_head"].error(f"d_model {v['d_model']} does not split into {v['n_head']} heads",
                                    "pick n_head dividing d_model")
        return v


@dataclass(frozen=True)
class MedianBound:
    """When the timed steps' median has settled: its distribution-free confidence interval at `confidence`
    lies within `max_halfwidth` of it (both fractions)."""

    WHAT = "median confidence bound"
    confidence: float = spec(Share('"95 %"', fix='write e.g. "95 %"', below_one=True,
                                   problem='"{value}" must be below 100 %'))
    max_halfwidth: float = spec(Qty('"2 %"', "percent"))
    source: str = spec(Source())
    yaml_path: str


def _min_samples(confidence: float) -> int:
    """The fewest samples whose median has a 95 % order-statistics interval at all
    (wirecheck.training.timing.median_ci_ranks): with fewer, the rule could never be met."""
    n = 1
    while 2 * 0.5**n > 1 - confidence:  # coverage of [min, max] is 1 - 2 * 2**-n
        n += 1
    return n


def _steps(at: _At) -> tuple[int, int]:
    steps = at.fields("timed steps", required={"min": "8", "max": "30"})
    low, high = steps["min"].count(minimum=1), steps["max"].count(minimum=1)
    if high < low:
        raise at.error(f"max {high} is below min {low}", "make max at least min")
    return low, high


def _precision(at: _At) -> str:
    reason = why_unsupported(at.value)
    if reason:  # refused here: the workers would only fail on it hours into the run
        raise at.error(f"{at.value} is not supported by the training runners ({reason})",
                       f"write precision: {' or '.join(PRECISIONS)}")
    return at.choice(PRECISIONS)


@dataclass(frozen=True)
class TrainingSettings:
    WHAT = "training run settings"
    model: ModelShape = spec(Nested("{n_layer: 20, n_head: 16, d_model: 2048, vocab_size: 32000, seq_len: 1024}", ModelShape))
    micro_batch: int = spec(Count(minimum=1), "8")
    warmup_steps: int = spec(Count(), "3")
    min_steps: int = spec(Call("{min: 8, max: 30}", _steps), key="steps")  # timed steps: at least this many...
    median_ci: MedianBound = spec(Nested('{confidence: "95 %", max_halfwidth: "2 %", source: ...}', MedianBound))
    timeout_s: float = spec(CEILING('"600 s"'), key="timeout")
    precision: str = spec(Call("bf16", _precision))  # a name in wirecheck.core.precision.PRECISIONS
    max_steps: int  # ...then until the median settles (median_ci), at most this many
    gc_freq: int = spec(Count(), "50", default=0)  # steps between manual GC collections; 0: Python's automatic GC

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["min_steps"], v["max_steps"] = v["min_steps"]
        needed = _min_samples(v["median_ci"].confidence)
        if v["max_steps"] < needed:
            raise f["steps"].child("max").error(
                f"{v['max_steps']} steps can never give a {v['median_ci'].confidence:.0%} interval for the median",
                f"allow at least {needed} (or lower median_ci.confidence)")
        return v

    def workload(self) -> dict:
        """What the training limits were measured on, as a run's record states it: a record of another
        workload is not judged by them."""
        return {"shape": asdict(self.model), "micro_batch": self.micro_batch, "precision": self.precision}

    def run_kwargs(self, strategy: str) -> dict:
        """The arguments of training.runner.run_strategy these settings fix, for `strategy` (seed 0: every
        strategy starts from the same weights and data)."""
        return {"strategy": strategy, "shape": asdict(self.model), "micro_batch": self.micro_batch,
                "warmup_steps": self.warmup_steps, "steps": self.min_steps, "max_steps": self.max_steps,
                "ci_confidence": self.median_ci.confidence, "ci_max_halfwidth": self.median_ci.max_halfwidth,
                "seed": 0, "precision": self.precision, "gc_freq": self.gc_freq}


# --- the per-GPU load ----------------------------------------------------------------------------------

LEVELS = ("quick", "acceptance", "burn_in")
LEVEL = "acceptance"  # the default level (--level picks the run's: wirecheck.core.levels.thresholds_key)


def _levels(kind: str | None, example: str):
    def read_levels(at: _At) -> Mapping[str, Any]:
        f = at.fields("levels", required={level: example for level in LEVELS})
        out = {k: (f[k].quantity(kind, positive=True) if kind else f[k].count(minimum=1)) for k in LEVELS}
        if kind and not out["quick"] <= out["acceptance"] <= out["burn_in"]:
            raise at.error("the levels must grow: quick <= acceptance <= burn_in", "reorder the values")
        return MappingProxyType(out)
    return read_levels


def _multiple(at: _At, value: int, of: int, problem: str, example: str) -> int:
    if value % of:
        raise at.error(problem, f"write e.g. {example}")
    return value


@dataclass(frozen=True)
class Hbm:
    WHAT = "HBM bandwidth settings"
    size: int = spec(SIZE('"4 GiB"'))  # bytes per buffer (the copy holds two)
    warmup_iters: int = spec(Count(), "5")
    iters: int = spec(Count(minimum=1), "50")

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["size"] = _multiple(f["size"], int(v["size"]), 4, "is not a whole number of 4-byte words", '"4 GiB"')
        return v


@dataclass(frozen=True)
class QuickGemm:
    WHAT = "the quick level's GEMM settings"
    warmup_iters: int = spec(Count(), "200")
    iters: int = spec(Count(minimum=1), "200")


@dataclass(frozen=True)
class Gemm:
    WHAT = "GEMM settings"
    n: int = spec(Count(minimum=16), "8192")  # square matrices n x n
    warmup_iters: int = spec(Count(), "10")
    iters: int = spec(Count(minimum=1), "50")
    compare_iters: int = spec(Count(minimum=1), "20")  # results compared with the reference after the timed ones
    seed: int = spec(Count(), "20")
    # The quick level's (warmup, timed) products: a window that still fails a GPU doing half its work (docs/levels.md)
    quick: QuickGemm | None = spec(Nested("{warmup_iters: 200, iters: 200}  (the quick level's, shorter)", QuickGemm),
                                   default=None)

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        if v["n"] % 16:
            raise f["n"].error(f"{v['n']} is not a multiple of 16", "fp8 GEMMs need sides that are multiples of 16, e.g. 8192")
        return v


@dataclass(frozen=True)
class MemoryPattern:
    WHAT = "memory pattern test settings"
    coverage: float = spec(Share('"90 %"'))  # fraction of the GPU's free memory the pattern test covers
    chunk: int = spec(SIZE('"2 GiB"'))  # bytes per allocation
    passes: Mapping[str, int] = spec(Call("{quick: 1, acceptance: 1, burn_in: 10}", _levels(None, "1")))
    cap: int | None = spec(SIZE('"16 MiB"  (at most this many bytes: simulation tests CPU memory)'), default=None)

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["chunk"] = _multiple(f["chunk"], int(v["chunk"]), 8, "is not a whole number of 8-byte words", '"2 GiB"')
        v["cap"] = None if v.get("cap") is None else int(v["cap"])
        return v


@dataclass(frozen=True)
class Sustained:
    WHAT = "sustained load settings"
    duration: Mapping[str, float] = spec(Call('{quick: "5 s", acceptance: "60 s", burn_in: "600 s"}',
                                              _levels("time", '"60 s"')))
    window: float = spec(TIME('"1 s"'))
    check_every: int = spec(Count(minimum=1), "8")  # results between two comparisons with the reference under load
    sample_interval: float = spec(TIME('"0.5 s"'))


@dataclass(frozen=True)
class GpuHealthSettings:
    """How the per-GPU load runs (one of hardware / simulated)."""

    WHAT = "per-GPU load settings"
    hbm: Hbm = spec(Nested('{size: "4 GiB", warmup_iters: 5, iters: 50}', Hbm))
    gemm: Gemm = spec(Nested("{n: 8192, warmup_iters: 10, iters: 50, compare_iters: 20, seed: 20}", Gemm))
    memory: MemoryPattern = spec(Nested('{coverage: "90 %", chunk: "2 GiB", passes: {quick: 1, acceptance: 1, burn_in: 10}}',
                                        MemoryPattern), key="memory_pattern")
    sustained: Sustained = spec(Nested('{duration: {quick: "5 s", acceptance: "60 s", burn_in: "600 s"}, window: "1 s", '
                                       'check_every: 8, sample_interval: "0.5 s"}', Sustained))
    timeout_s: float = spec(CEILING('"300 s"'), key="timeout")  # a call (figures, memory test); the sustained call: + this
    yaml_path: str

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        if v.pop("simulated") and v["memory"].cap is None:
            raise f["memory_pattern"].error("simulation needs a cap", 'add cap: "16 MiB" (CPU memory is not the GPU\'s)')
        return v

    # The flat names the plugin, the plan and the burn-in read.
    hbm_size = property(lambda s: s.hbm.size)
    hbm_warmup_iters = property(lambda s: s.hbm.warmup_iters)
    hbm_iters = property(lambda s: s.hbm.iters)
    gemm_n = property(lambda s: s.gemm.n)
    gemm_warmup_iters = property(lambda s: s.gemm.warmup_iters)
    gemm_iters = property(lambda s: s.gemm.iters)
    gemm_compare_iters = property(lambda s: s.gemm.compare_iters)
    gemm_quick = property(lambda s: (s.gemm.quick.warmup_iters, s.gemm.quick.iters) if s.gemm.quick else None)
    seed = property(lambda s: s.gemm.seed)
    memory_coverage = property(lambda s: s.memory.coverage)
    memory_chunk = property(lambda s: s.memory.chunk)
    memory_cap = property(lambda s: s.memory.cap)
    window_s = property(lambda s: s.sustained.window)
    check_every = property(lambda s: s.sustained.check_every)
    sample_interval_s = property(lambda s: s.sustained.sample_interval)

    def sustained_duration_s(self, level: str = LEVEL) -> float:
        return self.sustained.duration[level]

    def memory_passes(self, level: str = LEVEL) -> int:
        return self.memory.passes[level]

    def gemm_products(self, level: str = LEVEL) -> tuple[int, int]:
        """(warmup, timed) GEMM products of the figures at `level`."""
        if level == "quick" and self.gemm_quick is not None:
            return self.gemm_quick
        return self.gemm_warmup_iters, self.gemm_iters

    def figures_kwargs(self, level: str = LEVEL) -> dict[str, Any]:
        """The figures worker's arguments (wirecheck.gpu.worker.figures)."""
        warmup, timed = self.gemm_products(level)
        return {"hbm": {"size": self.hbm_size, "warmup_iters": self.hbm_warmup_iters, "iters": self.hbm_iters},
                "gemm": {"n": self.gemm_n, "warmup_iters": warmup, "iters": timed, "compare_iters": self.gemm_compare_iters},
                "seed": self.seed}

    def sustained_kwargs(self, level: str = LEVEL) -> dict[str, Any]:
        return {"n": self.gemm_n, "duration_s": self.sustained_duration_s(level), "window_s": self.window_s,
                "check_every": self.check_every, "seed": self.seed}

    def memory_kwargs(self, level: str = LEVEL) -> dict[str, Any]:
        return {"coverage": self.memory_coverage, "chunk": self.memory_chunk, "cap": self.memory_cap,
                "passes": self.memory_passes(level)}


# --- copies and workers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CopySettings:
    WHAT = "copy run settings"
    size: int = spec(SIZE('"1 GiB"'))  # bytes per copy
    warmup_iters: int = spec(Count(), "2")
    iters: int = spec(Count(minimum=1), "10")
    timeout_s: float = spec(CEILING('"120 s"'), key="timeout")

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["size"] = int(v["size"])
        return v


@dataclass(frozen=True)
class _Deadline:
    WHAT = "a deadline rule"
    minimum_s: float = spec(TIME('"10 s"'), key="minimum")
    # A minimum above a call's ceiling (its section's `timeout`) is no error: the ceiling wins.
    safety_factor: float = spec(Qty('"10 x"', "ratio", positive=True, below=None))
    source: str = spec(Source())
    yaml_path: str

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        if v["safety_factor"] < 1:
            raise f["safety_factor"].error(
                f'"{f["safety_factor"].value}" is below 1 x: the deadline would be shorter than the work itself',
                'write at least "1 x" (10 x leaves room for a slow but healthy call)')
        return v


@dataclass(frozen=True)
class _Deadlines:
    WHAT = "deadline rules"
    hardware: _Deadline = spec(Nested('{minimum: "10 s", safety_factor: "10 x", source: ...}', _Deadline))
    simulated: _Deadline = spec(Nested('{minimum: "10 s", safety_factor: "10 x", source: ...}', _Deadline))


@dataclass(frozen=True)
class NodeLock:
    WHAT = "node lock settings"
    wait_s: float = spec(Qty('"30 s"', "time"), key="wait")  # how long a run waits for another to release the node
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class WorkerSettings:
    """workers: per-call deadlines (hardware / simulated) and the per-node lock."""

    WHAT = "worker settings"
    deadlines: _Deadlines = spec(Nested('{hardware: {minimum: "10 s", safety_factor: "10 x", source: ...}, simulated: {...}}',
                                        _Deadlines))
    node_lock: NodeLock = spec(Nested('{wait: "30 s", source: ...}', NodeLock))

    def deadline_rule(self, simulated: bool) -> DeadlineRule:
        d = self.deadlines.simulated if simulated else self.deadlines.hardware
        return DeadlineRule(d.minimum_s, d.safety_factor, d.source, d.yaml_path)

    lock_wait_s = property(lambda s: s.node_lock.wait_s)
    lock_source = property(lambda s: s.node_lock.source)
    lock_yaml_path = property(lambda s: s.node_lock.yaml_path)
