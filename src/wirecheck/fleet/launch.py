"""The work of `wirecheck fleet multinode` (its options and usage: wirecheck.cli.fleet.multinode): torchrun
with c10d rendezvous on `wirecheck.fleet.multinode`, run once on every node (under Slurm: `srun
--ntasks-per-node=1`); `run(args)` with the command's options parsed.

It only builds the torchrun command the README documents and runs it with this environment
(NCCL switches pass through); under Slurm the node count, the rendezvous host (the job's first node)
and the job id come from Slurm's variables. When torchrun cannot reach or complete the rendezvous it
says so in one line that names the endpoint and the fix, instead of leaving the operator with a C++
stack. Exit status: torchrun's (0 every rank passed; 1 a rank failed: a verdict, a broken measurement,
bad input), 10 when every rank exited 10 (a simulation that failed nothing, which torchrun reports as
failed ranks), 2 when the rendezvous failed or an option is missing, and 128+N when a signal stopped it
(SIGTERM 143, SIGHUP 129, Ctrl-C 130): SIGTERM and SIGHUP are passed on to torchrun, which passes them
to the ranks, whose record ends naming the signal; Ctrl-C at a terminal reaches torchrun itself.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque

from wirecheck.core import exit_codes
from wirecheck.fleet.settings import DEFAULT_JOIN_TIMEOUT_S, DEFAULT_PORT
from wirecheck.workers import bytecode

# torchrun's own rendezvous failures (a worker's broken connection mid-run is not one of them).
RENDEZVOUS_ERRORS = ("RendezvousConnectionError", "RendezvousTimeoutError", "RendezvousClosedError",
                     "RendezvousStateError")
# A failed rank in torchrun's ChildFailedError summary: "  exitcode  : 10 (pid: 4242)".
SUMMARY_EXITCODE = re.compile(r"^\s+exitcode\s*:\s*(-?\d+)")


class LaunchError(ValueError):
    pass


TOOL_TIMEOUT_S = 10  # scontrol, nvidia-smi -L: a wedged driver or controller must not hold the step forever
# How long after --join-timeout the rendezvous may take before the step is stopped: torchrun itself waits
# without end on a port another service holds, and minutes on a host that does not resolve.
RENDEZVOUS_GRACE_S = 30.0
WATCH_EVERY_S = 0.5


def _tool(argv: list[str]) -> subprocess.CompletedProcess:
    """argv run with a time limit; LaunchError naming it where it does not answer."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"`{' '.join(argv)}` did not answer in {TOOL_TIMEOUT_S} s (a wedged driver or controller?); "
                          "fix it on this node, or pass the value as an option") from None


def _slurm_first_host() -> str | None:
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        return None
    if shutil.which("scontrol"):
        done = _tool(["scontrol", "show", "hostnames", nodelist])
        if done.returncode == 0 and done.stdout.split():
            return done.stdout.split()[0]
    return nodelist if "[" not in nodelist and "," not in nodelist else None


def _gpu_count() -> int | None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return len([d for d in visible.split(",") if d.strip()])
    if shutil.which("nvidia-smi"):
        done = _tool(["nvidia-smi", "-L"])
        if done.returncode == 0:
            return sum(line.startswith("GPU ") for line in done.stdout.splitlines()) or None
    return None


