#!/usr/bin/env python3
"""How small a loss each rule catches, and how often it cries wolf, on the recorded H200 noise: the
committed clean runs (fixtures/reference: 1x H200 nodes, h200-1; one 2x H200 SXM machine, h200-sxm-2)
replayed with losses injected into one GPU's or one placement's figures.

For every figure the history rule judges and every rule that can judge it (the shipped table floor, a
floor derived from the GPU's peaks, a floor calibrated from 10 clean runs, the history rule after 10 and
after 3 earlier runs, the node's peers on an 8-GPU node, the fleet of 50 nodes): the false-alarm rate on
clean runs, the share of runs caught after a step loss of 2, 3, 5 and 10 %, and the resolution (the
loss caught in 95 % of runs: wirecheck.checks.sensitivity). Then 30 nights of slow ramps (0.25, 0.5 and
1 % a night) after 10 clean nights, judged night by night by the history rule and the two candidate
drift tests (CUSUM and the robust slope, wirecheck.core.trend), with the nights to the first failure
and the share caught within 14 nights; and 40 clean nights for the drift tests' false alarms.

What it reads as clean: a complete hardware run's figure whose own verdict did not fail (or failed only a
table limit, as calibrate reads it), with none of the runs the notes name as slowed on purpose
(INJECTED), of a GPU named by serial (the 1x H200 folder's older records name only "vm", several
machines), or of the one 2x H200 machine (its records name no serials; the folder is one machine); the
training figures of the workload thresholds.yaml judges today (micro-batch 8). Its runs were minutes to
a day apart: the noise of weeks (drivers, seasons) is not in them, and the table says so.

    .venv/bin/python scripts/bench/sensitivity.py [--markdown] [--json OUT.json] [--draws N] [--replays N] [--write]
    .venv/bin/python scripts/bench/sensitivity.py --from-json OUT.json     # the tables of a saved run

Not a test: it judges nothing and asserts nothing; docs/records.md quotes its table and the README its
headline. Plain Python (no numpy): 15-20 minutes on one core with the defaults (`--replays 50`: about 5).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tarfile
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from wirecheck.checks import gpu_figures  # noqa: E402
from wirecheck.checks import sensitivity as sens  # noqa: E402
from wirecheck.checks.calibration import floor_of  # noqa: E402
from wirecheck.checks.history import margin_of  # noqa: E402
from wirecheck.core import trend  # noqa: E402
from wirecheck.core.resolution import CATCH, MAX_FALSE, from_critical, percent  # noqa: E402
from wirecheck.node.hardware import Hardware  # noqa: E402
from wirecheck.records.figures import run_figures  # noqa: E402
from wirecheck.records.file import RecordFileError, read_run  # noqa: E402
from wirecheck.thresholds.file import load_thresholds  # noqa: E402

REFERENCE = ROOT / "fixtures" / "reference"
DATA = ROOT / "fixtures" / "pytest_wirecheck" / "resolution.yaml"
SOURCES = {"h200-1": "1x H200 nodes", "h200-sxm-2": "2x H200 SXM"}
# Runs slowed or disturbed on purpose (fixtures/reference/*/NOTES.md): never clean, whatever their verdicts say.
INJECTED = ("gemm10", "hbm10", "half", "slowed", "slowgemm", "slowhbm", "foreign", "copy", "wrong", "diag-")
STEPS = (0.02, 0.03, 0.05, 0.10)
RULE_NAMES = {"measured": "table floor", "derived": "derived floor"}
RAMPS = (0.05 / 28, 0.0025, 0.005, 0.01)  # 5 % over four weeks, then the three the table is asked for
CLEAN_NIGHTS, RAMP_NIGHTS, WITHIN_NIGHTS = 10, 30, 14
PEER_GPUS, FLEET_NODES = 8, 50

# The figures tabulated, in order: (thresholds key, level or None, label, the loss it is aimed to catch or None)
FIGURES = (
    ("gpu_health.floors.NVIDIA H200.hbm_copy", "acceptance", "HBM copy", 0.01),
    ("gpu_health.floors.NVIDIA H200.hbm_read", "acceptance", "HBM read", 0.03),
    ("gpu_health.floors.NVIDIA H200.gemm_bf16", "acceptance", "GEMM bf16", 0.03),
    ("gpu_health.floors.NVIDIA H200.gemm_fp8", "acceptance", "GEMM fp8", 0.03),
    ("gpu_health.floors.NVIDIA H200.sustained_bf16", "acceptance", "sustained bf16 (60 s)", 0.03),
    ("copy_bandwidth.floors.pcie.h2d", "acceptance", "host to device", None),
    ("copy_bandwidth.floors.pcie.d2h", "acceptance", "device to host", None),
    ("collectives.floors.nvswitch.all_reduce.2", None, "all_reduce busbw, 2x H200", 0.05),
    ("collectives.floors.nvswitch.all_gather.2", None, "all_gather busbw, 2x H200", 0.05),
    ("collectives.floors.nvswitch.reduce_scatter.2", None, "reduce_scatter busbw, 2x H200", 0.05),
    ("collectives.floors.nvswitch.broadcast.2", None, "broadcast busbw, 2x H200", 0.05),
    ("collectives.floors.nvswitch.all_to_all.2", None, "all_to_all busbw, 2x H200", 0.05),
    ("collectives.floors.forced_pcie.all_reduce.2", None, "all_reduce busbw, host path", 0.05),
    ("collectives.floors.pair.all_reduce.2", None, "all_reduce busbw, pair check", 0.05),
    ("training.single_gpu_throughput_floors.NVIDIA H200", "acceptance", "one GPU training", 0.05),
    ("training.throughput_floors.nvswitch.ddp.2", None, "DDP tokens/s, 2x H200", 0.05),
    ("training.throughput_floors.nvswitch.zero1.2", None, "ZeRO-1 tokens/s, 2x H200", 0.05),
    ("training.throughput_floors.nvswitch.zero2.2", None, "ZeRO-2 tokens/s, 2x H200", 0.05),
    ("training.throughput_floors.nvswitch.zero3.2", None, "ZeRO-3 tokens/s, 2x H200", 0.05),
    ("training.throughput_floors.nvswitch.fsdp.2", None, "FSDP tokens/s, 2x H200", 0.05),
)


@dataclass
class Readings:
    """One figure's clean readings, by subject, with what its limits need."""

    series: dict = field(default_factory=lambda: defaultdict(list))  # subject -> [(started, value)]
    within: list = field(default_factory=list)
    hardware: dict | None = None
    link_ceiling: float | None = None
    records: set = field(default_factory=set)


