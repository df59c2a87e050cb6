"""What a drain hook does after a failed check, beyond the check itself: re-test, guard the fleet,
escalate a GPU that keeps failing. Pure functions over plain data (a state file's lines, Slurm's
`sinfo -R` text, records' GPU serials), so the hooks only gather and act; torch-free.

- Re-test: a check that failed and passed on its one re-run is flaky: recorded (an event line in the
  node's state file), reported, not drained; `flaky_max` such events within `flaky_window` drain with a
  reason that says so.
- Guard: before draining, the partition's nodes drained with a `wirecheck:` reason within
  `guard_window` are counted; above `guard_share` of the partition, and `guard_min` drains or more (this
  one with them: a partition of one or two nodes is no fleet to guard), the hook does not drain and says
  so until a person removes the guard file.
- Escalate: each failed run's GPUs (by serial, else UUID) are recorded; the same GPU failing
  `replace_after` times within `replace_window`, or any uncorrectable ECC / row-remap failure, is
  "replace the GPU".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from wirecheck.core.quantity import parse_duration, parse_quantity

FLAKY, FAILED = "flaky", "failed"
PREFIX = "wirecheck:"
# Checks whose failure is the GPU's memory itself: never flutter, always a replacement.
_HARD_MEMORY = re.compile(r"ecc|row.?remap|remapp", re.IGNORECASE)


class DrainPolicyError(ValueError):
    """A bad `drain:` key: the message names the key and the fix."""


@dataclass(frozen=True)
class Policy:
    flaky_max: int = 3
    flaky_window_s: float = 24 * 3600.0
    guard_share: float = 0.5
    guard_window_s: float = 300.0
    replace_after: int = 3
    replace_window_s: float = 7 * 86400.0
    guard_min: int = 3  # the fewest drains in the window (this one with them) the guard can hold


def parse_policy(section: dict | None, where: str = "thresholds.yaml: drain") -> Policy:
    """The `drain:` section of thresholds.yaml (every key optional) as a Policy."""
    if section is None:
        return Policy()
    if not isinstance(section, dict):
        raise DrainPolicyError(f"{where}: give a mapping of flaky_max, flaky_window, guard_share, guard_window, "
                               "guard_min, replace_after, replace_window")
    known = {"flaky_max", "flaky_window", "guard_share", "guard_window", "guard_min", "replace_after",
             "replace_window", "source"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise DrainPolicyError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    default = Policy()

    def count(key: str, fallback: int) -> int:
        value = section.get(key, fallback)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise DrainPolicyError(f"{where}.{key}: {value!r}: give a whole number of at least 1, e.g. {key}: {fallback}")
        return value

    def duration(key: str, fallback: float) -> float:
        return parse_duration(section[key], f"{where}.{key}") if key in section else fallback

    share = parse_quantity(section["guard_share"], "percent", f"{where}.guard_share") if "guard_share" in section \
        else default.guard_share
    if not 0 < share <= 1:
        raise DrainPolicyError(f"{where}.guard_share: give a share of the partition above 0 and up to 100 %, e.g. \"50 %\"")
    return Policy(count("flaky_max", default.flaky_max), duration("flaky_window", default.flaky_window_s), share,
                  duration("guard_window", default.guard_window_s), count("replace_after", default.replace_after),
                  duration("replace_window", default.replace_window_s), count("guard_min", default.guard_min))


# ---- the node's state file: one JSON line per event ---------------------------------------------------

def read_events(path: str | Path) -> list[dict]:
    """The state file's events; a missing file is none, a damaged line is skipped (a half-written last
    line after a crash must not stop a hook)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    events = []
    for raw in text.splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("at"), (int, float)):
            events.append(event)
    return events


def append_event(path: str | Path, event: dict) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(event, sort_keys=True) + "\n")


def flaky_count(events: list[dict], now: float, policy: Policy) -> int:
    return sum(e.get("event") == FLAKY and now - e["at"] <= policy.flaky_window_s for e in events)


@dataclass(frozen=True)
class Retest:
    drain: bool
    flaky: bool
    line: str  # without the "wirecheck: " prefix


def after_retest(first_reason: str, retest_failed: bool, events: list[dict], now: float, policy: Policy,
                 culprit: str | None = None) -> Retest:
    """The decision once the failed checks were re-run: failed again drains (the diagnosed culprit as the
    reason when there is one); passed is flaky, and drains only as the `flaky_max`-th within the window
    (this one counted)."""
    if retest_failed:
        return Retest(True, False, culprit or first_reason)
    n = flaky_count(events, now, policy) + 1
    window = _span(policy.flaky_window_s)
    if n >= policy.flaky_max:
        return Retest(True, True, f"flaky {n} times in {window} (failed, then passed its re-test): {first_reason}")
    return Retest(False, True, f"flaky ({n} of {policy.flaky_max} in {window} drains): failed, then passed its "
                               f"re-test: {first_reason}")


# ---- the fleet guard -------------------------------------------------------------------------------

def _when(text: str) -> float | None:
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if stamp.tzinfo is None:  # Slurm prints the controller's local time
        stamp = stamp.astimezone()
    return stamp.timestamp()


