"""`wirecheck node-state --hook slurm|k8s`: what a drain hook does after a run that failed a check, before it
drains (wirecheck.records.drain_policy's rules, the thresholds file's `drain:` keys):

1. re-test: the failed tests alone, once, through `wirecheck validate` with the first run's arguments and a
   `-k` selection of the record's failed tests (wirecheck.records.retest), within the hook's time left;
2. a re-test that passed is flaky: an event in the node's state file (RECORDS/drain-events.jsonl, shown by
   `wirecheck report`), not drained, unless it is the `flaky_max`-th within `flaky_window`;
3. a re-test that failed again (or could not give a verdict) drains; with --diagnose, `wirecheck diagnose
   --run` on the re-test's record first, and its culprit is the reason (wirecheck.records.culprit);
4. escalate: the same GPU failing `replace_after` times within `replace_window`, or an uncorrectable memory
   fault, is "replace the GPU": the evidence goes into one archive whose path ends the line;
5. guard: before a drain, the partition's nodes drained by wirecheck within `guard_window` are counted
   (Slurm's sinfo; kubectl's node conditions); above `guard_share`, or while the guard file is there, the
   node is not drained, the guard file says since when, and every later drain waits until a person removes it.

Exit codes (wirecheck.core.exit_codes): 0 healthy, 1 drain, 2 unknown (as without --hook), 30 flaky (not
drained), 31 the guard holds (not drained), 32 drain and replace a GPU (the bundle's path ends the line).
The shell hooks act on the code and put the line into Slurm's reason or the node condition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from wirecheck.cli import node_decision as ns
from wirecheck.core import exit_codes as codes
from wirecheck.core.paths import suite_paths
from wirecheck.core.safefs import write_atomically
from wirecheck.fleet import cluster_state
from wirecheck.node import evidence
from wirecheck.records import drain_policy as dp
from wirecheck.records import reason, retest
from wirecheck.records.culprit import diagnosed_culprit
from wirecheck.records.file import RunRecord
from wirecheck.report.prometheus import Family
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

EVENTS, GUARD, PROMETHEUS = "drain-events.jsonl", "guard", "wirecheck-drain.prom"
EVENTS_OUT = "wirecheck-health-events.json"  # --events: the decision as NVSentinel's or gpud's health events
MIN_RETEST_S = 5.0  # less time than this left: not re-tested (the first run's failure drains)
KILL_GRACE_S = 10.0  # SIGTERM, then this long, then SIGKILL (as the hooks' timeout --kill-after does)
DECISIONS = {codes.NODE_HEALTHY: "healthy", codes.NODE_UNHEALTHY: "drain", codes.NODE_UNKNOWN: "unknown",
             codes.NODE_FLAKY: "flaky", codes.NODE_GUARD_HOLD: "guard_hold", codes.NODE_REPLACE: "replace"}


@dataclass
class Hook:
    """The hook's inputs: node-state's options."""

    hook: str
    node: str
    records: Path
    wirecheck: list[str]
    validate_args: list[str]
    time_left_s: float
    limit: int
    diagnose: bool = False
    bug_report: bool = False
    guard_file: Path | None = None
    prometheus: Path | None = None
    sinfo: str = "sinfo"
    kubectl: str = "kubectl"
    mode: str = "hook"  # the record's prefix: prolog, healthcheck, plugin
    events: str | None = None  # write the decision as health events: "nvsentinel" or "gpud" (wirecheck.records.events)
    events_file: Path | None = None

    def __post_init__(self):
        self.guard_file = self.guard_file or self.records / GUARD
        self.prometheus = self.prometheus or self.records / PROMETHEUS
        self.events_file = self.events_file or self.records / EVENTS_OUT
        self.started = time.monotonic()
        self.warnings: list[str] = []

    def left(self) -> float:
        return self.time_left_s - (time.monotonic() - self.started)


def policy_for(validate_args: list[str]) -> dp.Policy:
    """The `drain:` keys of the thresholds the run used: --thresholds among validate's arguments, else the suite's."""
    path = ns_option(validate_args, "--thresholds") or suite_paths().thresholds
    return dp.parse_policy(load_thresholds(path).drain, f"{path}: drain")


def ns_option(args: list[str], option: str) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
        if arg == option and i + 1 < len(args):
            return args[i + 1]
    return None


def _stamp(now: float) -> str:
    return datetime.fromtimestamp(now, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _run(cmd: list[str], timeout: float, output: Path) -> int:
    """`cmd` in a session of its own, its output to `output`; past `timeout`: SIGTERM to the session, then
    SIGKILL, exit 124 (timeout(1)'s, which node-state reads as timed out)."""
    with open(output, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=os.getcwd())
        try:
            return proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return ns.TIMED_OUT


@dataclass(frozen=True)
class Retested:
    failed: bool | None  # None: no verdict (not re-run, no time, busy, a fault of the harness)
    why: str
    record: Path | None


def retest_once(hook: Hook, first: RunRecord) -> Retested:
    """The first run's failed tests once more, with its arguments, selected by -k."""
    selection = retest.selection(retest.failed_tests(first))
    if selection is None:
        return Retested(None, "", None)  # nothing to re-run (NVML broken, a worker group without a verdict)
    left = hook.left()
    if left < MIN_RETEST_S:
        return Retested(None, f"not re-tested: {max(left, 0):.0f} s of the hook's time left", None)
    record = hook.records / f"{hook.mode}-retest.jsonl"
    output = hook.records / f"{hook.mode}-retest.log"
    record.unlink(missing_ok=True)
    try:
        code = _run([*hook.wirecheck, "validate", *hook.validate_args, "-k", selection, "--wirecheck-json", str(record)],
                    left, output)
    except OSError as exc:  # --wirecheck names nothing that runs: the failure stands as the first run said it
        return Retested(None, f"not re-tested: --wirecheck {hook.wirecheck[0]} cannot be run ({exc.strerror or exc}); "
                        "fix the hook's WIRECHECK setting", None)
    run = ns.read_record(str(record))[0]
    state = ns.decide(code, run, ns.output_tail(str(output)), hook.limit)
    if state.state == ns.HEALTHY:
        return Retested(False, "passed its re-test", record)
    if state.state == ns.UNHEALTHY:
        return Retested(True, "failed its re-test", record)
    return Retested(None, f"re-test gave no verdict ({state.line.removeprefix(reason.PREFIX)})", record)


def diagnosed(hook: Hook, record: Path | None) -> tuple[str | None, Path | None]:
    """`wirecheck diagnose --run` on the re-test's record: its culprit, and the diagnosis record."""
    if not hook.diagnose or record is None or hook.left() < MIN_RETEST_S:
        return None, None
    out = hook.records / f"{hook.mode}-diagnosis.jsonl"
    out.unlink(missing_ok=True)
    try:
        _run([*hook.wirecheck, "diagnose", str(record), "--run", "--json", str(out)], hook.left(),
             hook.records / f"{hook.mode}-diagnosis.log")
    except OSError:  # said by the re-test, which ran the same command first
        return None, None
    run = ns.read_record(str(out))[0]
    return (diagnosed_culprit(run) if run is not None else None), (out if out.is_file() else None)


def read_guard(hook: Hook) -> dict | None:
    """The guard file a tripped guard left, until a person removes it."""
    try:
        text = hook.guard_file.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"line": f"guard file unreadable ({exc})"}
    try:
        held = json.loads(text)
        return held if isinstance(held, dict) else {"line": text.strip()}
    except ValueError:
        return {"line": text.strip()[:200] or "guard file present"}


