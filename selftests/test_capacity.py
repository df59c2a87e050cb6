"""The capacity case's verdicts: a clean OOM is the expected answer for DDP, a hang or a
dead rank never is. Run through real worker groups (gloo) so the failures are the launcher's,
judged from their data (exception type decided in the rank), never from message text."""

from __future__ import annotations

import pytest

from wirecheck.training import capacity
from wirecheck.core.failures import GroupFailure
from wirecheck.workers.launcher import WorkerError, WorkerGroup


def _call(group: WorkerGroup, fn: str, timeout_s: float = 30, **kwargs) -> GroupFailure | None:
    try:
        group.run(fn, kwargs, timeout_s=timeout_s, what="ddp training steps")
    except WorkerError as exc:
        return exc.failure
    return None


def _failure_of(tmp_path, fn: str, timeout_s: float = 30, **kwargs) -> GroupFailure | None:
    with WorkerGroup("capacity-selftest", 2, "gloo", log_dir=tmp_path) as group:
        return _call(group, fn, timeout_s, **kwargs)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """For errors that leave the group usable (every rank answers): one start for all of them."""
    with WorkerGroup("capacity-selftest", 2, "gloo", log_dir=tmp_path_factory.mktemp("logs")) as group:
        yield group


def test_out_of_memory_is_the_expected_oom(pair):
    failure = _call(pair, "faulty_workers:run_out_of_memory")
    assert failure.root.exception == "torch.OutOfMemoryError" and failure.root.out_of_memory
    assert capacity.outcome(failure) == capacity.OOM


def test_an_out_of_memory_behind_a_wrapper_is_an_oom(pair):
    # DeepSpeed and Accelerate re-raise; the allocator's error is then the cause of what arrives.
    failure = _call(pair, "faulty_workers:run_out_of_memory", wrapped=True)
    assert failure.root.exception == "builtins.RuntimeError"
    assert capacity.outcome(failure) == capacity.OOM


def test_a_dead_rank_is_a_failure_not_an_oom(tmp_path):
    assert capacity.outcome(_failure_of(tmp_path, "faulty_workers:die", how="exit")) == capacity.FAILURE


def test_a_hang_is_a_failure_not_an_oom(tmp_path):
    assert capacity.outcome(_failure_of(tmp_path, "faulty_workers:hang", timeout_s=3)) == capacity.FAILURE


def test_an_error_that_only_mentions_oom_is_a_failure(pair):
    # The message says OutOfMemoryError; the type does not: not an out-of-memory.
    failure = _call(pair, "faulty_workers:raise_on", rank=0, message="CUDA out of memory (OutOfMemoryError)")
    assert "OutOfMemoryError" in failure.message
    assert capacity.outcome(failure) == capacity.FAILURE


def test_an_oom_after_another_failure_is_a_failure(tmp_path):
    # Rank 1 dies first; rank 0's allocator then fails: the death is the cause, not the memory.
    failure = _failure_of(tmp_path, "faulty_workers:die_then_oom")
    assert failure.root.kind == "died" and any(r.out_of_memory for r in failure.ranks)
    assert capacity.outcome(failure) == capacity.FAILURE


def test_a_run_that_fits():
    assert capacity.outcome(None) == capacity.FIT


@pytest.mark.parametrize("memory, fraction", [(150754820096, 1.1), (85899345920, 1.1)])
def test_capacity_model_overflows_ddp_and_fits_fsdp(memory, fraction):
    from wirecheck.training.memory_model import predict
    from wirecheck.training.model import param_count, GPTShape

    shape = capacity.capacity_shape(memory, fraction, "bf16", 1024, 32000)
    n = param_count(GPTShape.of(shape))
    assert predict("ddp", n, 1, precision="bf16").total > memory
    assert predict("fsdp", n, 2, precision="bf16").total < memory
