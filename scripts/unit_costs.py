"""The time model's unit costs (`wirecheck plan`), derived from recorded whole-suite runs.

    .venv/bin/python scripts/unit_costs.py                     # the shipped reference runs; prints the YAML
    .venv/bin/python scripts/unit_costs.py --write             # ... into fixtures/pytest_wirecheck/unit_costs.yaml
    .venv/bin/python scripts/unit_costs.py --runs A.jsonl B.jsonl --startup-runs B.jsonl --write

A record stamps every measurement and verdict line with the second it was written. Between two
consecutive lines the suite did exactly one thing (started a worker group, measured a size, ran a
strategy), so the gap before a line is that thing's cost. One second of resolution is too coarse
for one gap; averaged over many it is not. What each figure takes:
- a collective size's overhead (buffers, correctness check, the calls to the workers): the span
  of a placement's consecutive size lines, less the wire time the records give (calls x time per
  call), over the sizes measured in it;
- a worker group's start (spawn, import torch, join the process group, the first call): the gap
  before a placement's first size line, less one size's overhead;
- a benchmark round (test_busbw): the gap between two busbw verdicts, less the rounds' wire time;
- the NCCL path probe, the copy-bandwidth measurement (less its copies) and each strategy run: the
  gap before their measurement line;
- the session's start (before the first line) and end (after the last: wall_s says);
- the one-GPU training run: its test's seconds in the end line of --single-gpu-runs (a new interpreter);
- on a one-GPU node, the copies (beyond their copy time) and the one-GPU training in the pool's one
  worker: their tests' seconds in the end lines of --one-gpu-pool-runs.
Figures that include starting worker processes come from --startup-runs (default: the 2026-12-01b
runs, the first with the bytecode cache: `import torch` 4.8 -> 1.4 s), and from the other --runs as
their `without_bytecode_cache` value; the in-group figures from all --runs. The GPU load's phases
come from --gpu-runs (their gpu_* measurements carry `wall_s`: default the 1x H200 GPU health runs
of 2026-12-01); without such records, from the GPU health probe's figures. What a spare worker saves
(wirecheck.workers.spares) comes from --spare-check, the log of scripts/device/spare_check.py: its one-rank
NCCL group started as a new interpreter and from a spare, alternately (default: 1x H200, 2026-12-02).
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from wirecheck.core import jsondata
from wirecheck.plan.collect import prepared_in_load
from wirecheck.thresholds.file import load_thresholds
from wirecheck.vocab.work import BENCHMARK_FIRST_ROUND_SWEPT, BENCHMARK_SWEPT_ONLY

PROJECT = Path(__file__).resolve().parents[1]
REFERENCE = PROJECT / "fixtures" / "reference" / "h200-sxm-2"
RUNS = [REFERENCE / d / f"run{i}.jsonl" for d in ("wirecheck-2026-11-30b", "wirecheck-2026-12-01", "wirecheck-2026-12-01b")
        for i in (1, 2, 3)]
STARTUP_RUNS = [REFERENCE / d / f"run{i}.jsonl" for d in ("wirecheck-2026-12-01b",) for i in (1, 2, 3)]
# Runs with the GPU load: today's acceptance on a 1x H200 node (2026-12-04; the sustained load's last window
# ends with its duration since 2026-12-02), the load on the pool's one worker.
GPU_RUNS = [PROJECT / "fixtures" / "reference" / "h200-1" / "level-times-2026-12-04-start" / f"acceptance-{i}.jsonl"
            for i in (1, 2, 3)]
SPARE_CHECK = PROJECT / "fixtures" / "reference" / "h200-1" / "spare-check-2026-12-02" / "spare_check.log"
# Whole-suite runs on a 1x H200 node without spare workers (2026-12-02): the one-GPU training run as a new interpreter.
SINGLE_GPU_RUNS = [PROJECT / "fixtures" / "reference" / "h200-1" / "spare-times-2026-12-02" / "acceptance" / f"without-{i}.jsonl"
                   for i in (1, 2)]
SINGLE_GPU_TEST = "tests/test_strategies.py::test_single_gpu_training["
# Acceptance runs on 1x H200 nodes whose copies and one-GPU training ran in the pool's one worker: 2026-12-05's with
# the training's one-time work done in the sustained load's shadow (the load's aside, in its first version: the
# training it leaves is the same in the thread version), 2026-12-04's without it.
ONE_GPU_POOL_RUNS = [PROJECT / "fixtures" / "reference" / "h200-1" / d / f"acceptance-{i}.jsonl"
                     for d in ("aside-2026-12-05", "level-times-2026-12-04-start") for i in (1, 2, 3)]
COPY_TEST = "tests/test_copy_bandwidth.py::test_host_copy["
# Strategy runs on a 1x H200 node forked from a zygote before and after it imported the trainers' modules
# (scripts/device/preload_check.py: 2026-12-04, and 2026-12-05's first_warmup_check.sh with ZeRO-2 and ZeRO-3), and a
# worker's end with and without Python's finalisation (scripts/device/exit_probe.py), 2026-12-04.
PRELOAD_CHECKS = (sorted((PROJECT / "fixtures" / "reference" / "h200-1" / "preload-2026-12-04").glob("preload-*.log"))
                  + [PROJECT / "fixtures" / "reference" / "h200-1" / "first-warmup-2026-12-05" / "preload.log"])
EXIT_PROBE = PROJECT / "fixtures" / "reference" / "h200-1" / "start-end-2026-12-04" / "console.log"
OUT = PROJECT / "fixtures" / "pytest_wirecheck" / "unit_costs.yaml"
NVLINK_CLASSES = ("nvswitch", "nvl_pair", "nvl_quad", "nvl_group", "pair")

# GPU health phases: no suite record has them yet (the GPU health probe, scripts/device/gpu_health_probe.py, on a
# 1x H200 node, 2026-12-01).
PROBE = {
    "figures": (2.0, "an estimate from the GPU health probe (1x H200, 2026-12-01): HBM 4 GiB x 55 copies at 4271 GB/s "
                     "(0.11 s) and reads (0.05 s), 80 bf16 and 80 fp8 8192-square GEMMs at 723 and 1398 TFLOP/s "
                     "(0.18 s), plus CUDA and cuBLAS set-up in a fresh worker (about 1.5 s); no suite record yet"),
    "memory_pass": (1.3, "the GPU health probe (1x H200, 2026-12-01): four fill patterns over 125.4 GiB "
                         "written and verified in 0.72 s, the address pattern in 0.55 s; no suite record yet"),
}


def _time(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def read_lines(path: Path) -> list[dict]:
    return [jsondata.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _name(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(PROJECT)) if path.is_relative_to(PROJECT) else str(path)


def _runs_text(paths: list[Path]) -> str:
    """wirecheck-2026-12-01b/run1+run2+run3 for a set of runs, briefly (the file lists them in full)."""
    by_dir = defaultdict(list)
    for p in paths:
        by_dir[Path(p).parent.name].append(Path(p).stem)
    return ", ".join(f"{d}/{'+'.join(sorted(stems))}" for d, stems in by_dir.items())


class Run:
    """One record file as a timeline: each line with its second, the gap before it."""

    def __init__(self, path: Path, settings):
        self.path = Path(path)
        lines = read_lines(path)
        self.header, self.end = lines[0], next((x for x in lines if x.get("type") == "end"), None)
        self.lines = [x for x in lines[1:] if x.get("type") in ("measurement", "verdict") and x.get("time")]
        self.started = _time(self.header["started"])
        self.settings = settings

    def times(self) -> list[float]:
        return [_time(x["time"]) for x in self.lines]

    def gaps(self):
        """(line, seconds since the line before it, index) for every line."""
        previous = self.started
        for i, (line, t) in enumerate(zip(self.lines, self.times())):
            yield line, t - previous, i
            previous = t

    # -- collectives ---------------------------------------------------------------------------
    def wire_s(self, details: dict) -> float:
        """Seconds on the wire for one size: eager calls (warm-up, timed, the checked one) and, up to
        graph_up_to, the captured calls replayed."""
        s = self.settings
        eager = details.get("eager_time_s") or details["time_s"]
        seconds = (s.warmup_iters + s.iters + 1) * eager
        graph = details.get("graph_time_s")
        if graph and s.graph_up_to and details["bytes"] <= s.graph_up_to:
            seconds += (s.iters * (1 + s.graph_replays) + 1) * graph
        return seconds

    def collective_runs(self) -> list[list[tuple[float, dict, float]]]:
        """Runs of consecutive collective lines of one placement: [(time, details, gap before)]."""
        runs, current, placement = [], [], None
        for line, gap, i in self.gaps():
            if line["type"] == "measurement" and line.get("kind") == "collective":
                if line["placement"] != placement or not current:
                    current = []
                    runs.append(current)
                    placement = line["placement"]
                current.append((_time(line["time"]), line["details"], gap))
            elif line["type"] == "measurement":
                placement = None  # another measurement between: the next collective starts a new run
        return runs


def per_size_overhead(runs: list[Run]) -> tuple[float, int]:
    span = wire = 0.0
    sizes = 0
    for run in runs:
        for seq in run.collective_runs():
            if len(seq) < 2:
                continue
            span += seq[-1][0] - seq[0][0]
            wire += sum(run.wire_s(d) for _, d, _ in seq[1:])
            sizes += len(seq) - 1
    return max(0.0, (span - wire) / sizes), sizes


def group_starts(runs: list[Run], per_size: float) -> list[float]:
    """The gap before each placement's first collective line, less that size's own cost."""
    starts = []
    for run in runs:
        seen = set()
        for seq in run.collective_runs():
            _, details, gap = seq[0]
            placement = (details["placement_class"], details["n_gpus"], tuple(sorted(details.get("env", {}).items())))
            key = (placement, details["op"])
            if details["op"] == "all_reduce" and key not in seen and details["bytes"] == min(d["bytes"] for _, d, _ in seq):
                seen.add(key)
                starts.append(gap - per_size - run.wire_s(details))
    return starts


def benchmark_rounds(runs: list[Run]) -> tuple[float, int]:
    """Per round beyond its wire time: test_busbw benchmarks its op after its verdict, so the gap to
    the next busbw verdict of the same placement is that benchmark; a run whose header says its first round
    came from the sweep measured one round less, and one that kept none measured none (it says nothing here)."""
    extra, rounds = 0.0, 0
    for run in runs:
        s = run.settings
        if run.header.get("benchmark") == BENCHMARK_SWEPT_ONLY:
            continue
        measured = s.benchmark_rounds - (run.header.get("benchmark") == BENCHMARK_FIRST_ROUND_SWEPT)
        at_floor = {(line["placement"], line["details"]["op"]): line["details"] for line in run.lines
                    if line["type"] == "measurement" and line.get("kind") == "collective"
                    and line["details"].get("requested_bytes", line["details"]["bytes"]) == s.floor_size}
        previous = None  # (placement, op) of the line before, when it was a busbw verdict
        for line, gap, _ in run.gaps():
            busbw = line["type"] == "verdict" and "::test_busbw[" in (line.get("test") or "")
            here = (line["inputs"]["placement"], line["inputs"]["op"]) if busbw else None
            if here and previous and previous[0] == here[0] and previous in at_floor:
                extra += gap - measured * s.iters * at_floor[previous]["time_s"]
                rounds += measured
            previous = here
    return max(0.0, extra / rounds) if rounds else 0.0, rounds


def busbw_at_floor(runs: list[Run]) -> dict:
    """class -> op -> GPU count -> (median busbw, samples): what the wire moved at the floor size."""
    found = defaultdict(list)
    for run in runs:
        for line in run.lines:
            if line["type"] == "measurement" and line.get("kind") == "collective" and line.get("value"):
                d = line["details"]
                if d.get("requested_bytes", d["bytes"]) == run.settings.floor_size:
                    found[(d["placement_class"], d["op"], d["n_gpus"])].append(d["busbw"])
    out = defaultdict(dict)
    for (klass, op, n), values in sorted(found.items()):
        out[klass].setdefault(op, {})[n] = (statistics.median(values), len(values))
    return out


def busbw_per_nvlink(runs: list[Run]) -> dict:
    """op -> (median busbw per NVLink, samples): 2-GPU NVLink placements at the floor size over their NV#,
    for pricing NVLink placements that have neither a measurement nor a floor."""
    found = defaultdict(list)
    for run in runs:
        matrix = run.header.get("matrix") or []
        gpus = {p["id"]: p["gpus"] for p in run.header.get("placements") or []}
        for line in run.lines:
            if line["type"] != "measurement" or line.get("kind") != "collective" or not line.get("value"):
                continue
            d = line["details"]
            pair = gpus.get(line["placement"]) or []
            if d["placement_class"] in NVLINK_CLASSES and len(pair) == 2 and \
                    d.get("requested_bytes", d["bytes"]) == run.settings.floor_size:
                cell = str(matrix[pair[0]][pair[1]]) if matrix else ""
                if cell.startswith("NV") and cell[2:].isdigit():
                    found[d["op"]].append(d["busbw"] / int(cell[2:]))
    return {op: (statistics.median(v), len(v)) for op, v in sorted(found.items())}


# -- one-off measurements: the gap before their line ---------------------------------------------
def gaps_before(runs: list[Run], kind: str) -> list[tuple[dict, float]]:
    return [(line, gap) for run in runs for line, gap, _ in run.gaps()
            if line["type"] == "measurement" and line.get("kind") == kind]


def copy_costs(runs: list[Run], settings) -> dict:
    """The copy-bandwidth group's starts (the gap less its copies), host and per-link peer bandwidth."""
    starts, host, peer_per_link = [], [], []
    for line, gap in gaps_before(runs, "copy_bandwidth"):
        d = line["details"]
        calls = d.get("warmup_iters", settings.warmup_iters) + d.get("iters", settings.iters)
        copies = sum(h["h2d_time_s"] + h["d2h_time_s"] for h in d.get("host", [])) + sum(p["time_s"] for p in d.get("peer", []))
        starts.append(gap - calls * copies)
        host += [h[k] for h in d.get("host", []) for k in ("h2d_bytes_per_s", "d2h_bytes_per_s")]
        peer_per_link += [p["bytes_per_s"] / 18 for p in d.get("peer", [])]  # NV18 on the recorded node
    return {"starts": starts, "host": statistics.median(host) if host else None,
            "peer_per_link": statistics.median(peer_per_link) if peer_per_link else None}


