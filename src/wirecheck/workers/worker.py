"""The worker process: one per rank, started by `launcher.WorkerGroup`, run as `python -m wirecheck.workers.worker`.

It takes part in the group's rendezvous (wirecheck.workers.rendezvous), sets up its device (and, unless told
otherwise, the process group), then serves calls from the parent over a private socket until told to
exit. Only these processes touch CUDA and torch.distributed: the pytest process must never create a
CUDA context.

Started as a spare (`--spare`: wirecheck.workers.spares), it first imports torch, touches no CUDA, and waits
for ("become", {"env", "role", "log"}): it then takes that environment, import path and log, and goes on as
a worker started with that role would.

Protocol (pickled tuples over a `multiprocessing.connection.Connection`):
  parent -> worker  ("become", {...}) (a spare, once, first)
                    ("rendezvous", port)  (ranks > 0, once)  |  ("call", seq, "pkg.module:function", kwargs)
                    ("exit",)
  worker -> parent  ("rendezvous", port)  (rank 0, once: its store's real port)
                    ("ready", info) | ("init_error", summary, traceback, facts)
                    ("ok", seq, value) | ("error", seq, summary, traceback, facts)
`facts` describe a raised exception as data (see `exception_facts`), so the parent never reads text.
"""

from __future__ import annotations

import argparse
import faulthandler
import fcntl
import gc
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable

from wirecheck.workers import parent_death

STARTED_AT = time.time()  # this interpreter reached the worker module (wall clock: the parent compares)

if TYPE_CHECKING:
    import torch

# How often a worker checks that its parent is still there. A worker stuck inside a collective never
# reads its pipe again, so it would not notice the parent dying without this.
PARENT_POLL_S = 0.5


@dataclass(frozen=True)
class RankContext:
    """What a worker function gets as its first argument."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: "torch.device"
    label: str
    # Inside a sub-group of the job (wirecheck.workers.subgroups.call): its process group, and the job's ranks
    # in it (rank and world_size above then number the sub-group). None: the whole job's. Work of each GPU on
    # its own on some of a pool's ranks: group None, group_ranks those ranks (rank and world_size the job's).
    group: Any = None
    group_ranks: tuple | None = None


def resolve(fn: str) -> Callable[..., Any]:
    """'package.module:function' -> the function. Import errors surface as the call's error."""
    module_name, sep, attr = fn.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"worker function {fn!r} must be written 'package.module:function'")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def _watch_parent(parent_pid: int) -> None:
    # Our own session keeps a terminal's Ctrl-C away from us (the parent cleans up), so nothing else
    # would end us if the parent were SIGKILLed: exit as soon as we are re-parented.
    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(70)

    threading.Thread(target=watch, name="wirecheck-parent-watch", daemon=True).start()


def exception_facts(exc: BaseException) -> dict[str, Any]:
    """When and what was raised, as data: the parent orders failures by `at` (torch elastic's
    earliest-failure rule) and the capacity check asks `out_of_memory`, decided here by type."""
    return {
        "at": time.time(),
        "exception": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "out_of_memory": _is_out_of_memory(exc),
    }


def _is_out_of_memory(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")
    oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None),
                                  getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None))
                      if isinstance(t, type))
    if not oom_types:
        return False
    # The exception itself or one it was raised from (a wrapper re-raising an allocator failure);
    # bounded: chains can be cyclic.
    seen: BaseException | None = exc
    for _ in range(16):
        if seen is None:
            return False
        if isinstance(seen, oom_types):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _nccl_version() -> str | None:
    import torch

    try:
        version = torch.cuda.nccl.version()
    except Exception:  # a CPU build, or NCCL not loadable
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    # Old torch returns one int: 2.18.3 -> 21803
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"


