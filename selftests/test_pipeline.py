"""The one measurement pipeline, without processes: the sweep runner on a fake worker group, the one
record writer (header and end) that the plugin and the multi-node job share, and the exit codes that
every command takes from wirecheck.core.exit_codes."""

from __future__ import annotations

import importlib
import json
import os
import signal
from types import SimpleNamespace

import pytest

from wirecheck.cli.protocol import commands

from wirecheck.core import exit_codes
from wirecheck.core import failures as F
from wirecheck.core.verdict import Verdict
from wirecheck.measure.collectives import MEASURE_WORKER
from wirecheck.measure.sweep import calls_per_size, run_sweep, sweep_context
from wirecheck.node.placement import Placement
from wirecheck.records.file import read_run
from wirecheck.records.run import RunWriter
from wirecheck.workers.launcher import WorkerCrash

PLACEMENT = Placement(klass="nvswitch", gpus=(0, 1))
SETTINGS = SimpleNamespace(warmup_iters=2, iters=5, graph_up_to=1024, graph_replays=3)


def _rank(rank: int, size: int, time_s: float, wrong: int = 0) -> dict:
    """One rank's `collective_worker.measure` record for one size."""
    return {"rank": rank, "op": "all_reduce", "world_size": 2, "nccl_version": "2.28.9",
            "results": [{"bytes": size, "requested_bytes": size, "time_s": time_s, "wrong": wrong,
                         "first_bad": 3 if wrong else None}]}


class FakeGroup:
    def __init__(self, fail_at: int | None = None):
        self.calls: list[tuple] = []
        self.fail_at = fail_at

    def run(self, worker, kwargs, timeout_s, what):
        self.calls.append((worker, kwargs, timeout_s, what))
        (size,) = kwargs["sizes"]
        if size == self.fail_at:
            raise WorkerCrash("rank 1 died", label=PLACEMENT.id, what=what,
                              failure=F.GroupFailure(label=PLACEMENT.id, what=what, phase=F.CALL,
                                                     root=F.RankFailure(rank=1, kind=F.DIED, at=1.0, summary="died"),
                                                     ranks=(), deadline_s=timeout_s, log_dir="/logs"))
        return [_rank(0, size, 1e-3), _rank(1, size, 2e-3, wrong=1 if size == 4096 else 0)]


class FakeGroups:
    def __init__(self, group: FakeGroup):
        self.group, self.failures, self.deadlines = group, [], []

    def shared(self, placement):
        return self.group

    def failed(self, placement, error):
        self.failures.append((placement, error))

    def collective_deadline(self, placement, op, size_bytes, calls):
        self.deadlines.append((size_bytes, calls))
        return 60.0


class Recorder:
    def __init__(self):
        self.lines = []

    def measurement(self, m):
        self.lines.append(m)


def test_a_sweep_measures_and_records_each_size_as_it_comes():
    groups, record = FakeGroups(FakeGroup()), Recorder()
    sweep = run_sweep(groups, PLACEMENT, "all_reduce", [2, 1024, 4096], SETTINGS, record=record,
                      context=sweep_context(PLACEMENT, "gloo", True))
    assert [r.bytes for r in sweep.results] == [1024, 4096]  # 2 B holds no float32 element: left out
    # one worker call per size, with the thresholds' iterations and a deadline for its calls
    assert [c[1]["sizes"] for c in groups.group.calls] == [[1024], [4096]]
    assert all(c[0] == MEASURE_WORKER and c[1]["graph_up_to"] == 1024 for c in groups.group.calls)
    assert groups.deadlines == [(1024, calls_per_size(SETTINGS, 1024)), (4096, calls_per_size(SETTINGS, 4096))]
    assert groups.group.calls[0][3] == "all_reduce at 1 KiB"
    # the slowest rank counts, and busbw is the collectives' own
    assert sweep.results[0].time_s == 2e-3 and sweep.results[0].busbw == pytest.approx(1024 / 2e-3)
    assert sweep.at(4096).wrong_by_rank == {0: 0, 1: 1} and sweep.nccl_version == "2.28.9"
    assert [m.what for m in record.lines] == ["all_reduce busbw at 1 KiB", "all_reduce busbw at 4 KiB"]
    first = record.lines[0]
    assert (first.kind, first.placement, first.unit) == ("collective", PLACEMENT.id, "GB/s")
    assert first.value == pytest.approx(1024 / 2e-3 / 1e9)
    assert first.details["rank_time_s"] == [1e-3, 2e-3] and first.details["placement_class"] == "nvswitch"
    assert first.details["backend"] == "gloo" and first.details["simulated"] is True
    assert sweep.error is None and groups.failures == []


