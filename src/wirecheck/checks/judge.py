"""`wirecheck judge RESULTS.jsonl [MORE.jsonl ...] [--thresholds FILE]`: judge recorded runs again.

Each verdict in a record file carries the inputs its check was computed from; the same check
functions (wirecheck.checks) run on them again against a thresholds file — retuned floors,
another node's limits — without GPUs. Without --thresholds each run is judged against its own
thresholds, as it read them (the record's header keeps the file's bytes); say --thresholds FILE to
judge against another. Failures are printed first, each with what was measured, the limit, where
it is written and its source. pytest counts tests, judge counts verdicts: where their skips
differ, judge says why (a test skipped before its check ran records no verdict).

A warn verdict (nothing failed, something to say) is printed with the failures, even with -q, and
counted apart; it does not fail the judgement.

Exit codes: 0 every verdict passes (or warns) on a complete hardware run; 1 a verdict fails (FAILED), or a run
was cut short (no end record) or interrupted with nothing failed (INCOMPLETE; a torn last line is
named and skipped); 2 bad input (a file that is not a record, a
malformed thresholds file); 10 the runs passed but one of them was a simulation (no node
was validated).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from wirecheck.core import exit_codes, render
from wirecheck.checks import rejudge
from wirecheck.training.strategy_run import workload_of
from wirecheck.core.paths import suite_paths
from wirecheck.records.file import RecordFileError, RunRecord, read_run
from wirecheck.records.run import recorded_bases, recorded_thresholds
from wirecheck.thresholds.file import Thresholds, ThresholdsError, load_thresholds
from wirecheck.core.verdict import FAIL, OUTCOMES, PASS, SKIP, WARN, Verdict
from wirecheck.vocab import records as kinds


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
    the file and the verdict, never a traceback."""
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
        if m.get("kind") != kinds.STRATEGY:
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


def format_verdict(j: Judged) -> str:
    """A verdict judged again, as wirecheck.core.render writes it for judge, and whether it changed."""
    lines = render.judge_lines(j.now)
    if j.changed:
        lines.append(f"     (was {j.recorded.outcome} when recorded{': ' + j.test if j.test else ''})")
    return "\n".join(lines)


def _run_status(run: RunRecord) -> str | None:
    if run.end is None:
        return f"{run.path}: the run was cut short (no end record): whatever it did not reach was never judged"
    if run.end.get("status") != "complete":
        return f"{run.path}: the run was {run.end.get('status')}: not every check ran"
    return None


def _own_thresholds(run: RunRecord, shipped: Path) -> tuple[Thresholds, str]:
    """The thresholds a run was judged against when it ran (its header keeps their bytes), with the line
    that says so; a record from before that judges against the shipped file, and says that."""
    recorded_path = run.run.get("thresholds")
    try:
        recorded = recorded_thresholds(run.run)
        bases = recorded_bases(run.run)
    except ValueError as exc:
        raise RecordFileError(f"{run.path}: {exc}; pass --thresholds FILE to judge it against a file") from None
    if recorded is None:
        return load_thresholds(shipped), (f"{run.path}: the record does not keep its thresholds (written before "
                                           f"they were recorded): judged against {shipped}")
    data, digest = recorded
    label = f"{recorded_path} as the run read it (sha256 {digest[:12]}, kept in the record's header)"
    try:
        thresholds = load_thresholds(recorded_path or "recorded thresholds", content=data, bases=bases)
    except ThresholdsError as exc:
        raise RecordFileError(f"{run.path}: the thresholds the run recorded cannot be read by this version of wirecheck "
                              f"({exc}); pass --thresholds FILE") from None
    note = f"{run.path}: judged against its own thresholds, {label}"
    now = _file_digest(recorded_path)
    if now is None:
        note += f"; {recorded_path} is gone from this machine"
    elif now != digest:
        note += "; " + _which_differs(run, recorded_path)
    return thresholds, note


def _which_differs(run: RunRecord, recorded_path: str) -> str:
    """The file on disk and the record's copy of it differ: which one moved. A file last written before the
    run started is the one the run read, so it is the record's copy that was edited since."""
    again = f"pass --thresholds {recorded_path} to judge against the file as it is now"
    try:
        modified = _dt.datetime.fromtimestamp(Path(recorded_path).stat().st_mtime, _dt.timezone.utc)
        started = _dt.datetime.fromisoformat(str(run.run.get("started")))
    except (OSError, ValueError, TypeError):
        return f"{recorded_path} differs from the copy in the record ({again})"
    when = modified.isoformat(timespec="seconds")
    if started.tzinfo is not None and modified < started:
        return (f"{recorded_path} is unchanged since before the run (last written {when}) but differs from the copy in "
                f"the record: the record's copy was edited after the run ({again})")
    return (f"{recorded_path} differs from the copy the run read and was written after the run started ({when}): it "
            f"has changed since ({again})")


