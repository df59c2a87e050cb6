"""WorkerGroup on CPU/gloo: calls, environment, and every way a rank can fail.

Each failing scenario needs a group of its own (a hang or a crash kills the group), and a rank costs
an interpreter start plus `import torch` (2-3 s on two cores), so healthy checks share one group.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from wirecheck.core import failures
from wirecheck.workers.deadlines import DeadlineRule, collective_deadline
from wirecheck.workers.launcher import (
    WorkerCallError,
    WorkerCrash,
    WorkerGroup,
    WorkerGroupDead,
    WorkerTimeout,
    describe_exit,
)

FAULTY = "selftests.faulty_workers"
PAIR_GPUS = (3, 5)
PAIR_ENV = {"WIRECHECK_SELFTEST_EXTRA": "yes"}
PARENT_ENV = {"NCCL_NVLS_ENABLE": "0", "WIRECHECK_SELFTEST_PARENT": "passed-through"}


def gone(pid: int) -> bool:
    """True when pid no longer runs (a zombie waiting for a non-reaping init counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_gone(pids: list[int], timeout_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in pids if not gone(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if not gone(p)]


PROBE_MODULE = "wirecheck_selftest_probe"


@pytest.fixture(scope="module")
def pair_state(tmp_path_factory):
    """Parent-side setup made *before* each spawn: the GPU machines' NCCL switches in the environment,
    and a module only importable through the parent's sys.path."""
    probe_dir = tmp_path_factory.mktemp("probe")
    (probe_dir / f"{PROBE_MODULE}.py").write_text("def answer(ctx):\n    return 40 + ctx.rank\n")
    state = {"group": None}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in PARENT_ENV.items():
            mp.setenv(name, value)
        mp.syspath_prepend(str(probe_dir))
        state["logs"] = tmp_path_factory.mktemp("pair-logs")
        state["new"] = lambda: WorkerGroup("selftest-pair", 2, "gloo", gpus=PAIR_GPUS, env=PAIR_ENV,
                                           log_dir=state["logs"])
        yield state
        if state["group"] is not None:
            state["group"].close()


@pytest.fixture
def pair(pair_state) -> WorkerGroup:
    """A healthy 2-rank group shared by the tests that leave it healthy (a rank costs ~3 s of CPU to
    start); started again if a test closed it."""
    if pair_state["group"] is None or not pair_state["group"].alive:
        pair_state["group"] = pair_state["new"]()
    return pair_state["group"]


def whoami(group: WorkerGroup, *names: str) -> list[dict]:
    return group.run(f"{FAULTY}:whoami", {"env_names": names}, timeout_s=30)


def test_each_rank_gets_its_context(pair):
    ranks = whoami(pair)
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["local_rank"] for r in ranks] == [0, 1]
    assert [r["dist_rank"] for r in ranks] == [0, 1]
    assert all(r["dist_initialized"] and r["is_rank_context"] for r in ranks)
    assert {(r["world_size"], r["backend"], r["device"], r["label"]) for r in ranks} == {
        (2, "gloo", "cpu", "selftest-pair")
    }
    assert [r["pid"] for r in ranks] == pair.pids
    assert [i["rank"] for i in pair.info] == [0, 1]


def test_ranks_talk_to_each_other(pair):
    assert pair.run(f"{FAULTY}:all_reduce_ranks", {}, timeout_s=30) == [3.0, 3.0]


def test_parent_environment_passes_through(pair):
    for r in whoami(pair, *PARENT_ENV, "PATH"):
        assert r["env"] == {**PARENT_ENV, "PATH": os.environ["PATH"]}


def test_extra_env_cuda_visible_devices_and_rank_variables(pair):
    names = ("WIRECHECK_SELFTEST_EXTRA", "CUDA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK", "WORLD_SIZE",
             "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    envs = [r["env"] for r in whoami(pair, *names)]
    for rank, env in enumerate(envs):
        assert env["WIRECHECK_SELFTEST_EXTRA"] == "yes"
        assert env["CUDA_VISIBLE_DEVICES"] == "3,5"  # the same list for every rank
        assert (env["RANK"], env["LOCAL_RANK"]) == (str(rank), str(rank))
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["MASTER_ADDR"]) == ("2", "2", "127.0.0.1")
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]


