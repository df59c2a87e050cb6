"""A fleet's results directory: one record file per node (named after the node), plus the records of
multi-node runs (wirecheck.fleet.multinode), read back with what is missing or cut short said per node.

A node that did not write a record, whose record ends without its `end` line, or whose record has
lines that are not UTF-8 text (damaged: its other lines are still judged), is a failed node, never a
gap: the operator learns which node to look at. A file that is not a wirecheck record at all
is bad input (the directory is the wrong one, or something else was written into it).
"""

from __future__ import annotations

import gc
import os
import re

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from wirecheck.core import jsondata, problems

from wirecheck.records.file import RecordFileError, RunRecord, read_run
from wirecheck.fleet.settings import PARALLEL_FROM  # below it, one process reads the records

SUFFIX = ".jsonl"


class FleetInputError(ValueError):
    """The directory or a file in it cannot be used; the message names it and the fix."""


@dataclass
class NodeRun:
    node: str
    path: Path | None
    run: RunRecord | None
    problem: str | None = None  # what is wrong with its record, in words; None: a complete record
    problem_kind: str | None = None  # the same as a kind of wirecheck.core.problems (what readers decide by)
    damaged: tuple = ()  # the record's lines that were not UTF-8 text (records.file.DamagedLine)
    unexpected: bool = False  # a record from a node not in the --nodes list
    simulated: bool = False
    digest: Any = None  # what collect's `digest` made of the record (its run is then dropped)


@dataclass
class Fleet:
    directory: Path
    nodes: list[NodeRun]
    network: list[RunRecord] = field(default_factory=list)  # multi-node runs
    simulated: bool = False
    missing_unnamed: int = 0  # --expect N without names: how many never wrote a record

    def node(self, name: str) -> NodeRun | None:
        return next((n for n in self.nodes if n.node == name), None)


