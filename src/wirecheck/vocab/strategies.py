"""The one table of data-parallel strategies: name, trainer, what is sharded, what its
implementation holds per parameter, settings.

Everything else looks a strategy up here: the runner imports the row's trainer class inside the
worker (training/trainer.py says what a trainer provides), the trainers apply these settings and
read each one back from the engine or module they built (a setting that is not in force is an
error, never a silent fallback), the record carries the values read back, the memory model
predicts model state from `shards` and `holds`, the thresholds loader keys its strategy
sections by NAMES, the probe script varies the settings. A new strategy is one row here (and
its trainer module, unless it reuses one); its thresholds.yaml entries are data.

The settings are each strategy as a user who tuned it runs it on one node:
- DeepSpeed's own defaults wherever they are the documented tuned value, and overlap where the
  DeepSpeed/Hugging Face guides turn it on. Accelerate's values for HF models (reduce bucket d²,
  prefetch 0.9·d²) made ZeRO-1/2 0.57-0.79x DDP on 2x H200 (docs/measurements.md): they are not used.
- FSDP2 laid out as torchtitan's `apply_fsdp` does (embedding, each block, the final norm with
  the head, then the root), bf16 compute with fp32 reduction, torch's fused AdamW.
- DDP with its documented defaults plus gradient_as_bucket_view, the same fused AdamW.

Each setting's `why` is one line: what it does and where the value comes from. Values that
are still candidates (chosen from documentation, not yet from a run on a GPU node) say so; the training
probe (scripts/device/training_probe.py) measures them against their alternatives.

Pure data (wirecheck.vocab): the pytest process, the thresholds loader, the plan and the memory
model read this table; the trainers it names are imported only inside the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from wirecheck.vocab.shape import GPTShape, block_params, param_count
from wirecheck.vocab.table import by_name

# Optimizer implementations of torch.optim.AdamW (torchtitan names them the same way).
OPTIMIZER_IMPLEMENTATIONS = ("fused", "foreach", "for-loop")

# Model state, in the order the memory model and the record list it.
PARAMS, GRADS, OPTIMIZER = "params", "grads", "optimizer"
STATE_PARTS = (PARAMS, GRADS, OPTIMIZER)
# Data types of held parameters and gradients: always fp32, or the run's precision (bf16 2 B, fp32 4 B).
FP32, MODEL_DTYPE = "fp32", "model"


@dataclass(frozen=True)
class PerModel:
    """A value that follows the model's size. DeepSpeed's defaults are absolute element counts
    tuned for large models: on the CPU self-tests' toy model a 5e8-element bucket is larger than
    the model and a 1e5-element persistence threshold would keep every parameter unpartitioned.
    Each rule gives DeepSpeed's default (or the documented value) on the hardware model."""

    rule: str  # how it is computed, for the record and the docs
    of: Callable[[GPTShape], int]

    def resolve(self, shape) -> int:
        return int(self.of(GPTShape.of(shape)))

    def __repr__(self) -> str:
        return self.rule


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any  # a plain value or a PerModel rule
    why: str


@dataclass(frozen=True)
class Holds:
    """What an implementation allocates per parameter before sharding: the memory model's
    implementation accounting (training/memory_model.py says where each figure comes from)."""

    params: str  # FP32 or MODEL_DTYPE
    grads: str  # FP32 or MODEL_DTYPE
    optimizer_bytes: int  # Adam m and v (8), plus an fp32 master copy (4) where the implementation keeps one


# torch AdamW on fp32 parameters: bf16 only through autocast (DDP) or while a unit is gathered (FSDP2).
TORCH_HOLDS = Holds(FP32, FP32, 8)
# DeepSpeed: parameters and gradients in the model's dtype, an fp32 master partition and Adam m, v.
DEEPSPEED_HOLDS = Holds(MODEL_DTYPE, MODEL_DTYPE, 12)


