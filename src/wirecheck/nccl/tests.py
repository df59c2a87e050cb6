"""NVIDIA nccl-tests beside the suite (the library of `wirecheck nccl-tests`, wirecheck.cli.nccl_tests):
the binaries' arguments and environment per placement, the suite's own sweep on the same GPUs, both
curves side by side and recorded, for each op at each dtype and reduction asked (nccl-tests' -d, -o)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from wirecheck.core import exit_codes
from wirecheck.nccl import crosscheck
from wirecheck.measure.curve import SWEEP_NAMES, SweepSpec, parse_sweep
from wirecheck.measure.sweep import run_sweep
from wirecheck.workers.pool import Unavailable, WorkerPool
from wirecheck.nccl.tests_output import Run, parse
from wirecheck.node.placement import CLASS_PAIR, CLASS_SINGLE, Placement, split_requested
from wirecheck.records.file import Measurement, env_switches
from wirecheck.records.run import COMPLETE, RunWriter, fault_lines
from wirecheck.core.safefs import is_root, make_dirs, path_problem, umask, write_atomically
from wirecheck.thresholds.file import CollectiveSettings
from wirecheck.vocab import ops as vocab
from wirecheck.vocab import records as kinds

DEFAULT_OPS = ("all_reduce", "all_gather", "reduce_scatter")


def compared_column(op: str) -> str:
    """torch's all_reduce and broadcast work in place: compare with nccl-tests' in-place column."""
    return "in_place" if vocab.get(op).in_place else "out_of_place"


def binary_argv(build_dir: Path, op: str, spec: SweepSpec, n_gpus: int, warmup_iters: int, iters: int,
                axes: vocab.Axes | None = None) -> list[str]:
    """One process driving n GPUs (-g), the data type (-d) and reduction (-o) of `axes` (None: the op's
    first, as the suite measures it), one checked iteration per size (-c 1)."""
    row, a = vocab.get(op), axes or vocab.axes(op)
    reduction = ["-o", a.reduction] if a.reduction else []
    return [str(build_dir / row.binary), *spec.nccl_tests_args(), "-g", str(n_gpus),
            "-w", str(warmup_iters), "-n", str(iters), "-c", "1", "-d", vocab.dtype(a.dtype).nccl_tests, *reduction]


ALL = "all"  # --dtypes all, --reductions all: every one the op has (nccl-tests' -d all, -o all)


def combinations(ops: Sequence[str], dtypes: Sequence[str] = (), reductions: Sequence[str] = ()) -> list[vocab.Axes]:
    """Each op at each of `dtypes` x `reductions` that it has (none given: its first; ["all"]: every one it
    has); an op that reduces nothing takes no reduction. Names the vocabulary does not know are refused."""
    unknown = [d for d in dtypes if d != ALL and d not in vocab.DTYPES]
    unknown += [r for r in reductions if r != ALL and r not in vocab.REDUCTIONS]
    if unknown:
        raise ValueError(f"unknown dtype or reduction {', '.join(unknown)}; dtypes: {', '.join(vocab.DTYPES)}, "
                         f"reductions: {', '.join(vocab.REDUCTIONS)} (or {ALL})")
    out = []
    for op in ops:
        row = vocab.get(op)
        ds = [row.dtype] if not dtypes else [d for d in row.dtypes if ALL in dtypes or d in dtypes]
        rs = [row.reduction] if not reductions or not row.reductions else \
            [r for r in row.reductions if ALL in reductions or r in reductions]
        out += [vocab.Axes(op, d, r) for d in ds for r in rs]
    return out


def binary_env(placement: Placement, base: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment (NVLS switches and all) plus the placement's, pinned to its GPUs as the
    suite's workers are (NVML's PCI bus order)."""
    env = dict(os.environ if base is None else base)
    env.update(placement.env)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["CUDA_VISIBLE_DEVICES"] = placement.cuda_visible_devices
    return env


def nccl_code(version: str | None) -> str | None:
    """"2.28.9" -> "22809", NCCL_VERSION_CODE as nccl-tests prints it (nccl-library=...)."""
    try:
        major, minor, patch = (int(x) for x in (version or "").split(".")[:3])
    except ValueError:
        return None
    return str(major * 10000 + minor * 100 + patch) if (major, minor) >= (2, 9) else str(major * 1000 + minor * 100 + patch)


@dataclass
class Outcome:
    """What one placement produced: the suite's curves, nccl-tests' runs, and what went wrong."""

    placement: Placement
    suite: dict[str, list] = field(default_factory=dict)  # axes id -> [collectives.SizeResult]
    runs: dict[str, Run] = field(default_factory=dict)  # axes id -> nccl-tests run
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not measured, and why (not a failure)
    suite_nccl: str | None = None


