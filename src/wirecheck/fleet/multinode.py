"""Collectives across every GPU of N nodes, and node pairs in a ring schedule, under torchrun.

    torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id JOB \\
        -m wirecheck.multinode --wirecheck-json results/network-JOB.jsonl

(`wirecheck fleet multinode` builds that command and explains a rendezvous that cannot be reached.)
Every rank measures all_reduce, all_gather and reduce_scatter over the whole job with the suite's
own worker function (wirecheck.measure.collective_worker:measure: warm-up, timed calls, every element checked),
then the node pairs of wirecheck.core.pair_schedule on their own process groups. Rank 0 writes the
record (run header, measurements, verdicts, end; the end line too when SIGTERM, SIGHUP or Ctrl-C stops
the job, naming the signal, and the rank exits 128+N: records.stop_signals) and judges it with the same check functions as one
node: `busbw` and `collective_correct` under the placement class `network`, whose floor is derived
from the slowest node's NIC line rate, and `pair_node`/`pair_link` for the pairs. The record is
written as the suite writes its own (wirecheck.records.run), each size as `wirecheck.measure.sweep`
records it. Every rank exits with rank 0's verdict (wirecheck.core.exit_codes): 0 pass, 1 a verdict
failed or a measurement broke, 2 bad input, 10 a simulation that failed nothing (torchrun counts
every exit but 0 as a failed rank: `wirecheck fleet multinode` says what 10 meant). A rank that
raises writes torch elastic's error file (`record`), so torchrun's summary names its exception.
A rank whose step fails (its own measurement raised, or a collective failed or timed out on a peer that
died or hung) asks NCCL's RAS before it leaves (`failure_ras`: the communicators of the whole job, the dead
or unresponsive ranks by host, GPU and pid; NCCL_RAS_ADDR honoured) and prints the reading in its torchrun
log; rank 0's goes into the record with the failure (`measurement_completed`'s `ras`). With gloo (a
simulation) there is no RAS, and that is said.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Mapping

from wirecheck.core import exit_codes
from wirecheck.records.run import COMPLETE, ERROR, INTERRUPTED
from wirecheck.records.stop_signals import EndOnSignal
from wirecheck.vocab import records as kinds

# Held while rank 0 writes its record, so that the end line a stop signal writes is the last line.
RECORD_LOCK = threading.Lock()

DEFAULT_OPS = ("all_reduce", "all_gather", "reduce_scatter")
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class UsageError(Exception):
    """Bad input: the message names the thing and the fix."""


def build_parser() -> argparse.ArgumentParser:
    # Imported here (they import torch): the module itself imports without it.
    from wirecheck.fleet.pairs import MEASURE_PAIR_WORKER
    from wirecheck.measure.collectives import MEASURE_WORKER

    p = argparse.ArgumentParser(prog="torchrun ... -m wirecheck.multinode", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--simulate", action="store_true",
                   help="CPU processes and gloo instead of GPUs and NCCL (nothing about the nodes is validated)")
    p.add_argument("--ops", default=",".join(DEFAULT_OPS), help=f"collectives, comma separated (default {','.join(DEFAULT_OPS)})")
    p.add_argument("--no-pairs", dest="pairs", action="store_false", help="skip the node-pair schedule")
    p.add_argument("--pair-list", metavar="A~B,C~D", help="measure these node pairs only, instead of the collectives "
                   "across the job and the ring schedule (`wirecheck fleet diagnose --run` passes it: each suspect "
                   "with known-good partners); every node named must be in the job")
    p.add_argument("--sizes", help='sizes instead of the thresholds file\'s, e.g. "64 MiB,1 GiB" (busbw is judged at '
                                   "floor_size only: keep it in the list)")
    p.add_argument("--thresholds", metavar="FILE", help="thresholds file (default: the one shipped with wirecheck)")
    p.add_argument("--wirecheck-json", metavar="PATH", help="record file rank 0 writes "
                                                          "(default: a new .wirecheck/multinode-<UTC>-<host>-<pid>.jsonl)")
    p.add_argument("--node-name", default=None,
                   help="this node's name in the record and the pair schedule, as its record file is named "
                        "(default: $SLURMD_NODENAME under Slurm, else the host name; give one per torchrun agent "
                        "when several agents share a host)")
    p.add_argument("--collective-worker", default=MEASURE_WORKER, metavar="MODULE:FUNCTION",
                   help=f"worker function for the whole-job collectives (default {MEASURE_WORKER})")
    p.add_argument("--pair-worker", default=MEASURE_PAIR_WORKER, metavar="MODULE:FUNCTION",
                   help=f"worker function for one node pair (default {MEASURE_PAIR_WORKER})")
    return p


def _torchrun_env() -> dict[str, int | str]:
    missing = [k for k in TORCHRUN_ENV if k not in os.environ]
    if missing:
        raise UsageError(f"{', '.join(missing)} not set: run this under torchrun, e.g. `torchrun --nnodes N "
                         "--nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id JOB -m "
                         "wirecheck.multinode` on every node, or `wirecheck fleet multinode`")
    return {k: (int(os.environ[k]) if k not in ("MASTER_ADDR",) else os.environ[k]) for k in TORCHRUN_ENV}


def _settings(args, simulated: bool):
    from wirecheck.core.paths import suite_paths
    from wirecheck.core.quantity import QuantityError, parse_quantity
    from wirecheck.thresholds.file import ThresholdsError, load_thresholds

    path = Path(args.thresholds) if args.thresholds else suite_paths().thresholds
    try:
        thresholds = load_thresholds(path)
    except FileNotFoundError:
        raise UsageError(f"--thresholds: {path} does not exist; pass the path of a thresholds file") from None
    except ThresholdsError as exc:
        raise UsageError(str(exc)) from None
    settings = thresholds.collective_settings(simulated)
    sizes = list(settings.sizes)
    if args.sizes:
        try:
            sizes = [int(parse_quantity(s.strip(), "size", "--sizes")) for s in args.sizes.split(",") if s.strip()]
        except QuantityError as exc:
            raise UsageError(str(exc)) from None
    from wirecheck.vocab.ops import OPS

    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = [op for op in ops if op not in OPS]
    if unknown or not ops:
        raise UsageError(f"--ops {args.ops}: unknown collective(s) {unknown}; known: {', '.join(OPS)}")
    return thresholds, settings, sizes, ops



class Job:
    """One rank's view of the job: who is where, the record (rank 0), the verdicts so far."""

    def __init__(self, args, env, thresholds, settings, sizes, ops, simulated):
        import torch

        from wirecheck.workers.worker import RankContext, resolve

        self.args, self.thresholds, self.settings, self.sizes, self.ops = args, thresholds, settings, sizes, ops
        self.simulated = simulated
        self.rank, self.world = env["RANK"], env["WORLD_SIZE"]
        # The name the node's own record carries (DIR/<name>.jsonl), so the fleet report can join them.
        self.node = args.node_name or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        backend = "gloo" if simulated else "nccl"
        if simulated:
            device = torch.device("cpu")
        else:
            if not torch.cuda.is_available():
                raise UsageError(f"node {self.node}: no CUDA device visible (CUDA_VISIBLE_DEVICES="
                                 f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); run on GPU nodes, or pass "
                                 "--simulate to rehearse on CPUs")
            torch.cuda.set_device(env["LOCAL_RANK"])
            device = torch.device("cuda", env["LOCAL_RANK"])
        self.ctx = RankContext(self.rank, self.world, env["LOCAL_RANK"], backend, device, f"{self.node}:{env['LOCAL_RANK']}")
        self.collective_worker = resolve(args.collective_worker)
        self.pair_worker = resolve(args.pair_worker)
        self.record = None
        self.verdicts: list = []
        self.started = time.monotonic()

    # -- every rank ---------------------------------------------------------------------------------
    def join(self) -> None:
        import torch.distributed as dist

        dist.init_process_group(self.ctx.backend, timeout=_dt.timedelta(seconds=self.settings.timeout_s))
        self.dist = dist
        me = {"rank": self.rank, "node": self.node, "host": socket.gethostname(), "pid": os.getpid(),
              "group_rank": int(os.environ.get("GROUP_RANK", -1)), "local_rank": self.ctx.local_rank,
              "device": _device_name(self.ctx), "network": None}
        if self.ctx.local_rank == 0 and not self.simulated:
            from wirecheck.node import network

            me["network"] = {"ports": network.ports_as_data(network.read_ports())}
        everyone: list = [None] * self.world
        dist.all_gather_object(everyone, me)
        self.ranks = sorted(everyone, key=lambda r: r["rank"])
        agents: dict[str, set] = {}
        for r in self.ranks:
            agents.setdefault(r["node"], set()).add(r["group_rank"])
        shared = {n: sorted(g) for n, g in agents.items() if len(g) > 1}
        if shared:
            raise UsageError(f"several torchrun agents report the same node name {shared}: give each agent its own "
                             "--node-name (e.g. when several agents run on one host)")
        self.nodes = sorted(agents)  # ring order: sorted names, stable from run to run
        self.node_ranks = {n: [r["rank"] for r in self.ranks if r["node"] == n] for n in self.nodes}

    def line_rate(self, nodes: list[str]) -> tuple[float | None, str]:
        if self.simulated:
            return None, "simulation: no NIC is measured"
        from wirecheck.node.network import job_line_rate

        info = {}
        for n in nodes:
            inv = next(r["network"] for r in self.ranks if r["node"] == n and r["local_rank"] == 0)
            info[n] = {"ports": inv["ports"] if inv else [], "gpus": len(self.node_ranks[n])}
        return job_line_rate(info)

    def collective(self, op: str):
        """Measure `op` over the whole job; every rank gets every rank's record. A rank whose measurement
        raises leaves the job (see `run`): its peers' collectives then fail, and rank 0 records that."""
        from wirecheck.vocab.ops import feasible_sizes

        # Sizes too small to give every rank an element (all_gather at 8 B on 16 GPUs) are left out.
        sizes = feasible_sizes(op, self.sizes, self.world)
        rec = self.collective_worker(self.ctx, op=op, sizes=sizes, warmup_iters=self.settings.warmup_iters,
                                     iters=self.settings.iters)
        gathered: list = [None] * self.world
        self.dist.all_gather_object(gathered, rec)
        return gathered

    def pairs(self, listed: list[tuple[str, str]] | None = None):
        """Run the pair schedule (or the `listed` pairs); every rank gets every rank's pair results."""
        from wirecheck.core.pair_schedule import listed_rounds, pair_key, pair_rounds

        rounds = pair_rounds(self.nodes) if listed is None else listed_rounds(listed)
        groups = {}
        for r in rounds:  # every rank creates every group, in the same order (torch.distributed's rule)
            for a, b in r.pairs:
                ranks = sorted(self.node_ranks[a] + self.node_ranks[b])
                groups[pair_key(a, b)] = (ranks, self.dist.new_group(ranks))
        size = self.settings.floor_size
        mine = []
        for r in rounds:
            # Simulated nodes share this machine's cores: pairs run at the same time would measure the
            # contention for them, not the pairs. Real nodes run each matching's pairs at once.
            slots = [(pair,) for m in r.matchings for pair in m] if self.simulated else list(r.matchings)
            for matching in slots:
                for a, b in matching:
                    ranks, group = groups[pair_key(a, b)]
                    if self.rank in ranks:
                        res = self.pair_worker(self.ctx, group=group, group_ranks=ranks, size=size,
                                               warmup_iters=self.settings.warmup_iters, iters=self.settings.iters)
                        mine.append((pair_key(a, b), a, b, r.shift, res))
                self.dist.barrier()  # the next matching starts when this one is done everywhere
        gathered: list = [None] * self.world
        self.dist.all_gather_object(gathered, mine)
        return rounds, groups, [item for per_rank in gathered for item in per_rank]

    def finish(self, code: int) -> int:
        """Every rank leaves with rank 0's verdict."""
        box = [code]
        self.dist.broadcast_object_list(box, src=0)
        self.dist.destroy_process_group()
        return int(box[0])