@dataclass(frozen=True)
class Strategy:
    name: str
    title: str
    trainer: str  # "module:Class", imported by the runner inside the worker (training/trainer.py)
    shards: tuple[str, ...]  # model state partitioned over the ranks: params, grads, optimizer
    holds: Holds
    settings: tuple[Setting, ...]

    def __post_init__(self):
        # A misspelt row would otherwise predict unsharded state or fail only inside a worker.
        unknown = [p for p in self.shards if p not in STATE_PARTS]
        if unknown:
            raise ValueError(f"strategy {self.name}: shards {unknown}; model state parts are {STATE_PARTS}")
        if {self.holds.params, self.holds.grads} - {FP32, MODEL_DTYPE}:
            raise ValueError(f"strategy {self.name}: holds {self.holds}; params and grads are {FP32!r} or {MODEL_DTYPE!r}")
        module, _, cls = self.trainer.partition(":")
        if not module or not cls:
            raise ValueError(f"strategy {self.name}: trainer {self.trainer!r}; expected 'package.module:Class'")

    def defaults(self, shape=None) -> dict[str, Any]:
        """Plain values; PerModel rules resolved for `shape` (left as rules without one)."""
        return {s.key: s.value.resolve(shape) if shape is not None and isinstance(s.value, PerModel) else s.value
                for s in self.settings}

    def why(self, key: str) -> str:
        for s in self.settings:
            if s.key == key:
                return s.why
        raise KeyError(key)


_OPTIMIZER = Setting(
    "optimizer", "fused",
    "torch AdamW's fused kernel: one launch updates every tensor (torchtitan's default; torch picks foreach on CUDA)",
)

