"""The burn-in's library, without processes: the loop on a fake rig (what stops it, what it records, Ctrl-C),
the collective cycle, the checks only a burn-in has (each shown failing), the verdicts' inputs over all
rounds, the progress line on a terminal and off it, and the thresholds' burn_in section."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
import yaml

from e2e import PROJECT
from fake_ras import FakeRas, sample
from wirecheck import checks
from wirecheck.burnin import faults, judging, progress
from wirecheck.burnin.faults import ECC, HANG, WRONG_COLLECTIVE, XID
from wirecheck.burnin.loop import COMPLETE, INTERRUPTED, STOPPED, RoundReport, run_burn_in
from wirecheck.burnin.plan import cycle, plan_burn_in
from wirecheck.burnin.rig import Progress
from wirecheck.core.failures import HUNG
from wirecheck.core.paths import suite_paths
from wirecheck.node.placement import COLLECTIVE_CLASSES, enumerate_placements
from wirecheck.node.topo_text import load_recorded
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.vocab.ops import OPS, get as get_op
from wirecheck.workers import ras

TH = load_thresholds(suite_paths().thresholds)
TOPO = load_recorded("h200-sxm-2", suite_paths().topologies)
PLACEMENTS = enumerate_placements(TOPO)
N = 8  # the fake GEMM's side


def _plan(duration_s=3.0, simulated=False, gpus=(0, 1)):
    """Rounds of 1 s on the fake clock (each round advances it by its length)."""
    plan = plan_burn_in(TH, duration_s=duration_s, gpus=gpus, names={g: "NVIDIA H200" for g in gpus},
                        bus_ids={g: f"0000:0{g}:00.0" for g in gpus}, simulated=simulated, placements=PLACEMENTS)
    return replace(plan, round_s=1.0, window_s=0.1)


# ---- a fake rig: rounds that come back at once (or when asked to stop) -----------------------------


def _health(sbe=0, dbe=0):
    return SimpleNamespace(volatile_corrected_ecc=sbe, volatile_uncorrected_ecc=dbe, remapped_rows=(0, 0, 0, 0),
                           nvlink_counters=(), pcie_replay_counter=0)


def _window(t0, flops=700e12, wrong=0):
    return {"t0": t0, "t1": t0 + 1.0, "products": 100, "seconds": 1.0, "flops_per_s": flops, "checked": 12,
            "mismatched_results": 1 if wrong else 0, "mismatched_elements": wrong}


def _value(rank, steps, first_step, flops=700e12, wrong_step=None, stopped="time up"):
    now = time.time()
    taken = []
    for k in range(first_step, first_step + 2) if steps else ():
        step = steps[k % len(steps)]
        # the fault on a rank whose result is checked: rank 1, or the root where the result lives there alone
        holders = get_op(step["op"]).result_ranks(2)  # the fake rig's two ranks
        wrong = 3 if wrong_step == k and rank == (1 if 1 in holders else holders[0]) else 0
        if rank not in holders:
            wrong = None  # as the worker says it: no result lives on this rank
        taken.append({"step": k, "placement": step["placement"], "op": step["op"], "t": now, "bytes": step["size"],
                      "requested_bytes": step["size"], "time_s": 0.01, "graph_time_s": None, "graph_note": None,
                      "wrong": wrong, "first_bad": 7 if wrong else None,
                      "wrong_by_path": {"eager": wrong} if wrong is not None else {}})
    return {"n": N, "window_s": 1.0, "windows": [_window(now - 2, flops), _window(now - 1, flops)],
            "math": {"checked": 24, "mismatched_results": 0, "mismatched_elements": 0, "first": None,
                     "reference_nonfinite": 0, "reference_digest": "d"},
            "steps": taken, "next_step": first_step + (2 if steps else 0), "stopped": stopped}


class FakeCall:
    def __init__(self, rig, values=None, error=None, until_stopped=False):
        self.rig, self._values, self.error, self.until_stopped = rig, values, error, until_stopped

    def wait(self, timeout_s):
        if self.until_stopped and not self.rig.stopped:
            self.rig.polls += 1
            return False
        return True

    @property
    def values(self):
        return self._values


class FakeRig:
    """Round `n` behaves as `behaviour.get(n)` says: flops per GPU, a wrong step, an XID during it, an
    error, ECC counters after it, Ctrl-C during it."""

    def __init__(self, plan, behaviour=None):
        self.plan, self.behaviour = plan, behaviour or {}
        self.events, self.stopped, self.polls, self.closed, self.rounds = [], None, 0, False, 0
        self.ecc = {g: _health() for g in plan.gpus}
        self.clock = Clock()

    def start(self):
        pass

    def health(self):
        return dict(self.ecc)

    def xid_events(self):
        if self.polls and self.behaviour.get(self.rounds, {}).get("xid") and not self.events:
            self.events.append({"time": time.time(), "gpu": 1, "bus_id": "0000:01:00.0", "kind": "xid", "code": 79})
        return list(self.events)

    def clear_stop(self):
        self.stopped = None

    def start_sampling(self):
        return None

    def stop_sampling(self, sampler):
        return None

    def request_stop(self, why):
        self.stopped = why

    def progress(self):
        return self.behaviour.get(self.rounds, {}).get("progress") or [
            Progress(1, time.time() - 30, "step 3: all_reduce on nvswitch-2gpu-0.1")]

    def start_round(self, number, round_s, first_step):
        self.rounds = number
        self.clock.now += round_s
        b = self.behaviour.get(number, {})
        if b.get("ctrl_c"):
            raise_in_wait = FakeCall(self, None)

            def wait(timeout_s, first=[True]):
                if first[0]:
                    first[0] = False
                    raise KeyboardInterrupt
                return True
            raise_in_wait.wait = wait
            raise_in_wait._values = [_value(r, self._steps(), first_step, stopped="asked to stop") for r in range(2)]
            return raise_in_wait
        if b.get("error"):
            return FakeCall(self, None, b["error"])
        if "ecc" in b:
            self.ecc = {g: _health(*b["ecc"]) if g == 1 else _health() for g in self.plan.gpus}
        flops = b.get("flops", {})
        values = [_value(r, self._steps(), first_step, flops.get(r, 700e12), b.get("wrong_step")) for r in range(2)]
        return FakeCall(self, values, until_stopped=bool(b.get("xid")))

    def _steps(self):
        return [s.as_worker_arg(self.plan.gpus) for s in self.plan.steps]

    def memory(self):
        return [{"free_bytes": 100, "total_bytes": 100, "target_bytes": 90, "bytes_covered": 90, "passes": 1,
                 "patterns": [{"pass": 1, "pattern": "zeros", "mismatched_words": 0, "first_bad_offset": None,
                               "seconds": 0.1}], "allocation_error": None, "wall_s": 0.1}] * 2

    def close(self):
        self.closed = True


class Clock:
    """The burn-in's clock: a round takes its length (FakeRig.start_round moves it on)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _run(plan, rig, **kwargs):
    recorded, reports = [], []
    burn = run_burn_in(plan, rig, TH, record=recorded.append, on_round=reports.append, clock=rig.clock, poll_s=0.0,
                       **kwargs)
    return burn, recorded, reports


