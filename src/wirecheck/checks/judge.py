"""`wirecheck judge RESULTS.jsonl [MORE.jsonl ...] [--thresholds FILE]`: judge recorded runs again.

Each verdict in a record file carries the inputs its check was computed from; the same check
functions (wirecheck.checks) run on them again against a thresholds file — retuned floors,
another node's limits — without GPUs. Failures are printed first, each with what was
measured, the limit, where it is written and its source.

Exit codes: 0 every verdict passes on a complete hardware run; 1 a verdict fails, or a run
was cut short (no end record) or interrupted; 2 bad input (a file that is not a record, a
malformed thresholds file); 10 the runs passed but one of them was a simulation (no node
was validated).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from wirecheck.core import exit_codes
from wirecheck.checks import rejudge
from wirecheck.training.strategy_run import workload_of
from wirecheck.core.paths import suite_paths
from wirecheck.records.file import RecordFileError, RunRecord, read_run
from wirecheck.thresholds.file import Thresholds, ThresholdsError, load_thresholds
from wirecheck.core.verdict import FAIL, OUTCOMES, PASS, SKIP, Verdict


@dataclass
class Judged:
    run: RunRecord
    test: str | None
    recorded: Verdict
    now: Verdict

    @property
    def changed(self) -> bool:
        return self.recorded.outcome != self.now.outcome


def judge_run(run: RunRecord, thresholds: Thresholds) -> list[Judged]:
    recorded, now = rejudge_run(run, thresholds)
    return [Judged(run, rec.get("test"), was, new) for rec, was, new in zip(run.verdicts, recorded, now)]


def rejudge_run(run: RunRecord, thresholds: Thresholds) -> tuple[list[Verdict], list[Verdict]]:
    """`run`'s verdicts as recorded, and each judged again against `thresholds`, in record order.

    A record comes from another node, or a shared folder: it is data, and what it recorded may be
    anything. A verdict whose recorded inputs the check cannot take raises RecordFileError naming
    the file and the verdict, never a traceback (issue 24)."""
    try:
        recorded = [Verdict.from_record(rec) for rec in run.verdicts]
        workloads = _recorded_workloads(run)
    except Exception as exc:  # noqa: BLE001 (anything a changed or damaged record makes them raise)
        raise RecordFileError(f"{run.path}: a verdict or measurement is not as wirecheck writes them "
                              f"({type(exc).__name__}: {_short(exc)}); the record was changed or damaged") from None
    now = []
    for rec, verdict in zip(run.verdicts, recorded):
        try:
            now.append(rejudge(_with_workload(verdict, workloads), thresholds))
        except ThresholdsError:
            raise
        except Exception as exc:  # noqa: BLE001
            what = "" if isinstance(exc, ValueError) else f"{type(exc).__name__}: "
            raise RecordFileError(f"{run.path}: the verdict {verdict.check} ({rec.get('test')}) cannot be judged again "
                                  f"from the inputs it recorded ({what}{_short(exc)}); the record was changed or "
                                  "damaged, or is from another version of wirecheck") from None
    return recorded, now


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


# Training checks whose limits hold for one workload (model, micro-batch, precision) only.
WORKLOAD_CHECKS = frozenset({"throughput", "peak_memory", "slow_wire", "dial_flattens"})


def _recorded_workloads(run: RunRecord) -> dict[tuple, dict]:
    """(placement, strategy) -> what that strategy trained, from the run's own measurements."""
    found = {}
    for m in run.measurements:
        if m.get("kind") != "strategy":
            continue
        ranks = (m.get("details") or {}).get("ranks") or []
        if ranks and "micro_batch" in ranks[0]:
            found[(m.get("placement"), ranks[0].get("strategy"))] = workload_of(ranks[0])
    return found


