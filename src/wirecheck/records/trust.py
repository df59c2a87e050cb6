"""Whether a recent pass of this node may stand for a new run: `wirecheck validate --trust-recent`.

A Slurm prolog runs before every job, and the quick level takes tens of seconds. A pass stands for a new
run only while nothing that the pass could have missed can have happened since: the node's latest run
(by the records in the record folder and --history) passed at the asked level or better, on this node's
GPUs (never a simulation), within the window, under the same thresholds and wirecheck version, and the
node now, as NVML and the kernel log tell it, is the node the pass saw at its end (the snapshot in its
record's end line, wirecheck.node.snapshot). Each difference is a `Refusal` of its own kind, so the
operator reads every reason at once; `decide` is a pure function of plain data (tested without a node).

The words for each kind are in REASONS, one place; nothing reads them back.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from wirecheck.core.levels import LEVELS
from wirecheck.core.quantity import QuantityError, parse_duration
from wirecheck.records.file import RecordFileError, read_run

DEFAULT_WINDOW_S = 6 * 3600.0  # thresholds.yaml prolog.trust_window, where a file has no prolog section
MAX_CANDIDATES = 20  # record files read, newest first by modification time: a folder of years stays cheap
OK_EXIT = 0
REMAP_FIELDS = ("correctable", "uncorrectable", "pending", "failure")  # wirecheck.node.memory_errors' order


@dataclass(frozen=True)
class LastRun:
    """The latest run of this node found in the record folders, as the decision needs it."""

    path: str
    started: str  # ISO 8601, the header's
    ended_at: float | None  # epoch seconds: the snapshot's time, else start + wall time; None: cut short
    level: str | None
    status: str | None  # the end line's status; None: no end line (killed)
    exit_status: int | None
    simulated: bool
    failed: int  # failed verdicts
    thresholds_digest: str | None
    snapshot: dict | None  # the end line's node_snapshot
    # What narrowed the run below its level (-k, -m, --placement, named tests: the header's `selection`);
    # None where the header does not say (a record written before runs said it)
    selection: tuple[str, ...] | None = None
    # The GPUs the pass ran on (the header's `gpus`, each by UUID, else bus id): NVML's snapshot lists every GPU
    # of the node whatever CUDA_VISIBLE_DEVICES said, the header only those validated. None: it lists none.
    ran_on: tuple[str, ...] | None = None
    visible_then: str | None = None  # the pass's CUDA_VISIBLE_DEVICES (the header's env), to say why
    profile: str | None = None  # the pass's --profile (the header's): the limits it was held to


@dataclass(frozen=True)
class Refusal:
    kind: str  # a key of REASONS
    facts: dict = field(default_factory=dict)

    def text(self) -> str:
        return REASONS[self.kind].format(**self.facts)


@dataclass(frozen=True)
class Decision:
    run: LastRun | None
    refusals: tuple[Refusal, ...]
    said: tuple[str, ...] = ()  # what could not be compared and is said, not refused (the kernel log)
    checked: tuple[str, ...] = ()  # what was compared and found unchanged

    @property
    def trusted(self) -> bool:
        return self.run is not None and not self.refusals


REASONS = {
    "no_run": "no record of a run of this host ({host}) in {folders}",
    "cut_short": "the latest run ({path}) has no end line: it was killed or is still running",
    "not_passed": "the latest run did not pass ({path}: status {status}, exit {exit_status}, {failed} failed check(s))",
    "simulated": "the latest run was a SIMULATION ({path}): no GPU of this node was validated",
    "level": "the latest run was at level {level}, below the asked {asked}",
    "selection": "the latest run ran a part of its level's checks ({what}), not all of them",
    "gpus_not_run": "the pass ran on {then} only{why}; this run would validate {missing} too",
    "profile": "the pass was held to {then}, this run to {now}: other limits and checks",
    "gpus_unlisted": "the pass's record does not list the GPUs it ran on: nothing says it validated {missing}",
    "expired": "the pass is {age} old, past the trust window of {window} ({where})",
    "future": "the pass ended {age} in the future: the clock moved back; not trusted",
    "no_snapshot": "the pass's record keeps no node snapshot ({why}): nothing to compare the node with",
    "unreadable_now": "NVML cannot read the node now: {why}",
    "thresholds": "the thresholds changed since the pass (sha256 {then} then, {now} now)",
    "version": "wirecheck changed since the pass ({then} then, {now} now)",
    "driver": "the NVIDIA driver changed since the pass ({then} then, {now} now)",
    "rebooted": "the node rebooted since the pass (booted {then} then, {now} now): its counters and kernel log restarted",
    "gpu_count": "{then} GPU(s) at the pass, {now} now",
    "gpu_swapped": "GPU{index} is another GPU ({then} at the pass, {now} now)",
    "xid": "{count} new Xid line(s) in the kernel log since the pass: {first}",
    "ecc": "GPU{index} {counter} uncorrectable ECC errors grew from {then} to {now}",
    "remap": "GPU{index} remapped rows {field} grew from {then} to {now}",
    "link_down": "GPU{index} NVLink(s) {links} up at the pass are down now",
    "link_errors": "GPU{index} NVLink {link} {counter} errors grew from {then} to {now}",
    "foreign_process": "GPU{index} has a compute process now: {processes}",
}


class TrustWindowError(ValueError):
    """A trust window that is no duration: the message names the key or option and the fix."""


def trust_window(section: Any, path: str, given: str | None = None) -> tuple[float, str]:
    """The window in seconds and where it comes from: `given` (--trust-recent=WINDOW), else the thresholds
    file's prolog.trust_window, else DEFAULT_WINDOW_S."""
    try:
        if given:
            return parse_duration(given, "--trust-recent"), f"--trust-recent={given}"
        if section is None:
            return DEFAULT_WINDOW_S, f"the default, {path} has no prolog section"
        if not isinstance(section, dict) or set(section) - {"trust_window", "source"}:
            raise TrustWindowError(f"{path}: prolog: give a mapping of trust_window and source, e.g. "
                                   'prolog: {trust_window: "6 h", source: ...}')
        if "trust_window" not in section:
            return DEFAULT_WINDOW_S, f"the default, {path} has no prolog.trust_window"
        return parse_duration(section["trust_window"], f"{path}: prolog.trust_window"), f"{path}: prolog.trust_window"
    except QuantityError as exc:
        raise TrustWindowError(str(exc)) from None