def test_rounds_run_until_the_duration_is_spent_each_recorded_as_it_ends():
    plan = _plan(duration_s=3.0)
    rig = FakeRig(plan)
    burn, recorded, reports = _run(plan, rig)
    assert burn.status == COMPLETE and burn.fault is None and rig.closed
    assert [m.kind for m in recorded] == ["burn_in_round"] * len(burn.rounds) + ["burn_in"]
    assert len(burn.rounds) == 3 and [r.number for r in reports] == [1, 2, 3]
    first = recorded[0].details
    assert first["gpus"]["GPU1"]["flops_per_s"] == 700e12 and first["gpus"]["GPU1"]["memory"]["passes"] == 1
    assert first["series"]["GPU0"]["windows"][0][2] == 700e12  # every window, as compact rows
    # the fake round takes two steps of the cycle; the next round goes on where it stopped
    assert set(first["collectives"]) == {f"nvswitch-2gpu-0.1 {op}" for op in OPS[:2]}
    assert set(recorded[1].details["collectives"]) == {f"nvswitch-2gpu-0.1 {op}" for op in OPS[2:4]}
    assert recorded[-1].details["status"] == COMPLETE


def test_an_xid_during_a_round_stops_it_at_once_and_names_it():
    plan = _plan(duration_s=100.0)
    rig = FakeRig(plan, {2: {"xid": True}})
    burn, recorded, reports = _run(plan, rig)
    assert burn.status == STOPPED and len(burn.rounds) == 2
    assert burn.fault.kind == XID and burn.fault.round == 2 and burn.fault.where == "GPU1"
    assert "XID 79 (the GPU has fallen off the bus) on GPU1" in burn.fault.message
    assert rig.stopped and "XID 79" in rig.stopped  # the workers were asked to stop mid-round
    assert recorded[1].details["fault"]["kind"] == XID and recorded[1].details["events"][0]["code"] == 79
    assert reports[-1].fault is burn.fault


