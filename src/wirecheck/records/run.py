"""Writing one run's record: its `run` header, the measurements and verdicts as they come, its `end`.

The suite's plugin, rank 0 of `wirecheck.fleet.multinode` and `wirecheck nccl-tests` all write their
records through `RunWriter`, so every record has the same header keys (`run_header`) and the same end
line, and the verdict counts and wall time are kept in one place. Line by line the file stays a
`RecordFile` (records/file.py): each line is flushed the moment it exists.

The header describes the node through attributes of wirecheck.node's objects (a topology: fabric,
gpus, index_groups, matrix(); a placement: id, klass, gpus), read here without importing them.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import yaml

from wirecheck.core import code_digest, exit_codes
from wirecheck.core.harness import REMOVED, HarnessFault
from wirecheck.core.paths import extends_target
from wirecheck.core.verdict import Verdict
from wirecheck.records.file import Measurement, RecordFile, RecordFileError, env_switches, read_run, starts_a_run

COMPLETE = "complete"
INTERRUPTED = "interrupted"
ERROR = "error"  # a multi-node job that broke: a rank raised, died or hung
BUSY = "busy"  # another run held the node longer than this one would wait: nothing ran (exit_codes.NODE_BUSY)
FAULT = "fault"  # the record could not be written whole (a full disk...): exit_codes.HARNESS_FAULT, no verdict on the node


def placement_entry(placement) -> dict:
    """A placement as the header lists it."""
    return {"id": placement.id, "class": placement.klass, "gpus": list(placement.gpus)}


def topology_fields(topology) -> dict:
    """The node's GPUs, NVLink groups and link matrix as the header holds them; empty without a topology."""
    if topology is None:
        return {"fabric": None, "gpus": [], "groups": [], "matrix": []}
    return {
        "fabric": topology.fabric,
        # uuid and serial name the GPU itself (an index or bus id names a slot): its history follows them
        "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "uuid": getattr(g, "uuid", None),
                  "serial": getattr(g, "serial", None),
                  "memory_bytes": g.memory_bytes, "nvlinks_active": topology.nvlinks_up(g.index)} for g in topology.gpus],
        "groups": [list(g) for g in topology.index_groups],
        "matrix": topology.matrix(),
    }


def thresholds_fields(path: str | Path) -> dict:
    """The thresholds file a run judged against, as the header keeps it: its path, the sha256 of its
    bytes and the bytes themselves (gzip, base64: ~20 kB for the shipped 60 kB file), so that `wirecheck
    judge` judges a record again against the run's own limits on any machine, whatever became of the
    file. Without a readable file: the path only."""
    fields: dict = {"thresholds": str(Path(path).absolute())}  # judge looks for it again, from anywhere
    try:
        data = Path(path).read_bytes()
    except OSError:
        return fields
    fields["thresholds_sha256"] = hashlib.sha256(data).hexdigest()
    fields["thresholds_gz_b64"] = base64.b64encode(gzip.compress(data, mtime=0)).decode("ascii")
    bases = [{"path": str(base), "sha256": hashlib.sha256(raw).hexdigest(),
              "gz_b64": base64.b64encode(gzip.compress(raw, mtime=0)).decode("ascii")}
             for base, raw in _extended_files(Path(path), data)]
    if bases:
        fields["thresholds_bases"] = bases
    return fields


def _extended_files(path: Path, data: bytes) -> list[tuple[Path, bytes]]:
    """The files a thresholds file's `extends:` chain names, nearest first, with their bytes, so a
    record keeps every layer its limits came from. What cannot be read is left out: the loader, which
    ran before the header is written, has said why."""
    out: list[tuple[Path, bytes]] = []
    seen = {Path(path).absolute()}
    while True:
        if b"extends" not in data:  # no layer below: spare a parse of the whole file (a prolog's second)
            return out
        try:
            doc = yaml.safe_load(data)
        except yaml.YAMLError:
            return out
        name = doc.get("extends") if isinstance(doc, dict) else None
        if not isinstance(name, str) or not name.strip():
            return out
        try:
            target = extends_target(name, path)
            data = target.read_bytes()
        except (OSError, RuntimeError):
            return out
        if target in seen:
            return out
        seen.add(target)
        out.append((target, data))
        path = target


