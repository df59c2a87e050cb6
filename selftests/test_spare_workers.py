"""Spare workers (wirecheck.workers.spares): a rank taken from a spare is the rank a new interpreter would be.

CPU/gloo. Each test makes its own stock (one spare costs an interpreter and `import torch`, 1-3 s on two
cores); a group is told `use_spares` by default, so the stock installed is the one it takes from.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from wirecheck.workers import spares, zygote
from wirecheck.workers.launcher import WorkerCallError, WorkerCrash, WorkerGroup

FAULTY = "selftests.faulty_workers"


def filled(stock: spares.SpareStock, timeout_s: float = 120) -> spares.SpareStock:
    """`stock` once its zygote has imported torch (or was given up) and its spares are forked: a stock fills
    only from a ready zygote, so that a run's start never waits for the import."""
    deadline = time.monotonic() + timeout_s
    while stock.zygote is not None and not stock.zygote.ready() and stock.zygote.alive():
        assert time.monotonic() < deadline, "the zygote did not import torch in time"
        time.sleep(0.1)
    stock.fill()
    assert len(stock.spares) == stock.count
    return stock


@pytest.fixture
def stock(request):
    """A stock of `count` spares (the test's parameter, default 2), installed, killed at the end."""
    count = getattr(request, "param", 2)
    before = spares.installed()  # the self-tests' own (conftest.py), given back after
    made = spares.SpareStock(count, replenish=False)
    spares.install(made)
    made.fill()
    yield filled(made)
    spares.install(before)
    made.close()


