"""Bytes of model state a rank really holds: parameters, gradients, optimizer state.

Counted by walking the tensors each implementation keeps, local shards only, and counting
every storage once (a parameter that is a view into a flat buffer counts the buffer, once).
Storage bytes rather than numel x itemsize, because padding and flat buffers are memory held
too. What is not model state is left out on purpose: activations, the transient all-gathered
copies of sharded parameters, and communication buckets. DeepSpeed's reduce buckets
(`ipg_buckets`, reduce_bucket_size elements each; ZeRO-3 keeps one for the whole run, stages
1-2 allocate one, two with overlap_comm, at each backward and free them at the step), and with
contiguous_gradients a gradient waiting for its reduction is a view into one: they are counted
apart, as `buffers` (their size is a setting, not a property of the model), and a gradient
that lives in a bucket counts there, not as model state.

- torch modules (DDP, FSDP2): parameters, their .grad and the optimizer's state; a DTensor
  counts its local shard (`to_local()`), never the global size.
- DeepSpeed ZeRO-1/2 (stage_1_and_2.DeepSpeedZeroOptimizer): the 16-bit (or fp32) flat
  parameter buffers, the gradient partition buffers, the fp32 master partition and the
  Adam state of that partition. The same attributes that DeepSpeed's own
  `offload_states()` moves, which is how it defines its state.
- DeepSpeed ZeRO-3 (stage3.DeepSpeedZeroOptimizer_Stage3): `ds_tensor` (the local
  partition) instead of the parameter, plus any parameter data still materialised (the
  persistent small parameters under `stage3_param_persistence_threshold`), the flat grad
  partition buffer, the fp32 master partition and Adam state.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

CATEGORIES = ("params", "grads", "optimizer")
BUFFERS = "buffers"  # communication buckets: reported apart from the model state


def _local(t):
    """The locally held tensor of a DTensor (its shard), else the tensor itself."""
    to_local = getattr(t, "to_local", None)
    if to_local is not None and type(t).__name__ == "DTensor":
        return to_local()
    return t


class StateTally:
    """Sums storage bytes per category; a storage seen before is not counted again."""

    def __init__(self):
        self._seen: set[tuple[str, int]] = set()
        self.bytes = dict.fromkeys(CATEGORIES + (BUFFERS,), 0)

    def add(self, category: str, tensor) -> None:
        if tensor is None or not isinstance(tensor, torch.Tensor):
            return
        tensor = _local(tensor)
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        if nbytes == 0:  # released (ZeRO-3 partitioned param, freed FSDP buffer)
            return
        key = (str(storage.device), storage.data_ptr())
        if key in self._seen:
            return
        self._seen.add(key)
        self.bytes[category] += nbytes

    def add_all(self, category: str, tensors: Iterable) -> None:
        for t in tensors:
            self.add(category, t)

    def result(self) -> dict:
        """{params, grads, optimizer, buffers}: the first three are the model state."""
        return dict(self.bytes)


def _optimizer_state_tensors(optimizer: torch.optim.Optimizer):
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                yield value


def _grad_containers(value):
    """Tensors inside DeepSpeed's averaged_gradients entries (tensor, list or buffer group)."""
    if value is None:
        return
    if isinstance(value, torch.Tensor):
        yield value
        return
    flat = getattr(value, "flat_partition", None)  # GradPartitionBufferGroup, a list subclass
    if isinstance(flat, torch.Tensor):
        yield flat
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


def _bucket_tensors(zero):
    """DeepSpeed's reduce-bucket buffers (stage 1/2: a list per dtype; stage 3: one tensor)."""
    for bucket in getattr(zero, "ipg_buckets", {}).values():
        buffer = getattr(bucket, "buffer", None)
        if isinstance(buffer, torch.Tensor):
            yield buffer
        elif isinstance(buffer, (list, tuple)):
            yield from (t for t in buffer if isinstance(t, torch.Tensor))


def torch_module_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """DDP or FSDP2 (or a plain module): parameters, .grad, optimizer.state."""
    tally = StateTally()
    params = list(model.parameters())
    tally.add_all("params", params)
    tally.add_all("grads", (p.grad for p in params))
    tally.add_all("optimizer", _optimizer_state_tensors(optimizer))
    return tally.result()


def deepspeed_zero12_state(engine) -> dict:
    """DeepSpeed ZeRO stage 1 or 2 (DeepSpeedZeroOptimizer)."""
    zero = engine.optimizer
    tally = StateTally()
    tally.add_all(BUFFERS, _bucket_tensors(zero))  # first: gradients viewing a bucket count there
    tally.add_all("params", getattr(zero, "bit16_groups_flat", []))
    tally.add_all("params", engine.module.parameters())
    for group in getattr(zero, "bit16_groups", []):
        for p in group:
            tally.add("grads", p.grad)
            tally.add("grads", getattr(p, "grad_accum", None))
    for value in getattr(zero, "averaged_gradients", {}).values():
        tally.add_all("grads", _grad_containers(value))
    tally.add("grads", getattr(zero, "grads_in_partition", None))
    for master in getattr(zero, "single_partition_of_fp32_groups", []):
        tally.add("optimizer", master)
        tally.add("grads", master.grad)  # fp32 copy of the grad partition, only inside step()
    tally.add_all("optimizer", _optimizer_state_tensors(zero.optimizer))
    return tally.result()


def deepspeed_zero3_state(engine) -> dict:
    """DeepSpeed ZeRO stage 3 (DeepSpeedZeroOptimizer_Stage3)."""
    zero = engine.optimizer
    tally = StateTally()
    tally.add_all(BUFFERS, _bucket_tensors(zero))  # first: gradients viewing a bucket count there
    tally.add("params", getattr(zero, "lp_param_buffer", None))
    tally.add_all("params", getattr(zero, "fp16_partitioned_groups_flat", []))
    for p in engine.module.parameters():
        tally.add("params", getattr(p, "ds_tensor", None))
        tally.add("params", p.data)  # empty unless persistent or currently gathered
        tally.add("grads", p.grad)
    tally.add("grads", getattr(zero, "grad_partitions_flat_buffer", None))
    for value in getattr(zero, "averaged_gradients", {}).values():
        tally.add_all("grads", _grad_containers(value))
    for master in getattr(zero, "fp32_partitioned_groups_flat", []):
        tally.add("optimizer", master)
        tally.add("grads", master.grad)
    tally.add_all("optimizer", _optimizer_state_tensors(zero.optimizer))
    return tally.result()
