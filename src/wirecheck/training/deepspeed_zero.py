"""DeepSpeed ZeRO stage 1, 2 and 3 through Accelerate, as people use it.

`Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config={...}))`, then `prepare(model,
optimizer)`, then `accelerator.backward(loss)` (which runs engine.backward and engine.step).
The config is explicit wherever a default would make the strategies disagree or cost time:
- gradient_clipping 0.0: DeepSpeed (and Accelerate's "auto") clip to 1.0 by default, which
  the torch strategies do not do; the losses would differ from step 2 on.
- a client torch.optim.AdamW (fused by default, as the table says): DeepSpeed's own Adam would
  JIT-compile an extension (FusedAdam with nvcc on GPU, cpu_adam on CPU: 80+ s); torch's fused
  kernel does the same work on the flat fp32 partition DeepSpeed hands it.
- the zero_optimization settings of the strategies table (strategies.py): DeepSpeed's own
  defaults and documented tuned values, each read back from the engine after prepare() (an
  unknown or ignored key would otherwise leave DeepSpeed's default silently in force).
  Accelerate's values for HF models (reduce bucket d², prefetch 0.9·d²) are not used: they cost
  ZeRO-1/2 up to 43 % on 2x H200 (docs/measurements.md).
- bf16 on GPU (DeepSpeed keeps bf16 params and grads, an fp32 master partition and fp32
  Adam state); fp32 on CPU.

CPU-only workarounds (never applied on GPU), from the CPU feasibility study:
- InitProcessGroupKwargs(backend="gloo"): otherwise Accelerate finds LOCAL_RANK but no CUDA,
  settles on one process, and DeepSpeed then fails its batch-size check.
- DeepSpeed's TorchBackend JIT-builds a shared-memory comm op on CPU (~50 s, used only for
  inference all-reduce): replaced by a no-op. It must be patched on the module object from
  sys.modules: `import deepspeed.comm.torch as m` binds the real `torch` package, because
  deepspeed.comm re-exports a name `torch`.
Accelerate's DeepSpeed plugin imports `transformers` to leave it a weakref to the config, which
only `from_pretrained` under ZeRO-3 reads; this model is not a transformers model, so the setter
is a no-op here: the import cost each DeepSpeed worker 2.9 s of set-up on 2x H200 (cProfile,
2026-12-01), and where transformers is absent (accelerate >= 1.8 needs it there) it would fail.
"""

from __future__ import annotations

import importlib

import torch

from wirecheck.training.baseline import optimizer_flags, optimizer_implementation
from wirecheck.training.state_bytes import deepspeed_zero3_state, deepspeed_zero12_state
from wirecheck.vocab.strategies import GRADS, OPTIMIZER, PARAMS, STATE_PARTS

# ZeRO's stages by what they partition (DeepSpeed's docs): the strategy row's `shards` picks the stage.
STAGES = {(OPTIMIZER,): 1, (GRADS, OPTIMIZER): 2, (PARAMS, GRADS, OPTIMIZER): 3}


def zero_stage(strategy) -> int:
    shards = tuple(part for part in STATE_PARTS if part in strategy.shards)
    if shards not in STAGES:
        raise ValueError(f"{strategy.name}: shards {shards}: no ZeRO stage partitions exactly that; "
                         f"stages: {', '.join(f'{stage} {parts}' for parts, stage in STAGES.items())}")
    return STAGES[shards]


# zero_optimization keys that go into the config as they are (the table uses DeepSpeed's names)
ZERO_KEYS = ("overlap_comm", "contiguous_gradients", "reduce_bucket_size", "allgather_bucket_size",
             "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
             "stage3_max_live_parameters", "stage3_max_reuse_distance", "memory_efficient_linear")