def test_a_failed_size_ends_the_sweep_recorded_and_handed_back():
    groups, record = FakeGroups(FakeGroup(fail_at=4096)), Recorder()
    sweep = run_sweep(groups, PLACEMENT, "all_reduce", [1024, 4096, 8192], SETTINGS, graphs=False, record=record)
    assert [r.bytes for r in sweep.results] == [1024]  # what was measured before stays
    assert sweep.error == "rank 1 died" and sweep.failure.root.kind == F.DIED
    assert [p for p, _ in groups.failures] == [PLACEMENT]
    assert [c[1]["sizes"] for c in groups.group.calls] == [[1024], [4096]]  # 8192 never tried
    assert groups.group.calls[0][1]["graph_up_to"] is None  # eager only
    failed = record.lines[-1]
    assert failed.what == "all_reduce at 4 KiB" and failed.value is None
    assert failed.details["error"] == "rank 1 died" and failed.details["failure"]["label"] == PLACEMENT.id


def _node():
    topo = SimpleNamespace(fabric="nvswitch", index_groups=((0, 1),), matrix=lambda: [["X", "NV18"], ["NV18", "X"]],
                           gpus=[SimpleNamespace(index=i, name="H200", bus_id=f"0000:0{i}:00.0", memory_bytes=1,
                                                 active_links=18) for i in (0, 1)], nvlinks_up=lambda index: 18)
    return SimpleNamespace(simulated=True, simulation_source="h200-sxm-2.txt", unavailable=None, profile_name=None,
                           thresholds=SimpleNamespace(path="thresholds.yaml"), versions={"torch": "2"}, topology=topo,
                           hardware=None,
                           placements=[PLACEMENT])


def _plugin_record(tmp_path, exit_status: int):
    from pytest_wirecheck.reporting import RecordReporter

    config = SimpleNamespace(option=SimpleNamespace(wirecheck_json=str(tmp_path / "suite.jsonl"), training="selected"),
                             invocation_params=SimpleNamespace(dir=tmp_path),
                             hook=SimpleNamespace(pytest_wirecheck_header=lambda header: None,  # no site hooks
                                                  pytest_wirecheck_measurement=lambda measurement: None,
                                                  pytest_wirecheck_verdict=lambda verdict, test: None))
    reporter = RecordReporter(config)
    reporter.header(_node())
    reporter.verdict(Verdict("busbw", "busbw", "x", "pass", "ok"), "t::a")
    reporter.end(exit_status)
    reporter.file.close()
    return read_run(tmp_path / "suite.jsonl")


def _multinode_record(tmp_path, failed: bool):
    from wirecheck.fleet.multinode import Judge

    ranks = [{"rank": r, "node": f"node{r}", "host": "h", "group_rank": r, "local_rank": 0, "pid": 1, "device": "cpu",
              "network": None} for r in (0, 1)]
    job = SimpleNamespace(simulated=True, thresholds=SimpleNamespace(path="thresholds.yaml"), ranks=ranks,
                          world=2, nodes=["node0", "node1"], node_ranks={"node0": [0], "node1": [1]}, node="node0",
                          ctx=SimpleNamespace(backend="gloo"), ops=["all_reduce"], sizes=[1024], started=0.0,
                          line_rate=lambda nodes: (None, "simulation"))
    judge = Judge(job, tmp_path / "network.jsonl")
    judge.header()
    judge.verdict(Verdict("busbw", "busbw", "x", "fail" if failed else "pass", "m"), "multinode::x")
    code = judge.end()
    return code, read_run(tmp_path / "network.jsonl")