def _record_files() -> list[Path]:
    """Every record under the reference folders, the members of their records.tgz unpacked to a temporary folder."""
    files = sorted(p for source in SOURCES for p in (REFERENCE / source).rglob("*.jsonl"))
    unpacked = Path(tempfile.mkdtemp(prefix="wirecheck-sensitivity-"))
    for archive in sorted(p for source in SOURCES for p in (REFERENCE / source).rglob("records.tgz")):
        target = unpacked / str(archive.relative_to(REFERENCE)).replace("/", "_")
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
        files += sorted(target.rglob("*.jsonl"))
    return files


def _clean_figures(workload: dict) -> dict:
    """(key, level) -> Readings from the reference records."""
    gpu = gpu_figures()
    out: dict = defaultdict(Readings)
    for path in _record_files():
        if any(path.name.startswith(name) for name in INJECTED) or "fleet" in path.parts:
            continue
        try:
            run = read_run(path)
        except (RecordFileError, OSError, ValueError):
            continue  # not a record of this schema (the earliest probes): not a reading
        if run.simulated or not run.end or run.end.get("status") != "complete":
            continue
        one_machine = "h200-sxm-2" in str(path)
        inputs = {(v.get("check"), v.get("where"), (v.get("inputs") or {}).get("op")): v.get("inputs") or {}
                  for v in run.verdicts}
        for f in run_figures(run, gpu):
            if not f.trusted or f.bound != "min" or (not f.identified and not one_machine):
                continue
            if f.workload and any(f.workload.get(k) != v for k, v in workload.items()):
                continue
            level = f.level if not one_machine else None
            r = out[(f.yaml_path, level)]
            r.series[f.subject].append((f.started, f.value))
            if f.within:
                r.within.append(f.within)
            r.records.add(str(path))
            if r.hardware is None and run.run.get("hardware"):
                r.hardware = run.run["hardware"]
            ceiling = inputs.get(("busbw", f.where, f.figure), {}).get("link_ceiling_bytes_per_s")
            r.link_ceiling = r.link_ceiling or ceiling
    return out