def _setup(label: str, backend: str, init_process_group: bool) -> tuple[RankContext, dict[str, Any]]:
    import torch

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    steps: dict[str, float] = {}  # seconds of each step of the start (the plan's worker-start costs)
    t = time.monotonic()
    if backend == "nccl":
        # Before init_process_group: NCCL binds the communicator to the current device, and without
        # this every rank would put its context on device 0.
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.cuda.init()  # the context now, so that its cost is this step's and not the first call's
    else:
        device = torch.device("cpu")
    steps["device"] = time.monotonic() - t

    if init_process_group:
        import torch.distributed as dist

        t = time.monotonic()
        if backend == "nccl":
            # device_id makes the communicator eager and lets barrier() know its device.
            dist.init_process_group(backend="nccl", device_id=device)
        else:
            dist.init_process_group(backend=backend)
        steps["process_group"] = time.monotonic() - t

    ctx = RankContext(rank, world_size, local_rank, backend, device, label)
    info = {
        "rank": rank,
        "pid": os.getpid(),
        # str(): torch.__version__ is a TorchVersion, which the parent could only unpickle by importing torch
        # (4 s on a 1x H200 node, inside the first worker start of every run).
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "nccl_version": _nccl_version() if backend == "nccl" else None,
        "start_steps_s": {k: round(v, 3) for k, v in steps.items()},
    }
    return ctx, info


def _call(ctx: RankContext, fn: str, kwargs: dict[str, Any]) -> Any:
    return resolve(fn)(ctx, **kwargs)


def _shutdown() -> None:
    # Tensors still referenced by finished calls keep NCCL buffers alive; drop them first.
    gc.collect()
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        # Not collective: ranks exit one by one and none waits for the others.
        dist.destroy_process_group()


def _wait_for_exit(conn: Connection) -> None:
    try:
        while conn.recv()[0] != "exit":
            pass
    except (EOFError, OSError):
        pass


def serve(conn: Connection, label: str, backend: str, init_process_group: bool, rendezvous_timeout_s: float,
          spare: dict[str, float] | None = None) -> int:
    """`spare`: how long this process imported torch and waited as a spare, if it was one (in its info)."""
    from wirecheck.workers import rendezvous

    try:
        t = time.monotonic()
        joined = rendezvous.join(conn, int(os.environ["RANK"]), rendezvous_timeout_s)  # imports torch, if not yet
        if joined is None:
            return 0  # told to exit before the rendezvous was complete
        rendezvous_s = time.monotonic() - t
        ctx, info = _setup(label, backend, init_process_group)
        info["port"] = joined
        info["start_steps_s"] = {"rendezvous": round(rendezvous_s, 3), **info["start_steps_s"]}
        info["started_at"], info["ready_at"] = STARTED_AT, time.time()
        if spare is not None:
            info["spare"] = spare
    except BaseException as exc:
        conn.send(("init_error", f"{type(exc).__name__}: {exc}", traceback.format_exc(), exception_facts(exc)))
        # Stay until the parent ends us: exiting now would race our error report with a
        # "rank died" verdict that hides the traceback.
        _wait_for_exit(conn)
        return 1
    conn.send(("ready", info))

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0  # the parent is gone: nobody to serve
        if msg[0] == "exit":
            break
        _, seq, fn, kwargs = msg
        try:
            reply = ("ok", seq, _call(ctx, fn, kwargs))
        except BaseException as exc:  # SystemExit from a worker function is an error, not our exit
            reply = ("error", seq, f"{type(exc).__name__}: {exc}", traceback.format_exc(), exception_facts(exc))
        try:
            conn.send(reply)  # pickles before writing: a bad value leaves the stream intact
        except Exception as exc:
            conn.send(("error", seq, f"the return value of {fn} could not be sent back: {exc}",
                       traceback.format_exc(), exception_facts(exc)))
        del reply
    _shutdown()
    return 0


def _wait_as_spare(conn: Connection, spare_log: str) -> tuple[dict, dict[str, float]] | None:
    """Import torch, then wait to be given a rank: (its role, how long the import and the wait took), or
    None when told to exit (or the parent went) first."""
    t0 = time.monotonic()
    try:
        import torch
        import torch.distributed  # noqa: F401  (the rendezvous's store, the process group)

        if torch.cuda.is_initialized():
            # CUDA has read its device variables already: a rank's CUDA_VISIBLE_DEVICES would not be obeyed.
            raise RuntimeError("a spare worker must not initialise CUDA before it is given a rank")
    except BaseException as exc:
        # Given a rank already (the group started while we imported): the failure is that rank's start's,
        # reported as a new worker's would be, in the rank's log.
        if conn.poll():
            msg = conn.recv()
            if msg[0] == "become":
                _become(msg[1]["env"], msg[1]["log"], spare_log)
                traceback.print_exc()
                conn.send(("init_error", f"{type(exc).__name__}: {exc}", traceback.format_exc(), exception_facts(exc)))
                _wait_for_exit(conn)
        raise
    imported = time.monotonic()
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        return None
    if msg[0] != "become":
        return None
    given = msg[1]
    _become(given["env"], given["log"], spare_log)
    return given["role"], {"import_s": round(imported - t0, 3), "waited_s": round(time.monotonic() - imported, 3)}