def training_runs(runs: list[Run]) -> dict:
    """(wire, strategy) -> gaps before each strategy run's line."""
    out = defaultdict(list)
    for line, gap in gaps_before(runs, "strategy"):
        klass = line["placement"].split("-")[0]
        out[("nvlink" if klass in NVLINK_CLASSES else "host_path", line["details"]["strategy"])].append(gap)
    return out


def local_baselines(runs: list[Run]) -> list[float]:
    """Each strategy run's local baseline (phase_s.local), its slowest rank's: the ranks leave together."""
    out = []
    for run in runs:
        for line in run.lines:
            if line.get("kind") == "strategy":
                phases = [(r.get("phase_s") or {}).get("local") for r in line["details"].get("ranks") or []]
                if phases and None not in phases:
                    out.append(max(phases))
    return out


def gpu_health_phases(runs: list[Run]) -> dict:
    """phase -> wall seconds of each recorded GPU load phase (one per run: every GPU at once)."""
    out = defaultdict(list)
    for run in runs:
        seen = set()
        for line in run.lines:
            kind = line.get("kind") or ""
            if line["type"] == "measurement" and kind.startswith("gpu_") and kind != "gpu_event":
                d = line["details"]
                if d.get("phase") not in seen and d.get("wall_s") is not None:
                    seen.add(d.get("phase"))
                    out[d["phase"]].append((d["wall_s"], d.get("level"), (d.get("settings") or {})))
    return out


