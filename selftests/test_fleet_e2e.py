"""Four simulated nodes on this machine, end to end, one of them slow on purpose (CI's fleet case).

1. Each node validates itself: the real suite (tests/) in simulation, one record per node in a shared
   results directory (the healthy nodes' runs are conftest.py's shared healthy_busbw_runs).
   node2's collective worker is the test-only `fleet_faults:slow_collective`.
2. Multi-node collectives and the pair schedule: four torchrun agents with c10d rendezvous on
   localhost, each its own CPU rank (gloo), started through `wirecheck fleet multinode`; node2's
   agent uses the test-only slow worker functions.
3. `wirecheck fleet report` on the directory names node2 by the fleet rule and by the pair schedule,
   and nobody else.
Sizes and iterations are the thresholds file's `simulated` ones (4 MiB, 5 calls): about a minute of
CPU on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import PROJECT, finish_run, pythonpath, records, start_busbw_run
from wirecheck.cli.fleet.report import main as report

N = 4
NODES = [f"node{k}" for k in range(N)]
SLOW = "node2"
TIMEOUT_S = 420
SLOW_CONFTEST = '''
import pytest


@pytest.fixture
def collective_worker():
    return "fleet_faults:slow_collective"  # test-only: a delay before every collective of this node
'''


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=pythonpath())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _multinode(results: Path) -> dict[str, subprocess.CompletedProcess]:
    port = _free_port()
    procs = {}
    for k in range(N):
        name = f"node{k}"
        slow = ["--collective-worker", "fleet_faults:slow_collective", "--pair-worker", "fleet_faults:slow_pair"]
        cmd = [sys.executable, "-m", "wirecheck.cli.main", "fleet", "multinode", "--nnodes", str(N), "--nproc-per-node", "1",
               "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "ci-fleet", "--join-timeout", "120", "--",
               "--simulate", "--node-name", name, "--ops", "all_reduce",
               f"--wirecheck-json={results / 'network-ci.jsonl'}", *(slow if name == SLOW else [])]
        procs[name] = subprocess.Popen(cmd, cwd=PROJECT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=TIMEOUT_S)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.fixture(scope="module")
def simulated_fleet(tmp_path_factory, request):
    """Each node's own validation run into one results directory, then the multi-node run. The healthy
    nodes' runs are conftest.py's healthy_busbw_runs (the same run other files need, made once per
    pytest run), their records copied in as node0, node1, node3; the slow node's run starts first and goes on beside
    them: it spends most of its time asleep in its delays."""
    root = tmp_path_factory.mktemp("fleet")
    results = root / "results"
    results.mkdir()
    slow = start_busbw_run(root / SLOW, results / f"{SLOW}.jsonl", tests_conftest=SLOW_CONFTEST)
    healthy = request.getfixturevalue("healthy_busbw_runs")
    nodes = {SLOW: finish_run(slow, timeout=TIMEOUT_S)}
    for name, (run, record) in zip((n for n in NODES if n != SLOW), healthy):
        shutil.copy(record, results / f"{name}.jsonl")
        nodes[name] = run
    network = _multinode(results)
    return results, dict(sorted(nodes.items())), network


def test_every_node_validated_itself_into_the_shared_directory(simulated_fleet):
    results, nodes, _ = simulated_fleet
    for name, run in nodes.items():
        assert run.ret == 10, f"{name}:\n{(run.stdout.str() + run.stderr.str())[-3000:]}"  # simulated: 10, never 0; node2 is slow, yet above its gloo floor
        lines = records(results / f"{name}.jsonl")
        assert lines[0]["type"] == "run" and lines[0]["simulated"] and lines[-1]["status"] == "complete"


def test_collectives_across_four_nodes_through_torchrun(simulated_fleet):
    results, _, network = simulated_fleet
    rank0 = next(run for run in network.values() if "wirecheck multinode:" in run.stdout)
    assert "4 nodes (node0, node1, node2, node3), 4 ranks, gloo" in rank0.stdout, rank0.stdout + rank0.stderr[-3000:]
    lines = records(results / "network-ci.jsonl")
    head = lines[0]
    assert head["multinode"]["nodes"] == ["node0", "node1", "node2", "node3"] and head["simulated"]
    assert {r["node"] for r in head["multinode"]["ranks"]} == {"node0", "node1", "node2", "node3"}
    verdicts = {(v["check"], v["where"]): v for v in lines if v["type"] == "verdict"}
    whole = "network-4node-4gpu"
    assert verdicts[("collective_correct", whole)]["outcome"] == "pass"
    assert verdicts[("busbw", whole)]["outcome"] == "pass"
    assert "collectives.simulated_floors.all_reduce" in verdicts[("busbw", whole)]["yaml_path"]
    pairs = [m for m in lines if m["type"] == "measurement" and m["kind"] == "pair"]
    assert len(pairs) == 6 and {m["details"]["shift"] for m in pairs} == {1, 2}
    assert all(verdicts[("collective_correct", m["placement"])]["outcome"] == "pass" for m in pairs), \
        "every rank's result checked, element by element, in every pair"
    assert lines[-1]["type"] == "end" and lines[-1]["status"] == "complete"
    # Every agent leaves with rank 0's verdict: the pair schedule failed node2.
    assert {run.returncode for run in network.values()} == {1}, {n: r.stderr[-2000:] for n, r in network.items()}


def test_the_slow_node_is_named_by_the_fleet_rule_and_the_pair_schedule(simulated_fleet, capsys, tmp_path):
    results, _, _ = simulated_fleet
    code = report([str(results), "--expect", str(N), "--json", str(tmp_path / "fleet.json"),
                   "--html", str(tmp_path / "fleet.html")])
    out = capsys.readouterr().out
    assert code == 1, out
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert data["named"] == {"fleet_rule": [SLOW], "pair_schedule": [SLOW], "slow_links": [], "gpus": []}, out
    failed = [n["node"] for n in data["nodes"] if not n["ok"]]
    assert failed == [SLOW], out
    slow_row = next(line for line in out.splitlines() if line.startswith(SLOW + " "))
    assert slow_row.split()[-2:] == ["SLOW", "FAIL"]
    assert "SIMULATION" in out.splitlines()[-3] + out.splitlines()[-1]
    assert (tmp_path / "fleet.html").read_text().count("<img") == 3  # overview, the named figure, the pair matrix


def test_a_rendezvous_nobody_else_joins_is_explained(tmp_path):
    port = _free_port()
    run = subprocess.run([sys.executable, "-m", "wirecheck.cli.main", "fleet", "multinode", "--nnodes", "2", "--rdzv-endpoint",
                          f"127.0.0.1:{port}", "--rdzv-id", "alone", "--join-timeout", "3", "--", "--simulate"],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 2
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"wirecheck fleet multinode: the rendezvous at 127.0.0.1:{port} failed (RendezvousTimeoutError)")
    assert "same --rdzv-endpoint and --rdzv-id" in last


# torchrun's stderr on an agent whose store host left first, after its worker failed a verdict
# (CI, 2026-12-01; paths shortened): the job ran, so this is no rendezvous problem.
SHUTDOWN_WARNING_TAIL = [
    "E1201 00:58:51.238000 16659 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
    "local_rank: 0 (pid: 16671) of binary: .venv/bin/python\n",
    "W1201 00:58:51.315000 16659 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1298] The node "
    "'localhost_16659_0' has failed to shutdown the rendezvous 'ci-fleet' due to an error of type "
    "RendezvousConnectionError.\n",
    "Traceback (most recent call last):\n",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
    "wirecheck.fleet.multinode FAILED\n",
]


def test_a_rendezvous_warning_at_shutdown_is_not_a_rendezvous_failure():
    from wirecheck.fleet.launch import rendezvous_problem

    assert rendezvous_problem(SHUTDOWN_WARNING_TAIL, "127.0.0.1:43823") is None
    # without the ChildFailedError (a clean exit), the shutdown warning alone is not one either
    assert rendezvous_problem(SHUTDOWN_WARNING_TAIL[:2], "127.0.0.1:43823") is None
    # a rendezvous that never formed still is
    timeout = ["torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: \n"]
    assert "failed (RendezvousTimeoutError)" in rendezvous_problem(timeout, "127.0.0.1:43823")


def test_only_torchrun_s_traceback_for_the_signal_it_was_sent_is_left_out():
    from wirecheck.fleet.launch import without_signal_traceback

    signal_tb = ["Traceback (most recent call last):\n", '  File "run.py", line 994, in <module>\n', "    main()\n",
                 "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1189 got signal: 15\n"]
    other_tb = ["Traceback (most recent call last):\n", '  File "x.py", line 1\n', "RuntimeError: NCCL error\n"]
    notice = ["W1201 api.py:739] Received 15 death signal, shutting down workers\n"]
    assert without_signal_traceback(notice + signal_tb) == notice
    assert without_signal_traceback(other_tb + signal_tb + notice) == other_tb + notice  # a real error stays
    assert without_signal_traceback(signal_tb[:2]) == signal_tb[:2]  # cut short: kept as it came


def test_outside_torchrun_the_fix_is_named(tmp_path):
    run = subprocess.run([sys.executable, "-m", "wirecheck.fleet.multinode", "--simulate"], cwd=tmp_path,
                         env={k: v for k, v in _env().items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")},
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 2
    assert "not set: run this under torchrun" in run.stderr and "--rdzv-backend c10d" in run.stderr
    bare = subprocess.run([sys.executable, "-m", "wirecheck.cli.main", "fleet", "multinode", "--rdzv-id", "x"], cwd=tmp_path,
                          env={k: v for k, v in _env().items() if not k.startswith("SLURM_")}, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert bare.returncode == 2 and "--nnodes: not given and $SLURM_JOB_NUM_NODES is not set" in bare.stderr


def test_a_rank_that_breaks_ends_the_job_and_its_record_says_so(tmp_path, capsys):
    """node1's measurement raises: rank 0's collective fails (peer gone), rank 0 records the failure and
    ends its record, and every agent exits non-zero instead of hanging."""
    port = _free_port()
    record = tmp_path / "results" / "network.jsonl"
    procs = []
    for k in range(2):
        broken = ["--collective-worker", "fleet_faults:broken_collective"] if k == 1 else []
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
             "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "broken", "-m", "wirecheck.fleet.multinode",
             "--simulate", "--node-name", f"node{k}", "--ops", "all_reduce", f"--wirecheck-json={record}", *broken],
            cwd=PROJECT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs
    assert "fleet_faults: rank 1 broke on purpose" in outs[1]
    # torch elastic's error file: torchrun's own summary names the failed rank's exception
    assert "RuntimeError: fleet_faults: rank 1 broke on purpose" in outs[1].split("Root Cause")[-1], outs[1]
    lines = records(record)
    failed = [v for v in lines if v["type"] == "verdict" and v["outcome"] == "fail"]
    assert len(failed) == 1 and failed[0]["check"] == "measurement_completed"
    # the failure, then NCCL RAS's reading: one problem a line
    assert failed[0]["message"].startswith("all_reduce across 2 nodes on network-2node-2gpu: \n  all_reduce across 2 "
                                           "nodes stopped on rank 0 (node0)")
    assert failed[0]["details"]["problems"][0].startswith("all_reduce across 2 nodes stopped on rank 0 (node0)")
    # each rank asked for NCCL RAS's evidence before leaving: gloo has none, and the record and the logs say so
    assert failed[0]["inputs"]["ras"]["absent"] == "not asked: the gloo backend has no NCCL RAS"
    assert failed[0]["details"]["problems"][-1] == "NCCL RAS not read: not asked: the gloo backend has no NCCL RAS"
    for k in range(2):
        assert f"rank {k} (node{k}): NCCL RAS not read: not asked: the gloo backend" in outs[k], outs[k]
    assert lines[-1]["type"] == "end" and lines[-1]["status"] == "error"
    assert report([str(record.parent)]) == 1
    out = capsys.readouterr().out
    assert "network run network.jsonl: 2 nodes, the multi-node run ended with status error" in out


def test_sigterm_mid_job_ends_the_record_naming_the_signal(tmp_path, capsys):
    """Slurm's time limit sends SIGTERM: torchrun passes it to its rank, whose record ends naming the
    signal with the exit code 128+15 the rank then returns, and keeps every size measured so far.
    node1 is slowed (0.3 s before each collective) so the job is still measuring when the signal comes."""
    import signal
    import time

    port = _free_port()
    record = tmp_path / "network.jsonl"
    procs = []
    for k in range(2):
        slow = ["--collective-worker", "fleet_faults:slow_collective"] if k == 1 else []
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "wirecheck.cli.main", "fleet", "multinode", "--nnodes", "2", "--nproc-per-node", "1",
             "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "stopped", "--", "--simulate", "--node-name", f"node{k}",
             f"--wirecheck-json={record}", *slow],
            cwd=PROJECT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(line.get("type") == "measurement" for line in _lines(record)):
        time.sleep(0.2)
    # c10d gives rank 0 (the record's writer) to whichever agent joined first
    writer = next(r["node"] for r in _lines(record)[0]["multinode"]["ranks"] if r["rank"] == 0)
    stopped = procs[int(writer[-1])]
    stopped.send_signal(signal.SIGTERM)  # to that node's launcher only: it, then torchrun, pass it on to the rank
    outs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    lines = _lines(record)
    assert any(line["type"] == "measurement" for line in lines), outs
    end = lines[-1]
    assert end["type"] == "end", outs
    assert (end["status"], end["signal"], end["exit_status"]) == ("interrupted", "SIGTERM", 143), outs
    out = outs[procs.index(stopped)]
    assert "wirecheck multinode: stopped by SIGTERM: the run is incomplete" in out, out
    assert stopped.returncode == 143, out
    assert "wirecheck fleet multinode: stopped by SIGTERM (torchrun exited" in out, out
    assert "Traceback" not in out and "SignalException" not in out, out  # torchrun's way out, not an error
    assert report([str(record.parent)]) == 1  # a fleet whose network run was cut is never accepted
    assert "was stopped by SIGTERM" in capsys.readouterr().out


def _lines(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]