def suite_pool(placements: Sequence[Placement], backend: str, settings: CollectiveSettings) -> WorkerPool:
    """The suite's side on one worker pool (wirecheck.workers.pool) for every placement of the command: a
    sub-group each, one start per environment; every size gets the thresholds' timeout (the command has
    no floors to derive deadlines from). The caller closes it."""
    return WorkerPool(placements, backend=backend, simulated=backend == "gloo", timeout_s=settings.timeout_s)


def measure_suite(pool: WorkerPool, placement: Placement, combos: Sequence[vocab.Axes], sizes: Sequence[int],
                  settings: CollectiveSettings, outcome: Outcome) -> None:
    """The suite's curves on the placement's sub-group of `pool`, one size per call (a hang costs one
    size's timeout, as in the suite): the suite's own sweep (wirecheck.measure.sweep), eager-only on gloo."""
    for a in combos:
        try:
            sweep = run_sweep(pool, placement, a.op, sizes, settings, graphs=pool.backend == "nccl", axes=a)
        except Unavailable as exc:  # its wire hung in an earlier op: nothing more runs there
            outcome.errors.append(f"suite {a.words} on {placement.id}: {exc}")
            continue
        outcome.suite_nccl = sweep.nccl_version or outcome.suite_nccl
        if sweep.results:
            outcome.suite[a.id] = sweep.results
        for result in sweep.results:
            if not result.ok:
                outcome.errors.append(
                    f"suite: {result.wrong_summary() or f'{a.words} at {result.requested_bytes} B was not checked'}")
        if sweep.error:
            outcome.errors.append(f"suite {a.words} on {placement.id}: {sweep.error}")
        if sweep.refused:
            outcome.notes.append(f"suite {a.words} on {placement.id}: not measured: {sweep.refused}")


def run_nccl_tests(build_dir: Path, placement: Placement, combos: Sequence[vocab.Axes], spec: SweepSpec,
                   settings: CollectiveSettings, timeout_s: float, outcome: Outcome,
                   raw_dir: Path | None = None, base_env: dict[str, str] | None = None) -> None:
    env = binary_env(placement, base_env)
    for a in combos:
        op = a.op
        argv = binary_argv(build_dir, op, spec, placement.n_gpus, settings.warmup_iters, settings.iters, a)
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s)
            text, status = proc.stdout, f"exit code {proc.returncode}"
            failed = proc.returncode != 0
            stderr = proc.stderr
        except subprocess.TimeoutExpired as exc:
            text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            stderr, status, failed = "", f"no result within {timeout_s:g} s", True
        if raw_dir is not None:  # replaced whole, never written through a link planted at the name
            make_dirs(raw_dir, what="--raw-dir", fix="pass --raw-dir with a folder only root can write")
            write_atomically(raw_dir / f"{placement.id}-{a.id}.txt", f"$ {' '.join(argv)}\n{text}", mode=0o644 & ~umask())
        runs = parse(text)
        if not runs or failed or not runs[-1].ok:
            tail = "\n".join((text + "\n" + stderr).strip().splitlines()[-8:]) or (
                "it printed nothing: is it nccl-tests' binary? rebuild nccl-tests in --build-dir")
            words = "" if a.first else f" {a.dtype}" + (f" {a.reduction}" if a.reduction else "")
            outcome.errors.append(f"nccl-tests {vocab.get(op).binary}{words} on {placement.id} ({status}): {tail}")
        if runs:
            outcome.runs[a.id] = runs[-1]


def _records(outcome: Outcome, combos: Sequence[vocab.Axes]) -> dict[vocab.Axes, list[dict]]:
    out = {}
    for a in combos:
        run = outcome.runs.get(a.id)
        out[a] = crosscheck.side_by_side(a.op, outcome.placement.id, outcome.placement.n_gpus,
                                         outcome.suite.get(a.id, []), run.rows if run else [], compared_column(a.op),
                                         axes=a)
    return out