def recorded_bases(header: dict) -> dict[str, bytes]:
    """The base files of the run's thresholds (`extends:`), absolute path -> bytes, as the header kept
    them. ValueError when they are damaged."""
    out = {}
    for base in header.get("thresholds_bases") or []:
        try:
            raw = gzip.decompress(base64.b64decode(base["gz_b64"], validate=True))
        except (ValueError, OSError, EOFError, KeyError, TypeError) as exc:
            raise ValueError(f"the recorded base thresholds cannot be unpacked ({exc})") from None
        if hashlib.sha256(raw).hexdigest() != base.get("sha256"):
            raise ValueError(f"the recorded base thresholds {base.get('path')} do not match their recorded sha256")
        out[str(base.get("path"))] = raw
    return out


def recorded_thresholds(header: dict) -> tuple[bytes, str] | None:
    """(the thresholds file's bytes, its sha256) as a run header recorded them; None for a header
    without them (records written before 2026-12-01, or whose thresholds file could not be read).
    ValueError when they are there but damaged."""
    packed = header.get("thresholds_gz_b64")
    if packed is None:
        return None
    try:
        data = gzip.decompress(base64.b64decode(packed, validate=True))
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"the recorded thresholds cannot be unpacked ({exc})") from None
    digest = hashlib.sha256(data).hexdigest()
    if header.get("thresholds_sha256") not in (None, digest):
        raise ValueError("the thresholds copy in the record's header does not match the sha256 recorded beside it: "
                         "the record was edited or damaged after the run")
    return data, digest


def judged_under(header: dict) -> tuple | None:
    """What a run header says its verdicts were judged under: (the thresholds file's sha256, its base
    files' sha256s in `extends:` order, wirecheck's code digest); None where it does not say all of it
    (records from before these were kept, a thresholds file the run could not read)."""
    thresholds = header.get("thresholds_sha256")
    code = (header.get("versions") or {}).get("wirecheck_code") if isinstance(header.get("versions"), dict) else None
    bases = header.get("thresholds_bases") or []
    if not isinstance(thresholds, str) or not isinstance(code, str) or not isinstance(bases, list):
        return None
    return thresholds, tuple(b.get("sha256") if isinstance(b, dict) else None for b in bases), code


def judging_under(path: str | Path) -> tuple | None:
    """judged_under for verdicts this process would judge against the thresholds file at `path`."""
    return judged_under({**thresholds_fields(path), "versions": code_digest.versions()})


def cannot_write(exc: Exception, option: str, named: bool, folder: str | Path) -> str:
    """The message for a record file that cannot be made: the option that names it and the fix. A
    run given no path was never asked for one: say where the default went and how to choose."""
    if named:
        return f"{option}: {exc}; pass a writable path"
    return (f"{exc}: without {option}, a run keeps its record in {folder}; start it from a writable directory, "
            f"or pass {option} PATH")


