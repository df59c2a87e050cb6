"""Judge recorded runs again (the library of `wirecheck judge`, wirecheck.cli.judge).

Each verdict in a record file carries the inputs its check was computed from; the same check
functions (wirecheck.checks) run on them again against a thresholds file, without GPUs: a run's
own thresholds (the record's header keeps the file's bytes, `own_thresholds`) or another file.
`judge_run` gives each verdict again beside the recorded one; `skips_explained` says where pytest's
skips and judge's differ, `run_status` what a run that did not end leaves unjudged. The fleet
report judges its nodes' records with `rejudge_run`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from wirecheck.core import render
from wirecheck.checks import rejudge
from wirecheck.training.strategy_run import workload_of
from wirecheck.records.file import RecordFileError, RunRecord
from wirecheck.records.run import recorded_bases, recorded_thresholds
from wirecheck.thresholds.file import Thresholds, ThresholdsError, load_thresholds
from wirecheck.core.verdict import FAIL, PASS, SKIP, WARN, Verdict
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


def refuse_diagnosis(run: RunRecord, command: str) -> None:
    """RecordFileError for a diagnosis record (`wirecheck diagnose --run`'s findings) given to a command that reads a
    validation's verdicts (judge, diagnose): naming how to read it, and the record it diagnosed."""
    if run.run.get("kind") == "diagnosis":  # probes' findings, not inputs
        raise RecordFileError(f"{run.path}: a diagnosis record (wirecheck diagnose --run): its findings come from "
                              "probes run on the node, not from inputs a check can judge again; read it with "
                              f"`wirecheck report {run.path}`, or {command} the record it diagnosed: `wirecheck "
                              f"{command} {run.run.get('diagnosed')}`")


def counted(counts: dict[str, int]) -> str:
    """Verdicts counted by outcome, as judge's last line says them (report's says a failed run's so too)."""
    warned = f"{counts[WARN]} warned, " if counts.get(WARN) else ""
    return f"{counts.get(FAIL, 0)} failed, {counts.get(PASS, 0)} passed, {warned}{counts.get(SKIP, 0)} skipped"


def run_status(run: RunRecord) -> str | None:
    if run.end is None:
        return f"{run.path}: the run was cut short (no end record): whatever it did not reach was never judged"
    if run.end.get("status") != "complete":
        return f"{run.path}: the run was {run.end.get('status')}: not every check ran"
    return None


def own_thresholds(run: RunRecord, shipped: Path) -> tuple[Thresholds, str]:
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


def skips_explained(runs: list[RunRecord], judged: list[Judged]) -> list[str]:
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