def session_edges(runs: list[Run]) -> tuple[float, float]:
    starts, ends = [], []
    for run in runs:
        times = run.times()
        starts.append(times[0] - run.started)
        if run.end and run.end.get("wall_s") is not None:
            ends.append(max(0.0, run.end["wall_s"] - (times[-1] - run.started)))
    return statistics.mean(starts), statistics.mean(ends)


def per_test(runs: list[Run]) -> tuple[float, int]:
    """The inventory stage's verdicts (NVML and sysfs only): span over count."""
    span, count = 0.0, 0
    for run in runs:
        t = [_time(x["time"]) for x in run.lines if x["type"] == "verdict" and any(
            f"tests/{m}.py::" in (x.get("test") or "") for m in ("test_inventory", "test_topology", "test_network"))]
        if len(t) > 1:
            span += max(t) - min(t)  # stamped in whole seconds: over many runs the mean span is the true one
            count += len(t)
    return span / count, count


# -- the file ------------------------------------------------------------------------------------
def q(seconds: float) -> str:
    return f"{seconds:.3g} s"


def figure(value: str, source: str, **extra) -> dict:
    return {"value": value, **extra, "source": source}


def spare_starts(log: Path) -> dict:
    """The start of a one-rank group as a new interpreter and from a spare, from spare_check.py's `RESULT start` line."""
    line = next((l for l in log.read_text(encoding="utf-8").splitlines() if l.startswith("RESULT start ")), None)
    found = re.search(r"new interpreter: median ([\d.]+) s of ([^;]+); spare: median ([\d.]+) s of (.+)$", line or "")
    if found is None:
        raise SystemExit(f"unit_costs.py: {log}: no `RESULT start ... new interpreter: median ... spare: median ...` line "
                         "(run scripts/device/spare_check.py on a GPU node and pass its log with --spare-check)")
    new, new_all, spare, spare_all = found.groups()
    how = "one-rank NCCL group on the GPU, spawn to ready, alternately as a new interpreter and from a spare"
    return {"new_interpreter": figure(f"{float(new):.2f} s", f"median of {new_all.strip()} s: {how} ({_name(log)})"),
            "from_spare": figure(f"{float(spare):.2f} s", f"median of {spare_all.strip()} s: {how} ({_name(log)})")}