def refuse_other_runs(path: str | Path, kind: str | None, reads: Iterable[str | Path] = ()) -> None:
    """A command that writes runs of its own `kind` (dcgm, nvbandwidth, diagnosis) into a path it was given:
    RecordFileError where that path is a record the command reads (`reads`), or a file whose last run is of
    another kind. Runs append, and every reader takes a file's last run: a DCGM run appended to a
    validation record would hide the validation's verdicts from judge, report and the drain hooks.

    `kind` None: the command writes no run, it replaces the file (a page, a JSON or Prometheus file): the path
    is refused where it is a file the command reads or holds a record (its first line a run header), which
    the new file would destroy; any other file there is the command's own output of an earlier day."""
    target = Path(path)
    try:
        if not target.is_file() or target.stat().st_size == 0:
            return
    except OSError:
        return  # the writer names what is wrong with the path
    for given in reads:
        try:
            same = os.path.samefile(target, given)
        except OSError:
            continue
        if same and kind is None:
            raise RecordFileError(f"{path} is a file this command reads: writing there would replace it, and what "
                                  "it holds would be lost; pass a new path")
        if same:
            raise RecordFileError(f"{path} is the record this command reads: writing its {kind} run there would "
                                  "make it the file's last run, which every reader takes, and hide the run it "
                                  "holds; pass a new path")
    if kind is None:
        if starts_a_run(target):
            raise RecordFileError(f"{path} holds a wirecheck record: writing there would replace it, and the run it "
                                  "holds would be lost; pass a new path")
        return
    try:
        last = read_run(target).run.get("kind")
    except (RecordFileError, OSError, ValueError):
        raise RecordFileError(f"{path} exists and is no wirecheck record file: pass a new path") from None
    if last != kind:
        held = f"a `wirecheck {last}` run" if last else "a validation run"
        raise RecordFileError(f"{path} holds {held}: runs append, and a `wirecheck {kind}` run after it would be the "
                              f"last one every reader takes, hiding it; pass a new path (a file of `wirecheck {kind}` "
                              "runs takes more of them)")


# The header's "workers" when the run's workers are one pool (one worker per GPU for the run, a sub-group per
# placement: the suite's plugin); records before it have no such key (a group per placement). The plan
# prices a run by it.
POOL = "pool"


def run_header(*, simulated: bool, simulation_source: str | None, thresholds: str | Path, versions: dict,
               placements: Iterable[dict], topology=None, gpus: list | None = None, unavailable: str | None = None,
               profile: str | None = None, level: str | None = None, duration_s: float | None = None,
               hardware: dict | None = None, selection: list[str] | None = None, workers: str | None = None,
               spare_workers: str | None = None, training: dict | None = None, benchmark: str | None = None,
               single_gpu: str | None = None, **extra: Any) -> dict:
    """The provenance of a run that measures and judges: what was simulated, against which thresholds,
    with which versions and environment, on which GPUs and placements, at which level (the suite's
    --level, a burn-in's duration; None for a run without levels). `gpus` replaces the topology's
    GPU list where there is no topology (the ranks of a multi-node job); `extra` adds keys of its own
    (`multinode`). `hardware`: what the derived limits read of the node (wirecheck.node.hardware; None
    where there is no one node, as in a multi-node job). `selection`: what narrowed a suite run below its
    level (-k, -m, ...; None where a run has no levels); `workers`: how the suite ran its workers (POOL);
    `spare_workers`: "on" where a run on a GPU node takes its workers' ranks from spares (wirecheck.workers.spares),
    "off" where told not to, None where it has none (a multi-node job); `training`: where each strategy trains
    (wirecheck.training.selection's header; None where nothing trains); `benchmark`: how the run's pytest-benchmark
    rounds were made (wirecheck.vocab.work.BENCHMARK_FIRST_ROUND_SWEPT or BENCHMARK_SWEPT_ONLY; None where it makes
    none); `single_gpu`: how the one-GPU training's one-time work is done (wirecheck.vocab.strategies.SINGLE_GPU_PREPARED_IN_LOAD; None where
    the run has no GPU load).
    Every header has every key, so that the suite's and the multi-node job's read alike."""
    fields = topology_fields(topology)
    if gpus is not None:
        fields["gpus"] = gpus
    return {
        "simulated": simulated,
        "simulation_source": simulation_source,
        "unavailable": unavailable,
        "profile": profile,
        **thresholds_fields(thresholds),
        # wirecheck's own version and code: a fleet report takes verdicts judged by this very code as recorded
        "versions": {**versions, **code_digest.versions()},
        "env": env_switches(),
        **fields,
        "placements": list(placements),
        "level": level,
        "duration_s": duration_s,
        "hardware": hardware,
        "selection": None if selection is None else list(selection),
        "workers": workers,
        "spare_workers": spare_workers,
        "training": training,
        "benchmark": benchmark,
        "single_gpu": single_gpu,
        **extra,
    }


