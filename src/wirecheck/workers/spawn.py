"""Starting a group's rank processes: one fresh interpreter per rank (`python -m wirecheck.workers.worker`),
each with its own environment, log file and private pipe to the parent.

The parent's environment passes through (a node may set NCCL_NVLS_ENABLE=0 and other
switches there that must reach NCCL); on top come the placement's extra variables, the rank variables
torch.distributed reads, and defaults a value the user set overrides.
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Protocol

from wirecheck.core.safefs import path_problem
from wirecheck.workers import bytecode, parent_death


class RankProcesses:
    """One group's rank processes, the parent's end of each one's pipe and each one's log, by rank.

    Filled one rank at a time by `spawn`, so that a start failing half-way still leaves every
    process already started here for the group to kill.
    """

    def __init__(self, log_paths: list[str]):
        self.procs: list[subprocess.Popen] = []
        self.conns: list[Connection] = []
        self.log_paths = log_paths

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def any_exited(self) -> bool:
        return any(p.poll() is not None for p in self.procs)

    def all_running(self) -> bool:
        return all(p.poll() is None for p in self.procs)


def _import_path_entries(existing: str | None) -> list[tuple[str, str | None]]:
    """(entry, why it is left out or None), in order, for the workers' import path."""
    entries = [os.getcwd()]
    entries += [os.path.abspath(p) if p else os.getcwd() for p in sys.path if isinstance(p, str)]
    entries += [p for p in (existing or "").split(os.pathsep) if p]
    seen: set[str] = set()
    out = []
    root = os.geteuid() == 0
    for p in entries:
        if p not in seen and os.path.exists(p):
            seen.add(p)
            # As root, a folder another user can write is code they choose (a torch.py planted in a
            # world-writable working directory would be imported before the real one): left out.
            out.append((p, path_problem(p) if root else None))
    return out


def python_path(existing: str | None) -> str:
    """The parent's import path for the workers: cwd and sys.path first, then what PYTHONPATH had;
    as root, without the folders another user could write (untrusted_import_path says which).

    Worker functions live in modules the parent can import (pytest puts test directories on sys.path,
    `selftests.faulty_workers` resolves from the repository root); a fresh interpreter would not see them.
    """
    return os.pathsep.join(p for p, problem in _import_path_entries(existing) if problem is None)


def untrusted_import_path() -> list[str]:
    """The folders a run as root leaves out of its workers' import path, each with why."""
    return [f"{p} ({problem})" for p, problem in _import_path_entries(os.environ.get("PYTHONPATH")) if problem]


def base_env(extra: dict[str, str]) -> dict[str, str]:
    """What every rank of a group gets before its rank variables: the parent's environment, the group's
    `extra`, wirecheck's defaults and the import path. A spare worker (spares.py) starts with this for an
    empty `extra`."""
    env = dict(os.environ)  # pass-through: the GPU machines' NCCL_* switches must reach NCCL
    env.update(extra)
    # As torchrun does: N ranks each spawning one OpenMP thread per core would oversubscribe.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")  # prints reach the log before a crash
    # A rank whose NCCL watchdog sees an error or a timed-out collective ends its process without
    # waiting in ncclCommAbort, which can itself hang on a broken link (torch's default since 2.2;
    # explicit so an older torch behaves the same). The parent kills the group anyway; this keeps
    # a rank from wedging if the parent is gone. A value the user set is kept.
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
    # NCCL's support for graph-captured launches mixed with eager ones in flight at the same time
    # adds a cross-stream dependency to every captured NCCL launch: 1-16 MiB replays took 3-6 us
    # more per call on 2x H200 with it (docs/measurements.md; NCCL picks the same ring/Simple/24 channels
    # either way). Our workers never have both in flight: every timed path ends synchronised
    # (collective_timing), and no other worker function captures. A value the user set is kept.
    env.setdefault("NCCL_GRAPH_MIXING_SUPPORT", "0")
    env["PYTHONPATH"] = python_path(env.get("PYTHONPATH"))
    # Where the node's Python cannot keep compiled bytecode, read it from wirecheck's cache
    # (bytecode.py): otherwise every worker compiles torch from source again (3+ s each).
    env = bytecode.worker_env(env)
    # No MASTER_PORT yet: the worker sets it to the store's real port after the rendezvous, and
    # a stale one from the parent's environment (a run inside torchrun) must not be read before.
    for name in ("MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(name, None)
    return env


def rank_env(rank: int, world_size: int, gpus: tuple[int, ...] | None, extra: dict[str, str]) -> dict[str, str]:
    """The environment of rank `rank`: the parent's, the group's `extra`, and the rank variables."""
    env = base_env(extra)
    if gpus is not None:
        # Placements use NVML indices, which follow PCI bus order; CUDA's default order is
        # fastest-first, which can differ on mixed nodes. Make CUDA count as NVML does.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
    )
    return env