def trainer_preload(logs: list[Path]) -> dict | None:
    """strategy -> what its run's process saves forked after the zygote's import of the trainers' modules: the
    median wrap phase (the trainer's import and construction) of runs forked before it, less that of runs forked
    after, from preload_check.py's RESULT lines; None without logs."""
    wraps: dict = defaultdict(lambda: {"plain": [], "preloaded": []})
    for log in logs:
        text = log.read_text(encoding="utf-8")
        if text.startswith("REHEARSAL"):
            raise SystemExit(f"unit_costs.py: {log}: a CPU rehearsal of preload_check.py (--cpu), not a GPU node's "
                             "figures: pass the log of a run on a GPU node")
        for found in re.finditer(r"^RESULT (\w+) (plain|preloaded): .*?\bwrap ([\d.]+)", text, re.M):
            wraps[found[1]][found[2]].append(float(found[3]))
    names = "+".join(_name(log) for log in logs)
    out = {}
    for strategy, seen in sorted(wraps.items()):
        if seen["plain"] and seen["preloaded"]:
            plain, pre = statistics.median(seen["plain"]), statistics.median(seen["preloaded"])
            out[strategy] = figure(q(max(0.0, plain - pre)), f"median wrap phase of {len(seen['plain'])} runs forked "
                                   f"before the preload ({plain:.2f} s) less that of {len(seen['preloaded'])} forked after "
                                   f"({pre:.2f} s), one rank on GPU 0 of a 1x H200 node ({names})")
    return out or None