def test_ecc_growth_over_the_limit_stops_the_burn_in_after_that_round():
    plan = _plan(duration_s=100.0)
    burn, _, _ = _run(plan, FakeRig(plan, {3: {"ecc": (0, 1)}}))
    assert burn.fault.kind == ECC and burn.fault.round == 3 and burn.fault.where == "GPU1"
    assert "volatile double-bit (uncorrected) ECC errors grew by 1 (0 -> 1; allowed 0)" in burn.fault.message


def test_a_wrong_collective_element_stops_it_naming_placement_and_step():
    plan = _plan(duration_s=100.0)
    burn, _, _ = _run(plan, FakeRig(plan, {2: {"wrong_step": 3}}))
    assert burn.fault.kind == WRONG_COLLECTIVE and burn.fault.round == 2
    assert burn.fault.where == "nvswitch-2gpu-0.1"
    assert "rank 1 has 3 wrong elements (first at index 7)" in burn.fault.message and "(step 3 of the cycle)" in \
        burn.fault.message


def test_a_hang_is_named_with_what_each_rank_was_doing():
    """Every rank of a hung round waits (in the vote, or a collective), so the launcher's root cause is its lowest
    rank, whichever GPU stopped: that GPU was named, and the one silent this round left out. The silent rank is
    the suspect, said and named; ranks all caught in one collective name no GPU."""
    plan = _plan(duration_s=100.0)
    error = RuntimeError("burn-in round 2 on burn-in: no reply within 95 s; rank stacks:\n--- rank 0 ---\n  vote\n"
                         "logs of every rank kept in /var/lib/wirecheck/x-logs/pool-1")
    error.failure = SimpleNamespace(kind=HUNG, root=SimpleNamespace(rank=0))
    voting = [Progress(0, time.time() - 30, "vote before step 13")]
    burn, recorded, _ = _run(plan, FakeRig(plan, {2: {"error": error, "progress": voting}}))
    assert burn.fault.kind == HANG and burn.fault.where == "GPU1" and burn.fault.round == 2
    assert re.search(r"no reply within 95 s \[last seen: GPU0 \(rank 0\): vote before step 13 since \d\d:\d\d:\d\d; "
                     r"GPU1 \(rank 1\): nothing this round\]; logs of every rank kept in /var/lib/wirecheck/x-logs/pool-1$",
                     burn.fault.message), burn.fault.message
    assert recorded[1].details["error"].startswith("burn-in round 2") and "--- rank 0 ---" in recorded[1].details["error"]
    both = [Progress(r, time.time() - 30, "step 3: all_reduce on nvswitch-2gpu-0.1") for r in (0, 1)]
    burn, _, _ = _run(plan, FakeRig(plan, {2: {"error": error, "progress": both}}))
    assert burn.fault.where is None, burn.fault  # both in the collective: no one GPU to blame


def _hang(ras_reading):
    error = RuntimeError("burn-in round 2 on burn-in: no reply within 95 s")
    error.failure = SimpleNamespace(kind=HUNG, root=SimpleNamespace(rank=1), ras=ras_reading)
    return error


