"""Spare workers: interpreters that have imported torch before any group asks for them.

Most of a worker's start is `import torch` (3.1-4.5 s of the 4-5 s on a 1x H200 node:
fixtures/reference/h200-1/start-costs-2026-12-02). A spare is a worker process started early (the pytest
plugin starts them at the run's start, while pytest collects: `for_run`) that imports torch and waits. A WorkerGroup that starts takes one spare per rank instead of a new interpreter and hands it the
rank's environment, its role (label, backend, process group) and its log.

Why a spare is the same as a new interpreter:
- it has touched no CUDA and no NCCL (the worker checks `torch.cuda.is_initialized()` before it waits):
  CUDA reads CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER at its first call, NCCL its NCCL_* variables at its
  first communicator and torch's ProcessGroupNCCL its TORCH_NCCL_* ones when it is made, so these may
  still change (ADOPTABLE). A rank whose environment differs from the spare's in any other variable (one
  the interpreter or `import torch` may have read: OMP_NUM_THREADS, the bytecode cache, a user's
  LD_PRELOAD) gets a new interpreter;
- its environment becomes the rank's exactly (os.environ replaced, which reaches C code's getenv), the
  rank's import path goes in front of sys.path, and its working directory must be the parent's now;
- it has imported nothing of DeepSpeed or Accelerate: a training strategy's process-global state starts
  fresh in it as in a new process.

Where the system can fork, the spares are forked from a zygote (zygote.py): one interpreter that imported
torch once; a fork costs milliseconds and shares the zygote's memory. A rank that finds no spare waiting
then gets one forked for it, where its environment is one the zygote's can become. Elsewhere each spare is
a new interpreter.

On a GPU node a spare taken is replaced when its group has started (`replenish`), so that later groups
(the pool of another environment, each training strategy) find warm ones too. In simulation the first
stock only (with a zygote, later ranks are forked when their groups start): CPU ranks share a small
machine's cores with the tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from wirecheck.workers import evidence, spawn, teardown, zygote

# Variables nothing reads before a worker's first CUDA call, its first NCCL communicator or its process
# group (the rank variables, torch.distributed's env:// ones, the devices), the import path (applied to
# sys.path on adoption), and the test pytest is running (it sets PYTEST_CURRENT_TEST in its own
# environment for each test, so every rank started in a test differs from a spare in it). Any other
# difference needs a new interpreter.
ADOPTABLE_NAMES = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTHONPATH", "PYTEST_CURRENT_TEST",
})
ADOPTABLE_PREFIXES = ("NCCL_", "TORCH_NCCL_")


def unadoptable(spare_env: dict[str, str], env: dict[str, str]) -> list[str]:
    """The variables in which `env` differs from a spare's that a spare cannot take on (sorted)."""
    differ = {k for k in spare_env.keys() | env.keys() if spare_env.get(k) != env.get(k)}
    return sorted(k for k in differ if k not in ADOPTABLE_NAMES and not k.startswith(ADOPTABLE_PREFIXES))


@dataclass
class Spare:
    proc: subprocess.Popen
    conn: Connection
    env: dict[str, str]
    cwd: str
    log_path: str
    started: float = field(default_factory=time.monotonic)