def peers(hook: Hook, now: float, policy: dp.Policy) -> list[cluster_state.Peers]:
    if hook.hook == "slurm":
        return cluster_state.slurm_peers(hook.node, now, policy, hook.sinfo)
    return cluster_state.k8s_peers(now, policy, hook.kubectl)


@dataclass(frozen=True)
class Held:
    hold: bool
    line: str
    figures: tuple[str, int, int] | None  # (where, drained recently, peers)


def _trip(hook: Hook, now: float, line: str, where: cluster_state.Peers) -> str:
    """The guard trips: its file holds every later drain of the node until a person removes it; its line."""
    line = line.replace("remove the guard file", f"remove {hook.guard_file}") + f" [{where.where}]"
    write_atomically(hook.guard_file, json.dumps({"since": datetime.fromtimestamp(now, timezone.utc).isoformat(
        timespec="seconds"), "node": hook.node, "line": line}) + "\n")
    return line


def guard_check(hook: Hook, now: float, policy: dp.Policy) -> Held:
    """Whether the guard holds this drain: a guard file left by an earlier trip, or the count now."""
    held = read_guard(hook)
    if held is not None:
        since = held.get("since") or "earlier"
        return Held(True, f"GUARD (held since {since}): not draining {hook.node}; remove {hook.guard_file} to drain "
                          f"again ({held.get('line', '')})", None)
    try:
        where, judged = cluster_state.fullest(peers(hook, now, policy), hook.node, policy)
    except cluster_state.GuardUnavailable as exc:
        hook.warnings.append(f"GUARD NOT AVAILABLE: {exc}: draining without the fleet guard")
        return Held(False, "", None)
    figures = (where.where, len(set(where.drained) - {hook.node}), where.size)
    if judged.hold:
        return Held(True, _trip(hook, now, judged.line, where), figures)
    return Held(False, judged.line, figures)