_HALF_MODEL_OR_5E8 = PerModel("min(5e8, parameters / 2)", lambda s: min(500_000_000, param_count(s) // 2))

_DS_COMMON = (
    _OPTIMIZER,
    Setting("contiguous_gradients", True,
            "copy each reduced gradient into one flat buffer as it is produced: no fragmentation (DeepSpeed's default)"),
    Setting("reduce_bucket_size", _HALF_MODEL_OR_5E8,
            "elements per gradient reduction: DeepSpeed's default 5e8 (at most half the model, so a small one still "
            "reduces in two buckets); Accelerate's d² (4.2e6 here) cost ZeRO-1/2 up to 43 %"),
)

_OVERLAP = Setting(
    "overlap_comm", True,
    "reduce gradient buckets on a side stream while backward runs, not all after it (HF's DeepSpeed ZeRO-2 "
    "config turns it on; DeepSpeed's default for stage 3)",
)
_ZERO1_NO_OVERLAP = Setting(
    "overlap_comm", False,
    "ZeRO-1 reduces once after backward (DeepSpeed's default for stage 1): with overlap, DeepSpeed 0.19 reduces "
    "its gradients into partitions during backward as ZeRO-2 does, so it would no longer hold ZeRO-1's state; "
    "DeepSpeed's defaults already ran at DDP's speed on 2x H200",
)

_DS_12 = _DS_COMMON + (
    Setting("allgather_bucket_size", _HALF_MODEL_OR_5E8,
            "elements per all-gather of the updated parameters after the step (DeepSpeed's default 5e8, at most half the model)"),
)

_ZERO3 = _DS_COMMON + (
    _OVERLAP,
    Setting("stage3_prefetch_bucket_size", PerModel("2 blocks (2 x (12 d² + 4 d))", lambda s: 2 * block_params(s)),
            "elements gathered ahead of use: two blocks (1.0e8 here; DeepSpeed's default 5e7 is just under one "
            "block of 5.03e7, so it cannot even hold the next block); candidate"),
    Setting("stage3_param_persistence_threshold", PerModel("min(1e5, 10 d_model)", lambda s: min(100_000, 10 * s.d_model)),
            "parameters up to this size stay whole on every rank: the norms, so no tiny all-gathers (DeepSpeed's "
            "default 1e5 and Accelerate's 10 d keep the same ones here)"),
    Setting("stage3_max_live_parameters", 1_000_000_000,
            "gathered elements allowed at once before releasing (DeepSpeed's default)"),
    Setting("stage3_max_reuse_distance", 1_000_000_000,
            "keep a gathered parameter if it is used again within this many elements: the last blocks "
            "stay gathered from forward into backward (DeepSpeed's default)"),
    Setting("memory_efficient_linear", True,
            "DeepSpeed swaps torch's F.linear for its own autograd function that keeps no gathered weight for "
            "backward (DeepSpeed's default; a Python-level call per Linear, for the whole process)"),
    Setting("leaf_modules", ("Block",),
            "one gather/release hook per transformer block instead of per Linear/LayerNorm: untuned ZeRO-3 "
            "is hook-bound here (0.27-0.40 s/step on NVLink); DeepSpeed's documented remedy "
            "(set_z3_leaf_modules, zero_optimization.leaf_module); candidate"),
)

_FSDP = (
    _OPTIMIZER,
    Setting("units", "torchtitan",
            "FSDP units as torchtitan's apply_fsdp: token embedding, each block, [final norm + head] "
            "(kept gathered after forward: backward needs it first), then the root"),
    Setting("reshard_after_forward", False,
            "torchtitan's `never` policy: blocks keep their gathered bf16 parameters from forward to backward, "
            "one all-gather per block per step instead of two; model state at rest stays sharded (1/N), the "
            "peak holds one gathered model more. Measured on 2x H200 NVLink, 2026-11-30: 0.89x DDP tokens/s "
            "against 0.75x (+-13 %) with resharding (torchtitan's default), whose profile showed 35 ms of "
            "the step's 85 ms NCCL time not under compute"),
    Setting("forward_prefetch", 0,
            "blocks whose all-gather a block issues before its own forward; 0 = FSDP2's implicit "
            "prefetch (the next gather is issued when the CPU reaches it)"),
    Setting("backward_prefetch", 0,
            "blocks whose all-gather a block issues before its own backward; 0 = FSDP2's implicit one-block prefetch"),
    Setting("reduce_dtype", "fp32",
            "gradients reduce-scattered in fp32 (torchtitan's mixed_precision_reduce default); bf16 "
            "was not FSDP's slowdown on 2x H200"),
)

_DDP = "wirecheck.training.ddp:DDPTrainer"
_DEEPSPEED = "wirecheck.training.deepspeed_zero:DeepSpeedTrainer"
_FSDP2 = "wirecheck.training.fsdp:FSDPTrainer"

_TABLE = (
    Strategy(
        "ddp", "PyTorch DDP", _DDP, (), TORCH_HOLDS,
        (
            _OPTIMIZER,
            Setting("bucket_cap_mb", 25,
                    "gradients all-reduced in 25 MiB buckets as backward produces them (DDP's default)"),
            Setting("gradient_as_bucket_view", True,
                    ".grad are views into the reduce buckets: no second gradient copy, no copy between them (DDP docs)"),
        ),
    ),
    Strategy("zero1", "DeepSpeed ZeRO-1 (Accelerate)", _DEEPSPEED, (OPTIMIZER,), DEEPSPEED_HOLDS,
             _DS_12 + (_ZERO1_NO_OVERLAP,)),
    Strategy("zero2", "DeepSpeed ZeRO-2 (Accelerate)", _DEEPSPEED, (GRADS, OPTIMIZER), DEEPSPEED_HOLDS,
             _DS_12 + (_OVERLAP,)),
    Strategy("zero3", "DeepSpeed ZeRO-3 (Accelerate)", _DEEPSPEED, STATE_PARTS, DEEPSPEED_HOLDS, _ZERO3),
    Strategy("fsdp", "PyTorch FSDP2 (fully_shard)", _FSDP2, STATE_PARTS, TORCH_HOLDS, _FSDP),
)

# The table by name, and its names in table order: every list of strategies in the suite.
STRATEGIES: Mapping[str, Strategy] = by_name(_TABLE, "strategy")
NAMES: tuple[str, ...] = tuple(STRATEGIES)
REFERENCE = "ddp"  # the strategy the others are compared with (losses agree, the dial's x DDP)

# What each key may hold: a checker returning an error text, or None when the value is fine.
_BOOL = ("a boolean", lambda v: isinstance(v, bool))
_COUNT = ("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
_POSITIVE = ("a whole number > 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0)
_KINDS = {
    "optimizer": (f"one of {OPTIMIZER_IMPLEMENTATIONS}", lambda v: v in OPTIMIZER_IMPLEMENTATIONS),
    "bucket_cap_mb": _POSITIVE,
    "gradient_as_bucket_view": _BOOL,
    "overlap_comm": _BOOL,
    "contiguous_gradients": _BOOL,
    "reduce_bucket_size": _POSITIVE,
    "allgather_bucket_size": _POSITIVE,
    "stage3_prefetch_bucket_size": _COUNT,
    "stage3_param_persistence_threshold": _COUNT,
    "stage3_max_live_parameters": _COUNT,
    "stage3_max_reuse_distance": _COUNT,
    "memory_efficient_linear": _BOOL,
    "leaf_modules": ("a tuple of module class names", lambda v: isinstance(v, (tuple, list)) and all(isinstance(x, str) for x in v)),
    "units": ("'torchtitan' or 'blocks'", lambda v: v in ("torchtitan", "blocks")),
    "reshard_after_forward": _BOOL,
    "forward_prefetch": _COUNT,
    "backward_prefetch": _COUNT,
    "reduce_dtype": ("'fp32' or 'bf16'", lambda v: v in ("fp32", "bf16")),
}


def strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"strategy {name!r}: expected one of {NAMES}") from None


def resolve_settings(name: str, shape, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The table's settings for `name` and the model `shape`, with `overrides` applied; unknown
    keys and bad values refused.

    Overrides exist for the training probe (scripts/device/training_probe.py: variants of one strategy); the suite runs the table.
    """
    s = strategy(name)
    settings = s.defaults(shape)
    for key, value in (overrides or {}).items():
        if key not in settings:
            raise ValueError(f"{name}: unknown setting {key!r}; {name} has {', '.join(settings)}")
        settings[key] = value
    for key, value in settings.items():
        text, ok = _KINDS[key]
        if not ok(value):
            raise ValueError(f"{name}: setting {key}={value!r} must be {text}")
    if "leaf_modules" in settings:
        settings["leaf_modules"] = tuple(settings["leaf_modules"])
    return settings


def check_in_force(name: str, asked: Mapping[str, Any], in_force: Mapping[str, Any]) -> None:
    """Raise unless every asked setting was read back from the engine/module with its value.

    A key the runner could not read back is an error too: an unchecked setting is a guess.
    """
    problems = []
    for key, value in asked.items():
        if key not in in_force:
            problems.append(f"{key}: not read back")
        elif _normal(in_force[key]) != _normal(value):
            problems.append(f"{key}: asked {value!r}, runs {in_force[key]!r}")
    if problems:
        raise RuntimeError(f"{name}: settings not in force: " + "; ".join(problems))


def _normal(value):
    return tuple(value) if isinstance(value, list) else value


# The record header's training.local_baseline where a run measures each GPU's local step time once
# (training/local_baselines.py); the plan prices a run whose header lacks it as one that measured it in every
# strategy run.
LOCAL_BASELINE_ONCE_PER_GPU = "once per GPU"

# The record header's training.trainer_workers where a run's strategy runs take workers forked after the zygote
# imported the trainers' modules (workers.zygote.TRAINER_MODULES, where spare workers are on) and its workers leave
# without Python's finalisation; the plan prices a run whose header lacks it without either saving.
TRAINER_WORKERS_PRELOADED = "preloaded, quick exit"

# The record header's `single_gpu` where the run prepares the one-GPU training in the GPU load's shadow: on a one-GPU
# load whose GPU a selected test trains alone, the sustained load runs the training's one-time work beside it
# (gpu/sustained.py's aside, training/single_gpu.py `prepare`); the plan prices a run whose header lacks it with the
# training's unprepared figure.
SINGLE_GPU_PREPARED_IN_LOAD = "prepared in the GPU load's shadow"