def worker_exit_saving(log: Path | None) -> dict | None:
    """A worker's end with Python's finalisation less one without (exit_probe.py's `RESULT end` medians)."""
    if log is None:
        return None
    text = log.read_text(encoding="utf-8")
    medians = {m[1]: float(m[2]) for m in re.finditer(r"^RESULT end (\w+): .*\(median ([\d.]+)\)", text, re.M)}
    if not {"normal", "exit_after_destroy"} <= medians.keys():
        raise SystemExit(f"unit_costs.py: {log}: no `RESULT end normal` and `RESULT end exit_after_destroy` lines "
                         "(run scripts/device/exit_probe.py on a GPU node and pass its log with --exit-probe)")
    saving = medians["normal"] - medians["exit_after_destroy"]
    return figure(q(saving), f"median request-to-exit of a one-rank NCCL worker holding 30 GiB on a 1x H200 node, "
                             f"{medians['normal']:.3f} s with Python's finalisation less {medians['exit_after_destroy']:.3f} s "
                             f"without ({_name(log)})")


def single_gpu_runs(paths: list[Path]) -> dict | None:
    """The one-GPU training run (test_single_gpu_training: its fresh worker, set-up, warm-up, timed steps), from the
    seconds the records' end lines give each test (setup, call and teardown); None without such records."""
    seconds = []
    for path in paths:
        end = next((x for x in reversed(read_lines(path)) if x.get("type") == "end"), {})
        seconds += [s for test, s in (end.get("test_durations_s") or {}).items() if test.startswith(SINGLE_GPU_TEST)]
    if not seconds:
        return None
    return figure(q(statistics.mean(seconds)), f"mean of {len(seconds)} runs ({', '.join(f'{s:.2f}' for s in seconds)} s): "
                  f"test_single_gpu_training's seconds in the record's end line, its worker a new interpreter (no spare "
                  f"workers) ({', '.join(_name(p) for p in paths)})")