SETTLE_S = 2.0  # after the hook's drain: drains stamped in the same second as ours land within it


def confirm_drain(hook: Hook, policy: dp.Policy, settle_s: float = SETTLE_S) -> Held:
    """After the hook drained this node (Slurm): whether its drain was one too many. Hooks failing in the same
    second each read the partition before the others' drains landed, and each drained; the controller stamps
    every reason, so each hook reads, once its own has landed, the drains stamped before it and judges its own
    as the guard would have, had it come last. The one that finds itself beyond the share takes its drain back
    (the hook resumes the node while its reason is still ours): exactly the share stays drained, whatever the
    timing. Held(True, the guard's line) for one too many."""
    time.sleep(settle_s)
    now = time.time()
    try:
        judged = []
        for where in peers(hook, now, policy):
            before = dp.drained_before(where.drained, hook.node)
            if before is not None:
                judged.append((where, before, dp.guard(before, where.size, hook.node, policy)))
    except cluster_state.GuardUnavailable as exc:
        hook.warnings.append(f"GUARD NOT AVAILABLE after the drain: {exc}: the drain stands")
        return Held(False, "", None)
    for where, _, guard in judged:
        if guard.hold:
            line = _trip(hook, now, guard.line.replace("GUARD: not draining", "GUARD: took back the drain of"), where)
            return Held(True, line, (where.where, len(set(where.drained) - {hook.node}), where.size))
    return Held(False, "the drain stands: " + "; ".join(f"{len(before)} drained before it in {w.where}"
                                                        for w, before, _ in judged), None)


def bundle(hook: Hook, now: float, files: list[Path], why: str) -> Path:
    """The evidence of a GPU to replace, as RECORDS/replace-<node>-<UTC>.tar.gz."""
    texts = {"decision.txt": why + "\n", "kernel-xid.txt": evidence.xid_lines()}
    smi = evidence.nvidia_smi_q()
    if smi is not None:
        texts["nvidia-smi-q.txt"] = smi
    if hook.bug_report:
        made, missing = evidence.bug_report(hook.records)
        if made is not None:
            files = files + [made]
        else:
            texts["nvidia-bug-report.txt"] = f"asked for, not written: {missing}\n"
    return dp.write_bundle(hook.records / f"replace-{hook.node}-{_stamp(now)}.tar.gz", files, texts)


