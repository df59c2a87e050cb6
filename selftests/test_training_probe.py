"""The device probe's plan and report, without a device: a typo in a variant or a wrong ratio
must show here, not after minutes of GPU time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from wirecheck.vocab.strategies import NAMES, resolve_settings

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "device" / "training_probe.py"
HARDWARE = {"n_layer": 20, "n_head": 16, "d_model": 2048, "vocab_size": 32000, "seq_len": 1024}


@pytest.fixture(scope="module")
def probe():
    spec = importlib.util.spec_from_file_location("training_probe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_plan_starts_with_the_table_on_nvlink_and_every_variant_resolves(probe):
    runs = probe.plan()
    first = runs[: len(NAMES)]
    assert [r.strategy for r in first] == list(NAMES)
    assert all(r.wire == probe.NVLINK and not r.overrides and r.local and r.profile for r in first)
    assert len({r.name for r in runs}) == len(runs)
    for r in runs:
        resolve_settings(r.strategy, HARDWARE, r.overrides)
    assert {r.strategy for r in runs if r.wire == probe.HOST} == set(NAMES)


def _result(strategy, wire, tokens, overrides=None, step=0.1, local=None, micro_batch=4):
    rank = {
        "micro_batch": micro_batch, "world_size": 2,
        "tokens_per_s": tokens, "tokens_per_s_min": tokens * 0.98, "tokens_per_s_max": tokens * 1.01,
        "step_time_ci_halfwidth": 0.01, "timed_steps": 8, "stop_reason": "settled", "step_time_median_s": step,
        "peak_allocated_bytes": 16 * 2**30, "model_state_bytes": {"params": 1, "grads": 1, "optimizer": 1},
        "comm_buffer_bytes": 0, "achieved_flops_per_gpu": 3e14, "phase_s": {"setup": 5.0}, "settings": {},
        "local_step_time_median_s": local,
    }
    return {"run": f"{strategy}@{wire}", "strategy": strategy, "wire": wire, "overrides": overrides or {},
            "ranks": [rank, rank], "wall_s": 20.0}


def test_targets_and_exposed_communication(probe):
    class Peak:
        flops = 1e15

    local = {}
    results = []
    for r in (_result("ddp", "nvlink", 90_000, local=0.08), _result("zero2", "nvlink", 86_000),
              _result("zero3", "nvlink", 40_000), _result("fsdp", "nvlink", 80_000, {"reshard_after_forward": False}),
              _result("ddp", "host", 38_000, step=0.2)):
        if r["ranks"][0]["local_step_time_median_s"]:
            local[r["strategy"]] = r["ranks"][0]["local_step_time_median_s"]
        results.append((r, probe.facts(r, Peak, local)))
    ddp_host = results[-1][1]
    assert ddp_host["exposed_s"] == pytest.approx(0.2 - 0.08)  # the host path reuses NVLink's local step
    assert results[0][1]["mfu"] == pytest.approx(0.3)
    text = "\n".join(probe.targets_table(results))
    assert "zero2@nvlink" in text and "0.96x DDP  MET (>= 0.95x)" in text
    assert "0.44x DDP  missed (>= 0.5x)" in text
    assert "0.89x DDP  MET (>= 0.85x)" in text
    assert "ddp     2.37x   exposed 20.0 -> 120.0 ms" in text  # NVLink over host path; exposed grows
    failed = {"run": "zero1@nvlink", "strategy": "zero1", "wire": "nvlink", "overrides": {}, "error": "boom", "wall_s": 3.0}
    assert "zero1@nvlink" in "\n".join(probe.targets_table(results + [(failed, None)]))
    assert probe.facts(failed, Peak, local) is None
    assert "FAILED" in probe.describe(failed, None)[0]


def test_each_run_is_compared_with_ddp_at_its_own_micro_batch(probe):
    results = [(r, probe.facts(r, None, {})) for r in (
        _result("ddp", "nvlink", 60_000), _result("zero3", "nvlink", 33_000),
        _result("ddp", "nvlink", 68_000, micro_batch=8), _result("zero3", "nvlink", 62_000, micro_batch=8),
        _result("fsdp", "nvlink", 70_000, micro_batch=16))]
    text = "\n".join(probe.targets_table(results))
    assert "60,000 tokens/s at micro-batch 4" in text and "68,000 tokens/s at micro-batch 8" in text
    lines = [line for line in text.splitlines() if "zero3@nvlink" in line]
    assert "0.55x DDP" in lines[0] and "0.91x DDP" in lines[1]
    assert "no DDP run at its micro-batch" in text  # fsdp at 16: nothing to compare with


def test_host_plan_resolves_and_varies_the_micro_batch(probe):
    runs = probe.plan_host()
    assert len({r.name for r in runs}) == len(runs)
    assert {r.loop.get("micro_batch", 4) for r in runs} == {4, 8, 16}
    assert all(r.local and r.profile for r in runs)
    for r in runs:
        resolve_settings(r.strategy, HARDWARE, r.overrides)


def test_contention_plan_pairs_each_run_quiet_and_busy_and_reports_the_cost(probe):
    runs = probe.plan_contention()
    assert len({r.name for r in runs}) == len(runs)
    assert {(r.strategy, r.loop["micro_batch"]) for r in runs if r.spinners} == \
           {(r.strategy, r.loop["micro_batch"]) for r in runs if not r.spinners}
    assert all("spinners=" in r.name for r in runs if r.spinners)

    class Peak:
        flops = 1e15

    pairs = []
    for tokens, spinners in ((60_000, 0), (48_000, 8)):
        r = _result("zero3", "nvlink", tokens, micro_batch=8)
        r["spinners"] = spinners
        for rank in r["ranks"]:
            rank["host"] = {"python_loop_s": 0.007 if not spinners else 0.013}
        pairs.append((r, probe.facts(r, Peak, {})))
    ddp = _result("ddp", "nvlink", 70_000, micro_batch=8)
    text = "\n".join(probe.targets_table([(ddp, probe.facts(ddp, Peak, {}))] + pairs))
    assert "zero3  micro-batch   8:  0.80x (60,000 -> 48,000); python loop 7.0 -> 13.0 ms" in text
    # The busy run is no target reading: ZeRO-3 is compared with DDP once, quiet.
    assert text.count("0.86x DDP") == 1 and "0.69x DDP" not in text