class SpareStock:
    """Up to `count` spare workers, started by `fill` (from the main thread only, so that each dies with
    this process: parent_death), taken by `adopt`, killed by `close`.

    `log_dir`: where the spares' log folder goes (the run's logs folder); a spare's log moves into its
    group's log when it is taken. `fork`: spares are forked from a zygote (zygote.py) where the system can
    fork, and a rank that finds none waiting gets one forked for it; else each is a new interpreter.
    """

    def __init__(self, count: int, replenish: bool, log_dir: str | os.PathLike | None = None, fork: bool = True):
        self.count = max(0, int(count))
        self.fork = fork and zygote.available()
        self.zygote: zygote.Zygote | None = None  # started by the first fill, from the main thread
        self.replenish = replenish
        self.folder = tempfile.mkdtemp(prefix="wirecheck-spares-", dir=log_dir)
        self.spares: list[Spare] = []
        self.started = 0  # spares started in all
        self.adopted = 0  # spares that became a group's rank
        self.refused: dict[str, int] = {}  # why a rank got a new interpreter instead (a variable), how often
        self.ages_s: list[float] = []  # each spare taken: seconds since it was started (its import's head start)
        self.died: list[str] = []  # spares that ended while waiting: how, and the last lines of their log
        self.closed = False
        teardown.track(self)

    def fill(self) -> None:
        """Start spares until `count` wait (none after close, none from another thread than the main one)."""
        if self.closed or threading.current_thread() is not threading.main_thread():
            return
        if self.fork and self.zygote is None:
            self.zygote = zygote.Zygote(self.folder)
        self._drop_dead()
        if self.zygote is not None and not self.zygote.ready() and self.zygote.alive():
            return  # still importing: the first ranks are forked when they ask, the stock at the next fill
        while len(self.spares) < self.count:
            self.spares.append(self._start())

    def preload_trainers(self) -> None:
        """The spares forked from now on come with the training strategies' imports (zygote.TRAINER_MODULES);
        nothing where there is no zygote."""
        if self.zygote is not None:
            self.zygote.preload()

    def resize(self, count: int) -> None:
        """Keep `count` spares from now on: the newest beyond it killed, the missing ones started."""
        self.count = max(0, int(count))
        while len(self.spares) > self.count:
            self._kill(self.spares.pop())
        self.fill()

    def _next_log(self) -> str:
        self.started += 1
        return os.path.join(self.folder, f"spare-{self.started}.log")

    def _start(self) -> Spare:
        log_path = self._next_log()
        forked = self._fork(log_path)
        if forked is not None:
            return forked
        env = spawn.base_env({})
        proc, conn = spawn.launch(["--spare", "--spare-log", log_path, "--parent-death-signal"], env, log_path)
        return Spare(proc, conn, env, os.getcwd(), log_path)

    def _fork(self, log_path: str) -> Spare | None:
        if self.zygote is None or not self.zygote.alive():
            return None
        forked = self.zygote.fork(log_path)
        if forked is None:
            return None
        return Spare(forked[0], forked[1], self.zygote.env, self.zygote.cwd, log_path)

    def adopt(self, env: dict[str, str], role: dict, log_path: str) -> tuple[subprocess.Popen, Connection] | None:
        """A waiting spare made into the rank of `env` and `role` (its output then goes to `log_path`), or
        None where none may be: the caller starts a new interpreter."""
        self._drop_dead()
        why: list[str] = []  # what kept the first waiting spare from this rank
        for spare in list(self.spares):
            differ = self._differ(spare.env, spare.cwd, env)
            if differ:
                why = why or differ
                continue
            self.spares.remove(spare)
            if self._give(spare, env, role, log_path):
                return spare.proc, spare.conn
        if self.zygote is not None and self.zygote.alive():
            # None waiting fits: one forked for this rank, where the zygote's environment does.
            differ = self._differ(self.zygote.env, self.zygote.cwd, env)
            if not differ:
                spare = self._fork(self._next_log())
                if spare is not None and self._give(spare, env, role, log_path):
                    return spare.proc, spare.conn
            why = why or differ
        for name in why:
            self.refused[name] = self.refused.get(name, 0) + 1
        return None

    @staticmethod
    def _differ(spare_env: dict[str, str], spare_cwd: str, env: dict[str, str]) -> list[str]:
        return unadoptable(spare_env, env) + (["the working directory"] if spare_cwd != os.getcwd() else [])

    def _give(self, spare: Spare, env: dict[str, str], role: dict, log_path: str) -> bool:
        """Make `spare` the rank: False where it died since (killed here)."""
        os.close(spawn.open_log(log_path))  # the group's log exists (in its own folder) before the rank writes
        try:
            spare.conn.send(("become", {"env": dict(env), "role": dict(role), "log": log_path}))
        except (OSError, EOFError):
            self._kill(spare)
            return False
        self.adopted += 1
        self.ages_s.append(round(time.monotonic() - spare.started, 3))
        return True

    def refill(self) -> None:
        """After a group took spares: on a GPU node, new ones for the groups after it."""
        if self.replenish:
            self.fill()

    def close(self) -> None:
        """Kill every waiting spare and remove their logs (a taken spare's log moved into its group's)."""
        self.closed = True
        for spare in self.spares:
            self._kill(spare)
        self.spares = []
        if self.zygote is not None:
            self.zygote.close()
        teardown.untrack(self)
        shutil.rmtree(self.folder, ignore_errors=True)

    def describe(self) -> str:
        refused = ", ".join(f"{name} ({n} rank{'s' if n > 1 else ''})" for name, n in sorted(self.refused.items()))
        forked = f" ({self.zygote.forked} forked from a zygote)" if self.zygote is not None and self.zygote.forked else ""
        gave_up = f"; the zygote was given up: {self.zygote.failed}" if self.zygote is not None and self.zygote.failed else ""
        return (f"{self.started} spare worker(s) started{forked}, {self.adopted} taken{gave_up}"
                + (f"; new interpreters where a rank's environment differed in {refused}" if refused else "")
                + (f"; {len(self.died)} ended while waiting ({self.died[0]})" if self.died else ""))

    def _drop_dead(self) -> None:
        for spare in [s for s in self.spares if s.proc.poll() is not None]:
            self.spares.remove(spare)
            # A spare never exits by itself while this process runs: why it did is worth the record.
            last = evidence.tail(spare.log_path, 5).strip()
            self.died.append(f"pid {spare.proc.pid}: {evidence.describe_exit(spare.proc.returncode)}"
                             + (f": {last}" if last else ""))
            self._kill(spare)

    @staticmethod
    def _kill(spare: Spare) -> None:
        ranks = spawn.RankProcesses([spare.log_path])
        ranks.procs.append(spare.proc)
        ranks.conns.append(spare.conn)
        teardown.kill(ranks)

    def _abandon(self, reason: str) -> None:  # teardown's atexit: the parent leaves without close()
        self.close()