def epoch(iso: Any) -> float | None:
    try:
        return _dt.datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def thresholds_digest(header: dict) -> str | None:
    """The thresholds a run ran under, as one string: its file's sha256 and those of the files it extends."""
    sha = header.get("thresholds_sha256")
    if not sha:
        return None
    bases = sorted(str(b.get("sha256")) for b in header.get("thresholds_bases") or [] if isinstance(b, dict))
    return "+".join([str(sha), *bases])


def summary(record) -> LastRun:
    end = record.end
    snapshot = (end or {}).get("node_snapshot")
    started = str(record.run.get("started"))
    ended_at = epoch(snapshot.get("taken_at")) if isinstance(snapshot, dict) else None
    if ended_at is None and end is not None and epoch(started) is not None:
        ended_at = epoch(started) + float(end.get("wall_s") or 0)
    return LastRun(
        path=str(record.path), started=started, ended_at=ended_at, level=record.run.get("level"),
        status=(end or {}).get("status"), exit_status=(end or {}).get("exit_status"), simulated=record.simulated,
        failed=sum(v.get("outcome") == "fail" for v in record.verdicts),
        thresholds_digest=thresholds_digest(record.run),
        snapshot=snapshot if isinstance(snapshot, dict) else None,
        selection=_selection(record.run, end), ran_on=_ran_on(record.run),
        visible_then=(record.run.get("env") or {}).get("CUDA_VISIBLE_DEVICES"), profile=record.run.get("profile"))


def _selection(header: dict, end: dict | None = None) -> tuple[str, ...] | None:
    """The header's selection, and the tests its end says were deselected by other than the level (--lf, --sw, a
    plugin: known only once collected)."""
    given = header.get("selection")
    if not isinstance(given, list):
        return None
    other = (end or {}).get("deselected_other")
    return tuple(str(s) for s in given) + ((f"{other} test(s) deselected (--lf, --sw or a plugin)",)
                                           if isinstance(other, int) and other > 0 else ())