def _device_name(ctx) -> str:
    import torch

    return torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda" else "cpu"


# ---- rank 0: record and judge -------------------------------------------------------------------


class Judge:
    """Rank 0: writes the record as things happen and prints the tables and verdicts."""

    def __init__(self, job: Job, path: str | None):
        """`path`: --wirecheck-json; None: a new `.wirecheck/multinode-<UTC>-<host>-<pid>.jsonl`."""
        from wirecheck.records.file import RecordFileError
        from wirecheck.records.run import RunWriter, cannot_write

        self.job = job
        try:  # the job's wall time, rendezvous included
            self.writer = RunWriter(path, folder=".wirecheck", prefix="multinode", started=job.started)
        except RecordFileError as exc:
            raise UsageError(cannot_write(exc, "--wirecheck-json", bool(path), ".wirecheck")) from None
        self.broken: list[str] = []

    def stopped(self, signal_name: str, code: int) -> int:
        """A stop signal came (RECORD_LOCK held): the end line names it, unless the record has ended."""
        if self.writer.ended:
            return self.writer.exit_status
        self.writer.end(INTERRUPTED, code, signal=signal_name)
        self.writer.close()
        print(f"wirecheck multinode: stopped by {signal_name}: the run is incomplete, not accepted; the record keeps "
              f"what was measured: {self.writer.path}", flush=True)
        return code

    def header(self) -> None:
        import torch

        from wirecheck.vocab.placements import CLASS_NETWORK
        from wirecheck.records.run import run_header

        job = self.job
        rate, why = job.line_rate(job.nodes)
        header = run_header(
            simulated=job.simulated,
            simulation_source="torchrun agents with CPU ranks (gloo)" if job.simulated else None,
            thresholds=job.thresholds.path,
            versions={"torch": str(torch.__version__), "python": platform.python_version()},
            gpus=[{"rank": r["rank"], "node": r["node"], "device": r["device"]} for r in job.ranks],
            placements=[{"id": self.placement_id, "class": CLASS_NETWORK, "gpus": list(range(job.world))}],
            multinode={
                "nodes": job.nodes, "world_size": job.world, "gpus_per_node": {n: len(r) for n, r in job.node_ranks.items()},
                "ranks": [{k: r[k] for k in ("rank", "node", "host", "group_rank", "local_rank", "pid")} for r in job.ranks],
                "backend": job.ctx.backend, "ops": job.ops, "sizes": job.sizes,
                "rdzv": {k: os.environ.get(k) for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")},
                "line_rate_bytes_per_s": rate, "line_rate_basis": why,
                "network": {r["node"]: r["network"] for r in job.ranks if r["local_rank"] == 0},
            },
        )
        with RECORD_LOCK:
            self.writer.header(header)

    @property
    def placement_id(self) -> str:
        return f"network-{len(self.job.nodes)}node-{self.job.world}gpu"

    def _measurement(self, m) -> None:
        with RECORD_LOCK:
            self.writer.measurement(m)

    def verdict(self, v, test: str) -> None:
        with RECORD_LOCK:
            self.writer.verdict(v, test)
        print(f"{v.outcome.upper():4} {v.check:18} {v.where or '-':28} {v.message}", flush=True)

    def collective(self, op: str, gathered: list) -> None:
        from wirecheck import checks
        from wirecheck.measure import collectives
        from wirecheck.measure.sweep import size_measurement
        from wirecheck.vocab.placements import CLASS_NETWORK
        from wirecheck.core.quantity import format_bytes

        job, where = self.job, self.placement_id
        results = collectives.combine(op, job.world, gathered)
        print(collectives.format_table(op, results), flush=True)
        rate, why = job.line_rate(job.nodes)
        context = {"placement_class": CLASS_NETWORK, "n_gpus": job.world, "backend": job.ctx.backend,
                   "simulated": job.simulated, "nodes": job.nodes}
        for k, res in enumerate(results):
            self._measurement(size_measurement(where, op, res, gathered, k, context))
        sizes = [{"bytes": r.bytes, "wrong_by_rank": r.wrong_by_rank, "first_bad_by_rank": r.first_bad_by_rank}
                 for r in results]
        self.verdict(checks.collectives.collective_correct(job.thresholds, op=op, placement=where, sizes=sizes, error=None),
                     f"multinode::{op}::correct")
        at_floor = next((r for r in results if r.requested_bytes == job.settings.floor_size), None)
        if at_floor is None:
            print(f"note: {op} busbw not judged: the floor size {format_bytes(job.settings.floor_size)} is not among the "
                  "sizes measured", flush=True)
            return
        self.verdict(checks.collectives.busbw(
            job.thresholds, op=op, placement=where, placement_class=CLASS_NETWORK, n_gpus=job.world,
            simulated=job.simulated, busbw_bytes_per_s=at_floor.busbw, size_bytes=at_floor.bytes,
            link_ceiling_bytes_per_s=rate), f"multinode::{op}::busbw")
        if rate is None and not job.simulated:
            print(f"note: no NIC line rate for the network floor ({why})", flush=True)

    def pairs(self, rounds, groups, results: list) -> None:
        from wirecheck import checks
        from wirecheck.core.pair_schedule import pair_key
        from wirecheck.core.quantity import format_bytes
        from wirecheck.fleet.pairs import OP
        from wirecheck.measure import collectives
        from wirecheck.vocab.placements import CLASS_NETWORK
        from wirecheck.records.file import Measurement

        job = self.job
        by_pair: dict[str, list] = {}
        for key, _a, _b, _shift, res in results:
            by_pair.setdefault(key, []).append(res)
        measured = []
        schedule = "the listed pairs" if job.args.pair_list else "ring (shift 1) then shift 2"
        print(f"# node pairs: {schedule}; all_reduce at {format_bytes(job.settings.floor_size)}", flush=True)
        for r in rounds:
            for a, b in r.pairs:
                key = pair_key(a, b)
                ranks, _ = groups[key]
                res = by_pair.get(key, [])
                if len(res) != len(ranks):  # every rank of the pair reports, or the job broke before
                    self.broken.append(f"pair {a}-{b}: {len(res)} of {len(ranks)} ranks reported")
                    self.verdict(checks.measurement_completed(job.thresholds, what=f"pair {a}-{b}", placement=key,
                                                              error=self.broken[-1]), f"multinode::pair::{key}")
                    continue
                n = len(ranks)
                (pair,) = collectives.combine(OP, n, res)  # slowest rank, algbw and busbw as for any collective
                print(f"  round {r.shift}  {a:>16} - {b:<16} {pair.busbw / 1e9:9.3f} GB/s  {pair.time_s * 1e6:10.1f} us  "
                      f"#wrong {pair.wrong}", flush=True)
                self._measurement(Measurement(
                    kinds.PAIR, key, f"{OP} busbw {a}-{b} at {format_bytes(pair.bytes)}", pair.busbw / 1e9, "GB/s", {
                        "a": a, "b": b, "shift": r.shift, "ranks": ranks, "op": OP, "bytes": pair.bytes,
                        "requested_bytes": pair.requested_bytes, "time_s": pair.time_s, "algbw": pair.algbw,
                        "busbw": pair.busbw, "rank_time_s": {x["job_rank"]: x["results"][0]["time_s"] for x in res},
                        "wrong_by_rank": pair.wrong_by_rank, "placement_class": CLASS_NETWORK, "n_gpus": n,
                        "simulated": job.simulated}))
                self.verdict(checks.collectives.collective_correct(
                    job.thresholds, op=OP, placement=key,
                    sizes=[{"bytes": pair.bytes, "wrong_by_rank": pair.wrong_by_rank,
                            "first_bad_by_rank": pair.first_bad_by_rank}], error=None),
                    f"multinode::pair::{key}::correct")
                rate, _ = job.line_rate([a, b])
                self.verdict(checks.collectives.busbw(
                    job.thresholds, op=OP, placement=key, placement_class=CLASS_NETWORK, n_gpus=n,
                    simulated=job.simulated, busbw_bytes_per_s=pair.busbw, size_bytes=pair.bytes,
                    link_ceiling_bytes_per_s=rate), f"multinode::pair::{key}::busbw")
                measured.append({"a": a, "b": b, "busbw_bytes_per_s": pair.busbw})
        if job.args.pair_list:
            return  # listed pairs are not a ring: `wirecheck fleet diagnose` judges them (fleet.diagnosis_verdicts)
        for node in job.nodes:
            self.verdict(checks.fleet.pair_node(job.thresholds, node=node, pairs=measured, simulated=job.simulated),
                         f"multinode::pair_node::{node}")
        for p in measured:
            self.verdict(checks.fleet.pair_link(job.thresholds, a=p["a"], b=p["b"], pairs=measured,
                                                simulated=job.simulated), f"multinode::pair_link::{p['a']}~{p['b']}")

    def record_break(self, what: str, exc: BaseException, ras: dict | None = None) -> int:
        """The job broke in `what` (this rank raised, or a peer died or hung): record it and end.
        `ras`: NCCL RAS's reading this rank took before giving up (`failure_ras`)."""
        from wirecheck import checks

        error = (f"{what} stopped on rank 0 ({self.job.node}): {type(exc).__name__}: {exc}; a peer that died or hung "
                 "shows in its own node's torchrun log")
        self.verdict(checks.measurement_completed(self.job.thresholds, what=what, placement=self.placement_id,
                                                  error=error, ras=ras), f"multinode::{what}")
        return self.end(status=ERROR)

    def end(self, status: str = COMPLETE) -> int:
        counts = self.writer.verdicts
        failed = counts["fail"] > 0 or bool(self.broken)
        code = exit_codes.verdict(failed=failed, simulated=self.job.simulated)
        with RECORD_LOCK:
            self.writer.end(status, code)
            self.writer.close()
        summary = f"{counts['fail']} failed, {counts['pass']} passed, {counts['skip']} skipped"
        print(f"wirecheck multinode: {'FAILED' if failed else 'PASSED'}: {summary}; record {self.writer.path}", flush=True)
        if self.job.simulated:
            print("wirecheck multinode: SIMULATION: CPU processes and gloo stood in for GPUs and NICs; "
                  "no node or network was validated", flush=True)
        return code


def run(args, stopper: EndOnSignal | None = None) -> int:
    env = _torchrun_env()
    simulated = bool(args.simulate)
    thresholds, settings, sizes, ops = _settings(args, simulated)
    if args.pair_list:
        ops = []  # the listed pairs only: no collective across the job
    job = Job(args, env, thresholds, settings, sizes, ops, simulated)
    job.join()
    try:
        listed = _pair_list(args.pair_list, job.nodes) if args.pair_list else None
    except UsageError:
        job.dist.destroy_process_group()
        raise
    judge, problem = None, None
    if job.rank == 0:
        try:
            judge = Judge(job, args.wirecheck_json)
        except UsageError as exc:
            problem = str(exc)
    box = [problem]
    job.dist.broadcast_object_list(box, src=0)  # a record rank 0 cannot write stops every rank, not just rank 0
    if box[0]:
        job.dist.destroy_process_group()
        raise UsageError(box[0])
    if judge:
        if stopper is not None:
            stopper.on_signal = judge.stopped
        judge.header()
        print(f"wirecheck multinode: {len(job.nodes)} nodes ({', '.join(job.nodes)}), {job.world} ranks, "
              f"{job.ctx.backend}", flush=True)
    what = "setup"
    try:
        if listed is not None:
            what = "the listed pairs"
            rounds, groups, results = job.pairs(listed)
            if judge:
                judge.pairs(rounds, groups, results)
        for op in ops:
            what = f"{op} across {len(job.nodes)} nodes"
            gathered = job.collective(op)
            if judge:
                judge.collective(op, gathered)
        if listed is None and args.pairs and len(job.nodes) >= 2:
            what = "the pair schedule"
            rounds, groups, results = job.pairs()
            if judge:
                judge.pairs(rounds, groups, results)
    except Exception as exc:
        # This rank raised, or a peer died or hung (its collective failed or timed out): the process group
        # cannot be trusted for another call. Rank 0 records the failure and ends its record; every rank
        # leaves at once, so torchrun reports the job failed instead of waiting on it.
        traceback.print_exc()
        _record_for_torchrun(exc)
        # Before leaving: RAS lives in the ranks' processes, and once they exit it has nothing to tell.
        reading = failure_ras(job.ctx.backend, job.rank, job.node)
        print_ras(reading)
        code = judge.record_break(what, exc, reading) if judge else exit_codes.FAILED
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or exit_codes.FAILED)
    code = judge.end() if judge else exit_codes.OK
    return job.finish(code)


