#!/usr/bin/env python3
"""How `wirecheck fleet report` grows with the fleet: time, peak memory and output sizes for N node
records (100, 1,000 and 10,000 by default), with `--json` and `--html` as the Slurm script passes them.

The records are copies of one run's record (`--record FILE`; without it one simulated run of
h200-sxm-2 is made first, a few minutes): each node's figures (busbw, tokens/s) get up to +-1 % of
noise so the fleet has a spread, and one node in 25 is slowed on a few figures (to 80 %, or to 10 % in
a simulated record, whose rule names only a gross slowdown), so every
size has outliers to find. The nodes' own verdicts are left as judged (they pass): what is named
is the fleet rule's work.

`--judged now` (the default) makes the copies records as this wirecheck writes them: the record's
verdicts judged again under the shipped thresholds, and its header saying so (the thresholds' sha256
and this wirecheck's code digest), so that the report takes them as recorded, as it does a fleet's
fresh records. `--judged as-is` copies the record as it is: a record of another wirecheck (or without
those header keys) is judged again node by node, the report's slow path.

    .venv/bin/python scripts/bench/fleet_scale.py --workdir /tmp/fleet-bench [--record run.jsonl]
        [--nodes 100,1000,10000] [--jobs N] [--judged now|as-is] [--markdown]

Peak memory is given twice: the largest single process (getrusage of the children, as
/usr/bin/time -v gives it) and the peak of the whole process tree's resident memory (the report
and the processes that read records with it), sampled every 50 ms from /proc. Not a test: it
judges nothing; docs/fleet.md quotes its table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLOW_EVERY = 25  # one node in 25 is slowed
SLOW_FACTOR = {False: 0.8, True: 0.1}  # hardware, simulated: the simulated rule names only a gross slowdown (80 %)
NOISE = 0.01
# The measurement kinds whose value is a fleet figure (wirecheck.fleet.figures), and their fields.
FIGURE_KINDS = {"collective": ("busbw", "algbw"), "strategy": (), "single_gpu_training": ()}


def simulated_record(workdir: Path) -> Path:
    path = workdir / "base.jsonl"
    if not path.exists():
        print(f"making one simulated run's record at {path} (a few minutes)", flush=True)
        subprocess.run([str(ROOT / ".venv/bin/wirecheck"), "validate", "--simulate=h200-sxm-2", "--wirecheck-json",
                        str(path), "-q"], stdout=subprocess.DEVNULL, check=False)
    return path


def judged_now(base: Path, workdir: Path) -> Path:
    """`base` as this wirecheck would have written it under the shipped thresholds: each verdict judged
    again (wirecheck judge's functions), the header's thresholds and wirecheck versions this run's."""
    sys.path.insert(0, str(ROOT / "src"))
    from wirecheck.checks.judge import rejudge_run
    from wirecheck.core import code_digest
    from wirecheck.core.paths import suite_paths
    from wirecheck.records.file import read_run
    from wirecheck.records.run import thresholds_fields
    from wirecheck.thresholds.file import load_thresholds

    shipped = suite_paths().thresholds
    run = read_run(base)
    if run.earlier_runs:
        raise SystemExit(f"--record {base}: holds {run.earlier_runs + 1} runs; give a record of one run")
    _, now = rejudge_run(run, load_thresholds(shipped))
    verdicts = iter(now)
    counts: dict[str, int] = {}
    out = []
    for line in base.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "run":
            obj.update(thresholds_fields(shipped))
            obj["versions"] = {**obj.get("versions", {}), **code_digest.versions()}
        elif obj.get("type") == "verdict":
            v = next(verdicts)
            counts[v.outcome] = counts.get(v.outcome, 0) + 1
            obj = {"type": "verdict", "test": obj.get("test"), "time": obj.get("time"), **v.as_record()}
        elif obj.get("type") == "end":
            obj["verdicts"] = counts
        out.append(json.dumps(obj))
    path = workdir / "base-judged-now.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def _template(line: str) -> tuple[list[str], list[float]] | None:
    """A figure line as the text between its scaled numbers and those numbers (None: a line left as it
    is), so that each copy is made by formatting floats, not by parsing and writing JSON again: the
    copies of 10,000 nodes are 3.7 GB. json.dumps writes a float as repr() does, so the text is the
    same as scaling the parsed line and writing it out."""
    obj = json.loads(line)
    kind = obj.get("kind")
    if obj.get("type") != "measurement" or kind not in FIGURE_KINDS:
        return None
    values: list[float] = []

    def mark(holder: dict, key: str) -> None:
        if isinstance(holder.get(key), (int, float)) and not isinstance(holder.get(key), bool):
            values.append(holder[key])
            holder[key] = f"@@scaled{len(values) - 1}@@"

    mark(obj, "value")
    details = obj.get("details") or {}
    for key in FIGURE_KINDS[kind]:
        mark(details, key)
    pieces = re.split(r'"@@scaled(\d+)@@"', json.dumps(obj))  # text, index, text, index, ..., text
    return pieces[0::2], [values[int(k)] for k in pieces[1::2]]


def _scaled(template: tuple[list[str], list[float]], f: float) -> str:
    parts, values = template
    out = [parts[0]]
    for value, part in zip(values, parts[1:]):
        out += [repr(value * f), part]
    return "".join(out)


def build(base: Path, directory: Path, n: int) -> int:
    """n node records in `directory` (made once, reused); returns how many are slowed."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = base.read_text().splitlines()
    slow_factor = SLOW_FACTOR[bool(json.loads(lines[0]).get("simulated"))]
    figures = {k: (json.loads(line)["kind"], t) for k, line in enumerate(lines)
               if any(f'"kind": "{kind}"' in line for kind in FIGURE_KINDS) and (t := _template(line)) is not None}
    rng = random.Random(n)
    slowed = 0
    for k in range(n):
        path = directory / f"node{k:05d}.jsonl"
        slow = set()
        if k % SLOW_EVERY == SLOW_EVERY // 2:
            slow = {rng.choice(list(FIGURE_KINDS))}
            slowed += 1
        if path.exists():  # made by an earlier call: the same node, slowed or not
            continue
        out = list(lines)
        for i, (kind, template) in figures.items():
            out[i] = _scaled(template, (1 + rng.uniform(-NOISE, NOISE)) * (slow_factor if kind in slow else 1.0))
        path.write_text("\n".join(out) + "\n")
    return slowed


def stale(directory: Path, base: Path) -> None:
    """Copies made from another base are removed, to be made again; copies of this base under an
    older header (a record judged by an earlier edit of wirecheck: another code digest, the only
    line that changes) get this header, without making the copies again."""
    header, _, body = base.read_bytes().partition(b"\n")
    stamp = directory / ".body-sha256"
    digest = hashlib.sha256(body).hexdigest()
    if directory.exists() and (not stamp.exists() or stamp.read_text() != digest):
        for old in directory.glob("node*.jsonl"):
            old.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest)
    for copy in directory.glob("node*.jsonl"):
        with open(copy, "r+b") as fh:
            first = fh.readline()
            if first != header + b"\n":
                rest = fh.read()
                fh.seek(0)
                fh.write(header + b"\n" + rest)
                fh.truncate()


def _tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and every process below it."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def measure(directory: Path, out: Path, n: int, jobs: int | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [str(ROOT / ".venv/bin/wirecheck"), "fleet", "report", str(directory), "--expect", str(n), "-q",
           "--json", str(out / "fleet.json"), "--html", str(out / "fleet.html")]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(out / "stdout.txt", "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        peak_tree = 0
        while proc.poll() is None:
            peak_tree = max(peak_tree, _tree_rss(proc.pid))
            time.sleep(0.05)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = (out / "stdout.txt").read_text()
    return {"nodes": n, "exit": proc.returncode, "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_process_mb": after.ru_maxrss / 1024, "peak_tree_mb": peak_tree / 2**20,
            "json_mb": (out / "fleet.json").stat().st_size / 2**20 if (out / "fleet.json").exists() else None,
            "html_mb": (out / "fleet.html").stat().st_size / 2**20 if (out / "fleet.html").exists() else None,
            "stdout_lines": len(text.splitlines()),
            "load_avg_1min": os.getloadavg()[0],  # other work on the machine: wall time means little when high
            "named": next((line for line in text.splitlines() if line.startswith("below their peers")), "")[:120]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, required=True, help="where the records and outputs go (GBs at 10,000)")
    p.add_argument("--record", type=Path, help="the run record to copy (default: make a simulated one)")
    p.add_argument("--nodes", default="100,1000,10000", help="fleet sizes, comma-separated")
    p.add_argument("--jobs", type=int, help="passed to `fleet report --jobs`")
    p.add_argument("--judged", choices=("now", "as-is"), default="now",
                   help="now: the copies are records of this wirecheck under the shipped thresholds (taken as "
                        "recorded); as-is: the record as it is (judged again node by node when it is another's)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.nodes.split(",")]
    args.workdir.mkdir(parents=True, exist_ok=True)
    base = args.record or simulated_record(args.workdir)
    if not base.is_file():
        print(f"--record {base}: no such file; pass a run's record (--wirecheck-json FILE of any run)", file=sys.stderr)
        return 4
    if args.judged == "now":
        base = judged_now(base, args.workdir)
    rows = []
    for n in sizes:
        directory = args.workdir / (f"records-{n}" if args.judged == "as-is" else f"records-now-{n}")
        stale(directory, base)
        slowed = build(base, directory, n)
        row = measure(directory, args.workdir / f"out-{n}", n, args.jobs)
        row["slowed"] = slowed
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.markdown:
        print("\n| nodes | slowed | wall s | CPU s | peak, one process | peak, all processes | JSON | HTML | exit | load |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['nodes']:,} | {r['slowed']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_process_mb']:.0f} MB "
                  f"| {r['peak_tree_mb']:.0f} MB | {r['json_mb']:.1f} MB | {r['html_mb']:.2f} MB | {r['exit']} "
                  f"| {r['load_avg_1min']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