def wait_warm(stock: spares.SpareStock, timeout_s: float = 60) -> None:
    """Until every spare has imported torch (its log is empty and it waits in recv: not measurable from here,
    so: until its process has been running for long enough that a new interpreter would have imported it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(os.path.exists(f"/proc/{s.proc.pid}") for s in stock.spares):
            with_torch = [s for s in stock.spares if _has_torch(s.proc.pid)]
            if len(with_torch) == len(stock.spares):
                return
        time.sleep(0.2)
    raise AssertionError("the spares did not import torch within a minute")


def _has_torch(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libtorch_cpu" in f.read()
    except OSError:
        return False


def test_a_rank_from_a_spare_is_as_a_new_interpreter(stock):
    wait_warm(stock)
    extra = {"NCCL_DEBUG": "WARN", "TORCH_NCCL_BLOCKING_WAIT": "1"}  # read at NCCL's start: a spare may take them
    with WorkerGroup("from-spares", 2, "gloo", env=extra) as warm:
        taken = [i.get("spare") for i in warm.info]
        warm_seen = warm.run(f"{FAULTY}:environment", None, 30)
    with WorkerGroup("new", 2, "gloo", env=extra, use_spares=False) as new:
        assert [i.get("spare") for i in new.info] == [None, None]
        new_seen = new.run(f"{FAULTY}:environment", None, 30)
    assert all(t is not None for t in taken), taken
    assert stock.adopted == 2 and not stock.spares
    for rank, (w, n) in enumerate(zip(warm_seen, new_seen)):
        ignore = {"MASTER_PORT"}  # each group's own store
        assert {k: v for k, v in w["env"].items() if k not in ignore} == \
               {k: v for k, v in n["env"].items() if k not in ignore}, f"rank {rank}'s environment"
        assert w["env"]["RANK"] == str(rank) and w["env"]["NCCL_DEBUG"] == "WARN"
        assert set(w["path"]) == set(n["path"]), "the import path"
        assert w["cwd"] == n["cwd"]
        assert w["training_imported"] == [], "a spare imported DeepSpeed or Accelerate: not a fresh process"


def test_a_difference_read_at_the_interpreters_start_gets_a_new_interpreter(stock):
    # OMP_NUM_THREADS is read when torch is imported: a spare has it already, as the parent's.
    with WorkerGroup("threads", 2, "gloo", env={"OMP_NUM_THREADS": "2"}) as group:
        assert [i.get("spare") for i in group.info] == [None, None]
        seen = group.run(f"{FAULTY}:environment", None, 30)
    assert [s["env"]["OMP_NUM_THREADS"] for s in seen] == ["2", "2"]
    assert stock.adopted == 0 and len(stock.spares) == 2, "the spares wait for a group they can serve"
    assert stock.refused == {"OMP_NUM_THREADS": 2}
    assert "OMP_NUM_THREADS (2 ranks)" in stock.describe()


def test_which_variables_a_spare_can_take():
    spare = {"A": "1", "OMP_NUM_THREADS": "1", "PATH": "/bin"}
    rank = {**spare, "RANK": "1", "NCCL_P2P_DISABLE": "1", "TORCH_NCCL_BLOCKING_WAIT": "1",
            "CUDA_VISIBLE_DEVICES": "0,1", "PYTEST_CURRENT_TEST": "t (call)"}
    assert spares.unadoptable(spare, rank) == []
    assert spares.unadoptable(spare, {**rank, "LD_PRELOAD": "x.so"}) == ["LD_PRELOAD"]
    assert spares.unadoptable(spare, {k: v for k, v in rank.items() if k != "A"}) == ["A"]  # unset counts too
    assert spares.unadoptable(spare, {**rank, "OMP_NUM_THREADS": "4", "PATH": "/usr/bin"}) == ["OMP_NUM_THREADS", "PATH"]


@pytest.mark.parametrize("stock", [1], indirect=True)
def test_what_a_spare_wrote_before_and_its_rank_writes_after_are_in_the_rank_log(stock, tmp_path):
    (spare,) = stock.spares
    with open(spare.log_path, "a") as f:  # as the import's warnings would be
        f.write("printed while importing\n")
    group = WorkerGroup("said", 1, "gloo", log_dir=tmp_path)
    try:
        (pid,) = group.run(f"{FAULTY}:say", {"text": "printed as rank 0"}, 30)
        assert pid == spare.proc.pid
        with open(group.log_paths[0], encoding="utf-8") as log:
            text = log.read()
        assert "printed while importing" in text and "printed as rank 0" in text
        assert text.index("printed while importing") < text.index("printed as rank 0")
        assert not os.path.exists(spare.log_path), "the spare's own log moved into the rank's"
    finally:
        group.close()


@pytest.mark.parametrize("fork", [False, True])
def test_a_dead_spare_is_passed_over(fork):
    before = spares.installed()
    stock = spares.SpareStock(2, replenish=False, fork=fork)
    spares.install(stock)
    try:
        stock.fill()
        dead = filled(stock).spares[0]
        os.killpg(dead.proc.pid, signal.SIGKILL)
        assert dead.proc.wait(10) == -signal.SIGKILL
        with WorkerGroup("one-dead", 2, "gloo") as group:
            taken = [i.get("spare") is not None for i in group.info]
            assert group.run(f"{FAULTY}:all_reduce_ranks", None, 30) == [3.0, 3.0]  # (0 + 1) + (1 + 1)
        waiting = list(stock.spares)
    finally:
        spares.install(before)
        stock.close()
    assert waiting == []
    if fork:  # the other rank forked for it
        assert taken == [True, True] and stock.adopted == 2 and stock.zygote.forked == 3
    else:
        assert sorted(taken) == [False, True], "one rank from the live spare, one new interpreter"
        assert stock.adopted == 1


@pytest.mark.parametrize("fork", [False, True])
def test_a_spare_whose_import_fails_after_it_was_taken_fails_its_groups_start(tmp_path, monkeypatch, fork):
    # A torch.py in the working directory comes first on the import path: this spare's import of torch
    # fails a second after the group took it. With a zygote, its own import fails: it is given up, saying
    # why, and the rank is a new interpreter whose import fails the same way.
    (tmp_path / "torch.py").write_text("import time\ntime.sleep(1.5)\nraise ImportError('planted torch')\n")
    monkeypatch.chdir(tmp_path)
    before = spares.installed()
    made = spares.SpareStock(1, replenish=False, fork=fork)
    spares.install(made)
    try:
        made.fill()
        with pytest.raises(WorkerCallError) as raised:
            WorkerGroup("planted", 1, "gloo", log_dir=tmp_path / "logs")
        if fork:
            assert made.adopted == 0 and "the zygote was given up" in made.describe()
            assert "planted torch" in made.describe(), made.describe()
        else:
            assert made.adopted == 1
        failure = raised.value.failure
        assert failure.phase == "start" and "planted torch" in str(raised.value)
        if not fork:  # the spare's import failed after it was taken: it says so in the rank's log too
            logs = list((tmp_path / "logs").rglob("rank0.log"))
            assert logs and "planted torch" in logs[0].read_text(), "the traceback is in the rank's log"
    finally:
        spares.install(before)
        made.close()


def test_close_kills_the_waiting_spares_and_removes_their_folder():
    made = spares.SpareStock(2, replenish=True)
    made.fill()
    pids = [s.proc.pid for s in filled(made).spares] + [made.zygote.proc.pid]
    made.close()
    assert all(not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in "ZX"
               for pid in pids)
    assert not os.path.exists(made.folder)
    made.fill()
    assert made.spares == [], "a closed stock starts none"


def test_replenish_starts_new_spares_after_a_group_took_some():
    before = spares.installed()
    made = spares.SpareStock(1, replenish=True)
    spares.install(made)
    try:
        made.fill()
        with WorkerGroup("took", 1, "gloo") as group:
            assert group.info[0].get("spare") is not None
            assert len(made.spares) == 1 and made.started == 2, "the one taken replaced"
        with WorkerGroup("again", 1, "gloo") as group:
            assert group.info[0].get("spare") is not None
        assert made.adopted == 2
    finally:
        spares.install(before)
        made.close()


def test_a_group_told_not_to_use_spares_leaves_them(stock):
    with WorkerGroup("own", 1, "gloo", use_spares=False) as group:
        assert group.info[0].get("spare") is None
    assert stock.adopted == 0 and len(stock.spares) == 2


def test_the_parent_never_imports_torch_to_read_what_its_workers_send():
    # A reply pickled with a torch type (torch.__version__ is a TorchVersion) makes the unpickling parent
    # import torch: seconds inside the first worker start of a run, in the process that must stay torch-free.
    code = ("import sys\n"
            "from wirecheck.workers.launcher import WorkerGroup\n"
            "with WorkerGroup('torch-free', 1, 'gloo', use_spares=False) as g:\n"
            "    g.run('selftests.faulty_workers:whoami', None, 30)\n"
            "    info = g.info\n"
            "print('torch' in sys.modules, info[0]['torch'])\n")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    imported, version = out.stdout.split()
    assert imported == "False", "the parent imported torch to unpickle a worker's message"
    assert version[0].isdigit()


# ---- spares forked from a zygote (wirecheck.workers.zygote) ----------------------------------------------


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


def test_a_rank_forked_for_a_group_is_as_a_new_interpreter_and_its_death_reads_as_a_new_ones(stock):
    stock.resize(0)  # none waiting: every rank is forked when its group starts
    forked_before = stock.zygote.forked
    with WorkerGroup("forked", 2, "gloo") as forked:
        assert [i.get("spare") is not None for i in forked.info] == [True, True]
        forked_seen = forked.run(f"{FAULTY}:environment", None, 30)
        assert _threads(stock.zygote.proc.pid) == 1, "the zygote forks with one thread: a fork copies only the caller"
        with pytest.raises(WorkerCrash) as raised:
            forked.run(f"{FAULTY}:die", {"rank": 1, "how": "segv"}, 30)
    with WorkerGroup("new", 2, "gloo", use_spares=False) as new:
        new_seen = new.run(f"{FAULTY}:environment", None, 30)
    assert stock.zygote.forked - forked_before == 2 and stock.adopted == 2
    for w, n in zip(forked_seen, new_seen):
        assert {k: v for k, v in w["env"].items() if k != "MASTER_PORT"} == \
               {k: v for k, v in n["env"].items() if k != "MASTER_PORT"}
        assert set(w["path"]) == set(n["path"]) and w["cwd"] == n["cwd"]
        assert w["training_imported"] == []
    err = raised.value
    assert err.rank == 1 and err.returncode == -signal.SIGSEGV and "killed by SIGSEGV" in str(err), str(err)


def test_the_zygotes_children_die_with_it_and_read_as_killed(stock):
    spare = stock.spares[0]
    assert _threads(stock.zygote.proc.pid) == 1
    os.killpg(stock.zygote.proc.pid, signal.SIGKILL)
    assert spare.proc.wait(10) == -signal.SIGKILL, "a forked spare dies with its zygote (parent-death signal)"
    with WorkerGroup("after", 1, "gloo") as group:  # the zygote gone: a new interpreter, and the run goes on
        assert group.info[0].get("spare") is None
    assert not stock.zygote.alive()


def test_a_zygote_with_more_than_one_thread_forks_nothing_and_ranks_start_as_new_interpreters(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # torch starts its OpenMP pool at import: a second thread
    before = spares.installed()
    stock = spares.SpareStock(1, replenish=False)
    spares.install(stock)
    try:
        stock.fill()
        filled(stock)  # given up: its one spare a new interpreter
        assert stock.zygote.forked == 0 and not stock.zygote.alive()
        with WorkerGroup("threads", 2, "gloo") as group:
            assert group.run(f"{FAULTY}:all_reduce_ranks", None, 30) == [3.0, 3.0]
            assert sorted(i.get("spare") is not None for i in group.info) == [False, True]
    finally:
        spares.install(before)
        stock.close()
    assert "the zygote was given up" in stock.describe() and "2 threads after importing torch" in stock.describe()


def test_spares_forked_after_a_preload_come_with_the_trainers_imports_and_earlier_ones_without(stock):
    """A run that trains on GPUs asks the zygote to import what every strategy's set-up imports (torch._dynamo,
    FSDP, DTensor: 3.6-4.3 s of each strategy run's process on a 1x H200 node), once, when it is idle: the
    spares forked after have them; those forked before, and any group of a run that never asks, do not."""
    stock.resize(0)  # none waiting: each rank is forked as its group starts
    with WorkerGroup("before", 1, "gloo") as before:
        (plain,) = before.run(f"{FAULTY}:environment", None, 30)
    stock.preload_trainers()
    time.sleep(2 * zygote.IDLE_POLL_S)  # idle: the zygote imports now; a fork asked meanwhile waits for it
    with WorkerGroup("after", 1, "gloo") as after:
        (loaded,) = after.run(f"{FAULTY}:environment", None, 60)
    assert plain["trainer_modules"] == []
    assert loaded["trainer_modules"] == sorted(zygote.TRAINER_MODULES), loaded["trainer_modules"]
    assert loaded["training_imported"] == []  # nothing of DeepSpeed or Accelerate: their state starts in the rank
    assert stock.zygote.alive() and _threads(stock.zygote.proc.pid) == 1


def test_a_forked_rank_leaves_the_zygotes_objects_out_of_its_collections(stock):
    """A training run collects fully four or five times; in a rank forked from the zygote each collection would walk
    every object of torch's imports (and write to each, copying the pages it shares with the zygote). The zygote
    freezes them before it forks: the rank's collections walk only what it made. A new interpreter freezes nothing."""
    stock.resize(0)  # none waiting: the rank is forked as its group starts
    with WorkerGroup("forked", 1, "gloo") as forked:
        (seen,) = forked.run(f"{FAULTY}:collector", None, 30)
    with WorkerGroup("new", 1, "gloo", use_spares=False) as new:
        (plain,) = new.run(f"{FAULTY}:collector", None, 30)
    assert seen["frozen"] > 10_000 and seen["tracked"] < seen["frozen"] / 2, seen  # torch's objects, left out
    assert plain["frozen"] == 0 and plain["tracked"] > 10_000, plain  # a new interpreter walks all of its own