def _noise(r: Readings) -> sens.Noise:
    return sens.Noise.of([[v for _, v in sorted(vals)] for vals in r.series.values()], r.within)


# -- nights: the history rule and the drift tests, run after run ------------------------------------


@dataclass
class NightRules:
    history: object  # thresholds' HistoryRule
    drift: object  # its DriftRule
    figure: str | None = None  # the figure's short name (its own least margin)
    slope_runs: int = 14
    slope_z: float = 2.33


def figure_name(key: str) -> str:
    """The short name the history rule knows a figure by (records.figures.Figure.figure), from its key."""
    parts = key.split(".")
    return "single_gpu_throughput" if parts[1] == "single_gpu_throughput_floors" else parts[3]


def _drift_verdict(method: str, rules: NightRules, series: list[float], within: list) -> str:
    """pass, warn or fail of one drift test on `series` (oldest first, tonight last)."""
    d = rules.drift
    measured = [w for w in within if w]
    floor = max(d.min_noise, statistics.median(measured) if measured else 0.0)
    if method == "cusum":
        window = series[-d.runs:]
        if len(window) < d.baseline + d.min_after:
            return "skip"
        found = trend.cusum(window, d.baseline, max(floor, trend.detrended_noise(window[:-1])), d.k, d.h)
    else:
        window = series[-rules.slope_runs:]
        if len(window) < rules.slope_runs:
            return "skip"
        found = trend.slope(window, floor, rules.slope_z)
    if method == "cusum" and (found.began is None or len(window) - found.began < d.min_after):
        return "pass"  # one low run is no fall (checks.drift: min_after runs since it began)
    warn_at, fail_at = d.bounds(found.sigma)
    margin = margin_of(rules.history, window[:-1], within[-len(window):], rules.figure).margin
    if margin > rules.history.max_margin or d.noise_k * found.sigma > rules.history.max_margin:
        return "skip"
    if not found.alarm or found.loss < warn_at:
        return "pass"
    return "fail" if found.loss >= fail_at else "warn"


def _nights(noise: sens.Noise, rules: NightRules, loss_at, nights: int, seed: int, start: int = 0) -> dict:
    """One subject's nights: each judged by the history rule and both drift tests; a night that failed the
    history rule is left out of the later histories, as records.figures.history_figures leaves it out. Returns the first night from `start` on of each outcome
    and the outcomes of the clean nights."""
    rng = random.Random(seed)
    kept, within_kept = [], []
    first: dict = {}
    clean = {"history": [0, 0], "cusum_warn": [0, 0], "cusum_fail": [0, 0], "slope_warn": [0, 0], "slope_fail": [0, 0]}
    for night in range(nights):
        loss = loss_at(night)
        value = noise.run(rng) * (1 - loss)
        within = noise.within_of(rng)
        past = kept[-rules.history.runs:]
        failed = False
        if len(past) >= rules.history.min_runs:
            m = margin_of(rules.history, past, [within] + within_kept[-rules.history.runs:], rules.figure)
            if m.margin <= rules.history.max_margin and value < statistics.median(past) * (1 - m.margin):
                failed = True
                if night >= start:
                    first.setdefault("history", night)
            if loss == 0:
                clean["history"][0] += 1
                clean["history"][1] += failed
        for method in ("cusum", "slope"):
            outcome = _drift_verdict(method, rules, kept + [value], within_kept + [within])
            if outcome in ("warn", "fail") and night >= start:
                first.setdefault(f"{method}_warn", night)
            if outcome == "fail" and night >= start:
                first.setdefault(f"{method}_fail", night)
            if outcome != "skip" and loss == 0:
                clean[f"{method}_warn"][0] += 1
                clean[f"{method}_warn"][1] += outcome in ("warn", "fail")
                clean[f"{method}_fail"][0] += 1
                clean[f"{method}_fail"][1] += outcome == "fail"
        if not failed:
            kept.append(value)
            within_kept.append(within)
    return {"first": first, "clean": clean}