def open_log(path: str) -> int:
    """A new file in a group's own folder (mkdtemp), never through a link: its descriptor."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def launch(args: list[str], env: dict[str, str], log_path: str) -> tuple[subprocess.Popen, Connection]:
    """Start `python -m wirecheck.workers.worker ARGS` with `env`, its output appended to `log_path`, and
    the parent's end of its private pipe."""
    parent_end, child_end = Pipe(duplex=True)
    with open(open_log(log_path), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wirecheck.workers.worker", "--fd", str(child_end.fileno()),
             "--parent-pid", str(os.getpid()), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(child_end.fileno(),),
            # Own process group: killpg takes the rank's children too, and a terminal's
            # Ctrl-C goes to the parent only, which then cleans up.
            start_new_session=True,
        )
    # Only the child may hold its end: its death must read as EOF here.
    child_end.close()
    return proc, parent_end


def spawn(ranks: RankProcesses, *, label: str, backend: str, world_size: int, gpus: tuple[int, ...] | None,
          extra_env: dict[str, str], join_process_group: bool, rendezvous_timeout_s: float,
          spares: "SpareSource | None" = None) -> None:
    """Start every rank into `ranks`; their logs append to `ranks.log_paths`. Forked by the main thread,
    each rank dies with this process (parent_death: the signal follows the thread that forked).

    `spares`: where a rank may be a spare worker that has imported torch already (spares.py) instead of a
    new interpreter; it is handed this rank's environment and decides whether one of its spares may take it.
    """
    dies_with_us = parent_death.forked_by_main_thread()
    role = {"label": label, "backend": backend, "init_process_group": join_process_group,
            "rendezvous_timeout_s": rendezvous_timeout_s}
    for rank in range(world_size):
        env = rank_env(rank, world_size, gpus, extra_env)
        adopted = spares.adopt(env, role, ranks.log_paths[rank]) if spares is not None else None
        if adopted is not None:
            proc, conn = adopted
        else:
            proc, conn = launch([
                "--label", label,
                "--backend", backend,
                "--rendezvous-timeout", f"{rendezvous_timeout_s:g}",
                *(["--no-process-group"] if not join_process_group else []),
                *(["--parent-death-signal"] if dies_with_us else []),
            ], env, ranks.log_paths[rank])
        ranks.procs.append(proc)
        ranks.conns.append(conn)
    if spares is not None:
        spares.refill()


class SpareSource(Protocol):
    """What `spawn` asks of the run's spare workers (spares.SpareStock)."""

    def adopt(self, env: dict[str, str], role: dict, log_path: str) -> tuple[subprocess.Popen, Connection] | None: ...

    def refill(self) -> None: ...


def prepare_for_workers(build: bool = True) -> list[tuple[str, bool]]:
    """Before the first worker starts: where the node's Python cannot keep compiled bytecode, compile once into
    wirecheck's cache (seconds once, not in every worker; `build` False reads a cache install.sh or an earlier
    run built, and compiles nothing). A cache, or (as root) a folder of the import path, that another user
    could write is not given to the workers (docs/running-as-root.md). The lines that say so, each with
    whether it is a warning."""
    lines = []
    prepared = bytecode.prepare() if build else None
    if prepared is not None:
        lines.append((f"wirecheck: {prepared.describe()}", prepared.problem is not None or prepared.untrusted is not None))
    left_out = untrusted_import_path()
    if left_out:
        lines.append(("wirecheck: running as root, the workers' import path leaves out what another user could write: "
                      + "; ".join(left_out), True))
    return lines
