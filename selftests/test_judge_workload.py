"""Judging a recorded run again with thresholds measured on another workload: the training
limits skip by name, the rest is judged as always (the shipped records of 2026-12-01)."""

from pathlib import Path

from wirecheck.checks.judge import judge_run
from wirecheck.records.file import read_run
from wirecheck.thresholds.file import load_thresholds

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "fixtures/reference/h200-sxm-2"
SHIPPED = load_thresholds(ROOT / "thresholds.yaml")


def _outcomes(path):
    judged = judge_run(read_run(path), SHIPPED)
    return {(j.now.check, j.now.where, j.now.what): j.now for j in judged}


def test_a_record_of_another_micro_batch_is_not_judged_by_these_floors():
    micro_batch = SHIPPED.training_settings(False).micro_batch
    old = _outcomes(REFERENCE / "wirecheck-2026-12-01/run1.jsonl")  # 4 x 1024 tokens per GPU
    training = [v for (check, _, _), v in old.items() if check in ("throughput", "peak_memory", "slow_wire", "dial_flattens")]
    assert len(training) == 26  # 10 throughput, 10 peak memory, 5 slow wire, 1 dial
    for v in training:
        assert v.outcome == "skip", v.message
        assert f"micro_batch 4 (thresholds: {micro_batch})" in v.message
    assert not [v for v in old.values() if v.outcome == "fail"]  # the rest of that run still passes
    assert sum(v.outcome == "pass" for v in old.values()) > 100


def test_a_record_of_the_same_workload_is_judged():
    now = _outcomes(REFERENCE / "wirecheck-2026-12-01b/run1.jsonl")
    throughput = [v for (check, _, _), v in now.items() if check == "throughput"]
    assert len(throughput) == 10 and all(v.outcome == "pass" for v in throughput)
    assert not [v for v in now.values() if v.outcome == "fail"]
