"""The suite as users run it, for what the workers promise: a node whose collectives all hang
finishes in bounded time with every hang named, and two runs never share a node's GPUs."""

from __future__ import annotations

import os
import re
from pathlib import Path
import subprocess
import sys
import time

from e2e import make_project, pythonpath, records, run_suite, thresholds_with

# Every collective hangs: rank 1 never arrives, the others wait inside the collective. Training
# hangs too (both ranks), as it would on a node whose wires do not move data.
ALL_HANG = '''
import pytest

@pytest.fixture
def collective_worker():
    return "faulty_workers:measure_hang_every_op"

@pytest.fixture
def strategy_worker():
    return "faulty_workers:train_hang"
'''

DEADLINE_S = 4  # the simulated minimum for this run: every first call is a small one


def test_a_node_where_every_collective_hangs_finishes_in_bounded_time_naming_every_hang(pytester):
    def quick(data):
        data["workers"]["deadlines"]["simulated"]["minimum"] = f"{DEADLINE_S} s"
        # the ceilings a hang could wait for instead, set to an hour: the run would outlast the suite's timeout
        data["collectives"]["simulated"]["timeout"] = "3600 s"
        data["training"]["simulated"]["timeout"] = "3600 s"

    root = make_project(pytester, thresholds_text=thresholds_with(quick), tests_conftest=ALL_HANG)
    out = root / "run.jsonl"
    t0 = time.monotonic()
    # (the GPU health checks hold no collective and judge speed, which a loaded machine skews: left out)
    result = run_suite(pytester, "--simulate=h200-sxm-2", f"--thresholds={root / 'thresholds.yaml'}", "-m", "not health",
                       f"--wirecheck-json={out}", "--benchmark-disable", "-rfs")
    elapsed = time.monotonic() - t0
    text = result.stdout.str()
    # One failure per placement that runs collectives, each naming its hang ...
    failed = sorted(set(re.findall(r"FAILED tests/\S+\[(\S+?-2gpu-0\.1)-", text)))
    assert failed == ["forced_pcie-2gpu-0.1", "nvswitch-2gpu-0.1"], text
    assert result.parseoutcomes()["failed"] == 2, text
    for placement in failed:
        assert re.search(rf"all_reduce at 64 KiB on {placement} did not finish within {DEADLINE_S}s \(the minimum ", text)
    # ... and every other test on them skipped at once, saying why.
    skips = re.findall(r"SKIPPED \[\d+\] \S+: (\S+) hung earlier \(all_reduce at 64 KiB did not finish within "
                       rf"{DEADLINE_S}s; logs in (\S+)\): its remaining tests are skipped", text)
    assert {p for p, _ in skips} == set(failed), text
    # The hung groups' logs are next to the records.
    logs = {d for _, d in skips}
    assert all(d.startswith(str(root / "run-logs")) for d in logs), logs
    # (the run's worker pool held the ranks: its logs, named by the pool, are where each skip says)
    assert logs and all(sorted(Path(d).glob("rank*.log")) for d in logs), logs
    # The records keep each hang as data: kind, deadline, every rank's stack, where the logs are.
    hangs = [r["details"]["failure"] for r in records(out)
             if r.get("type") == "measurement" and (r["details"].get("failure") or {}).get("kind") == "hung"]
    assert sorted(h["label"] for h in hangs) == failed
    for h in hangs:
        assert h["deadline_s"] == DEADLINE_S and h["log_dir"] in logs and h["what"] == "all_reduce at 64 KiB"
        assert {r["rank"] for r in h["ranks"]} == {0, 1} and all(r["evidence"] for r in h["ranks"])
    # Bounded: each hang was cut at its own deadline, and nothing waited for a ceiling (an hour here). How long the
    # rest takes is the machine's business (minutes at a load of 7 on 2 cores).
    assert elapsed < 400, elapsed


FAKE_NODE = '''
import sys
import fake_pynvml

# A 2-GPU NVSwitch node as NVML would describe it: the run is a real (not simulated) one.
sys.modules["pynvml"] = fake_pynvml.build(fake_pynvml.nvswitch(2))
'''

HOLD = """
import sys, time
from wirecheck.workers.node_lock import NodeLock
lock = NodeLock(sys.argv[1]).acquire(0, command=["pytest", "--profile", "h200-sxm-8", "(acceptance)"])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_gpu_run_stops_naming_who_holds_the_node(pytester):
    root = make_project(pytester, tests_conftest=FAKE_NODE)
    lock = root / "node.lock"
    holder = _hold(lock, 120)
    try:
        t0 = time.monotonic()
        result = run_suite(pytester, f"--node-lock={lock}", "--wait-for-node=2s", "--wirecheck-json=busy.jsonl",
                           "tests/test_inventory.py", "-k", "test_gpus_visible")
        assert time.monotonic() - t0 < 60
        # Busy is neither a usage error (4) nor a failed node (1): a code of its own, and the record says so.
        assert result.ret == 75, result.stdout.str() + result.stderr.str()
        end = records(root / "busy.jsonl")[-1]
        assert end["type"] == "end" and end["status"] == "busy" and end["exit_status"] == 75, end
        assert end["holder"]["pid"] == holder.pid and end["node_lock"] == str(lock) and end["waited_s"] >= 2, end
        assert records(root / "busy.jsonl")[0]["type"] == "run"
        err = result.stderr.str()
        assert f"node busy: another wirecheck run holds the GPUs: pid {holder.pid} (pytest --profile h200-sxm-8 " \
               "(acceptance)), user " in err, err
        assert "since 20" in err and "Waited 2 s" in err and "--wait-for-node DURATION" in err
        assert "wirecheck: node busy: GPUs held by pid" in result.stdout.str()  # said while waiting

        # A simulated run takes no GPU lock: it runs while the node is held.
        sim = run_suite(pytester, f"--node-lock={lock}", "--wait-for-node=0", "--simulate=h200-sxm-2",
                        "tests/test_topology.py", "-k", "full_meshes")
        sim.assert_outcomes(passed=1)
    finally:
        holder.kill()
        holder.wait()


def test_a_second_gpu_run_can_wait_for_the_node(pytester):
    root = make_project(pytester, tests_conftest=FAKE_NODE)
    lock = root / "node.lock"
    holder = _hold(lock, 300)
    env = dict(os.environ, PYTHONPATH=pythonpath())
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--node-lock={lock}",
                            "--wait-for-node=2min", "tests/test_inventory.py", "-k", "test_gpus_visible"],
                           cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in run.stdout:
            lines.append(line)
            if "node busy" in line:
                holder.kill()  # the first run ends while the second waits
                holder.wait()
        assert run.wait(timeout=120) == 0, "".join(lines)
    finally:
        for proc in (run, holder):
            proc.kill()
            proc.wait()
    text = "".join(lines)
    assert re.search(rf"wirecheck: node busy: GPUs held by pid {holder.pid} \(pytest --profile h200-sxm-8 "
                     rf"\(acceptance\)\), user \S+, since 20\S+; waiting up to 120 s \(lock {re.escape(str(lock))}\)",
                     text), text
    assert "1 passed" in text