def decide_after_failure(hook: Hook, first_path: Path, first: RunRecord | None, first_line: str,
                         now: float, policy: dp.Policy) -> tuple[int, str, Held | None]:
    """The decision for a run node-state found unhealthy: (exit code, line, the guard's view)."""
    events_file = hook.records / EVENTS
    events = dp.read_events(events_file)
    first_reason = first_line.removeprefix(reason.PREFIX)
    tried = retest_once(hook, first) if first is not None else Retested(None, "", None)
    culprit, diagnosis = diagnosed(hook, tried.record) if tried.failed else (None, None)
    decision = dp.after_retest(first_reason, tried.failed is not False, events, now, policy, culprit)
    base = {"at": now, "node": hook.node, "hook": hook.mode, "record": str(first_path), "first": first_reason}
    if decision.flaky:
        dp.append_event(events_file, {**base, "event": dp.FLAKY, "drained": decision.drain, "line": decision.line})
        if not decision.drain:
            return codes.NODE_FLAKY, reason.line(decision.line, hook.limit), None
    line = f"{decision.line} ({tried.why})" if tried.failed is None and tried.why else decision.line
    again = ns.read_record(str(tried.record))[0] if tried.failed and tried.record else None
    verdicts = (first.verdicts if first else []) + (again.verdicts if again else [])
    gpus = dp.failed_gpus(verdicts, first.run) if first is not None else []
    escalation = dp.escalate(events, gpus, verdicts, now, policy)
    dp.append_event(events_file, {**base, "event": dp.FAILED, "gpus": gpus, "line": line})
    held = guard_check(hook, now, policy)
    path = None
    if escalation.replace:
        line = f"{escalation.why}: {line}"
        files = [p for p in (first_path, tried.record, diagnosis, hook.records / f"{hook.mode}.log") if p]
        path = bundle(hook, now, files, line)
    if held.hold:
        said = held.line + (f"; bundle {path}" if path else "")
        return codes.NODE_GUARD_HOLD, reason.line(said, hook.limit), held
    if path is not None:
        keep = f"; bundle {path}"
        if len(keep) > hook.limit // 2:  # node-problem-detector's 80 characters: the reason first, the path to the log
            print(f"replace-the-GPU evidence bundle: {path}", file=sys.stderr)
            keep = ""
        return codes.NODE_REPLACE, reason.cut(reason.PREFIX + reason.ascii_text(line), hook.limit, keep), held
    return codes.NODE_UNHEALTHY, reason.line(line, hook.limit), held


def write_figures(hook: Hook, code: int, now: float, policy: dp.Policy | None, held: Held | None) -> None:
    """The decision and the guard as Prometheus gauges, for node_exporter's textfile collector (the flaky count
    where the drain rules were read: after a failure)."""
    node = {"node": hook.node}
    guarded = Family("wirecheck_drain_guard_held", "1 while the fleet guard holds this node's drains (until a "
                                                   "person removes the guard file), else 0")
    guarded.add(1 if read_guard(hook) is not None else 0, **node)
    decision = Family("wirecheck_drain_decision_info", "The drain hook's last decision on this node (value always 1)")
    decision.add(1, decision=DECISIONS.get(code, str(code)), **node)
    at = Family("wirecheck_drain_decision_timestamp_seconds", "When the drain hook last decided, Unix time")
    at.add(now, **node)
    families = [guarded, decision, at]
    if policy is not None:
        flaky = Family("wirecheck_drain_flaky_events", "Flaky re-tests on this node within the drain policy's flaky_window")
        flaky.add(dp.flaky_count(dp.read_events(hook.records / EVENTS), now, policy), **node)
        families.append(flaky)
    if held is not None and held.figures is not None:
        where, drained, size = held.figures
        recent = Family("wirecheck_drain_guard_recent_drains", "Other nodes drained by wirecheck within the guard's window")
        recent.add(drained, where=where, **node)
        total = Family("wirecheck_drain_guard_peers", "Nodes the guard counts against (the partition, the cluster)")
        total.add(size, where=where, **node)
        families += [recent, total]
    try:
        write_atomically(hook.prometheus, "\n".join(f.text() for f in families) + "\n")
    except OSError as exc:
        hook.warnings.append(f"could not write {hook.prometheus}: {exc}")