def _ramp_table(noise: sens.Noise, rules: NightRules, replays: int, seed: int) -> dict:
    out = {}
    for rate in RAMPS:
        starts = defaultdict(list)
        for i in range(replays):
            result = _nights(noise, rules, lambda n, r=rate: max(0, n - CLEAN_NIGHTS + 1) * r,
                             CLEAN_NIGHTS + RAMP_NIGHTS, seed + i, start=CLEAN_NIGHTS)
            for what in ("history", "cusum_warn", "cusum_fail", "slope_warn", "slope_fail"):
                night = result["first"].get(what)
                starts[what].append(None if night is None or night < CLEAN_NIGHTS else night - CLEAN_NIGHTS + 1)
            # caught: the first failure of the median rule or the shipped drift rule (CUSUM)
            both = [n for n in (result["first"].get("history"), result["first"].get("cusum_fail")) if n is not None]
            starts["caught"].append(min(both) - CLEAN_NIGHTS + 1 if both and min(both) >= CLEAN_NIGHTS else None)
        out[rate] = {what: _night_summary(values) for what, values in starts.items()}
    return out


def _night_summary(nights: list) -> dict:
    found = sorted(n for n in nights if n is not None)
    return {"median_nights": statistics.median(found) if found else None,
            "within_14": sum(1 for n in found if n <= WITHIN_NIGHTS) / len(nights),
            "within_30": len(found) / len(nights)}


def _clean_rates(noise: sens.Noise, rules: NightRules, replays: int, seed: int) -> dict:
    totals = defaultdict(lambda: [0, 0])
    for i in range(replays):
        clean = _nights(noise, rules, lambda n: 0.0, CLEAN_NIGHTS + RAMP_NIGHTS, seed + i)["clean"]
        for what, (judged, fails) in clean.items():
            totals[what][0] += judged
            totals[what][1] += fails
    return {what: (fails / judged if judged else None) for what, (judged, fails) in totals.items()}


# -- the figure's rows ------------------------------------------------------------------------------


def _steps(losses: list[float], noise: sens.Noise, rule: str, how: str) -> dict:
    """One rule's row: false alarms, the share caught at each step, its resolution; `rule`: the name limits
    knows it by (fixtures/pytest_wirecheck/resolution.yaml), `how`: what it was measured on."""
    res = from_critical(losses, noise.describe())
    return {"rule": rule, "how": how, "false_alarm": res.false_alarm, "resolution": res.step,
            "caught": {step: sens.caught(losses, step) for step in STEPS}}