# The zygote's SIGCHLD handler runs between any two bytecodes, an import's included. It once opened the status file
# with encoding="ascii": a codec lookup, which is an import, inside the zygote's import of torch._dynamo; the lookup
# failed, the handler raised into the import, half of torch's modules stayed imported, and every forked rank's DDP
# failed registering torch's operators a second time (a flake under load, three tests at a time).
REAP_WITHOUT_IMPORTS = r"""
import os, sys, tempfile, time
from wirecheck.workers import zygote

class NoImports:
    def find_spec(self, name, path=None, target=None):
        raise ImportError(f"the handler imported {name}")

folder = tempfile.mkdtemp()
reap = zygote._reaper(folder)
pid = os.fork()
if pid == 0:
    os._exit(3)
while open(f"/proc/{pid}/stat").read().split()[2] != "Z":  # exited, not yet reaped
    time.sleep(0.01)
sys.meta_path.insert(0, NoImports())
reap()  # in a fresh interpreter: no codec looked up before it
sys.meta_path.pop(0)
print(open(os.path.join(folder, str(pid))).read())
"""


def test_the_zygotes_child_handler_imports_nothing_and_raises_nothing(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", REAP_WITHOUT_IMPORTS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr
    gone = tmp_path / "gone"
    reap = zygote._reaper(str(gone))  # the stock's folder removed: the status is dropped, nothing raised
    child = os.fork()
    if child == 0:
        os._exit(0)
    deadline = time.monotonic() + 30
    while open(f"/proc/{child}/stat").read().split()[2] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    reap()
    assert not gone.exists()


def test_a_preload_that_fails_part_way_stops_the_zygotes_forks(monkeypatch, tmp_path):
    """A module a torch lacks is skipped; one that fails part way (whatever it raised) makes the zygote fork no
    more: its children would import the rest again, and torch's operators would be registered twice."""
    (tmp_path / "half_imported.py").write_text("import sys\nSTARTED = True\nraise LookupError('unknown encoding: ascii')\n")
    (tmp_path / "needs_missing.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert zygote._import_whole(("no_such_trainer_module", "json")) is None
    said = zygote._import_whole(("json", "half_imported"))
    assert said and "half_imported" in said and "LookupError" in said and "forks no more" in said
    said = zygote._import_whole(("needs_missing",))
    assert said and "needs_missing" in said and "no_such_module_anywhere" in said
    assert signal.SIGCHLD not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # unblocked again