def test_a_hang_carries_nccl_ras_s_reading_into_the_fault_its_records_and_the_verdict():
    """The launcher's failure holds RAS's reading, taken before the ranks were killed (here read from a
    stand-in RAS whose answer names rank 2 unresponsive): the fault, the round's and the burn-in's lines and
    the hard-fault verdict keep it, its findings by host, GPU and pid among the verdict's problems."""
    with FakeRas(json=sample("status-unresponsive-4rank-2.28.9.json")) as fake:
        reading = ras.ask_status({"NCCL_RAS_ADDR": fake.address})
    plan = _plan(duration_s=100.0)
    burn, recorded, _ = _run(plan, FakeRig(plan, {2: {"error": _hang(reading)}}))
    assert burn.fault.kind == HANG and burn.fault.ras is reading
    for line in (recorded[1].details, recorded[-1].details):  # the round's and the burn-in's record
        assert line["fault"]["ras"]["answered"] and line["fault"]["ras"]["findings"][0]["pid"] == 51234
    verdict = checks.burn_in.burn_in_no_hard_fault(TH, **judging.hard_fault(burn))
    assert verdict.outcome == "fail" and verdict.inputs["fault"]["ras"]["communicators"][0]["missing_ranks_count"] == 1
    problems = verdict.details["problems"]
    assert problems[0].startswith("STOPPED in round 2") and problems[1].startswith(f"NCCL RAS ({fake.address}, json")
    assert "RAS UNRESPONSIVE 0x9e17999afaa87dbb: rank 2, GPU 2, pid 51234 on 10.0.0.5: did not answer RAS" in \
        verdict.message


def test_a_hang_without_a_ras_reading_says_why_and_other_faults_have_none():
    plan = _plan(duration_s=100.0)
    gloo = ras.not_read("not asked: the gloo backend has no NCCL RAS")  # what a simulated group's failure holds
    burn, _, _ = _run(plan, FakeRig(plan, {2: {"error": _hang(gloo)}}))
    verdict = checks.burn_in.burn_in_no_hard_fault(TH, **judging.hard_fault(burn))
    assert verdict.outcome == "fail" and verdict.details["problems"][1:] == [
        "NCCL RAS not read: not asked: the gloo backend has no NCCL RAS"]
    # a group that was closed or could not be sent the call has no failed call: RAS was not asked, and said so
    unsent = faults.from_error(RuntimeError("round 3 on burn-in: could not send the call to rank 1"), 3, {}, plan.gpus)
    assert unsent.ras == ras.not_read(faults.NO_FAILURE)
    said = checks.burn_in.burn_in_no_hard_fault(TH, status=STOPPED, rounds=3, seconds=3.0, duration_s=100.0,
                                                fault=unsent.as_record(), checked={})
    assert said.details["problems"][1] == f"NCCL RAS not read: {faults.NO_FAILURE}"
    # a fault the workers did not break on (a wrong element) has no RAS reading, and says none
    wrong, _, _ = _run(plan, FakeRig(plan, {2: {"wrong_step": 2}}))
    assert wrong.fault.ras is None
    assert "NCCL RAS" not in checks.burn_in.burn_in_no_hard_fault(TH, **judging.hard_fault(wrong)).message


def test_ctrl_c_keeps_the_round_it_cut_short_then_stops_the_run():
    plan = _plan(duration_s=100.0)
    rig = FakeRig(plan, {3: {"ctrl_c": True}})
    recorded = []
    with pytest.raises(KeyboardInterrupt):
        run_burn_in(plan, rig, TH, record=recorded.append, clock=rig.clock, poll_s=0.0)
    rounds = [m.details for m in recorded if m.kind == "burn_in_round"]
    assert [r["round"] for r in rounds] == [1, 2, 3] and rounds[2]["interrupted"]
    assert rounds[2]["gpus"]["GPU0"]["flops_per_s"] == 700e12  # the cut round's windows are kept
    assert rounds[2]["gpus"]["GPU0"]["memory"] is None  # no memory test after Ctrl-C
    assert rig.stopped == "Ctrl-C" and rig.closed
    assert recorded[-1].kind == "burn_in" and recorded[-1].details["status"] == INTERRUPTED


# ---- the verdicts over all rounds ----------------------------------------------------------------