def crosscheck_placements(build_dir: Path, placements: Sequence[Placement], ops: Sequence[str | vocab.Axes],
                          spec: SweepSpec, settings: CollectiveSettings, out_path: Path | None, backend: str = "nccl",
                          binary_timeout_s: float = 300, raw_dir: Path | None = None,
                          echo: Callable[[str], None] = print) -> int:
    """Measure, run, print and record every placement; the exit status (0 all ran and were right, 1 not).
    `ops`: op names (each at its first dtype and reduction) or `combinations` of them."""
    combos = [vocab.axes(x) if isinstance(x, str) else x for x in ops]
    ops = list(dict.fromkeys(a.op for a in combos))
    missing = [vocab.get(op).binary for op in ops if not os.access(build_dir / vocab.get(op).binary, os.X_OK)]
    if missing:
        echo(f"wirecheck nccl-tests: {build_dir} has no executable {', '.join(missing)}; build nccl-tests there "
             "(make -C nccl-tests NCCL_HOME=... ) or pass its build directory")
        return exit_codes.BAD_INPUT
    if is_root():  # root runs these binaries: another user who can change them chooses what root runs
        for op in ops:
            problem = path_problem(build_dir / vocab.get(op).binary)
            if problem:
                echo(f"wirecheck nccl-tests: running as root, and {problem}, who could choose what root runs; build "
                     "nccl-tests in a folder only root can write and pass that")
                return exit_codes.BAD_INPUT
    records = RunWriter(out_path, folder=".wirecheck", prefix="nccl-tests", keep_going=True)
    records.header({"command": "wirecheck nccl-tests", "build_dir": str(build_dir), "sizes": list(spec.sizes),
                    "ops": list(ops), "axes": [a.id for a in combos], "placements": [p.id for p in placements],
                    "backend": backend,
                    "iters": settings.iters, "warmup_iters": settings.warmup_iters,
                    "graph_up_to": settings.graph_up_to, "graph_replays": settings.graph_replays,
                    "env": env_switches()})
    failed = False
    try:
        outcomes = [Outcome(placement) for placement in placements]
        pool = suite_pool(placements, backend, settings)
        try:
            for outcome in outcomes:
                measure_suite(pool, outcome.placement, combos, spec.sizes, settings, outcome)
        finally:
            pool.close()  # nccl-tests' binaries have the GPUs alone
        for outcome in outcomes:
            placement = outcome.placement
            run_nccl_tests(build_dir, placement, combos, spec, settings, binary_timeout_s, outcome, raw_dir)
            for a, recs in _records(outcome, combos).items():
                run = outcome.runs.get(a.id)
                versions = {"nccl_tests_version": run.version if run else None, "nccl_tests_library": run.nccl_library if run else None,
                            "suite_nccl": outcome.suite_nccl}
                for rec in recs:
                    records.measurement(Measurement(
                        kinds.NCCL_TESTS, placement.id, f"{a.words} busbw at {rec['bytes']} B, suite / nccl-tests",
                        rec["busbw_ratio"], "x", {**rec, **versions}))
                title = (f"{a.words} on {placement.id} ({placement.n_gpus} GPUs): wirecheck vs nccl-tests "
                         f"{versions['nccl_tests_version'] or '?'} ({compared_column(a.op).replace('_', '-')} column)")
                echo(crosscheck.format_side_by_side(title, recs))
                code = nccl_code(outcome.suite_nccl)
                if run and run.nccl_library and code and run.nccl_library != code:
                    echo(f"# WARNING: nccl-tests ran with NCCL {run.nccl_library}, the suite with {outcome.suite_nccl} "
                         f"({code}): point LD_LIBRARY_PATH at torch's NCCL to compare the same library")
                echo("")
            for note in outcome.notes:
                echo(f"NOTE: {note}")
            for error in outcome.errors:
                echo(f"ERROR: {error}")
            failed = failed or bool(outcome.errors)
        status = exit_codes.verdict(failed=failed, simulated=False)
        records.end(COMPLETE, status)
        status = records.exit_status  # HARNESS_FAULT where the disk refused a line (RunWriter)
    finally:
        records.close()
    echo(f"wirecheck nccl-tests: records in {records.path}")
    if records.any_fault is not None:  # last: a fault of the harness, no verdict on the node
        for line in fault_lines(records):
            echo(f"wirecheck nccl-tests: {line}")
        echo(f"wirecheck nccl-tests: HARNESS FAULT, not a verdict on this node (exit {status}): "
             f"{records.any_fault.line().replace('--wirecheck-json', '--out')}")
    return status


def select_placements(placements: Sequence[Placement], wanted: Sequence[str]) -> list[Placement]:
    """--placement ID or CLASS (repeatable); none: every placement that runs collectives."""
    if not wanted:
        return [p for p in placements if p.klass not in (CLASS_SINGLE, CLASS_PAIR)]
    chosen = []
    for item in split_requested(list(wanted)):
        matches = [p for p in placements if item in (p.id, p.klass)]
        if not matches:
            known = ", ".join(p.id for p in placements)
            raise ValueError(f"--placement {item}: no such placement id or class on this node; known: {known}")
        chosen += [p for p in matches if p not in chosen]
    return chosen


def sweep(settings: CollectiveSettings, text: str) -> SweepSpec:
    return settings.sweep(text) if text in SWEEP_NAMES else parse_sweep(text)