def gpu_key(gpu: dict) -> str | None:
    """What names a GPU across a header and a snapshot: its UUID, else its bus id."""
    return gpu.get("uuid") or gpu.get("bus_id")


def _ran_on(header: dict) -> tuple[str, ...] | None:
    gpus = [g for g in header.get("gpus") or [] if isinstance(g, dict)]
    keys = tuple(gpu_key(g) for g in gpus)
    return keys if keys and all(keys) else None


def _files(folder: Path) -> Iterable[Path]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    files = []
    for entry in entries:
        try:
            if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                files.append((entry.stat(follow_symlinks=False).st_mtime, Path(entry.path)))
        except OSError:
            continue
    return [path for _, path in sorted(files, reverse=True)]


def last_run(folders: Iterable[str | Path], host: str) -> LastRun | None:
    """The latest validation run of `host` (by its start) among the newest record files of `folders`; a
    file that is no record, a diagnosis record and another host's runs are passed over."""
    candidates = []
    for folder in folders:
        for path in _files(Path(folder))[:MAX_CANDIDATES]:
            try:
                record = read_run(path)
            except (RecordFileError, OSError, ValueError):
                continue
            if record.run.get("host") != host or record.run.get("kind") == "diagnosis":
                continue
            started = epoch(record.run.get("started"))
            if started is not None:
                candidates.append((started, str(path), record))
    if not candidates:
        return None
    return summary(max(candidates, key=lambda c: (c[0], c[1]))[2])


def _iso(epoch_s: Any) -> str:
    if not isinstance(epoch_s, (int, float)):
        return "unknown"
    return _dt.datetime.fromtimestamp(epoch_s, _dt.timezone.utc).isoformat(timespec="seconds")