def _is_run_header(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline(1 << 20)
        return jsondata.loads(first).get("type") == "run"
    except (OSError, ValueError, AttributeError):  # jsondata: no RecursionError from a deep line
        return False


def _problem(run: RunRecord) -> tuple[str | None, str | None]:
    """(words, kind) of what is wrong with a record that was read; (None, None) for a complete one."""
    if run.damaged:  # its other lines are judged: what could be read stands, the record as a whole does not
        return f"record {run.path.name} is damaged: {run.damage()}", problems.DAMAGED
    if run.end is None:
        return (f"record {run.path.name} was cut short (no end line): the run was killed, hung or ran out of disk; "
                "whatever it had not reached was never judged"), problems.CUT_SHORT
    status = run.end.get("status")
    if status != "complete":
        return (f"record {run.path.name}: the run was {status} (exit status {run.end.get('exit_status')}): not every "
                "check ran"), problems.STOPPED
    if run.end.get("stopped_early"):
        return (f"record {run.path.name}: the run stopped at a failure (-x or --maxfail): the checks after it never "
                "ran"), problems.NARROWED
    return None, None


def scope(run: RunRecord) -> str:
    """What a run set out to check, in words: its level and what narrowed it (-k, -m, test ids). The fleet holds a
    node that ran other checks than the others ran to account (fleet.judging)."""
    selection = run.run.get("selection") or []
    level = run.run.get("level") or "no level"
    return f"{level}, {' '.join(map(str, selection))[:120]}" if selection else str(level)


# What a host or Slurm node name is made of (RFC 1123 labels, and the '_' some sites use), 253 at most.
NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")


def read_node_list(path: str | Path) -> list[str]:
    """One node name per line; blank lines and # comments ignored (e.g. `scontrol show hostnames`)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text, byte {exc.start}"
        raise FleetInputError(f"--nodes {path}: cannot read it ({why or exc}); give a file with one node "
                              "name per line (e.g. `scontrol show hostnames $SLURM_JOB_NODELIST > nodes.txt`)") from None
    names = []
    for number, line in enumerate(lines, 1):
        name = line.split("#", 1)[0].strip()
        if name and not NODE_NAME.fullmatch(name):  # a name is also a file name here: DIR/<name>.jsonl
            shown = name if len(name) <= 40 else name[:40] + "..."
            raise FleetInputError(f"--nodes {path}, line {number}: {shown!r} is not a node name (letters, digits, "
                                  "'.', '-', '_'); give one node name per line (e.g. `scontrol show hostnames "
                                  "$SLURM_JOB_NODELIST > nodes.txt`)")
        if name:
            names.append(name)
    if not names:
        raise FleetInputError(f"--nodes {path}: no node names in it; write one name per line")
    seen: set[str] = set()
    dupes = sorted({n for n in names if n in seen or seen.add(n)})  # a set: a list of 10,000 names is no square
    if dupes:
        raise FleetInputError(f"--nodes {path}: {', '.join(dupes)} listed twice; list each node once")
    return names


def _read(path: Path, directory: Path, digest: Callable[[NodeRun], Any] | None) -> NodeRun | RunRecord:
    """One file of the directory: a NodeRun, or the RunRecord of a multi-node run. With `digest`, the
    node's record is handed to it and dropped: a fleet of thousands keeps what the digest kept, never
    every record at once."""
    node = path.name[: -len(SUFFIX)]
    if path.stat().st_size == 0:
        return NodeRun(node, path, None, f"record {path.name} is empty: the run died before writing its header",
                       problems.UNREADABLE)
    try:  # read for what the digest keeps of it (fleet.judging.LeanLines; a multi-node run is read whole)
        run = read_run(path, getattr(digest, "lines", None))
    except RecordFileError as exc:
        if (not _is_run_header(path) and not exc.lost) or exc.other_schema:
            raise FleetInputError(f"{exc}; move it out of {directory} (the directory must hold only wirecheck "
                                  "records, one per node)") from None
        return NodeRun(node, path, None, f"unreadable record: {exc}", problems.UNREADABLE)
    if run.run.get("multinode"):
        return run
    n = NodeRun(node, path, run, *_problem(run), simulated=run.simulated, damaged=run.damaged)
    if digest is not None:
        n.digest = digest(n)
        n.run = None
    return n


_CHUNK = 16
_WORK: tuple | None = None  # (directory, digest) for the reading processes, inherited when they fork


def _read_in_worker(path: Path) -> NodeRun | RunRecord:
    directory, digest = _WORK
    return _read(path, directory, digest)


def _read_all(paths: list[Path], directory: Path, digest, jobs: int) -> list:
    # Parsed records are millions of small dicts and lists without a cycle among them: the cyclic
    # collector, set off by every few hundred of them, finds nothing and cost a tenth of the reading.
    # Off while reading (the reading processes fork with it off), on again after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_each(paths, directory, digest, jobs)
    finally:
        if collecting:
            gc.enable()


def _read_each(paths: list[Path], directory: Path, digest, jobs: int) -> list:
    if digest is None or jobs < 2 or len(paths) < PARALLEL_FROM:
        return [_read(path, directory, digest) for path in paths]
    import multiprocessing

    global _WORK
    _WORK = (directory, digest)
    try:
        # fork: the processes inherit the thresholds and the digest as they are, nothing is pickled but
        # the paths and the digests coming back, in order.
        with multiprocessing.get_context("fork").Pool(min(jobs, len(paths) // _CHUNK + 1)) as pool:
            return list(pool.imap(_read_in_worker, paths, chunksize=_CHUNK))
    finally:
        _WORK = None


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def collect(directory: str | Path, expected: list[str] | None = None, expect_n: int | None = None,
            digest: Callable[[NodeRun], Any] | None = None, jobs: int = 1) -> Fleet:
    """The directory's records; `digest(node_run)`, when given, is what each node's record is kept as
    (read by `jobs` processes at once when there are many)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FleetInputError(f"{directory}: no such directory; pass the results directory the nodes wrote to "
                              "(each node: wirecheck validate ... --wirecheck-json DIR/$(hostname).jsonl)")
    nodes: list[NodeRun] = []
    network: list[RunRecord] = []
    for got in _read_all(sorted(directory.glob(f"*{SUFFIX}")), directory, digest, jobs):
        (nodes if isinstance(got, NodeRun) else network).append(got)
    if not nodes and not network and not expected:
        raise FleetInputError(f"{directory}: no record files (*{SUFFIX}) in it; pass the directory the nodes wrote "
                              "their records to")
    read = [n for n in nodes if n.run is not None or n.digest is not None]
    modes = {n.simulated for n in read} | {bool(r.simulated) for r in network}
    if len(modes) > 1:
        sims = [n.node for n in read if n.simulated] + [r.path.name for r in network if r.simulated]
        raise FleetInputError(f"{directory} mixes simulated and hardware records (simulated: {', '.join(sims)}); "
                              "judge them in separate directories")
    fleet = Fleet(directory, nodes, network, simulated=modes == {True})
    if expected is not None:
        found, listed = {n.node for n in nodes}, set(expected)
        for n in nodes:
            n.unexpected = n.node not in listed
        for name in expected:
            if name not in found:
                nodes.append(NodeRun(name, None, None, f"no record {name}{SUFFIX} in {directory}: the node never wrote "
                                                       "one (not started, or it died before its first line)",
                                     problems.MISSING))
    elif expect_n is not None and len(nodes) < expect_n:
        fleet.missing_unnamed = expect_n - len(nodes)
    nodes.sort(key=lambda n: n.node)
    return fleet