def one_gpu_pool(paths: list[Path]) -> dict | None:
    """On a one-GPU node, the work in the pool's one worker (wirecheck.workers.pool's `alone`): the copies beyond their
    copy time (the first host-copy test's seconds less the timed and warm-up copies) and one GPU's training (its
    test's seconds), from the records' end lines; only records whose copies and training say they ran there. The
    training is priced from the records whose sustained load prepared it in its shadow (its settings name the aside),
    and, as `single_gpu_run_unprepared`, from those whose load did not (where both are given)."""
    copies, single = [], {True: [], False: []}
    names = {True: [], False: []}
    for path in paths:
        lines = read_lines(path)
        made = {x.get("kind"): x.get("details") or {} for x in lines if x.get("type") == "measurement"}
        copy, alone = made.get("copy_bandwidth", {}), made.get("single_gpu_training", {})
        if copy.get("workers") != "pool" or alone.get("workers") != "pool":
            raise SystemExit(f"unit_costs.py: {path}: its copies and one-GPU training did not run in the one-GPU pool's "
                             "worker (their details' workers are not \"pool\"): pass a 1x GPU node's acceptance record")
        prepared = prepared_in_load(x for x in lines if x.get("type") == "measurement")
        durations = next((x for x in reversed(lines) if x.get("type") == "end"), {}).get("test_durations_s") or {}
        copy_test = max((s for t, s in durations.items() if t.startswith(COPY_TEST)), default=0.0)  # the one that copied
        timed = sum((copy["warmup_iters"] + copy["iters"]) * (h["h2d_time_s"] + h["d2h_time_s"]) for h in copy["host"])
        copies.append(copy_test - timed)
        single[prepared] += [s for t, s in durations.items() if t.startswith(SINGLE_GPU_TEST)]
        names[prepared].append(_name(path))
    if not paths:
        return None

    def training(runs: list[float], where: list[str], how: str) -> dict:
        return figure(q(statistics.mean(runs)), f"mean of {len(runs)} runs ({', '.join(f'{s:.2f}' for s in runs)} s): "
                      f"test_single_gpu_training's seconds in the record's end line, in the pool's worker, {how} "
                      f"({', '.join(where)})")

    out = {"copies": figure(q(statistics.mean(copies)), f"mean of {len(copies)} runs ({', '.join(f'{s:.2f}' for s in copies)}"
                            f" s): the first host-copy test's seconds less its copies, in the pool's worker "
                            f"({', '.join(_name(p) for p in paths)})")}
    if single[True]:
        out["single_gpu_run"] = training(single[True], names[True], "prepared in the sustained load's shadow")
        if single[False]:
            out["single_gpu_run_unprepared"] = training(single[False], names[False], "not prepared (runs before it)")
    else:
        out["single_gpu_run"] = training(single[False], names[False], "not prepared in the load's shadow")
    return out