def _with_workload(verdict: Verdict, workloads: dict) -> Verdict:
    """Records written before these checks took the workload as an input: it is read from the
    run's own strategy measurement, so that limits of another workload skip them by name
    instead of failing (or passing) them."""
    if verdict.check not in WORKLOAD_CHECKS or "workload" in verdict.inputs:
        return verdict
    workload = workloads.get((verdict.inputs.get("placement"), verdict.inputs.get("strategy", "ddp")))
    return verdict if workload is None else replace(verdict, inputs={**verdict.inputs, "workload": workload})


def _limit_text(v: Verdict) -> str:
    if not v.limit:
        return ""
    parts = [f"{k} {_num(val)}" for k, val in v.limit.items() if val is not None]
    return " ".join(parts) + (f" {v.unit}" if v.unit and v.unit not in ("x",) else "")


def _num(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_verdict(j: Judged) -> str:
    v = j.now
    head = f"{v.outcome.upper():4} {v.check:22} {v.where or 'node':28}"
    if v.outcome == SKIP:
        return f"{head} {v.message}"
    lines = [f"{head} {v.message}"]
    if v.outcome == FAIL and v.measured is not None:
        lines.append(f"     measured {_num(v.measured)}{' ' + v.unit if v.unit else ''}; limit {_limit_text(v) or '-'}"
                     + (f"; {v.yaml_path}; source: {v.source}" if v.source else ""))
    if j.changed:
        lines.append(f"     (was {j.recorded.outcome} when recorded{': ' + j.test if j.test else ''})")
    return "\n".join(lines)


def _run_status(run: RunRecord) -> str | None:
    if run.end is None:
        return f"{run.path}: the run was cut short (no end record): whatever it did not reach was never judged"
    if run.end.get("status") != "complete":
        return f"{run.path}: the run was {run.end.get('status')}: not every check ran"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wirecheck judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", metavar="RESULTS.jsonl", help="record files written by a run (--wirecheck-json)")
    parser.add_argument("--thresholds", metavar="FILE",
                        help="thresholds file to judge against (default: the thresholds.yaml shipped with this wirecheck)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    args = parser.parse_args(argv)

    th_path = Path(args.thresholds) if args.thresholds else suite_paths().thresholds
    try:
        thresholds = load_thresholds(th_path)
        runs = [read_run(p) for p in args.records]
        judged = [j for run in runs for j in judge_run(run, thresholds)]
    except (ThresholdsError, RecordFileError, ValueError) as exc:
        print(f"wirecheck judge: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except FileNotFoundError as exc:
        print(f"wirecheck judge: {exc.filename}: no such file", file=sys.stderr)
        return exit_codes.BAD_INPUT

    print(f"wirecheck judge: {len(judged)} verdicts from {len(runs)} run(s) against {th_path}")
    for run in runs:
        if run.earlier_runs:
            print(f"wirecheck judge: {run.path} holds {run.earlier_runs + 1} runs; judging the last one "
                  f"(started {run.run.get('started')})")
    order = {FAIL: 0, PASS: 1, SKIP: 2}
    for j in sorted(judged, key=lambda j: order[j.now.outcome]):
        if j.now.outcome == FAIL or not args.quiet:
            print(format_verdict(j))
    counts = {o: sum(j.now.outcome == o for j in judged) for o in OUTCOMES}
    changed = sum(j.changed for j in judged)
    problems = [p for p in (_run_status(run) for run in runs) if p]
    for p in problems:
        print(f"wirecheck judge: {p}")
    simulated = [str(run.path) for run in runs if run.simulated]
    summary = f"{counts[FAIL]} failed, {counts[PASS]} passed, {counts[SKIP]} skipped; {changed} changed since recorded"
    if counts[FAIL] or problems:
        print(f"wirecheck judge: FAILED: {summary}")
        return exit_codes.FAILED
    if simulated:
        print(f"wirecheck judge: {summary}; SIMULATION: {', '.join(simulated)} judged a simulated run, no node was validated")
        return exit_codes.SIMULATED
    print(f"wirecheck judge: PASSED: {summary}")
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