def test_a_gpu_slower_in_its_last_rounds_fails_the_drift_and_a_slow_gpu_its_peers():
    plan = _plan(duration_s=6.0)
    slow = {n: {"flops": {1: 700e12 if n <= 3 else 560e12}} for n in range(1, 7)}
    burn, _, _ = _run(plan, FakeRig(plan, slow))
    assert len(burn.rounds) == 6
    drift0 = checks.burn_in.burn_in_throughput_drift(TH, **judging.drift(burn, 0))
    drift1 = checks.burn_in.burn_in_throughput_drift(TH, **judging.drift(burn, 1))
    assert drift0.outcome == "pass"
    assert drift1.outcome == "fail", drift1.message
    assert "measured 20 % > ceiling 10 %" in drift1.message
    assert "the drop from the first 3 round(s) 700.0 TFLOP/s to the last 3 560.0 TFLOP/s" in drift1.message
    sustained = checks.gpu_health.sustained_throughput(TH, **judging.sustained(burn, 1))
    assert sustained.outcome == "pass"  # 630 TFLOP/s over all rounds: above the floor; one peer only
    assert judging.sustained(burn, 1)["windows"]["first"] == 700e12


def test_one_round_has_no_drift_and_no_spread_to_judge():
    assert checks.burn_in.burn_in_throughput_drift(TH, gpu=0, bus_id=None, round_flops=[7e14],
                                                   simulated=False).outcome == "skip"
    assert checks.burn_in.burn_in_busbw_spread(TH, placement="p", op="all_reduce", round_busbw=[3e11],
                                               simulated=False).outcome == "skip"


def test_a_round_far_below_the_others_fails_the_busbw_spread():
    ok = checks.burn_in.burn_in_busbw_spread(TH, placement="nvswitch-2gpu-0.1", op="all_reduce",
                                             round_busbw=[330e9, 325e9, 328e9], simulated=False)
    bad = checks.burn_in.burn_in_busbw_spread(TH, placement="nvswitch-2gpu-0.1", op="all_reduce",
                                              round_busbw=[330e9, 325e9, 200e9, 328e9], simulated=False)
    assert ok.outcome == "pass" and bad.outcome == "fail", bad.message
    assert "measured 38.7 % > ceiling 15 %" in bad.message
    assert "the lowest round 200.0 GB/s below the median 326.5 GB/s over 4 rounds" in bad.message


def test_the_hard_fault_verdict_fails_on_a_fault_and_on_no_round_and_passes_otherwise():
    plan = _plan(duration_s=100.0)
    stopped, _, _ = _run(plan, FakeRig(plan, {2: {"wrong_step": 2}}))
    verdict = checks.burn_in.burn_in_no_hard_fault(TH, **judging.hard_fault(stopped))
    assert verdict.outcome == "fail" and "STOPPED in round 2 at " in verdict.message
    assert "by a wrong collective result on nvswitch-2gpu-0.1" in verdict.message
    plan = _plan(duration_s=3.0)
    done, _, _ = _run(plan, FakeRig(plan))
    passed = checks.burn_in.burn_in_no_hard_fault(TH, **judging.hard_fault(done))
    assert passed.outcome == "pass" and "no XID, no ECC growth, no hang" in passed.message
    none = checks.burn_in.burn_in_no_hard_fault(TH, status=COMPLETE, rounds=0, seconds=0.1, duration_s=0.1, fault=None,
                                                checked={})
    assert none.outcome == "fail" and "no round ran" in none.message


def test_placements_out_of_the_cycle_or_not_reached_are_named():
    plan = _plan(duration_s=2.0)
    burn, _, _ = _run(plan, FakeRig(plan))
    assert "needs NCCL_P2P_DISABLE=1 in its processes" in judging.not_in_cycle(burn, "forced_pcie-2gpu-0.1", "all_reduce")
    assert "the cycle did not reach all_to_all on nvswitch-2gpu-0.1" in judging.not_in_cycle(
        burn, "nvswitch-2gpu-0.1", "all_to_all")


# ---- the cycle and the progress line -------------------------------------------------------------