def derive(runs_paths: list[Path], startup_paths: list[Path], thresholds_path: Path, gpu_paths: list[Path],
           spare_check: Path | None = SPARE_CHECK, single_gpu_paths: list[Path] = (),
           one_gpu_pool_paths: list[Path] = (), preload_checks: list[Path] = (), exit_probe: Path | None = None) -> dict:
    th = load_thresholds(thresholds_path)
    settings = th.collective_settings(False)
    runs = [Run(p, settings) for p in runs_paths]
    startup = [Run(p, settings) for p in startup_paths]
    warm_paths = {r.path.resolve() for r in startup}
    cold = [r for r in runs if r.path.resolve() not in warm_paths]  # the runs before the bytecode cache
    all_text, startup_text, cold_text = _runs_text(runs_paths), _runs_text(startup_paths), _runs_text([r.path for r in cold])

    def started(values: list[float], cold_values: list[float], how: str) -> dict:
        """A figure that includes starting workers: today's runs, and those without the bytecode cache."""
        source = f"mean of {len(values)} {how} ({startup_text})"
        if not cold_values:
            return figure(q(statistics.mean(values)), source)
        return figure(q(statistics.mean(values)), f"{source}; without the bytecode cache: {len(cold_values)} ({cold_text})",
                      without_bytecode_cache=q(statistics.mean(cold_values)))

    per_size, n_sizes = per_size_overhead(runs)
    round_s, n_rounds = benchmark_rounds(runs)
    if not n_rounds:  # a round's cost would read 0 s, and the nightly's plan (--benchmark-kept) would price none
        raise SystemExit("unit_costs.py: no run given made a test_busbw benchmark round beyond its sweep's own (each "
                         "header says the sweep's round only): add --runs records of runs that kept them "
                         "(--benchmark-autosave, as the nightly runs)")
    start_s, end_s = session_edges(runs)
    test_s, n_tests = per_test(runs)
    copies, cold_copies = copy_costs(startup, th.copy_bandwidth.settings), copy_costs(cold, th.copy_bandwidth.settings)
    training, cold_training = training_runs(startup), training_runs(cold)
    health = gpu_health_phases([Run(p, settings) for p in gpu_paths])
    gpu_text = _runs_text(gpu_paths)
    starts = group_starts(startup, per_size)
    group = started(starts, group_starts(cold, per_size), "placement starts: the gap before a placement's first size "
                    "line less one size's overhead")

    busbw = {}
    for klass, ops in busbw_at_floor(runs).items():
        busbw[klass] = {op: {n: figure(f"{v / 1e9:.1f} GB/s", f"median of {k} runs at the floor size ({all_text})")
                             for n, (v, k) in counts.items()} for op, counts in ops.items()}

    per_link = {op: figure(f"{v / 1e9:.2f} GB/s", f"median of {k} 2-GPU NVLink measurements at the floor size over "
                           f"the pair's NV# ({all_text})") for op, (v, k) in busbw_per_nvlink(runs).items()}

    gpu = {}
    if health.get("figures"):  # the first phase's wall_s includes starting the group
        walls = [w for w, _, _ in health["figures"]]
        gpu["figures"] = figure(q(statistics.mean(walls)), f"mean wall_s of {len(walls)} recorded figures phases, "
                                f"the worker group's start included ({gpu_text})")
    else:
        gpu["figures"] = figure(q(statistics.mean(starts) + PROBE["figures"][0]),
                                f"worker_group_start (one worker per GPU, each importing torch) + {PROBE['figures'][1]}")
    if health.get("memory"):
        walls = [w / max(1, st.get("passes", 1)) for w, _, st in health["memory"]]
        gpu["memory_pass"] = figure(q(statistics.mean(walls)), f"mean wall_s per pass of {len(walls)} recorded memory "
                                    f"phases ({gpu_text})")
    else:
        gpu["memory_pass"] = figure(q(PROBE["memory_pass"][0]), PROBE["memory_pass"][1])
    if health.get("sustained"):
        extra = [w - st.get("duration_s", 0) for w, _, st in health["sustained"]]
        gpu["sustained_beyond_duration"] = figure(q(statistics.mean(extra)), f"mean of {len(extra)} recorded sustained "
                                                  f"phases: wall_s less the level's duration ({gpu_text})")
    else:
        gpu["sustained_beyond_duration"] = figure(q(1.0), "estimate: the last window and the NVML sampler's stop "
                                                  "(window 1 s); no suite record yet")

    return {
        "records": [_name(p) for p in runs_paths],
        "startup_records": [_name(p) for p in startup_paths],
        "gpu_load_records": [_name(p) for p in gpu_paths],
        "session": {
            "start": figure(q(start_s), f"mean of {len(runs)} runs: the run line's start to the first verdict ({all_text})"),
            "end": figure(q(end_s), f"mean of {len(runs)} runs: wall_s after the last line ({all_text})"),
        },
        "per_test": figure(q(test_s), f"{n_tests} inventory, topology and network verdicts (NVML and sysfs only): "
                           f"their span over their count ({all_text})"),
        "worker_group_start": group,
        "collective": {
            "per_size": figure(q(per_size), f"{n_sizes} sizes: the span of each placement's consecutive size lines "
                               f"less their wire time (calls x time per call, as recorded), per size ({all_text})"),
            "benchmark_round": figure(q(round_s), f"{n_rounds} rounds: the gap between consecutive test_busbw "
                                      f"verdicts less the rounds' wire time, per round ({all_text})"),
            "busbw_at_floor": busbw,
            "busbw_per_nvlink": per_link,
        },
        "nccl_path_probe": started([g for _, g in gaps_before(startup, "nccl_path")],
                                   [g for _, g in gaps_before(cold, "nccl_path")],
                                   "probes: the gap before each nccl_path line (a fresh worker group included)"),
        "copy_bandwidth": {
            "start": started(copies["starts"], cold_copies["starts"], "runs: the gap before the copy_bandwidth line "
                             "less its copies"),
            "host": figure(f"{copies['host'] / 1e9:.1f} GB/s", f"median pinned host copy, either direction ({startup_text})"),
            "peer_per_link": figure(f"{copies['peer_per_link'] / 1e9:.2f} GB/s", "median peer copy over NV18, per link "
                                    f"({startup_text})"),
        },
        "training": {
            wire: {strategy: started(gaps, cold_training.get((w, strategy), []), "runs on 2 GPUs: the gap before each "
                                     "strategy line (fresh workers, imports, set-up, steps, the local baseline)")
                   for (w, strategy), gaps in sorted(training.items()) if w == wire}
            for wire in ("nvlink", "host_path")
        },
        **({"single_gpu_run": one} if (one := single_gpu_runs(list(single_gpu_paths))) else {}),
        "gpu_health": gpu,
        **({"spare_workers": spare_starts(spare_check)} if spare_check is not None else {}),
        **({"one_gpu_pool": pool} if (pool := one_gpu_pool(list(one_gpu_pool_paths))) else {}),
        **({"local_baseline": figure(q(statistics.mean(local)), f"mean of {len(local)} strategy runs on 2 GPUs: each "
                                     f"run's local baseline (phase_s.local, its slowest rank), part of the training "
                                     f"figures above ({startup_text})")} if (local := local_baselines(startup)) else {}),
        **({"trainer_preload": pre} if (pre := trainer_preload(list(preload_checks))) else {}),
        **({"worker_exit_saving": ex} if (ex := worker_exit_saving(exit_probe)) else {}),
    }