def test_exception_in_a_worker_comes_back_with_its_traceback(pair):
    with pytest.raises(WorkerCallError) as info:
        pair.run(f"{FAULTY}:raise_on", {"rank": 1}, timeout_s=30, what="raise-test")
    err = info.value
    assert err.rank == 1 and err.label == "selftest-pair" and err.what == "raise-test"
    assert "raise-test on selftest-pair: rank 1 raised ValueError: boom from rank 1" in str(err)
    assert "_nested_failure" in str(err) and "_nested_failure" in err.traceback
    assert err.partial == {0: 0}
    # Every rank replied, so the group is still consistent and usable.
    assert pair.alive
    assert pair.run(f"{FAULTY}:all_reduce_ranks", {}, timeout_s=30) == [3.0, 3.0]


def test_unsendable_return_value_is_an_error(pair):
    with pytest.raises(WorkerCallError, match="could not be sent back"):
        pair.run(f"{FAULTY}:unpicklable", {}, timeout_s=30)
    assert pair.alive


def test_unknown_worker_function(pair):
    with pytest.raises(ValueError, match="package.module:function"):
        pair.run("no_colon_here", {}, timeout_s=30)
    with pytest.raises(WorkerCallError, match="ModuleNotFoundError"):
        pair.run("wirecheck_no_such_module:fn", {}, timeout_s=30)
    with pytest.raises(ValueError, match="arguments cannot be sent"):
        pair.run(f"{FAULTY}:whoami", {"env_names": lambda: None}, timeout_s=30)
    assert pair.alive
    assert pair.run(f"{FAULTY}:all_reduce_ranks", {}, timeout_s=30) == [3.0, 3.0]


def test_invalid_arguments_are_refused_before_spawning():
    with pytest.raises(ValueError, match="one GPU per rank"):
        WorkerGroup("bad", 2, "gloo", gpus=(0,))
    with pytest.raises(ValueError, match="backend"):
        WorkerGroup("bad", 2, "mpi")


def test_hang_is_reported_with_the_stack_and_a_new_group_works(tmp_path):
    group = WorkerGroup("selftest-hang", 2, "gloo", log_dir=tmp_path)
    pids = group.pids
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        group.run(f"{FAULTY}:hang", {"rank": 1}, timeout_s=5, what="hang-test")
    elapsed = time.monotonic() - t0
    assert 5 <= elapsed < 30  # the deadline, then the stacks and the kill: seconds, longer on a loaded machine
    err = info.value
    message = str(err)
    assert message.startswith("hang-test on selftest-hang did not finish within 5s; rank stacks:\n")
    assert "replied: [0]; no reply: [1]" in message
    assert "in hang_forever_here" in err.stacks[1] and "in hang" in message
    assert err.replied == [0] and err.partial == {0: 0}
    assert not group.alive
    assert wait_gone(pids) == []
    with pytest.raises(WorkerGroupDead, match="start a new WorkerGroup"):
        group.run(f"{FAULTY}:whoami", {}, timeout_s=5)
    group.close()

    with WorkerGroup("selftest-hang", 2, "gloo", log_dir=tmp_path) as fresh:
        assert fresh.run(f"{FAULTY}:all_reduce_ranks", {}, timeout_s=30) == [3.0, 3.0]


@pytest.mark.parametrize(("how", "world_size", "join_group", "returncode", "described"), [
    ("exit", 2, True, 3, "exit code 3"),
    # One rank is enough to see the signal and faulthandler's report (saves a torch start-up), and
    # this group doubles as the check of a group that leaves the process group to its functions.
    ("segv", 1, False, -signal.SIGSEGV, "killed by SIGSEGV"),
])
def test_dying_rank_is_reported_at_once_with_its_stderr(how, world_size, join_group, returncode,
                                                       described, tmp_path):
    group = WorkerGroup("selftest-die", world_size, "gloo", join_process_group=join_group, log_dir=tmp_path)
    if not join_group:
        (r,) = whoami(group, "RANK", "WORLD_SIZE", "MASTER_PORT")
        assert not r["dist_initialized"] and r["device"] == "cpu" and r["is_rank_context"]
        assert r["env"]["RANK"] == "0" and r["env"]["WORLD_SIZE"] == "1" and r["env"]["MASTER_PORT"]
    pids = group.pids
    rank = world_size - 1
    t0 = time.monotonic()
    with pytest.raises(WorkerCrash) as info:
        group.run(f"{FAULTY}:die", {"rank": rank, "how": how}, timeout_s=60, what="die-test")
    assert time.monotonic() - t0 < 30  # the other rank sleeps 60 s: we did not wait for it
    err = info.value
    assert err.rank == rank and err.returncode == returncode
    assert f"die-test on selftest-die: rank {rank} (pid {pids[rank]}) died during the call: {described}" \
        in str(err)
    assert "about to die on purpose" in err.stderr_tail and "about to die on purpose" in str(err)
    if how == "segv":
        assert "Segmentation fault" in err.stderr_tail and "in die" in err.stderr_tail  # faulthandler
    assert not group.alive
    assert wait_gone(pids) == []  # rank 0 was killed too
    group.close()