def test_the_cycle_takes_each_placement_in_turn_for_one_collective_then_the_next():
    topo = load_recorded("h200-nvl-8", suite_paths().topologies)
    placements = enumerate_placements(topo)
    steps, left_out = cycle(placements, topo.indices, 1 << 30)
    cycled = [p for p in placements if p.klass in COLLECTIVE_CLASSES and p.id not in left_out]
    assert len(steps) == len(cycled) * len(OPS)  # every placement but forced_pcie, every collective
    first, second = OPS[:2]
    assert [(s.placement.id, s.op) for s in steps[:2]] == [(cycled[0].id, first), (cycled[1].id, first)]
    assert {s.op for s in steps[:len(cycled)]} == {first} and steps[len(cycled)].op == second
    assert [s.op for s in steps[::len(cycled)]] == list(OPS)
    assert list(left_out) == ["forced_pcie-2gpu-0.1"] and "NCCL_P2P_DISABLE=1" in left_out["forced_pcie-2gpu-0.1"]
    assert steps[0].as_worker_arg(topo.indices)["ranks"] == [0, 1]


def _report(**kw):
    base = dict(number=12, elapsed_s=723, remaining_s=13677, duration_s=14400,
                gpus={0: {"flops_per_s": 702.3e12, "temperature_c": 61, "power_w": 690.4},
                      1: {"flops_per_s": 698.8e12, "temperature_c": 63, "power_w": 695.0}},
                busbw=("nvswitch-2gpu-0.1", "all_reduce", 358.2e9), fault=None, interrupted=False, simulated=False)
    base.update(kw)
    return RoundReport(**base)


def test_the_progress_line_and_its_terminal_forms():
    assert progress.line(_report()) == ("burn-in 0:12:03 of 4:00:00 (3:47:57 left) round 12 | GPU0 702.3 TFLOP/s "
                                        "61°C 690W | GPU1 698.8 TFLOP/s 63°C 695W | all_reduce nvswitch-2gpu-0.1 "
                                        "358.2 GB/s")
    eight = {g: {"flops_per_s": 700e12, "temperature_c": 60, "power_w": 690} for g in range(8)}
    wide = progress.line(_report(gpus=eight), width=120)
    assert len(wide) < 120 and "0:700/60°C/690W 1:700/60°C/690W" in wide
    assert len(progress.line(_report(gpus=eight), width=60)) <= 60
    stopped = SimpleNamespace(kind="wrong GEMM result", where="GPU1")
    assert progress.line(_report(fault=stopped)).endswith("| STOPPED: wrong GEMM result on GPU1")


class _FakeTerminal:
    def __init__(self, tty):
        self.isatty, self.out = tty, []
        self._tw = SimpleNamespace(fullwidth=100)

    def write_line(self, text):
        self.out.append(("line", text))

    def rewrite(self, text, erase=False):
        self.out.append(("rewrite", text))

    def ensure_newline(self):
        self.out.append(("newline", ""))

    def flush(self):
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_the_plugin_rewrites_the_line_on_a_terminal_and_writes_plain_lines_otherwise(tty):
    from pytest_wirecheck.burn_in import ProgressLine

    terminal = _FakeTerminal(tty)
    config = SimpleNamespace(pluginmanager=SimpleNamespace(
        get_plugin=lambda name: terminal if name == "terminalreporter" else None))
    line = ProgressLine(config)
    line.round(_report(number=1))
    line.round(_report(number=2))
    line.say("wirecheck: burn-in complete")
    kinds = [k for k, _ in terminal.out]
    if tty:
        assert kinds == ["newline", "rewrite", "rewrite", "line", "line"]  # the rewritten line is ended first
        assert all(len(text) < 100 for k, text in terminal.out if k == "rewrite")
    else:
        assert kinds == ["line", "line", "line"]
        assert terminal.out[1][1].startswith("burn-in 0:12:03 of 4:00:00 (3:47:57 left) round 2 | GPU0")


# ---- thresholds -----------------------------------------------------------------------------------


def test_the_burn_in_section_is_read_and_its_mistakes_named(tmp_path):
    assert TH.burn_in.drift(False).value == pytest.approx(0.10) and TH.burn_in.drift_rounds == 3
    assert TH.burn_in.busbw_spread(True).yaml_path == "thresholds.yaml: burn_in.busbw_spread.simulated"
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    data["burn_in"]["drift"]["hardware"]["max_drop"] = "100 %"
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ThresholdsError, match=r"burn_in\.drift\.hardware\.max_drop: is 100 % or more"):
        load_thresholds(path)
    del data["burn_in"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ThresholdsError, match=r"missing required key 'burn_in'"):
        load_thresholds(path)