def measure(thresholds, key: str, r: Readings, draws: int, replays: int, seed: int) -> dict:
    noise = _noise(r)
    history = thresholds.history
    calibration = thresholds.calibration
    shipped = sens.shipped_floors(thresholds, key, Hardware.from_dict(r.hardware) if r.hardware else None,
                                  r.link_ceiling)
    peers = thresholds.gpu_health.peers(False)
    fleet = thresholds.fleet(False)
    fleet_rule = fleet.gpus if key.startswith("gpu_health") else (
        fleet.busbw if key.startswith("collectives") else fleet.throughput)
    rules: dict = {}
    where = f"{noise.runs} clean runs on {len(noise.levels)} {'subject' if len(noise.levels) == 1 else 'subjects'}"
    for rule, floor in shipped.items():
        what = "the shipped floor" if rule == "measured" else "a floor derived from the hardware's peaks"
        rules[RULE_NAMES[rule]] = _steps(sens.floor_losses(noise, floor, draws, seed), noise, rule, f"{what} over {where}")
    rules["calibrated floor (10 runs)"] = _steps(sens.calibrated_losses(
        noise, lambda values: floor_of(values, calibration), 10, draws, seed), noise, "calibrated",
        f"a floor calibrated from 10 runs like the {where}")
    name = figure_name(key)
    rules[f"history ({history.runs} runs)"] = _steps(sens.history_losses(noise, history, history.runs, draws, seed, name),
                                                     noise, "history", f"{history.runs} earlier runs, noise of {where}")
    rules[f"history ({history.min_runs} runs)"] = _steps(sens.history_losses(noise, history, history.min_runs, draws,
                                                                             seed, name), noise, "history_first",
                                                         f"{history.min_runs} earlier runs, noise of {where}")
    if key.startswith("gpu_health"):
        rules[f"peers ({PEER_GPUS} GPUs)"] = _steps(sens.peer_losses(
            noise, peers.max_below_median, peers.mad_k, PEER_GPUS, draws, seed), noise, "peers",
            f"a node of {PEER_GPUS} GPUs drawn from the {where}")
    rules[f"fleet ({FLEET_NODES} nodes)"] = _steps(sens.peer_losses(
        noise, fleet_rule.max_below_median, fleet_rule.mad_k, FLEET_NODES, draws, seed), noise, "fleet",
        f"a fleet of {FLEET_NODES} nodes drawn from the {where}")
    night_rules = NightRules(history, history.drift, name)
    return {"key": key, "runs": noise.runs, "subjects": len(noise.levels), "sd": noise.sd, "between": noise.between,
            "within": statistics.median(noise.within) if noise.within else None,
            "records": len(r.records), "rules": rules,
            "ramps": _ramp_table(noise, night_rules, replays, seed),
            "clean_nights": _clean_rates(noise, night_rules, replays, seed + 10_000)}


# -- output -----------------------------------------------------------------------------------------


def _cell(rule: dict) -> str:
    if rule["false_alarm"] >= MAX_FALSE:
        return f"cries wolf: {percent(rule['false_alarm'])}"
    step = rule["resolution"]
    if step >= 1:
        return "none: too noisy to judge in over 5 % of histories"
    return f"{percent(step)}" + (" (> 10 %)" if step > 0.10 else "")


def markdown(results: list[dict], labels: dict) -> str:
    lines = ["| figure | noise (run to run; GPU to GPU; within a run) | rule | false alarms | caught at "
             + " / ".join(f"{s * 100:g} %" for s in STEPS) + f" | resolution ({CATCH * 100:g} %) |",
             "|---|---|---|---|---|---|"]
    for res in results:
        noise = (f"{percent(res['sd'])}; {percent(res['between']) if res['subjects'] > 1 else '-'}; "
                 f"{percent(res['within']) if res['within'] else '-'} ({res['runs']} runs, {res['subjects']} "
                 f"{'subject' if res['subjects'] == 1 else 'subjects'})")
        first = True
        for name, rule in res["rules"].items():
            caught = " / ".join(f"{rule['caught'][s] * 100:.0f}" for s in STEPS)
            lines.append(f"| {labels[res['key'], res['level']] if first else ''} | {noise if first else ''} | {name} | "
                         f"{percent(rule['false_alarm'])} | {caught} | {_cell(rule)} |")
            first = False
    lines += ["", "| figure | ramp | median rule: night of its first failure (share within 14) | CUSUM: warns / fails "
                  "(fails within 14) | robust slope: warns / fails (fails within 14) | caught (the median rule or the CUSUM "
                  "fails): night; within 14 / 30 |", "|---|---|---|---|---|---|"]

    def nights(s: dict) -> str:
        return "never" if s["median_nights"] is None else f"{s['median_nights']:g}"

    for res in results:
        first = True
        clean = res["clean_nights"]
        for rate, row in res["ramps"].items():
            ramp = "5 % in 4 weeks" if abs(rate - 0.05 / 28) < 1e-9 else f"{rate * 100:g} %"
            lines.append(
                f"| {labels[res['key'], res['level']] if first else ''} | {ramp} | "
                f"{nights(row['history'])} ({row['history']['within_14'] * 100:.0f} %) | "
                f"{nights(row['cusum_warn'])} / {nights(row['cusum_fail'])} ({row['cusum_fail']['within_14'] * 100:.0f} %) | "
                f"{nights(row['slope_warn'])} / {nights(row['slope_fail'])} ({row['slope_fail']['within_14'] * 100:.0f} %) | "
                f"{nights(row['caught'])}; {row['caught']['within_14'] * 100:.0f} / {row['caught']['within_30'] * 100:.0f} % |")
            first = False
        lines.append(f"| | clean, 40 nights | false alarms {percent(clean['history'] or 0)} | warns "
                     f"{percent(clean['cusum_warn'] or 0)}, fails {percent(clean['cusum_fail'] or 0)} | warns "
                     f"{percent(clean['slope_warn'] or 0)}, fails {percent(clean['slope_fail'] or 0)} | |")
    return "\n".join(lines)