def write_events(hook: Hook, first: RunRecord | None, code: int) -> None:
    """--events: the first run's verdicts as health events that follow this decision (a run that says nothing
    about the node, or none at all, writes an empty list: never an unhealthy event)."""
    if not hook.events:
        return
    from wirecheck.records import events

    decision = DECISIONS.get(code, events.UNKNOWN)
    found = events.events(first, decision)[0] if first is not None else []
    doc = events.nvsentinel(found, hook.node) if hook.events == "nvsentinel" else events.gpud(found)
    try:
        write_atomically(hook.events_file, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        hook.warnings.append(f"could not write {hook.events_file}: {exc}")


def run_hook(hook: Hook, exit_code: int, record: str | None, output: str | None) -> tuple[int, str]:
    """The whole hook decision: node-state's on the first run, then the drain rules on a failure."""
    now = time.time()
    first, note = ns.read_record(record)
    state = ns.decide(exit_code, first, ns.output_tail(output), hook.limit, note)
    if state.state != ns.UNHEALTHY:  # nothing to re-test: the thresholds file is not even read (a prolog's second)
        if read_guard(hook) is not None:
            hook.warnings.append(f"the fleet guard holds drains on {hook.node} until {hook.guard_file} is removed")
        write_figures(hook, state.state, now, None, None)
        write_events(hook, first, state.state)
        return state.state, state.line
    try:
        policy = policy_for(hook.validate_args)
    except (ThresholdsError, ValueError, OSError) as exc:  # DrainPolicyError, QuantityError: ValueErrors
        # A failed check is still a failed check: it drains as it did before there were rules.
        hook.warnings.append(f"DRAIN RULES NOT APPLIED (no re-test, no guard): {' '.join(str(exc).split())}")
        write_figures(hook, state.state, now, None, None)
        write_events(hook, first, state.state)
        return state.state, state.line
    code, line, held = decide_after_failure(hook, Path(record or ""), first, state.line, now, policy)
    write_figures(hook, code, now, policy, held)
    write_events(hook, first, code)
    return code, line


def after_drain(hook: Hook) -> tuple[int, str]:
    """node-state --after-drain: NODE_GUARD_HOLD and the guard's line where this node's drain, just made, was one
    too many (confirm_drain); OK and what was counted where it stands. Slurm's only: a Kubernetes condition is
    node-problem-detector's, not the hook's to take back."""
    if hook.hook != "slurm":
        return codes.OK, reason.line("the drain stands (--after-drain reads Slurm's drains only)", hook.limit)
    try:
        policy = policy_for(hook.validate_args)
    except (ThresholdsError, ValueError, OSError) as exc:
        hook.warnings.append(f"DRAIN RULES NOT APPLIED after the drain: {' '.join(str(exc).split())}")
        return codes.OK, reason.line("the drain stands (the drain rules could not be read)", hook.limit)
    held = confirm_drain(hook, policy)
    if held.hold:
        return codes.NODE_GUARD_HOLD, reason.line(held.line, hook.limit)
    return codes.OK, reason.line(held.line or "the drain stands", hook.limit)


def hook_from_args(args, validate_args: list[str]) -> Hook:
    return Hook(hook=args.hook, node=args.node, records=Path(args.records),
                wirecheck=[args.wirecheck] if args.wirecheck else [sys.executable, "-m", "wirecheck.cli.main"],
                validate_args=validate_args, time_left_s=args.time_left, limit=args.max_length,
                diagnose=args.diagnose, bug_report=args.bug_report,
                guard_file=Path(args.guard_file) if args.guard_file else None,
                prometheus=Path(args.prometheus) if args.prometheus else None,
                sinfo=args.sinfo, kubectl=args.kubectl, mode=args.mode, events=args.events,
                events_file=Path(args.events_file) if args.events_file else None)