def _become(env: dict[str, str], log_path: str, spare_log: str) -> None:
    """Take on a rank's environment, import path and log (its group's folder), as if started with them."""
    os.environ.clear()
    os.environ.update(env)  # putenv: CUDA and NCCL read these at their first call, still to come
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:1] = [p for p in entries if p not in sys.path]  # [0] is the working directory (-m)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with open(spare_log, "rb") as earlier:  # what the import printed belongs to this rank's log too
            os.write(fd, earlier.read())
        os.dup2(fd, 1)
        os.dup2(fd, 2)  # faulthandler writes to descriptor 2: it follows
    finally:
        os.close(fd)
    os.unlink(spare_log)


def _lowest_descriptor(fd: int) -> int:
    """Move the parent's pipe to the lowest free descriptor, before torch opens any socket.

    At exit (a SIGKILL included) the kernel closes descriptors in ascending order: the parent then
    sees this rank's pipe close before a peer sees one of its sockets close, so the peer's
    "connection closed" error cannot look earlier than this rank's death (watch.Replies.record_death).
    """
    low = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    if low < fd:
        os.close(fd)
        return low
    os.close(low)
    return fd


def main(argv: list[str] | None = None) -> int:
    global STARTED_AT
    # First thing: a hang or a fatal signal anywhere later must leave a Python stack in our log.
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)

    parser = argparse.ArgumentParser(prog="python -m wirecheck.workers.worker")
    parser.add_argument("--fd", type=int, required=True, help="socket inherited from the parent")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--label")
    parser.add_argument("--backend")
    parser.add_argument("--spare", action="store_true", help="import torch, then wait to be given a rank")
    parser.add_argument("--spare-log", help="a spare's own log, moved into its rank's when it is given one")
    parser.add_argument("--zygote", metavar="EXITS_DIR",
                        help="import torch, then fork spares on request; their exit codes go to EXITS_DIR (zygote.py)")
    parser.add_argument("--no-process-group", action="store_true")
    parser.add_argument("--parent-death-signal", action="store_true",
                        help="die with the parent (SIGKILL, prctl): the parent's main thread started us")
    parser.add_argument("--rendezvous-timeout", type=float, default=120.0,
                        help="seconds to wait for the group's store (the parent's start timeout)")
    args = parser.parse_args(argv)
    if not (args.spare or args.zygote) and not (args.label and args.backend):
        parser.error("--label and --backend are required (or --spare, or --zygote)")

    if args.parent_death_signal:
        # The kernel's own parent-death signal: at once, even where the watch thread cannot run (a
        # C call holding the GIL); the watch stays for systems without it.
        parent_death.arm(signal.SIGKILL, args.parent_pid)
    conn = Connection(_lowest_descriptor(args.fd))
    if args.zygote:
        # No watch thread in the zygote: it forks, and a fork copies only the calling thread. Its loop
        # watches the parent instead.
        from wirecheck.workers import zygote

        forked = zygote.serve(conn, args.zygote, args.parent_pid)
        if forked is None:
            return 0
        fd, args.spare_log, args.parent_pid = forked  # a forked spare: the zygote is its parent
        conn = Connection(_lowest_descriptor(fd))
        args.spare = True
        STARTED_AT = time.time()  # this process began here
    _watch_parent(args.parent_pid)
    try:
        if args.spare:
            given = _wait_as_spare(conn, args.spare_log)
            if given is None:
                return 0
            role, spare = given
            return serve(conn, role["label"], role["backend"], role["init_process_group"],
                         role["rendezvous_timeout_s"], spare)
        return serve(conn, args.label, args.backend, not args.no_process_group, args.rendezvous_timeout)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


if __name__ == "__main__":
    # Run as `-m`, this file is `__main__`; use the importable copy so that RankContext is
    # `wirecheck.workers.worker.RankContext` for worker functions too.
    from wirecheck.workers.worker import main as _main

    code = _main()
    # Left without Python's finalisation: the work is done, the process group destroyed and the output flushed
    # (main's end). Tearing down torch's modules was 0.4 s of a worker's 0.95-s end on a 1x H200 node
    # (scripts/device/exit_probe.py), paid at every group's close; the kernel and the driver free the rest.
    os._exit(code)