def test_raise_while_others_wait_in_a_collective(tmp_path):
    group = WorkerGroup("selftest-raise-stuck", 2, "gloo", log_dir=tmp_path)
    group.error_grace_s = 1.0
    t0 = time.monotonic()
    with pytest.raises(WorkerCallError) as info:
        group.run(f"{FAULTY}:raise_then_barrier", {"rank": 1}, timeout_s=60)
    assert time.monotonic() - t0 < 30  # not the call's 60 s: the grace after the error, then the kill
    err = info.value
    assert err.rank == 1 and "boom from rank 1" in str(err)
    assert "ranks [0] did not reply" in str(err) and "raise_then_barrier" in str(err)  # rank 0's stack
    assert not group.alive
    group.close()


def test_start_failure_is_reported_not_hung(tmp_path):
    # No such devices on any machine: set_device fails in every rank before the process group forms.
    with pytest.raises(WorkerCallError, match=r"start of 1 nccl worker\(s\) on selftest-nogpu: rank 0 raised") as info:
        WorkerGroup("selftest-nogpu", 1, "nccl", gpus=(97,), start_timeout_s=60, log_dir=tmp_path)
    failure = info.value.failure
    assert failure.phase == failures.START and (Path(failure.log_dir) / "rank0.log").is_file()  # kept


def test_workers_import_from_the_parents_sys_path(pair):
    assert pair.run(f"{PROBE_MODULE}:answer", {}, timeout_s=30) == [40, 41]


def test_close_leaves_no_processes(pair):
    grandchildren = pair.run(f"{FAULTY}:spawn_grandchild", {}, timeout_s=30)
    pids = pair.pids
    pair.close()
    assert not pair.alive
    assert wait_gone(pids + grandchildren) == []
    with pytest.raises(WorkerGroupDead):
        pair.run(f"{FAULTY}:whoami", {}, timeout_s=5)
    pair.close()  # twice is fine


def test_describe_exit():
    assert describe_exit(0) == "exit code 0"
    assert describe_exit(-signal.SIGKILL).startswith("killed by SIGKILL (also what the kernel's OOM killer")


def test_the_earliest_failure_is_the_root_cause_not_the_lowest_rank(pair):
    with pytest.raises(WorkerCallError) as info:
        # Each rank's clock starts when it gets the call: on a loaded machine one rank got it 57 ms after the
        # other, and a 0.3-s delay then left 0.243 s between their failures. 1 s leaves room for that.
        pair.run(f"{FAULTY}:raise_in_order", {"first": 1, "delay_s": 1.0}, timeout_s=30, what="order-test")
    failure = info.value.failure
    assert info.value.rank == 1 and failure.root.rank == 1 and failure.kind == failures.RAISED
    assert [(r.rank, r.kind) for r in failure.ranks] == [(1, "raised"), (0, "raised")]
    assert failure.ranks[1].at - failure.root.at >= 0.25
    message = str(info.value)
    assert message.startswith("order-test on selftest-pair: rank 1 raised ValueError: rank 1 fails first\n")
    assert re.search(r"\nroot cause: the earliest failure; after it: rank 0 raised \(ValueError: rank 0 fails later\) "
                     r"\+\d\.\d\ds\n", message), message
    assert failure.root.exception == "builtins.ValueError" and not failure.out_of_memory
    assert pair.alive  # both answered: still in step