def test_the_plugin_and_the_multinode_job_write_the_same_header_and_end(tmp_path, capsys):
    suite = _plugin_record(tmp_path, exit_codes.SIMULATED)
    code, network = _multinode_record(tmp_path, failed=False)
    assert [k for k in network.run if k != "multinode"] == list(suite.run)
    assert list(network.end) == list(suite.end)
    assert suite.run["gpus"][1] == {"index": 1, "name": "H200", "bus_id": "0000:01:00.0", "memory_bytes": 1,
                                    "nvlinks_active": 18, "uuid": None, "serial": None}  # a fake without either
    assert suite.run["placements"] == [{"id": "nvswitch-2gpu-0.1", "class": "nvswitch", "gpus": [0, 1]}]
    assert network.run["placements"] == [{"id": "network-2node-2gpu", "class": "network", "gpus": [0, 1]}]
    assert network.run["multinode"]["nodes"] == ["node0", "node1"]
    assert suite.end["verdicts"] == {"pass": 1} == network.end["verdicts"]
    # A simulation that failed nothing exits SIMULATED in the multi-node job as in the suite, never 0.
    assert code == exit_codes.SIMULATED == network.end["exit_status"] == suite.end["exit_status"]
    assert network.end["status"] == suite.end["status"] == "complete" and network.simulated and suite.simulated
    assert "SIMULATION" in capsys.readouterr().out


def test_a_failed_multinode_verdict_exits_failed(tmp_path, capsys):
    code, network = _multinode_record(tmp_path, failed=True)
    assert code == exit_codes.FAILED == network.end["exit_status"]
    assert "wirecheck multinode: FAILED: 1 failed, 0 passed, 0 skipped" in capsys.readouterr().out


def test_an_interrupted_suite_run_says_so_in_its_end(tmp_path):
    assert _plugin_record(tmp_path, exit_codes.INTERRUPTED).end["status"] == "interrupted"


def test_the_writer_counts_verdicts_and_keeps_the_wall_time(tmp_path):
    writer = RunWriter(tmp_path / "r.jsonl", started=0.0)
    writer.header({"simulated": False})
    for outcome in ("pass", "fail", "pass"):
        writer.verdict(Verdict("c", "c", "x", outcome, "m"), None)
    writer.end("complete", exit_codes.FAILED, {"failed": 1})
    writer.close()
    end = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[-1])
    assert end["verdicts"] == {"pass": 2, "fail": 1} and end["tests"] == {"failed": 1} and end["wall_s"] > 0


@pytest.mark.parametrize(("failed", "simulated", "code"), [
    (False, False, 0), (False, True, 10), (True, False, 1), (True, True, 1),
])
def test_the_verdict_rule(failed, simulated, code):
    assert exit_codes.verdict(failed=failed, simulated=simulated) == code


# Every `wirecheck` subcommand (wirecheck.cli.protocol) and the modules beside them; but node-state, whose
# codes are node-problem-detector's protocol (0 healthy, 1 unhealthy, 2 unknown), not a run's, and fleet, whose
# subcommands hand their work and its exit code to the fleet modules listed here (report, launch, inventory,
# diagnose).
@pytest.mark.parametrize("module", [
    *(m.__name__ for m in commands() if m.NAME not in ("node-state", "fleet")), "wirecheck.fleet.judging",
    "wirecheck.fleet.report", "wirecheck.fleet.launch", "wirecheck.fleet.inventory", "wirecheck.fleet.diagnose",
    "wirecheck.fleet.multinode", "wirecheck.nccl.tests", "pytest_wirecheck.reporting",
])
def test_every_command_takes_its_exit_codes_from_one_module(module):
    mod = importlib.import_module(module)
    assert exit_codes in vars(mod).values(), f"{module} does not use wirecheck.core.exit_codes"
    own = [name for name in vars(mod) if name.startswith("EXIT_") and name != "EXIT_CODES"]
    assert own == [], f"{module} defines exit codes of its own: {own}"