class RunWriter:
    """One run's record file: the header, then measurements and verdicts (counted), then the end.

    At `path` (the user's: runs may append to it), or, without one, a new file of the run's own
    naming, `<prefix>-<UTC>-<host>-<pid>.jsonl` in `folder` (RecordFile.fresh). Raises
    RecordFileError when the file cannot be made (a path that cannot be one: the caller names its own
    option), HarnessFault when the disk refuses it (full, read-only, failing).

    A line the disk refuses later raises HarnessFault (an OSError), unless `keep_going`: then the
    measurement goes on, the writer keeps the fault (`fault`) and what it could not write (`unwritten`:
    counts by type, and the verdicts themselves, for the screen), writes nothing more, and `end` makes the
    run's exit status HARNESS_FAULT and tries once to end the file with a `fault` end line. The caller
    says so last (`fault_lines`) and exits with that status: the suite's plugin and nccl-tests do."""

    def __init__(self, path: str | Path | None, *, folder: str | Path = ".wirecheck", prefix: str = "results",
                 started: float | None = None, keep_going: bool = False):
        self.file = RecordFile(path) if path else RecordFile.fresh(folder, prefix)
        self.started = time.monotonic() if started is None else started  # for wall_s: time.monotonic()
        self.verdicts: Counter = Counter()  # outcome -> count, as written
        self.simulated = False
        self.exit_status: int | None = None  # set by end()
        self.ended = False
        self.measurements = 0
        self.fault: HarnessFault | None = None  # the first line the disk refused
        self.unwritten: Counter = Counter()  # line type -> lines not written after the fault
        self.unwritten_verdicts: list[dict] = []  # the verdicts among them, as their record lines
        self.end_written = False  # the end line is in the file (not when the fault kept it out)
        self.other_fault: HarnessFault | None = None  # a fault elsewhere (a worker's log): the record goes on
        self.keep_going = keep_going

    @property
    def path(self) -> Path:
        return self.file.path

    def _keep(self, kind: str, write) -> bool:
        """Run `write` (one line) unless the record already failed; False (and the fault kept) when it fails."""
        if self.fault is None:
            try:
                write()
                return True
            except HarnessFault as fault:
                if not self.keep_going:
                    raise
                self.fault = fault
        self.unwritten[kind] += 1
        return False

    def header(self, provenance: dict) -> None:
        self.simulated = bool(provenance.get("simulated"))
        self._keep("run", lambda: self.file.header(provenance))

    def measurement(self, m: Measurement) -> None:
        self.measurements += 1
        self._keep("measurement", lambda: self.file.measurement(m))

    def verdict(self, v: Verdict, test: str | None) -> None:
        self.verdicts[v.outcome] += 1
        if not self._keep("verdict", lambda: self.file.verdict(v, test)):
            self.unwritten_verdicts.append({"test": test, **v.as_record()})

    def note_fault(self, fault: HarnessFault) -> None:
        """A fault of the harness outside the record (a log, a cache): the record keeps being written, and its
        end line names the fault with status FAULT."""
        self.other_fault = self.other_fault or fault

    @property
    def any_fault(self) -> HarnessFault | None:
        return self.fault or self.other_fault

    @property
    def measured(self) -> bool:
        """Whether anything was recorded after the header."""
        return bool(self.verdicts) or self.measurements > 0

    def end(self, status: str, exit_status: int, tests: dict | None = None, signal: str | None = None,
            skipped_without_verdict: dict | None = None, test_durations_s: dict | None = None,
            node_snapshot: dict | None = None, **extra: Any) -> None:
        """The last line: how the run ended (`signal`: the one that stopped it, None otherwise), its exit
        status (what the process returns), test and verdict counts (`skipped_without_verdict`: reason ->
        tests skipped before any check ran, which pytest counts and the verdicts do not), wall time, each
        test's seconds (setup, call and teardown: the time model's figures; {} where there are no tests),
        the node as NVML tells it at the end (`node_snapshot`: what `validate --trust-recent` compares with;
        None where no one node's GPUs were read), and `extra` keys of its own (a busy run's holder).

        After a fault (or when this very line is refused): status FAULT and exit status HARNESS_FAULT,
        whatever was asked (a stop signal's 128+N stays); the end line names the fault and counts the lines
        not written, and is tried once more (the disk may take it once the cut line is taken back)."""
        def faulted(code: int) -> int:
            return code if code > 128 else exit_codes.HARNESS_FAULT

        self.ended = True
        fault = self.any_fault
        self.exit_status = int(exit_status) if fault is None else faulted(int(exit_status))
        line = {
            "status": status if fault is None else FAULT,
            "signal": signal,
            "exit_status": self.exit_status,
            "simulated": self.simulated,
            "tests": dict(tests or {}),
            "skipped_without_verdict": dict(skipped_without_verdict or {}),
            "verdicts": dict(self.verdicts),
            "wall_s": round(time.monotonic() - self.started, 1),
            "test_durations_s": {test: round(seconds, 3) for test, seconds in (test_durations_s or {}).items()},
            "node_snapshot": node_snapshot,
            **extra,
        }
        if fault is not None:
            if self.fault is not None and self.fault.code == REMOVED:  # no path leads to the file: nothing to end
                self.unwritten["end"] += 1
                return
            line.update(fault=fault.as_dict(), not_written=dict(self.unwritten))
        try:
            self.file.end(line)
            self.end_written = True
        except HarnessFault as fault:
            if not self.keep_going:
                raise
            self.fault = self.fault or fault
            self.unwritten["end"] += 1
            self.exit_status = faulted(self.exit_status)

    def close(self) -> None:
        self.file.close()

    def discard(self) -> None:
        """A run that measured nothing (a usage error, nothing collected) leaves no record: the file
        it made is removed, the lines it appended to a named one are taken back."""
        self.file.discard()