def failure_ras(backend: str, rank: int, node: str, env: Mapping[str, str] | None = None) -> dict:
    """NCCL RAS's reading of the job as this rank's node answers it (`env`: the process's, where NCCL_RAS_ADDR
    says where RAS listens), taken when a step failed; with gloo, why there is none. Never raises: RAS is
    evidence, its absence said (wirecheck.workers.ras)."""
    from wirecheck.workers import ras

    if backend != "nccl":
        reading = ras.not_read(f"not asked: the {backend} backend has no NCCL RAS")
    else:
        reading = ras.ask_status(os.environ if env is None else env)
    return {**reading, "asked_by": {"rank": rank, "node": node, "pid": os.getpid()}}


def print_ras(reading: dict) -> None:
    """The reading in this rank's torchrun log (each node's log holds its own ranks' readings)."""
    from wirecheck.workers import ras_report

    who = reading.get("asked_by") or {}
    for line in ras_report.lines(reading):
        print(f"wirecheck multinode: rank {who.get('rank')} ({who.get('node')}): {line}", file=sys.stderr, flush=True)


def _pair_list(text: str, nodes: list[str]) -> list[tuple[str, str]]:
    """--pair-list A~B,C~D as pairs of the job's nodes (every rank reads the same, so every rank refuses alike)."""
    pairs = []
    for item in (t.strip() for t in text.split(",")):
        a, sep, b = item.partition("~")
        if not item or not sep or not a or not b or a == b:
            raise UsageError(f"--pair-list {text}: {item!r} is not a pair of two nodes; write A~B,C~D")
        unknown = [n for n in (a, b) if n not in nodes]
        if unknown:
            raise UsageError(f"--pair-list: {', '.join(unknown)} not in this job (its nodes: {', '.join(nodes)}); "
                             "start the job on every node the list names, with its --node-name")
        pairs.append((a, b))
    return pairs