SIMULATED_PASS_TAIL = [
    "E1201 12:49:44.000000 28684 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 10) "
    "local_rank: 0 (pid: 28712) of binary: .venv/bin/python\n",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
    "wirecheck.fleet.multinode FAILED\n",
    "Failures:\n", "  <NO_OTHER_FAILURES>\n",
    "Root Cause (first observed failure):\n", "[0]:\n",
    "  rank      : 0 (local_rank: 0)\n",
    "  exitcode  : 10 (pid: 28712) \n",
]


def test_the_launcher_tells_a_simulated_pass_from_a_failed_rank():
    from wirecheck.fleet.launch import simulated_pass

    assert simulated_pass(SIMULATED_PASS_TAIL)
    failed = [line.replace("exitcode  : 10", "exitcode  : 1") for line in SIMULATED_PASS_TAIL]
    assert not simulated_pass(failed)
    assert not simulated_pass(SIMULATED_PASS_TAIL + ["  exitcode  : 1 (pid: 28713) \n"])  # one rank failed
    assert not simulated_pass(SIMULATED_PASS_TAIL[3:])  # no ChildFailedError: torchrun did not fail


def test_a_rank_that_raises_leaves_torch_elastics_error_file(tmp_path, monkeypatch):
    from wirecheck.fleet import multinode

    def broken(args, stopper=None):
        raise RuntimeError("rank 3 broke on purpose")

    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    monkeypatch.setattr(multinode, "run", broken)
    with pytest.raises(RuntimeError, match="rank 3 broke on purpose"):
        multinode.main(["--simulate"])
    message = json.loads(error_file.read_text())["message"]
    assert message["message"] == "RuntimeError: rank 3 broke on purpose"
    assert "in broken" in message["extraInfo"]["py_callstack"]
    # the stop signals are this process's again: its Ctrl-C, and its later subprocesses' SIGTERM
    assert not {signal.SIGINT, signal.SIGTERM, signal.SIGHUP} & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_rendezvous_that_never_completes_is_stopped_and_said(monkeypatch, capsys):
    """A port another service holds (here a listener that never answers) held torchrun forever, with no word: the
    step is stopped once no worker has started by --join-timeout and the grace, and says what to check (exit 2)."""
    import socket
    import time
    from types import SimpleNamespace

    from wirecheck.fleet import launch

    monkeypatch.setattr(launch, "RENDEZVOUS_GRACE_S", 3.0)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(8)
        port = held.getsockname()[1]
        args = SimpleNamespace(nnodes=1, nproc_per_node=1, rdzv_endpoint=f"127.0.0.1:{port}", rdzv_id="held",
                               join_timeout=2, dry_run=False, multinode_args=["--", "--simulate", "--node-name", "a"])
        start = time.monotonic()
        code = launch.run(args)
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - start < 60, err
    assert f"the rendezvous at 127.0.0.1:{port} did not complete in" in err and "no worker started" in err, err


def test_a_tool_that_does_not_answer_is_named_never_waited_on(monkeypatch, tmp_path):
    """nvidia-smi -L on a wedged driver held the multinode step before torchrun started, even with --dry-run."""
    from wirecheck.fleet import launch

    slow = tmp_path / "nvidia-smi"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(launch, "TOOL_TIMEOUT_S", 1)
    with pytest.raises(launch.LaunchError, match=r"`nvidia-smi -L` did not answer in 1 s"):
        launch._gpu_count()


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--nnodes", "0", "argument --nnodes: 0 nodes: at least 1 is needed"),
    ("--join-timeout", "-5", "argument --join-timeout: -5 seconds: at least 1 is needed"),
    ("--nproc-per-node", "x", "'x' is not a whole number of GPUs")])
def test_a_count_or_timeout_below_one_is_refused_by_name(capsys, option, value, said):
    """--nnodes 0 read as "not given" and a negative --join-timeout was passed to torchrun."""
    from wirecheck.cli.fleet.multinode import main as multinode

    with pytest.raises(SystemExit) as stopped:
        multinode([f"{option}={value}", "--rdzv-endpoint", "h:1", "--rdzv-id", "1", "--dry-run"])
    assert stopped.value.code == 2 and said in capsys.readouterr().err
