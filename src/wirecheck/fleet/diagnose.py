"""The work of `wirecheck fleet diagnose` (its options, usage and exit codes: wirecheck.cli.fleet.diagnose):
across nodes, which node or which path is slow. The suspects and good partners come from a fleet report
(wirecheck.fleet.diagnose_plan), the pairs are measured by `wirecheck fleet multinode` (one srun under Slurm,
one agent per node on this machine for a simulated fleet), judged by wirecheck.fleet.diagnosis and written
to a record of their own (verdicts of check `diagnosis`, as `wirecheck diagnose` writes them), which
`wirecheck fleet report DIR --diagnosis FILE` shows; `run(args)` with the command's options parsed.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from wirecheck.core import exit_codes as codes
from wirecheck.core.pair_schedule import pair_key
from wirecheck.core.paths import suite_paths
from wirecheck.fleet.diagnose_plan import Plan, PlanError, make_plan, read_leaves, render
from wirecheck.fleet.diagnosis import exit_code, judge
from wirecheck.fleet.launch import DEFAULT_PORT
from wirecheck.fleet.records import FleetInputError, read_node_list
from wirecheck.records import reason
from wirecheck.records.culprit import diagnosed_culprits
from wirecheck.records.file import RecordFileError, read_run
from wirecheck.records.run import COMPLETE, RunWriter, thresholds_fields
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.vocab import records as kinds

PROG = "wirecheck fleet diagnose"
KIND = "diagnosis"  # the header's kind, as `wirecheck diagnose`'s records
LOCAL_TIMEOUT_S = 300  # a simulated pair run on this machine: a few pairs of CPU ranks
SLURM_REASON_MAX = 255  # a Slurm reason as slurmdbd keeps it (as `wirecheck node-state`, a layer above, says)


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def _report_data(source: Path, listed: list[str] | None, thresholds) -> dict:
    """The fleet report's data: read from its --json file, or made from the records directory as
    `wirecheck fleet report --json` makes it."""
    if source.is_dir():
        from wirecheck.fleet.judging import digest, judge_fleet
        from wirecheck.fleet.records import collect
        from wirecheck.fleet.report import as_json

        fleet = collect(source, listed, digest=digest(thresholds))
        return json.loads(json.dumps(as_json(judge_fleet(fleet, thresholds)), default=str))
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FleetInputError(f"{source}: no such file or directory; pass a fleet report (`wirecheck fleet report DIR "
                              "--json FILE`) or the records directory") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FleetInputError(f"{source}: not a fleet report's JSON ({type(exc).__name__}); pass the file `wirecheck "
                              "fleet report DIR --json FILE` wrote, or the records directory") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or "named" not in data:
        raise FleetInputError(f"{source}: JSON without the fleet report's 'nodes' and 'named'; pass the file `wirecheck "
                              "fleet report DIR --json FILE` wrote, or the records directory")
    return data


def _pairs_record_path(out: str | None) -> Path:
    if out:
        return Path(out).with_suffix(".pairs.jsonl")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path(".wirecheck") / f"fleet-pairs-{stamp}-{platform.node()}-{os.getpid()}.jsonl"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _multinode(nnodes: int, endpoint: str, rdzv_id: str, plan: Plan, record: Path, extra: list[str]) -> list[str]:
    """`wirecheck fleet multinode` (the fleet's one launcher) for the plan's pairs."""
    return [sys.executable, "-m", "wirecheck.cli.main", "fleet", "multinode", "--nnodes", str(nnodes),
            "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id, "--",
            "--pair-list", ",".join(f"{a}~{b}" for a, b in plan.pairs), f"--wirecheck-json={record}", *extra]


def launch_commands(plan: Plan, record: Path, simulated: bool, env: dict, workers: dict[str, str],
                    srun: str | None) -> list[list[str]]:
    """The commands that measure the plan's pairs: one srun over its nodes under Slurm (`srun`: its path;
    each node runs `wirecheck fleet multinode`, as the acceptance job's step 2), or, for a simulated fleet
    outside Slurm, one agent per node on this machine. Raises PlanError where neither can run."""
    nodes = plan.nodes
    if env.get("SLURM_JOB_ID") and srun:
        if workers:
            raise PlanError("--pair-worker: only for a simulated run on this machine, not under srun")
        step = _multinode(len(nodes), f"{nodes[0]}:{DEFAULT_PORT}", f"{env['SLURM_JOB_ID']}-diagnose", plan, record,
                          ["--simulate"] if simulated else [])
        return [[srun, f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}", "--ntasks-per-node=1",
                 "--kill-on-bad-exit=0", *step]]
    if not simulated:
        by_hand = " ".join(_multinode(len(nodes), f"{nodes[0]}:{DEFAULT_PORT}", "diagnose", plan, record, []))
        raise PlanError(f"--run measures pairs between nodes: run it inside a Slurm allocation holding "
                        f"{', '.join(nodes)} (salloc/sbatch --nodelist), or run on each of them `{by_hand}` and then "
                        f"`{PROG} ... --pairs-record {record}`")
    unknown = sorted(set(workers) - set(nodes))
    if unknown:
        raise PlanError(f"--pair-worker {', '.join(unknown)}: not among the plan's nodes ({', '.join(nodes)})")
    endpoint = f"127.0.0.1:{_free_port()}"
    rdzv = f"diagnose-{os.getpid()}"
    return [_multinode(len(nodes), endpoint, rdzv, plan, record,
                       ["--simulate", "--node-name", n, *(["--pair-worker", workers[n]] if n in workers else [])])
            for n in nodes]


def run_pairs(commands: list[list[str]]) -> list[int]:
    """Start every command at once (each node's agent), wait for all; their output passes through."""
    procs = [subprocess.Popen(cmd) for cmd in commands]
    try:
        return [p.wait(timeout=LOCAL_TIMEOUT_S if len(commands) > 1 else None) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def measured_pairs(path: Path) -> dict[str, dict]:
    """{pair_key: {"busbw_bytes_per_s", "below_floor"}} from a pair run's record; {} without one."""
    try:
        run = read_run(path)
    except FileNotFoundError:
        return {}
    floor_failed = {v.get("where") for v in run.verdicts if v.get("check") == "busbw" and v.get("outcome") == "fail"}
    out = {}
    for m in run.measurements:
        d = m.get("details") or {}
        if m.get("kind") == kinds.PAIR and isinstance(d.get("busbw"), (int, float)):
            key = pair_key(d["a"], d["b"])
            out[key] = {"busbw_bytes_per_s": float(d["busbw"]), "below_floor": key in floor_failed}
    return out


def write_record(out: str | None, plan: Plan, findings, figures, source: str, pairs_record: Path, simulated: bool,
                 thresholds_path, code: int) -> Path:
    writer = RunWriter(out, folder=".wirecheck", prefix="fleet-diagnosis")
    try:
        writer.header({"kind": KIND, "fleet": True, "diagnosed": source, "pairs_record": str(pairs_record),
                       "simulated": simulated, **thresholds_fields(thresholds_path), "plan": plan.as_data(),
                       "figures": figures, "gpus": [], "placements": []})
        for f in findings:
            writer.verdict(f.verdict(), test=f"fleet_diagnose::{f.kind}::{f.subject}")
        writer.end(COMPLETE, code)
    finally:
        writer.close()
    return writer.path


def run(args) -> int:
    """`wirecheck fleet diagnose` with its options parsed (wirecheck.cli.fleet.diagnose): an exit code of
    wirecheck.core.exit_codes, as `wirecheck fleet diagnose --help` lists them."""
    th_path = Path(args.thresholds) if args.thresholds else suite_paths().thresholds
    try:
        thresholds = load_thresholds(th_path)
        listed = read_node_list(args.nodes) if args.nodes else None
        leaves = read_leaves(args.leaves) if args.leaves else None
        good = [g.strip() for g in args.good.split(",") if g.strip()] if args.good else None
        data = _report_data(Path(args.source), listed, thresholds)
        plan = make_plan(data, good, listed, leaves)
        workers = dict(w.split("=", 1) for w in args.pair_worker if "=" in w)
        if len(workers) != len(args.pair_worker):
            raise PlanError("--pair-worker: write NODE=MODULE:FUNCTION")
    except FileNotFoundError:
        _say(f"--thresholds: {th_path} does not exist; pass the path of a thresholds file")
        return codes.BAD_INPUT
    except (ThresholdsError, FleetInputError, PlanError, RecordFileError, ValueError) as exc:
        _say(str(exc))
        return codes.BAD_INPUT
    simulated = bool(data.get("simulated"))
    source = Path(args.source)
    records_dir = source if source.is_dir() else Path(data["directory"]) if data.get("directory") else None
    if args.out and records_dir is not None and Path(args.out).resolve().parent == records_dir.resolve():
        # the pair run's record goes beside it: both would be read back as records of the fleet
        _say(f"--json {args.out}: inside the records directory {records_dir}, where `wirecheck fleet report` would read "
             f"it as a node's record; give a path in a folder of its own (e.g. {records_dir}/diagnosis/"
             "fleet-diagnosis.jsonl)")
        return codes.BAD_INPUT
    print(render(plan))
    if not plan.suspects:
        return codes.NOTHING_TO_LOCALIZE
    if not (args.run_pairs or args.pairs_record):
        print(f"\nrun them: {PROG} {args.source}{' --good ' + args.good if args.good else ''} --run")
        return codes.DIAGNOSIS_PLANNED
    record = Path(args.pairs_record) if args.pairs_record else _pairs_record_path(args.out)
    if not args.pairs_record:
        try:
            commands = launch_commands(plan, record, simulated, dict(os.environ), workers, shutil.which("srun"))
        except PlanError as exc:
            _say(str(exc))
            return codes.BAD_INPUT
        record.parent.mkdir(parents=True, exist_ok=True)
        for cmd in commands:
            print(f"{PROG}: " + " ".join(cmd), file=sys.stderr, flush=True)
        exits = run_pairs(commands)
        if codes.BAD_INPUT in exits and not record.exists():
            _say(f"the pair run did not start (exit {codes.BAD_INPUT}: bad input or a rendezvous that failed; its "
                 "message is above)")
            return codes.BAD_INPUT
    try:
        measured = measured_pairs(record)
    except RecordFileError as exc:
        _say(f"--pairs-record: {exc}")
        return codes.BAD_INPUT
    findings, figures = judge(plan, measured, thresholds.fleet(simulated).pairs)
    code = exit_code(findings)
    print(f"\npairs measured: {len(measured)} of {len(plan.pairs)} (record {record})")
    for f in findings:
        print(f.verdict().message)
    path = write_record(args.out, plan, findings, figures, str(args.source), record, simulated, th_path, code)
    print(f"\ndiagnosis record: {path}")
    culprits = diagnosed_culprits(read_run(path))  # as a drain hook reads them back
    for node, line in culprits.items():
        print(f"culprit {node}: {line}")
        print(f"  drain reason: {reason.line(line, SLURM_REASON_MAX)}")
    if not culprits:
        print("no node or path named")
    if simulated:
        print(f"{PROG}: SIMULATION: CPU processes and gloo stood in for GPUs and NICs; no node was diagnosed")
    return code