# ---- a round on one CPU rank, in this process ------------------------------------------------------


def _ctx():
    torch = pytest.importorskip("torch")
    from wirecheck.workers.worker import RankContext

    return RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"), label="t")


def _round_kwargs(tmp_path, duration_s):
    return {"n": 32, "duration_s": duration_s, "window_s": 0.02, "check_every": 2, "seed": 20, "steps": [],
            "first_step": 0, "warmup_iters": 1, "iters": 1, "stop_path": str(tmp_path / "stop"),
            "progress_dir": str(tmp_path)}


def test_a_round_runs_its_duration_and_stops_early_when_the_stop_file_exists(tmp_path):
    from wirecheck.burnin import worker

    done = worker.load_round(_ctx(), **_round_kwargs(tmp_path, 0.2))
    assert done["stopped"] == worker.TIME_UP and done["windows"] and done["math"]["mismatched_elements"] == 0
    assert (tmp_path / "rank0").read_text().split(" ", 1)[1].strip() == "round done"
    (tmp_path / "stop").write_text("parent: Ctrl-C\n")
    began = time.time()
    asked = worker.load_round(_ctx(), **_round_kwargs(tmp_path, 30.0))
    assert asked["stopped"] == worker.ASKED and time.time() - began < 5


def test_a_wrong_product_stops_the_round_and_tells_the_other_ranks(tmp_path, monkeypatch):
    from faulty_gpu_worker import wrong_after_reference
    from wirecheck.burnin import worker
    from wirecheck.gpu import gemm

    worker.load_round(_ctx(), **_round_kwargs(tmp_path, 0.05))  # the reference is made right
    monkeypatch.setattr(gemm, "matmul", wrong_after_reference(gemm.matmul))
    result = worker.load_round(_ctx(), **_round_kwargs(tmp_path, 30.0))
    assert result["stopped"] == worker.WRONG and result["math"]["first"]["index"] == 5
    assert "rank 0: wrong GEMM result in window" in (tmp_path / "stop").read_text()


# ---- the report ------------------------------------------------------------------------------------


def test_the_report_draws_the_burn_in_and_names_what_stopped_it(tmp_path):
    from wirecheck.records.run import RunWriter, run_header
    from wirecheck.report import sections
    from wirecheck.report.model import view_of

    plan = _plan(duration_s=100.0)
    writer = RunWriter(tmp_path / "run.jsonl")
    writer.header(run_header(simulated=False, simulation_source=None, thresholds="thresholds.yaml", versions={},
                             placements=[], level="burn-in", duration_s=100.0))
    rig = FakeRig(plan, {3: {"wrong_step": 5}})
    burn = run_burn_in(plan, rig, TH, record=writer.measurement, clock=rig.clock, poll_s=0.0)
    verdict = checks.burn_in.burn_in_no_hard_fault(TH, **judging.hard_fault(burn))
    writer.verdict(verdict, "tests/test_burn_in.py::test_burn_in_without_hard_fault")
    writer.end("complete", 1)
    writer.close()
    view = view_of(tmp_path / "run.jsonl")
    assert [r["round"] for r in view.burn_in.rounds] == [1, 2, 3] and view.burn_in.status == STOPPED
    assert len(view.burn_in.windows("GPU0")) == 6 and set(view.burn_in.busbw()) >= {"nvswitch-2gpu-0.1 all_reduce"}
    section = sections.burn_in_section(view)
    html = section.html()
    assert [img.id for img in section.images] == ["fig-burn-in"]
    assert "Stopped in round 3 by a wrong collective result on nvswitch-2gpu-0.1" in html
    assert "1 burn-in verdicts (1 failed)" in html
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(line for line in (tmp_path / "run.jsonl").read_text().splitlines()
                               if '"burn_in' not in line) + "\n")
    assert "Not a burn-in" in sections.burn_in_section(view_of(other)).html()