def failed_not_kept(writer: RunWriter, limit: int = 20) -> list[str]:
    """fault_lines' line for each failed verdict the record could not keep (the screen marks them)."""
    from wirecheck.records.reason import ascii_text, verdict_reason

    failed = [v for v in writer.unwritten_verdicts if v.get("outcome") == "fail"]
    return [f"not in the record: FAILED {ascii_text(verdict_reason(v))} ({v.get('test')})" for v in failed[:limit]]


def fault_lines(writer: RunWriter, limit: int = 20) -> list[str]:
    """What a run whose record failed says before its last line: what the record keeps, what it lost, and
    each failed verdict it could not keep (the measurement is not lost with the disk: it is on the screen)."""
    if writer.fault is None:
        return []
    if writer.unwritten.get("run"):
        return [f"the record {writer.path} could not take its first line: nothing ran, nothing was measured"]
    named = {"end": "the end line"}
    lost = ", ".join(named.get(kind, f"{n} {kind} line(s)") for kind, n in sorted(writer.unwritten.items(),
                                                                                key=lambda item: item[0] == "end"))
    kept = ("kept nothing (removed while the run wrote it)" if writer.fault.code == REMOVED
            else f"keeps every line before the fault{', and its end line' if writer.end_written else ''}")
    lines = [f"the record {writer.path} {kept}; not written: {lost or 'nothing'}"]
    failed = [v for v in writer.unwritten_verdicts if v.get("outcome") == "fail"]
    lines += failed_not_kept(writer, limit)
    if len(failed) > limit:
        lines.append(f"not in the record: {len(failed) - limit} more failed verdict(s)")
    others = Counter(v.get("outcome") for v in writer.unwritten_verdicts if v.get("outcome") != "fail")
    if others:
        said = {"pass": "passed", "warn": "warned", "skip": "skipped"}
        lines.append("not in the record: " + ", ".join(f"{n} {said.get(outcome, outcome)}"
                                                       for outcome, n in sorted(others.items())) + " verdict(s)")
    return lines