def _file_digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _skips_explained(runs: list[RunRecord], judged: list[Judged]) -> list[str]:
    """pytest counts tests, judge counts verdicts: a test skipped before its check ran (simulation, no
    --profile, a placement it does not apply to) recorded no verdict. Said when the counts differ."""
    lines = []
    for run in runs:
        tests = (run.end or {}).get("tests") or {}
        pytest_skips = tests.get("skipped")
        verdict_skips = sum(j.recorded.outcome == SKIP for j in judged if j.run is run)
        if pytest_skips is None or pytest_skips == verdict_skips:
            continue
        line = (f"{run.path}: pytest counted {pytest_skips} skipped tests, the record holds {verdict_skips} skip "
                f"verdicts: a test that skips before its check runs records no verdict")
        unjudged = (run.end or {}).get("skipped_without_verdict") or {}
        if unjudged:
            top = sorted(unjudged.items(), key=lambda kv: -kv[1])[:3]
            line += "; most often: " + "; ".join(f"{n} x {reason}" for reason, n in top)
        lines.append(line)
    return lines


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wirecheck judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", metavar="RESULTS.jsonl", help="record files written by a run (--wirecheck-json)")
    parser.add_argument("--thresholds", metavar="FILE",
                        help="thresholds file to judge against (default: each run's own, kept in its record; a record "
                             "written before 2026-12-02 keeps none and is judged against the shipped thresholds.yaml)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print failures and the summary only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    notes = []
    try:
        runs = [read_run(p) for p in args.records]
        for run in runs:
            if run.run.get("kind") == "diagnosis":  # wirecheck diagnose's findings: probes, not inputs
                raise RecordFileError(f"{run.path}: a diagnosis record (wirecheck diagnose --run): its findings come "
                                      "from probes run on the node, not from inputs a check can judge again; read it "
                                      f"with `wirecheck report {run.path}`, or judge the record it diagnosed "
                                      f"({run.run.get('diagnosed')})")
        if args.thresholds:
            try:
                given = load_thresholds(Path(args.thresholds))
            except FileNotFoundError:
                raise ThresholdsError(f"--thresholds {args.thresholds}: no such file") from None
            judged = [j for run in runs for j in judge_run(run, given)]
            notes.append(f"against {args.thresholds}")
        else:
            judged = []
            for run in runs:
                own, note = _own_thresholds(run, suite_paths().thresholds)
                judged += judge_run(run, own)
                notes.append(note)
    except (ThresholdsError, RecordFileError, ValueError) as exc:
        print(f"wirecheck judge: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except FileNotFoundError as exc:
        print(f"wirecheck judge: {exc.filename}: no such file", file=sys.stderr)
        return exit_codes.BAD_INPUT

    print(f"wirecheck judge: {len(judged)} verdicts from {len(runs)} run(s)" + (f" {notes[0]}" if args.thresholds else ""))
    if not args.thresholds:
        for note in notes:
            print(f"wirecheck judge: {note}")
    for run in runs:
        if run.torn_line is not None:
            print(f"wirecheck judge: {run.path}:{run.torn_line}: a torn last line (not JSON: the run was killed or "
                  "its disk filled while writing it): skipped")
        if run.earlier_runs:
            print(f"wirecheck judge: {run.path} holds {run.earlier_runs + 1} runs; judging the last one "
                  f"(started {run.run.get('started')})")
    order = {FAIL: 0, WARN: 1, PASS: 2, SKIP: 3}
    for j in sorted(judged, key=lambda j: order.get(j.now.outcome, 4)):
        if j.now.outcome in (FAIL, WARN) or not args.quiet:
            print(format_verdict(j))
    for line in _skips_explained(runs, judged):
        print(f"wirecheck judge: {line}")
    counts = {o: sum(j.now.outcome == o for j in judged) for o in OUTCOMES}
    changed = sum(j.changed for j in judged)
    problems = [p for p in (_run_status(run) for run in runs) if p]
    for p in problems:
        print(f"wirecheck judge: {p}")
    simulated = [str(run.path) for run in runs if run.simulated]
    summary = (f"{counts[FAIL]} failed, {counts[PASS]} passed, " + (f"{counts[WARN]} warned, " if counts[WARN] else "")
               + f"{counts[SKIP]} skipped; {changed} changed since recorded")
    # Said in every outcome, failed or cut short too: a dry run's verdicts never stand for a node.
    simulation = (f"; SIMULATION: {', '.join(simulated)} judged a simulated run, no node was validated"
                  if simulated else "")
    if counts[FAIL]:
        print(f"wirecheck judge: FAILED: {summary}{simulation}")
        return exit_codes.FAILED
    if problems:  # nothing failed, but not every check was judged: no verdict on the run as a whole
        print(f"wirecheck judge: INCOMPLETE: a run did not end (see above), so not every check was judged: "
              f"{summary}{simulation}")
        return exit_codes.FAILED
    if simulated:
        print(f"wirecheck judge: {summary}{simulation}")
        return exit_codes.SIMULATED
    print(f"wirecheck judge: PASSED: {summary}")
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