def test_a_healthy_group_leaves_no_logs_a_failed_one_keeps_them(pair_state, tmp_path):
    with WorkerGroup("selftest-logs", 1, "gloo", log_dir=tmp_path) as healthy:
        healthy.run(f"{FAULTY}:whoami", {}, timeout_s=30)
    assert not any(tmp_path.iterdir())
    pair = pair_state["group"] if pair_state["group"] is not None and pair_state["group"].alive else pair_state["new"]()
    with pytest.raises(WorkerCallError) as info:
        pair.run(f"{FAULTY}:raise_on", {"rank": 0}, timeout_s=30)
    log_dir = Path(info.value.failure.log_dir)
    assert f"logs of every rank kept in {log_dir}" in str(info.value)
    assert info.value.failure.root.log == str(log_dir / "rank0.log")
    pair.close()
    pair_state["group"] = None
    assert sorted(p.name for p in log_dir.iterdir()) == ["rank0.log", "rank1.log"]  # kept after close


def test_a_rank_killed_mid_all_reduce_is_the_root_cause_in_seconds_and_a_new_group_works(tmp_path):
    group = WorkerGroup("selftest-kill", 2, "gloo", log_dir=tmp_path)
    pids = group.pids
    t0 = time.monotonic()
    with pytest.raises(WorkerCrash) as info:
        group.run(f"{FAULTY}:all_reduce_until_killed", {"victim": 1, "after_s": 0.5}, timeout_s=60,
                  what="all_reduce at 1 MiB")
    elapsed = time.monotonic() - t0
    assert elapsed < 30, elapsed  # seen at once, not after the 60 s deadline (a loaded machine takes seconds)
    failure = info.value.failure
    # Rank 0 notices the closed connection and raises too, after rank 1 died: rank 1 is the cause.
    assert (failure.root.rank, failure.root.kind, failure.root.returncode) == (1, "died", -signal.SIGKILL)
    assert failure.phase == failures.CALL
    # rank 0 then raises (gloo sees the closed connection) or, had it not noticed, hangs: never the cause
    assert [r.rank for r in failure.ranks] == [1, 0] and failure.ranks[1].kind in (failures.RAISED, failures.HUNG)
    message = str(info.value)
    assert message.startswith(f"all_reduce at 1 MiB on selftest-kill: rank 1 (pid {pids[1]}) died during the call: "
                              "killed by SIGKILL")
    assert "SIGKILL now, mid all_reduce" in message  # its stderr tail
    assert f"logs of every rank kept in {failure.log_dir}" in message and failure.log_dir.startswith(str(tmp_path))
    assert wait_gone(pids) == []
    group.close()
    assert (Path(failure.log_dir) / "rank1.log").exists()  # kept after close
    with WorkerGroup("selftest-kill", 2, "gloo", log_dir=tmp_path) as fresh:
        assert fresh.run(f"{FAULTY}:all_reduce_ranks", {}, timeout_s=30) == [3.0, 3.0]


def test_a_hung_small_collective_is_reported_within_its_deadline_with_every_rank_stack(tmp_path):
    rule = DeadlineRule(minimum_s=3.0, safety_factor=10.0, source="test", yaml_path="workers.deadlines.simulated")
    # 7 calls of 1 MiB (bus factor 1/2) at 50 MB/s: 73 ms of work, x 10 is below the 3 s minimum.
    deadline = collective_deadline(rule, 60, "all_gather", 2**20, 0.5, 7, 50e6, "simulated floor")
    assert deadline.seconds == 3.0
    group = WorkerGroup("selftest-hung", 2, "gloo", log_dir=tmp_path)
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        group.run(f"{FAULTY}:measure_hang",
                  {"op": "all_gather", "hang_op": "all_gather", "hang_rank": 1, "sizes": [2**20],
                   "warmup_iters": 2, "iters": 5}, timeout_s=deadline, what="all_gather at 1 MiB")
    elapsed = time.monotonic() - t0
    assert deadline.seconds <= elapsed < deadline.seconds + 25, elapsed  # its own deadline, not the 60 s cap
    failure = info.value.failure
    assert failure.kind == failures.HUNG and [r.rank for r in failure.ranks] == [0, 1] and failure.replied == ()
    assert "in hang_forever_here" in info.value.stacks[1]
    assert "all_gather" in info.value.stacks[0]  # rank 0 waits inside the collective
    message = str(info.value)
    assert message.startswith("all_gather at 1 MiB on selftest-hung did not finish within 3s (the minimum "
                              "(workers.deadlines.simulated); 7 x all_gather at 1 MiB should take ")
    group.close()