def _age(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _grew(then: Any, now: Any) -> bool:
    """A counter that grew, or that was read then and cannot be read now (a GPU hiding it is a change)."""
    if then is None:
        return False  # never readable on this GPU: nothing to compare (said in `checked` by its absence)
    return now is None or now > then


def _run_refusals(run: LastRun, *, now: float, window_s: float, window_where: str, asked_level: str,
                  asked_profile: str | None, thresholds: str | None, version: str) -> list[Refusal]:
    out = []
    if run.status is None:
        return [Refusal("cut_short", {"path": run.path})]
    if run.simulated:
        out.append(Refusal("simulated", {"path": run.path}))
    elif run.status != "complete" or run.exit_status != OK_EXIT or run.failed:
        out.append(Refusal("not_passed", {"path": run.path, "status": run.status, "exit_status": run.exit_status,
                                          "failed": run.failed}))
    if run.level not in LEVELS or LEVELS.index(run.level) < LEVELS.index(asked_level):
        out.append(Refusal("level", {"level": run.level, "asked": asked_level}))
    if run.selection is None or run.selection:  # a re-test of one failed check passes, but not for the rest
        out.append(Refusal("selection", {"what": "; ".join(run.selection) if run.selection
                                         else "its record does not say which"}))
    if run.ended_at is not None:
        age = now - run.ended_at
        if age < 0:
            out.append(Refusal("future", {"age": _age(age)}))
        elif age > window_s:
            out.append(Refusal("expired", {"age": _age(age), "window": _age(window_s), "where": window_where}))
    if run.profile != asked_profile:  # a profile adds checks (the GPU count, the fabric) and sets limits of its own
        out.append(Refusal("profile", {"then": _profile(run.profile), "now": _profile(asked_profile)}))
    if run.thresholds_digest != thresholds:
        out.append(Refusal("thresholds", {"then": (run.thresholds_digest or "unknown")[:12],
                                          "now": (thresholds or "unknown")[:12]}))
    snap = run.snapshot
    if snap is None or "unreadable" in snap:
        why = "a record written before runs kept one" if snap is None else f"NVML at its end: {snap['unreadable']}"
        out.append(Refusal("no_snapshot", {"why": why}))
    elif snap.get("wirecheck") != version:
        out.append(Refusal("version", {"then": snap.get("wirecheck"), "now": version}))
    return out


def _profile(name: str | None) -> str:
    return f"--profile {name}" if name else "no --profile (the limits derived from the node)"


def _identity(gpu: dict) -> str:
    return f"serial {gpu['serial']}" if gpu.get("serial") else f"uuid {gpu.get('uuid')}"


def _node_refusals(then: dict, now: dict) -> tuple[list[Refusal], list[str]]:
    out, checked = [], []
    if then.get("booted_at") != now.get("booted_at"):
        out.append(Refusal("rebooted", {"then": _iso(then.get("booted_at")), "now": _iso(now.get("booted_at"))}))
    else:
        checked.append("no reboot")
    if then.get("driver") != now.get("driver"):
        out.append(Refusal("driver", {"then": then.get("driver"), "now": now.get("driver")}))
    else:
        checked.append(f"driver {now.get('driver')}")
    before, after = then.get("gpus") or [], now.get("gpus") or []
    if len(before) != len(after):
        out.append(Refusal("gpu_count", {"then": len(before), "now": len(after)}))
    same = [(b, a) for b, a in zip(before, after)]
    swapped = [(b, a) for b, a in same if (b.get("serial"), b.get("uuid")) != (a.get("serial"), a.get("uuid"))]
    for b, a in swapped:
        out.append(Refusal("gpu_swapped", {"index": a.get("index"), "then": _identity(b), "now": _identity(a)}))
    if len(before) == len(after) and not swapped:
        checked.append(f"{len(after)} GPU(s), the same by " + ("serial" if all(g.get("serial") for g in after) else "UUID"))
    links = counters = 0
    for b, a in same:
        if (b, a) in swapped:
            continue  # another GPU: its counters are its own
        index = a.get("index")
        for counter in ("volatile", "aggregate"):
            key = f"ecc_{counter}_uncorrected"
            if _grew(b.get(key), a.get(key)):
                out.append(Refusal("ecc", {"index": index, "counter": counter, "then": b.get(key), "now": a.get(key)}))
        rows_then, rows_now = b.get("remapped_rows"), a.get("remapped_rows") or {}
        for name in REMAP_FIELDS if rows_then else ():  # any new remap, a pending one, a failed one
            if _grew(rows_then.get(name), rows_now.get(name)):
                out.append(Refusal("remap", {"index": index, "field": name, "then": rows_then.get(name),
                                             "now": rows_now.get(name)}))
        down = sorted(set(b.get("links_up") or []) - set(a.get("links_up") or []))
        if down:
            out.append(Refusal("link_down", {"index": index, "links": ",".join(map(str, down))}))
        links += len(a.get("links_up") or [])
        for link, values in (b.get("link_counters") or {}).items():
            if int(link) in down:
                continue
            current = (a.get("link_counters") or {}).get(link) or {}
            for name, value in values.items():
                counters += value is not None
                if _grew(value, current.get(name)):
                    out.append(Refusal("link_errors", {"index": index, "link": link, "counter": name, "then": value,
                                                       "now": current.get(name)}))
    checked.append("uncorrectable ECC and remapped rows not grown")
    checked.append(f"{links} NVLink(s) up as at the pass, {counters} error counter(s) not grown")
    return out, checked


def _coverage_refusals(run: LastRun, then: dict, now: dict,
                       asked: tuple[int, ...] | None) -> tuple[list[Refusal], list[str]]:
    """Whether the pass ran on every GPU the new run would validate (`asked`: the NVML indices its
    CUDA_VISIBLE_DEVICES names; None: every GPU of the node). By index, through the pass's own snapshot: a GPU
    swapped since is refused as such (gpu_swapped), not again here."""
    wanted = sorted(g.get("index") for g in now.get("gpus") or [] if asked is None or g.get("index") in asked)
    if run.ran_on is None:
        return [Refusal("gpus_unlisted", {"missing": _gpu_names(wanted)})], []
    ran = sorted(g.get("index") for g in then.get("gpus") or [] if gpu_key(g) in run.ran_on)
    missing = [i for i in wanted if i not in ran]
    if not missing:
        return [], [f"the pass ran on every GPU this run would validate ({len(wanted)})"]
    why = f" (CUDA_VISIBLE_DEVICES={run.visible_then})" if run.visible_then is not None else ""
    return [Refusal("gpus_not_run", {"then": _gpu_names(ran), "why": why, "missing": _gpu_names(missing)})], []


def _gpu_names(indices: list[int]) -> str:
    return "GPU " + ",".join(map(str, indices)) if indices else "no GPU"


def _process_refusals(now: dict, asked: tuple[int, ...] | None) -> tuple[list[Refusal], list[str], list[str]]:
    """A compute process on a GPU this run would validate (`asked`; None: every GPU): on a node shared with
    other jobs, theirs on their GPUs are no change to the GPUs asked for."""
    out, unknown = [], []
    for gpu in now.get("gpus") or []:
        if asked is not None and gpu.get("index") not in asked:
            continue
        processes = gpu.get("processes")
        if processes is None:
            unknown.append(str(gpu.get("index")))
        elif processes:
            named = ", ".join(f"pid {p.get('pid')} ({p.get('name') or 'name unknown'})" for p in processes[:3])
            out.append(Refusal("foreign_process", {"index": gpu.get("index"), "processes": named}))
    said = [f"compute processes cannot be read on GPU(s) {','.join(unknown)}"] if unknown else []
    return out, said, [] if unknown or out else ["no compute process on the GPUs"]


def _xid_refusals(xid_lines: list[dict] | None, unreadable: str | None, oldest_at: float | None,
                  since: float | None) -> tuple[list[Refusal], list[str], list[str]]:
    if unreadable is not None:
        return [], [f"new XIDs not checked: the kernel log cannot be read ({unreadable}); NVML keeps no XID "
                    "after the fact"], []
    if xid_lines:
        first = xid_lines[0]
        return [Refusal("xid", {"count": len(xid_lines), "first": f"Xid {first['xid']} on {first['where']}"})], [], []
    if since is not None and oldest_at is not None and oldest_at > since:
        return [], ["the kernel log's oldest line is after the pass: an XID between the two may have scrolled out"], []
    return [], [], ["no Xid line in the kernel log since the pass"]


def decide(run: LastRun | None, now_snapshot: dict, *, now: float, window_s: float, window_where: str,
           asked_level: str, thresholds: str | None, version: str, xid_lines: list[dict] | None = None,
           xid_unreadable: str | None = None, xid_oldest_at: float | None = None, host: str = "",
           folders: str = "", asked_gpus: tuple[int, ...] | None = None,
           asked_profile: str | None = None) -> Decision:
    """Whether `run` (this node's latest, or None) stands for a run at `asked_level` now. `now_snapshot`:
    the node now (wirecheck.node.snapshot; {"unreadable": why} when NVML failed); xid_*: the kernel log's
    Xid lines since the pass's start (plain dicts with xid and where), or why it could not be read;
    asked_gpus: the NVML indices of the GPUs the new run would validate (its CUDA_VISIBLE_DEVICES), None for all;
    asked_profile: the new run's --profile."""
    if run is None:
        return Decision(None, (Refusal("no_run", {"host": host, "folders": folders}),))
    refusals = _run_refusals(run, now=now, window_s=window_s, window_where=window_where, asked_level=asked_level,
                             asked_profile=asked_profile, thresholds=thresholds, version=version)
    said, checked = [], []
    if "unreadable" in now_snapshot:
        refusals.append(Refusal("unreadable_now", {"why": now_snapshot["unreadable"]}))
    elif run.snapshot is not None and "unreadable" not in run.snapshot:
        node, checked = _node_refusals(run.snapshot, now_snapshot)
        processes, said, idle = _process_refusals(now_snapshot, asked_gpus)
        coverage, covered = _coverage_refusals(run, run.snapshot, now_snapshot, asked_gpus)
        refusals += node + coverage + processes
        checked += covered + idle
    xid, xid_said, xid_checked = _xid_refusals(xid_lines, xid_unreadable, xid_oldest_at, epoch(run.started))
    return Decision(run, tuple(refusals + xid), tuple(said + xid_said), tuple(checked + xid_checked))
