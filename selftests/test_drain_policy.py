"""The drain hooks' rules beyond one failed check (wirecheck.records.drain_policy): flaky then passed does
not drain, flaky K times in the window does, the fleet guard holds above its share, a GPU failing N times
(or with an uncorrectable memory fault) is "replace the GPU", and the bundle holds the evidence."""

from __future__ import annotations

import tarfile

import pytest

from wirecheck.records import drain_policy as dp
from wirecheck.thresholds.file import load_thresholds

from e2e import PROJECT

NOW = 1_800_000_000.0
POLICY = dp.Policy(flaky_max=3, flaky_window_s=86400, guard_share=0.5, guard_window_s=300, replace_after=3,
                   replace_window_s=7 * 86400)


def test_the_shipped_drain_keys_parse():
    policy = dp.parse_policy(load_thresholds(PROJECT / "thresholds.yaml").drain)
    assert (policy.flaky_max, policy.flaky_window_s, policy.guard_share, policy.guard_window_s) == (3, 86400, 0.5, 300)


@pytest.mark.parametrize("section, says", [({"flaky_max": 0}, "flaky_max: 0"), ({"guard_share": "150 %"}, "guard_share"),
                                           ({"flaky_window": "24"}, "flaky_window"), ({"flaky": 3}, "unknown key")])
def test_a_bad_drain_key_is_named(section, says):
    with pytest.raises(ValueError, match=says):
        dp.parse_policy(section)


def test_failed_then_passed_is_flaky_and_does_not_drain(tmp_path):
    state = tmp_path / "drain-state.jsonl"
    decision = dp.after_retest("busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s", False, dp.read_events(state), NOW, POLICY)
    assert not decision.drain and decision.flaky and "flaky (1 of 3 in 1 d drains)" in decision.line
    dp.append_event(state, {"event": dp.FLAKY, "at": NOW, "line": decision.line})
    assert dp.flaky_count(dp.read_events(state), NOW, POLICY) == 1


def test_flaky_k_times_within_the_window_drains_and_older_ones_do_not_count(tmp_path):
    old = [{"event": dp.FLAKY, "at": NOW - 2 * 86400}] * 5
    recent = [{"event": dp.FLAKY, "at": NOW - 3600}, {"event": dp.FLAKY, "at": NOW - 60}]
    assert not dp.after_retest("r", False, old + recent[:1], NOW, POLICY).drain
    third = dp.after_retest("busbw x 1 < 2 GB/s", False, old + recent, NOW, POLICY)
    assert third.drain and third.line.startswith("flaky 3 times in 1 d")


def test_a_retest_that_fails_again_drains_with_the_culprit_when_diagnosed():
    assert dp.after_retest("busbw x", True, [], NOW, POLICY, culprit="GPU1 NVLink 3 CRC +412").line == "GPU1 NVLink 3 CRC +412"
    assert dp.after_retest("busbw x", True, [], NOW, POLICY).line == "busbw x"


def _stamp(seconds_ago: float) -> str:
    from datetime import datetime, timezone
    return datetime.fromtimestamp(NOW - seconds_ago, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def test_the_guard_counts_recent_wirecheck_drains_and_holds_above_its_share():
    sinfo = "\n".join([f"wc1|wirecheck: busbw a 1 < 2 GB/s|{_stamp(60)}",
                       f"wc2|wirecheck: NVML failed|{_stamp(4000)}",  # outside the window
                       f"wc3|maintenance by a person|{_stamp(10)}"])  # not ours
    drained = dp.recently_drained(sinfo, NOW, POLICY)
    assert drained == ["wc1"]
    assert not dp.guard(drained, 4, "wc4", POLICY).hold  # 2 of 4: 50 %, not above
    held = dp.guard(drained + ["wc5"], 4, "wc4", POLICY)
    assert held.hold and "GUARD: not draining wc4" in held.line and "75% > 50%" in held.line


def test_a_small_partition_is_no_fleet_to_guard():
    """A node alone in its partition (1 of 1: 100 %) was held, and its guard file then held every later drain: a
    failed node was never drained. The guard holds from guard_min drains on (3), this one with them."""
    assert not dp.guard([], 1, "wc2", POLICY).hold
    small = dp.guard(["wc1"], 2, "wc2", POLICY)
    assert not small.hold and "fewer than guard_min 3 drains" in small.line
    assert dp.guard(["wc1", "wc3"], 4, "wc2", POLICY).hold  # 3 of 4
    with pytest.raises(dp.DrainPolicyError, match="guard_min: 0: give a whole number of at least 1"):
        dp.parse_policy({"guard_min": 0})
    assert dp.parse_policy({"guard_min": 5}).guard_min == 5


def test_a_gpu_failing_n_times_is_replace_and_an_ecc_failure_at_once():
    header = {"gpus": [{"index": 0, "serial": "1653A"}, {"index": 1, "uuid": "GPU-b"}]}
    verdict = {"outcome": "fail", "check": "busbw", "what": "all_reduce", "gpus": [1]}
    gpus = dp.failed_gpus([verdict], header)
    assert gpus == ["GPU-b"]
    events = [{"event": dp.FAILED, "at": NOW - 86400, "gpus": ["GPU-b"]}]
    assert dp.escalate(events, gpus, [verdict], NOW, POLICY).replace == []
    events.append({"event": dp.FAILED, "at": NOW - 3600, "gpus": ["GPU-b"]})
    third = dp.escalate(events, gpus, [verdict], NOW, POLICY)
    assert third.replace == ["GPU-b"] and "failed 3 times in 7 d" in third.why
    ecc = {"outcome": "fail", "check": "ecc_uncorrectable", "what": "volatile DBE", "where": "GPU0", "gpus": [0]}
    at_once = dp.escalate([], dp.failed_gpus([ecc], header), [ecc], NOW, POLICY)
    assert at_once.replace == ["1653A"] and "uncorrectable" in at_once.why


def test_the_bundle_holds_the_records_and_the_texts(tmp_path):
    record = tmp_path / "prolog-unhealthy-1.jsonl"
    record.write_text('{"type": "run"}\n')
    bundle = dp.write_bundle(tmp_path / "replace-GPU-b.tar.gz", [record, tmp_path / "gone.log"],
                             {"nvidia-smi-q.txt": "GPU 0", "xid.txt": "NVRM: Xid (PCI:0000:1b:00): 79"})
    with tarfile.open(bundle) as tar:
        assert sorted(tar.getnames()) == ["nvidia-smi-q.txt", "prolog-unhealthy-1.jsonl", "xid.txt"]
        assert b"Xid" in tar.extractfile("xid.txt").read()
    assert not list(tmp_path.glob("*.partial"))