def write_data(results: list[dict], path: Path, args) -> None:
    """fixtures/pytest_wirecheck/resolution.yaml: what `wirecheck limits` shows beside each bound
    (wirecheck.thresholds.sensitivity)."""
    lines = ["# What each rule catches on the recorded noise of the reference nodes: the loss a bound fails in 95 % of",
             "# runs and its false alarms on clean runs. Written by scripts/bench/sensitivity.py --write (the tables:",
             "# docs/records.md#sensitivity); `wirecheck limits` shows it beside each bound. Do not edit by hand.",
             f'source: "scripts/bench/sensitivity.py --draws {args.draws} --replays {args.replays} over the clean runs of '
             f'fixtures/reference (h200-1: 1x H200 nodes; h200-sxm-2: one 2x H200 SXM machine)"',
             "figures:"]
    for res in results:
        if res["level"] not in (None, "acceptance"):
            continue
        lines.append(f'  "{res["key"]}":')
        for rule in res["rules"].values():
            if rule["rule"] == "history_first":
                continue
            lines.append(f'    {rule["rule"]}: {{step: "{min(rule["resolution"], 1.0) * 100:.2f} %", '
                         f'false_alarms: "{rule["false_alarm"] * 100:.2f} %", how: "{rule["how"]}"}}')
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=sens.DRAWS, help="resampled runs per rule and figure")
    p.add_argument("--replays", type=int, default=200, help="replayed histories per ramp and figure")
    p.add_argument("--markdown", action="store_true", help="print the tables as markdown (docs/records.md)")
    p.add_argument("--json", metavar="OUT.json", help="write every figure's results as JSON")
    p.add_argument("--only", metavar="WORD", help="only the figures whose key holds WORD")
    p.add_argument("--write", action="store_true", help=f"write {DATA.relative_to(ROOT)} (what `wirecheck limits` shows)")
    p.add_argument("--from-json", metavar="IN.json", help="print the tables of a saved --json run instead of measuring")
    args = p.parse_args()
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        for res in saved:  # JSON keys are strings: the steps and ramps back to numbers
            for rule in res["rules"].values():
                rule["caught"] = {float(k): v for k, v in rule["caught"].items()}
            res["ramps"] = {float(k): v for k, v in res["ramps"].items()}
        names = {(key, level): label for key, level, label, _ in FIGURES}
        print(markdown(saved, {(r["key"], r["level"]): names[r["key"], r["level"]] for r in saved}))
        return 0
    thresholds = load_thresholds(ROOT / "thresholds.yaml")
    workload = thresholds.training_settings(False).workload()
    readings = _clean_figures(workload)
    labels, results = {}, []
    for i, (key, level, label, _) in enumerate(FIGURES):
        if args.only and args.only not in key:
            continue
        r = readings.get((key, level))
        if r is None or not r.series:
            print(f"sensitivity: no clean readings of {key} at {level}", file=sys.stderr)
            continue
        labels[key, level] = label
        res = measure(thresholds, key, r, args.draws, args.replays, 1000 * (i + 1))
        res["level"] = level
        results.append(res)
        full = f"history ({thresholds.history.runs} runs)"
        print(f"sensitivity: {label}: {res['runs']} runs; {full} {_cell(res['rules'][full])}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if args.write:
        if args.only:
            print("sensitivity: --write needs every figure; drop --only", file=sys.stderr)
            return 2
        write_data(results, DATA, args)
        print(f"sensitivity: wrote {DATA}", file=sys.stderr)
    print(markdown(results, labels) if args.markdown else json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