# In simulation: as many spares as the GPU load's CPU ranks, the first groups' size; more would only queue on a
# small machine's cores beside pytest's collection.
MAX_SIMULATED_SPARES = 2


def gpus_listed(proc_driver: Path, visible: str | None) -> int:
    """How many GPUs a run on this node will use, before NVML is read: CUDA_VISIBLE_DEVICES's entries where
    it is set (`visible`), else the GPUs the driver lists under `proc_driver` (1 where it lists none)."""
    if visible is not None:
        return len([e for e in visible.split(",") if e.strip()])
    try:
        return len(os.listdir(Path(proc_driver) / "gpus"))
    except OSError:
        return 1


def for_run(count: int, simulated: bool) -> SpareStock | None:
    """At a run's start, before the node is read: `count` spares (MAX_SIMULATED_SPARES in simulation), started
    and installed; None where count is none. `settle` makes the count the node's once it is known."""
    count = MAX_SIMULATED_SPARES if simulated else count
    if count < 1:
        return None
    stock = SpareStock(count, replenish=not simulated)
    stock.fill()
    install(stock)
    return stock


def settle(stock: SpareStock, n_gpus: int, simulated: bool) -> None:
    """One spare per GPU of the run (MAX_SIMULATED_SPARES at most in simulation)."""
    stock.resize(min(n_gpus, MAX_SIMULATED_SPARES) if simulated else n_gpus)


def stop(stock: SpareStock) -> dict | None:
    """The waiting spares killed; what they did, for the run's record (None where no spare served a rank or
    ended on its own: a run that used none is recorded as before)."""
    install(None)
    stock.close()
    if not (stock.adopted or stock.died):
        return None
    return {"started": stock.started, "taken": stock.adopted,
            "forked": stock.zygote.forked if stock.zygote is not None else 0, "replenish": stock.replenish, "stock": stock.count,
            "new_interpreters_because": dict(stock.refused), "ages_s": stock.ages_s, "died": stock.died,
            "summary": stock.describe()}


_installed: SpareStock | None = None


def install(stock: SpareStock | None) -> None:
    """Make `stock` the one every WorkerGroup of this process takes its ranks from (None: none)."""
    global _installed
    _installed = stock


def installed() -> SpareStock | None:
    return _installed if _installed is not None and not _installed.closed else None