def recently_drained(sinfo_reasons: str, now: float, policy: Policy) -> list[str]:
    """Nodes drained with a `wirecheck:` reason within the guard's window, from
    `sinfo -R -N -h -o '%N|%E|%H'` (node, reason, when: wirecheck.fleet.cluster_state runs it), in the order
    the controller stamped their reasons (then by name, for one second's): the order `drained_before` reads."""
    when_of: dict[str, float] = {}
    for raw in sinfo_reasons.splitlines():
        parts = raw.split("|")
        if len(parts) < 3:
            continue
        node, reason, when = parts[0].strip(), "|".join(parts[1:-1]).strip(), _when(parts[-1])
        if reason.startswith(PREFIX) and when is not None and now - when <= policy.guard_window_s and node not in when_of:
            when_of[node] = when
    return sorted(when_of, key=lambda n: (when_of[n], n))


def drained_before(drained: list[str], node: str) -> list[str] | None:
    """The drains stamped before `node`'s own in `drained` (recently_drained's order); None where its own is not
    among them (a person changed the reason, or it is out of the window)."""
    return drained[:drained.index(node)] if node in drained else None


@dataclass(frozen=True)
class Guard:
    hold: bool
    line: str


def guard(drained: list[str], partition_size: int, node: str, policy: Policy) -> Guard:
    """Whether draining `node` would put the partition's recent wirecheck drains above the guard's share."""
    others = [n for n in drained if n != node]
    after = len(others) + 1
    if partition_size <= 0:
        return Guard(True, f"guard: the partition's size is unknown; not draining {node}")
    share = after / partition_size
    window = _span(policy.guard_window_s)
    if share > policy.guard_share and after >= policy.guard_min:
        return Guard(True, f"GUARD: not draining {node}: {len(others)} of {partition_size} nodes drained by wirecheck "
                           f"in {window}, {after} would be {share:.0%} > {policy.guard_share:.0%} (a bad push or a "
                           "fabric-wide event?); remove the guard file to drain again")
    if share > policy.guard_share:  # a small partition: this drain is no fleet-wide event
        return Guard(False, f"guard: {after} of {partition_size} drained in {window} ({share:.0%}, fewer than "
                            f"guard_min {policy.guard_min} drains: a partition this small is no fleet to guard)")
    return Guard(False, f"guard: {after} of {partition_size} drained in {window} ({share:.0%} <= {policy.guard_share:.0%})")


# ---- escalation per GPU ---------------------------------------------------------------------------

def gpu_ids(run_header: dict) -> list[str]:
    """Each GPU's serial, else its UUID, from a run's header."""
    ids = []
    for gpu in run_header.get("gpus") or []:
        if isinstance(gpu, dict):
            key = gpu.get("serial") or gpu.get("uuid")
            if key:
                ids.append(str(key))
    return ids


def failed_gpus(verdicts: list[dict], run_header: dict) -> list[str]:
    """The GPUs a run's failed verdicts name (a verdict's `gpus` indices), else every GPU of the run."""
    by_index = {g.get("index"): str(g.get("serial") or g.get("uuid")) for g in run_header.get("gpus") or []
                if isinstance(g, dict) and (g.get("serial") or g.get("uuid"))}
    named = []
    for v in verdicts:
        if v.get("outcome") != "fail":
            continue
        for index in v.get("gpus") or (v.get("details") or {}).get("gpus") or []:
            if index in by_index and by_index[index] not in named:
                named.append(by_index[index])
    return named or list(by_index.values())


def hard_memory_failure(verdicts: list[dict]) -> str | None:
    """The first failed verdict that is the GPU's memory itself: the suite's ECC and row-remap checks, or a
    verdict that says so in its details (`hard_memory`: DCGM's uncorrectable-memory error ids, checks.dcgm)."""
    for v in verdicts:
        details = v.get("details") if isinstance(v.get("details"), dict) else {}
        if v.get("outcome") == "fail" and (_HARD_MEMORY.search(f"{v.get('check')} {v.get('what')}")
                                           or details.get("hard_memory")):
            return f"{v.get('check')} {v.get('what')} on {v.get('where')}"
    return None


@dataclass(frozen=True)
class Escalation:
    replace: list[str]  # GPU serials/UUIDs to replace
    why: str


def escalate(events: list[dict], gpus: list[str], verdicts: list[dict], now: float, policy: Policy) -> Escalation:
    """"Replace the GPU" for each of `gpus` (this run's failed ones) that failed `replace_after` times within
    the window (this failure counted), or at once for an uncorrectable ECC / row-remap failure."""
    hard = hard_memory_failure(verdicts)
    if hard and gpus:
        return Escalation(list(gpus), f"replace the GPU {', '.join(gpus)}: {hard} (an uncorrectable memory fault)")
    replace, counts = [], {}
    for gpu in gpus:
        counts[gpu] = 1 + sum(e.get("event") == FAILED and gpu in (e.get("gpus") or []) and
                              now - e["at"] <= policy.replace_window_s for e in events)
        if counts[gpu] >= policy.replace_after:
            replace.append(gpu)
    if not replace:
        return Escalation([], "")
    return Escalation(replace, "replace the GPU " + ", ".join(f"{g} (failed {counts[g]} times in "
                                                                f"{_span(policy.replace_window_s)})" for g in replace))


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def write_bundle(path: str | Path, files: list[str | Path], texts: dict[str, str]) -> Path:
    """The evidence for a replacement as one .tar.gz: `files` (records, a bug report) under their names,
    `texts` (diagnose's output, `nvidia-smi -q`, the kernel's Xid lines) as NAME files; a file that is gone
    is skipped, the archive is written beside and moved into place (never a half archive)."""
    import io
    import os
    import tarfile

    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        for f in files:
            if Path(f).is_file():
                tar.add(str(f), arcname=Path(f).name)
        for name, text in texts.items():
            data = text.encode("utf-8", "replace")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    os.replace(partial, path)
    return path