def _record_for_torchrun(exc: BaseException) -> None:
    """torch elastic's error file (TORCHELASTIC_ERROR_FILE) for an exception this rank leaves on through
    os._exit, which `record` around main never sees: torchrun's summary then names it."""
    from torch.distributed.elastic.multiprocessing.errors import get_error_handler

    get_error_handler().record_exception(exc)


def _main(argv: list[str] | None, stopper: EndOnSignal | None = None) -> int:
    args = build_parser().parse_args(argv)
    rank = os.environ.get("RANK", "0")
    try:
        return run(args, stopper)
    except UsageError as exc:
        if rank == "0":
            print(f"wirecheck multinode: {exc}", file=sys.stderr, flush=True)
        return exit_codes.BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    """The rank's entry point, under torch elastic's `record`: an exception that ends the rank is written
    to TORCHELASTIC_ERROR_FILE, and torchrun's summary shows it for the failed rank."""
    # Before torch is imported: the threads it starts inherit the blocked stop signals, which only the
    # stopper's thread takes (one of torch's threads given SIGTERM would end the rank without an end line).
    with EndOnSignal(RECORD_LOCK) as stopper:
        from torch.distributed.elastic.multiprocessing.errors import record  # here: the module imports without torch

        return record(_main)(argv, stopper)


if __name__ == "__main__":
    sys.exit(main())