HEADER = """\
# Unit costs of wirecheck's time model (`wirecheck plan`): what each piece of a run costs, in the
# reference runs' own seconds. Made by scripts/unit_costs.py from the records below; do not edit by
# hand: run `.venv/bin/python scripts/unit_costs.py --write` again (with newer records: --runs ...).
# Each figure says its source: which records, and how it was taken from their line timestamps.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", type=Path, default=RUNS, help="whole-suite records (default: the nine "
                        "2x H200 reference runs)")
    parser.add_argument("--startup-runs", nargs="+", type=Path, default=STARTUP_RUNS, help="the records whose process "
                        "starts are today's (default: the 2026-12-01b runs, with the bytecode cache)")
    parser.add_argument("--gpu-runs", nargs="*", type=Path, default=GPU_RUNS, help="records with the GPU load's phases "
                        "(default: the 1x H200 acceptance runs of 2026-12-04); none: the GPU health probe's figures")
    parser.add_argument("--spare-check", type=Path, default=SPARE_CHECK, help="scripts/device/spare_check.py's log "
                        f"(default {_name(SPARE_CHECK)})")
    parser.add_argument("--single-gpu-runs", nargs="*", type=Path, default=SINGLE_GPU_RUNS, help="whole-suite records "
                        "whose one-GPU training ran in a new interpreter (default: the 1x H200 runs without spare workers "
                        "of 2026-12-02); none: priced as the reference strategy's 2-GPU run")
    parser.add_argument("--one-gpu-pool-runs", nargs="*", type=Path, default=ONE_GPU_POOL_RUNS, help="acceptance records "
                        "of a one-GPU node whose copies and training ran in the pool's worker (default: the 1x H200 runs "
                        "of 2026-12-05, the training prepared in the load's shadow, and of 2026-12-04, not); none: "
                        "priced as in new workers")
    parser.add_argument("--preload-checks", nargs="*", type=Path, default=PRELOAD_CHECKS, help="scripts/device/"
                        "preload_check.py's logs (default: the 1x H200 nodes' of 2026-12-04 and 12-05); none: no preload saving")
    parser.add_argument("--exit-probe", type=Path, default=EXIT_PROBE, help="scripts/device/start_end_probe.sh's console "
                        f"log, with exit_probe.py's lines (default {_name(EXIT_PROBE)})")
    parser.add_argument("--thresholds", type=Path, default=PROJECT / "thresholds.yaml")
    parser.add_argument("--write", nargs="?", const=OUT, type=Path, default=None, metavar="PATH",
                        help=f"write the YAML there (default {_name(OUT)}) instead of printing it")
    args = parser.parse_args(argv)
    text = HEADER + yaml.safe_dump(derive(args.runs, args.startup_runs, args.thresholds, args.gpu_runs, args.spare_check,
                                             args.single_gpu_runs, args.one_gpu_pool_runs, args.preload_checks,
                                             args.exit_probe), sort_keys=False, width=120,
                                   allow_unicode=True)
    if args.write:
        args.write.write_text(text)
        print(f"unit_costs.py: wrote {_name(args.write)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
