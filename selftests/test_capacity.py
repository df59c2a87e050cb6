"""The capacity case's verdicts: a clean OOM is the expected answer for DDP, a hang or a
dead rank never is. Run through real worker groups (gloo) so the messages are the launcher's."""

from __future__ import annotations

import pytest

from wirecheck import capacity
from wirecheck.launcher import WorkerError, WorkerGroup


def _error_of(fn: str, timeout_s: float = 30, **kwargs) -> str | None:
    with WorkerGroup("capacity-selftest", 2, "gloo") as group:
        try:
            group.run(fn, kwargs, timeout_s=timeout_s, what="ddp training steps")
        except WorkerError as exc:
            return str(exc)
    return None


def test_out_of_memory_is_the_expected_oom():
    error = _error_of("faulty_workers:run_out_of_memory")
    assert "OutOfMemoryError" in error
    assert capacity.outcome(error) == capacity.OOM


def test_a_dead_rank_is_a_failure_not_an_oom():
    assert capacity.outcome(_error_of("faulty_workers:die", how="exit")) == capacity.FAILURE


def test_a_hang_is_a_failure_not_an_oom():
    assert capacity.outcome(_error_of("faulty_workers:hang", timeout_s=3)) == capacity.FAILURE


def test_an_error_that_only_mentions_oom_is_a_failure():
    error = _error_of("faulty_workers:raise_on", rank=0)
    assert capacity.outcome(error + "\n  hint: OutOfMemoryError") == capacity.FAILURE


def test_a_run_that_fits():
    assert capacity.outcome(None) == capacity.FIT


@pytest.mark.parametrize("memory, fraction", [(150754820096, 1.1), (85899345920, 1.1)])
def test_capacity_model_overflows_ddp_and_fits_fsdp(memory, fraction):
    from wirecheck.memory_model import predict
    from wirecheck.training.model import param_count, GPTShape

    shape = capacity.capacity_shape(memory, fraction, "bf16", 1024, 32000)
    n = param_count(GPTShape.of(shape))
    assert predict("ddp", n, 1, precision="bf16").total > memory
    assert predict("fsdp", n, 2, precision="bf16").total < memory