def _has_children(pid: int) -> bool:
    """Whether the process has started a child (torchrun starts its workers once the rendezvous completed)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # no /proc to read: never stop a job on a guess
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                if fh.read().split():
                    return True
        except OSError:
            continue
    return False


def _watch_rendezvous(proc: subprocess.Popen, deadline_s: float, timed_out: list[float]) -> None:
    """Stop torchrun when no worker has started by `deadline_s` after its start: the rendezvous did not complete."""
    start = time.monotonic()
    while proc.poll() is None:
        if _has_children(proc.pid):
            return
        if time.monotonic() - start > deadline_s:
            timed_out.append(time.monotonic() - start)
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            return
        time.sleep(WATCH_EVERY_S)


def torchrun_command(args) -> list[str]:
    env = os.environ
    nnodes = args.nnodes or (int(env["SLURM_JOB_NUM_NODES"]) if env.get("SLURM_JOB_NUM_NODES", "").isdigit() else None)
    if not nnodes:
        raise LaunchError("--nnodes: not given and $SLURM_JOB_NUM_NODES is not set; pass --nnodes N")
    extra = [a for a in args.multinode_args if a != "--"]
    nproc = args.nproc_per_node or (1 if "--simulate" in extra else _gpu_count())
    if not nproc:
        raise LaunchError("--nproc-per-node: no GPU found (CUDA_VISIBLE_DEVICES unset, nvidia-smi lists none); pass "
                          "--nproc-per-node G, or -- --simulate to rehearse on CPUs")
    endpoint = args.rdzv_endpoint
    if not endpoint:
        host = _slurm_first_host()
        if not host:
            raise LaunchError("--rdzv-endpoint: not given and not under Slurm; pass --rdzv-endpoint HOST:PORT "
                              "naming one node of the job (the same on every node)")
        endpoint = f"{host}:{DEFAULT_PORT}"
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit():
        raise LaunchError(f"--rdzv-endpoint {endpoint}: expected HOST:PORT, e.g. node001:{DEFAULT_PORT}")
    rdzv_id = args.rdzv_id or env.get("SLURM_JOB_ID")
    if not rdzv_id:
        raise LaunchError("--rdzv-id: not given and $SLURM_JOB_ID is not set; pass the same --rdzv-id on every node")
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node", str(nproc),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", str(rdzv_id),
            "--rdzv-conf", f"join_timeout={args.join_timeout}", "-m", "wirecheck.fleet.multinode", *extra]


def rendezvous_problem(stderr_tail: list[str], endpoint: str) -> str | None:
    """The rendezvous error that kept the job from running, explained; None when there was none.

    Not one that torchrun only warns about after the job: when the agent hosting the store leaves
    first, the others log "failed to shutdown the rendezvous ... RendezvousConnectionError" on
    their way out. Their workers ran (a ChildFailedError or a clean exit says so), so their exit
    code is the job's verdict, not a rendezvous problem (seen in CI, 2 of 8 simulated 4-node runs).
    """
    if any("ChildFailedError" in line for line in stderr_tail):
        return None  # the workers started, so the rendezvous worked
    text = "".join(line for line in stderr_tail if "failed to shutdown the rendezvous" not in line)
    found = next((name for name in RENDEZVOUS_ERRORS if name in text), None)
    if found is None:
        return None
    return (f"the rendezvous at {endpoint} failed ({found}): check that every node runs this same command with the "
            f"same --rdzv-endpoint and --rdzv-id, that the endpoint's host is one of the job's nodes and its port is "
            f"open between the nodes (firewall), and that all nodes join within --join-timeout")


def without_signal_traceback(lines: list[str]) -> list[str]:
    """torchrun's output after a stop signal, without the Python traceback it prints for the signal it was
    sent (a SignalException: the expected way out, not an error to read at 3 am)."""
    out: list[str] = []
    block: list[str] = []
    for line in lines:
        if line.startswith("Traceback (most recent call last):"):
            out += block
            block = [line]
        elif block:
            block.append(line)
            if not line.startswith(" "):  # the exception line ends the traceback
                if "SignalException" not in line:
                    out += block
                block = []
        else:
            out.append(line)
    return out + block


def simulated_pass(stderr_tail: list[str]) -> bool:
    """True when torchrun's failure summary lists only ranks that exited SIMULATED: a simulation that
    failed nothing, which torchrun, counting every exit but 0 as a failed rank, reports as a failure."""
    if not any("ChildFailedError" in line for line in stderr_tail):
        return False
    codes = [int(m.group(1)) for m in map(SUMMARY_EXITCODE.match, stderr_tail) if m]
    return bool(codes) and all(code == exit_codes.SIMULATED for code in codes)


def _ranks_env() -> dict[str, str]:
    """This environment, plus wirecheck's bytecode cache where the node's Python keeps none: every
    torchrun worker imports torch, and compiles it from source without one (bytecode.py)."""
    prepared = bytecode.prepare()
    if prepared is not None:
        print(f"wirecheck fleet multinode: {prepared.describe()}", file=sys.stderr, flush=True)
    return bytecode.worker_env(dict(os.environ))


def run(args) -> int:
    """`wirecheck fleet multinode` with its options parsed (wirecheck.cli.fleet.multinode): torchrun's exit
    status, or one of wirecheck.core.exit_codes as this module's docstring says."""
    try:
        cmd = torchrun_command(args)
    except LaunchError as exc:
        print(f"wirecheck fleet multinode: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    endpoint = cmd[cmd.index("--rdzv-endpoint") + 1]
    print("wirecheck fleet multinode: " + " ".join(cmd), file=sys.stderr, flush=True)
    if args.dry_run:
        return exit_codes.OK
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace", env=_ranks_env())
    stopped_by: list[int] = []
    timed_out: list[float] = []
    threading.Thread(target=_watch_rendezvous, args=(proc, args.join_timeout + RENDEZVOUS_GRACE_S, timed_out),
                     daemon=True, name="wirecheck-rendezvous-watch").start()

    def pass_on(signum, _frame) -> None:
        stopped_by.append(signum)
        if signum != signal.SIGINT:  # a terminal's Ctrl-C reaches torchrun itself; twice would cut its cleanup
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    tail: deque[str] = deque(maxlen=400)
    assert proc.stderr is not None
    held: list[str] = []  # torchrun's stderr after a stop signal, shown once it has exited
    try:
        for line in proc.stderr:  # passed through as it comes, kept to explain a failure
            if stopped_by:
                held.append(line)
            else:
                sys.stderr.write(line)
            tail.append(line)
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    sys.stderr.writelines(without_signal_traceback(held))
    if timed_out:
        print(f"wirecheck fleet multinode: the rendezvous at {endpoint} did not complete in {timed_out[0]:.0f} s "
              f"(--join-timeout {args.join_timeout} s and {RENDEZVOUS_GRACE_S:.0f} s more): no worker started, torchrun "
              "was stopped; check that the endpoint's port is free for the rendezvous (no other service listens "
              "there), that its host resolves and is reachable from every node, and that every node runs this same "
              "command with the same --rdzv-endpoint and --rdzv-id", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if stopped_by:
        name = signal.Signals(stopped_by[0]).name
        print(f"wirecheck fleet multinode: stopped by {name} (torchrun exited {code}): the job is incomplete, not "
              "accepted; rank 0's record ends naming the signal", file=sys.stderr)
        return 128 + stopped_by[0]
    if code != 0:
        problem = rendezvous_problem(list(tail), endpoint)
        if problem:
            print(f"wirecheck fleet multinode: {problem}", file=sys.stderr)
            return exit_codes.BAD_INPUT
        if simulated_pass(list(tail)):
            print(f"wirecheck fleet multinode: SIMULATION without failures: every rank exited {exit_codes.SIMULATED}, "
                  "which torchrun reports as failed ranks above; nothing about the nodes or network was validated; "
                  f"exit {exit_codes.SIMULATED}", file=sys.stderr)
            return exit_codes.SIMULATED
    return code