def ds_config(stage: int, micro_batch: int, world_size: int, precision: str, settings: dict) -> dict:
    zero = {"stage": stage}
    zero.update({k: v for k, v in settings.items() if k in ZERO_KEYS})
    if "leaf_modules" in settings:
        # replaces DeepSpeed's default list (HF MoE blocks), which this model does not have
        zero["leaf_module"] = {"classes": list(settings["leaf_modules"])}
    return {
        "train_micro_batch_size_per_gpu": micro_batch,
        "train_batch_size": micro_batch * world_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 0.0,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": False},
        "zero_optimization": zero,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def _cpu_workarounds() -> list:
    from accelerate.utils import InitProcessGroupKwargs

    comm_torch = importlib.import_module("deepspeed.comm.torch")
    comm_torch.build_shm_op = lambda: None
    return [InitProcessGroupKwargs(backend="gloo")]


def _without_transformers_weakref() -> None:
    from accelerate.utils import DeepSpeedPlugin

    DeepSpeedPlugin.set_deepspeed_weakref = lambda self: None


class DeepSpeedTrainer:
    joins_process_group = True  # Accelerate and DeepSpeed join it themselves

    def __init__(self, ctx, strategy, model: torch.nn.Module, lr: float, precision: str, micro_batch: int,
                 settings: dict):
        from accelerate import Accelerator
        from accelerate.utils import DeepSpeedPlugin

        self.strategy = strategy.name
        self.stage = zero_stage(strategy)
        if ctx.device.type == "cpu" and torch.cuda.is_available():
            # Accelerate and DeepSpeed pick their device from what CUDA shows, not from us
            raise RuntimeError(f"{strategy}: a CPU run on a host with visible GPUs would train on "
                               "the GPUs; hide them from CPU workers (CUDA_VISIBLE_DEVICES='')")
        handlers = _cpu_workarounds() if ctx.device.type == "cpu" else []
        _without_transformers_weakref()
        config = ds_config(self.stage, micro_batch, ctx.world_size, precision, settings)
        plugin = DeepSpeedPlugin(hf_ds_config=config, zero3_init_flag=False)
        self.accelerator = Accelerator(
            deepspeed_plugin=plugin,
            mixed_precision="bf16" if precision == "bf16" else "no",
            kwargs_handlers=handlers,
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, **optimizer_flags(settings["optimizer"]))
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.wrapper = type(self.model).__name__
        self._check(ctx, precision)

    @staticmethod
    def library_versions() -> dict:
        import accelerate
        import deepspeed

        return {"deepspeed_version": deepspeed.__version__, "accelerate_version": accelerate.__version__}

    def _check(self, ctx, precision: str) -> None:
        from accelerate.utils import DistributedType

        acc = self.accelerator
        if acc.distributed_type != DistributedType.DEEPSPEED:
            raise RuntimeError(f"{self.strategy}: Accelerate runs {acc.distributed_type}, not DEEPSPEED")
        if acc.num_processes != ctx.world_size:
            raise RuntimeError(f"{self.strategy}: Accelerate sees {acc.num_processes} processes, expected {ctx.world_size}")
        if self.wrapper != "DeepSpeedEngine":
            raise RuntimeError(f"{self.strategy}: prepare() returned {self.wrapper}, not a DeepSpeedEngine")
        stage = self.model.zero_optimization_stage()
        if stage != self.stage:
            raise RuntimeError(f"{self.strategy}: DeepSpeed runs ZeRO stage {stage}, expected {self.stage}")
        if self.model.bfloat16_enabled() != (precision == "bf16"):
            raise RuntimeError(f"{self.strategy}: DeepSpeed bf16={self.model.bfloat16_enabled()} for precision {precision}")
        if self.model.dp_world_size != ctx.world_size:
            raise RuntimeError(f"{self.strategy}: DeepSpeed shards over {self.model.dp_world_size} ranks, expected {ctx.world_size}")
        self._check_sharding(ctx.world_size)

    def _check_sharding(self, world_size: int) -> None:
        """The fp32 master copy (and under ZeRO-3 the parameters) hold 1/N of the model here."""
        engine, zero = self.model, self.model.optimizer
        n_params = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in engine.module.parameters())
        share = n_params / world_size * 1.02 + 1024  # DeepSpeed pads partitions for alignment
        masters = getattr(zero, "fp32_partitioned_groups_flat" if self.stage == 3 else "single_partition_of_fp32_groups", None)
        if not masters:
            raise RuntimeError(f"{self.strategy}: {type(zero).__name__} holds no fp32 master partition")
        held = sum(t.numel() for t in masters)
        if not 0 < held <= share:
            raise RuntimeError(f"{self.strategy}: this rank's optimizer partition holds {held} of {n_params} "
                               f"parameters; sharded over {world_size} ranks it would hold at most {share:.0f}")
        if self.stage == 3:
            local = sum(p.ds_tensor.numel() for p in engine.module.parameters())
            if not 0 < local <= share:
                raise RuntimeError(f"{self.strategy}: this rank's parameter partitions hold {local} of {n_params}")
        if getattr(zero, "partition_gradients", self.stage >= 2) != (self.stage >= 2):
            raise RuntimeError(f"{self.strategy}: DeepSpeed partition_gradients={zero.partition_gradients}")

    def in_force(self) -> dict:
        """The settings as the engine runs them: from the ZeRO optimizer and, for ZeRO-3, the
        parameter coordinator that schedules the gathers (not from the config we passed)."""
        engine, zero = self.model, self.model.optimizer
        values = {
            "optimizer": optimizer_implementation(zero.optimizer),
            "reduce_bucket_size": zero.reduce_bucket_size,
            "contiguous_gradients": zero.contiguous_gradients,
        }
        if self.stage in (1, 2):
            values["overlap_comm"] = zero.overlap_comm
            values["allgather_bucket_size"] = zero.allgather_bucket_size
            return values
        offload = zero.parameter_offload
        coordinator = offload.get_param_coordinator()
        # the coordinator keeps these private (name-mangled); they are what the hooks obey
        private = {
            "stage3_prefetch_bucket_size": "_PartitionedParameterCoordinator__prefetch_bucket_sz",
            "stage3_max_live_parameters": "_PartitionedParameterCoordinator__max_n_available_params",
            "stage3_max_reuse_distance": "_PartitionedParameterCoordinator__max_reuse_dist_in_numel",
        }
        for key, attr in private.items():
            if hasattr(coordinator, attr):
                values[key] = getattr(coordinator, attr)
        values["stage3_param_persistence_threshold"] = offload.param_numel_persistence_threshold
        # stage 3 has no overlap flag of its own: the engine's parsed config decides its streams
        values["overlap_comm"] = engine.zero_overlap_comm()
        from deepspeed.runtime.zero.linear import zero3_linear_wrap
        from deepspeed.utils import z3_leaf_module

        values["memory_efficient_linear"] = torch.nn.functional.linear is zero3_linear_wrap

        values["leaf_modules"] = tuple(sorted({type(m).__name__ for m in engine.module.modules() if z3_leaf_module(m)}))
        return values

    def loss(self, x, y):
        return self.model(x, y)

    def update(self, loss) -> None:
        self.accelerator.backward(loss)  # engine.backward + engine.step (+ zero grad)
        self.optimizer.step()  # no-ops under DeepSpeed, kept as a user's loop has them
        self.optimizer.zero_grad()

    def measure_state(self, loss) -> dict:
        """Backward without the step (accelerator.backward would also step), then the state.

        ZeRO-1 reduces only once the whole backward is done, then keeps its partition of
        the gradients and frees the rest: its full gradients exist between the end of
        backward and that reduction, so for ZeRO-1 a snapshot is taken there too
        (engine.allreduce_gradients is where it starts) and the larger figure per category
        kept. ZeRO-2/3 reduce bucket by bucket during backward and never hold more than
        their partition plus one bucket; at that moment ZeRO-3 also still holds gathered
        parameters, which are communication buffers, not state: they are measured after
        backward only.
        """
        engine = self.model
        snapshots = []
        if self.stage == 1:
            reduce = engine.allreduce_gradients

            def snapshot_then_reduce(*args, **kwargs):
                snapshots.append(self._state_bytes())
                return reduce(*args, **kwargs)

            engine.allreduce_gradients = snapshot_then_reduce
        try:
            engine.backward(loss)
        finally:
            engine.__dict__.pop("allreduce_gradients", None)  # back to the class's method
        if self.stage == 1 and not snapshots:
            raise RuntimeError("zero1: DeepSpeed never called allreduce_gradients; "
                               "the pre-reduction gradients could not be measured")
        snapshots.append(self._state_bytes())
        return {k: max(snap[k] for snap in snapshots) for k in snapshots[0]}

    def _state_bytes(self) -> dict:
        if self.stage == 3:
            return deepspeed_zero3_state(self.model)
        return deepspeed_zero12_state(self.model)

    def close(self) -> None:
        # drop hooks and every reference to the engine before the process group goes
        if self.accelerator is not None:
            self.accelerator.free_memory()
        self.model = self.optimizer = self.accelerator = None
        _restore_linear()


def _restore_linear() -> None:
    """ZeRO-3's memory_efficient_linear replaces torch.nn.functional.linear for the whole process
    ("this will persist unless manually reset"): put torch's back, so that whatever runs next in
    this worker (the local baseline) computes as plain torch does."""
    import sys

    partition = sys.modules.get("deepspeed.runtime.zero.partition_parameters")
    original = getattr(getattr(partition, "InsertPostInitMethodToModuleSubClasses", None), "linear_bk", None)
    if original is not None:
        torch.nn.functional.linear = original
