"""The training figures of several whole-suite runs side by side, and the limits they support.

    .venv/bin/python scripts/training_limits.py run1.jsonl run2.jsonl run3.jsonl [--floor 0.85] [--ceiling 1.25]

Reads each run's strategy measurements (run.jsonl, the suite's record) and prints, per wire and
strategy: tokens/s min / median / max and the largest distance from the median (the 5 %
criterion), x DDP, MFU, exposed communication per step, peak allocated memory. Then what
thresholds.yaml's `training` section would hold: throughput floors (`--floor` x the lowest run),
peak-memory ceilings (`--ceiling` x the highest), the slow-wire slowdown per strategy and the
strategy spread on each wire. It only prints: the values go into thresholds.yaml by hand, each
with its source, after reading them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict

from wirecheck.vocab.strategies import NAMES, REFERENCE

GIB = 2**30


def strategy_runs(path: str) -> dict[tuple[str, str], dict]:
    """(placement class, strategy) -> rank 0's figures, from one run.jsonl."""
    found = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") != "measurement" or record.get("kind") != "strategy":
                continue
            details = record["details"]
            if details.get("error") or not details.get("ranks"):
                continue
            wire = record["placement"].split("-")[0]
            rank0 = details["ranks"][0]
            found[(wire, details["strategy"])] = {
                "tokens_per_s": rank0["tokens_per_s"],
                "mfu": details.get("figures", {}).get("mfu"),
                "exposed_s": rank0.get("exposed_comm_s"),
                "peak": max(r["peak_allocated_bytes"] for r in details["ranks"] if r.get("peak_allocated_bytes")),
                "micro_batch": rank0.get("micro_batch"),
            }
    return found


def _span(values: list[float], fmt: str) -> str:
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run.jsonl files of whole-suite runs")
    parser.add_argument("--floor", type=float, default=0.85, help="floor as a share of the lowest run (0.85)")
    parser.add_argument("--ceiling", type=float, default=1.25, help="memory ceiling over the highest peak (1.25)")
    args = parser.parse_args()
    runs = [strategy_runs(p) for p in args.runs]
    by_key: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for run in runs:
        for key, figures in run.items():
            by_key[key].append(figures)
    wires = sorted({w for w, _ in by_key})
    print(f"{len(runs)} runs; micro-batch {sorted({f['micro_batch'] for v in by_key.values() for f in v})}")
    for wire in wires:
        print(f"\n{wire}")
        print(f"{'strategy':9} {'tokens/s min / med / max':32} {'off med':>8} {'x DDP':>6} {'MFU %':>12} "
              f"{'exposed ms':>12} {'peak GiB':>9} {'floor':>8}")
        ddp_median = statistics.median(f["tokens_per_s"] for f in by_key.get((wire, REFERENCE), [{"tokens_per_s": 0}]))
        for strategy in NAMES:
            figures = by_key.get((wire, strategy))
            if not figures:
                continue
            tps = [f["tokens_per_s"] for f in figures]
            median = statistics.median(tps)
            off = max(abs(t - median) for t in tps) / median
            mfus = [f["mfu"] * 100 for f in figures if f["mfu"] is not None]
            exposed = [f["exposed_s"] * 1e3 for f in figures if f["exposed_s"] is not None]
            print(f"{strategy:9} {_span(tps, '{:,.0f}'):32} {off:8.1%} {median / ddp_median if ddp_median else 0:6.2f} "
                  f"{_span(mfus, '{:.1f}') if mfus else '-':>12} {_span(exposed, '{:.0f}') if exposed else '-':>12} "
                  f"{max(f['peak'] for f in figures) / GIB:9.2f} {math.floor(min(tps) * args.floor / 100) * 100:8,d}")
    print("\npeak-memory ceilings (GiB, every wire):")
    for strategy in NAMES:
        peaks = [f["peak"] for (w, s), v in by_key.items() if s == strategy for f in v]
        if peaks:
            print(f"  {strategy}: highest {max(peaks) / GIB:.2f} -> {max(peaks) / GIB * args.ceiling:.1f}")
    if "nvswitch" in wires and "forced_pcie" in wires:
        print("\nslow wire (NVLink over host-path tokens/s, per run; floor on the lowest):")
        for strategy in NAMES:
            ratios = [r[("nvswitch", strategy)]["tokens_per_s"] / r[("forced_pcie", strategy)]["tokens_per_s"]
                      for r in runs if ("nvswitch", strategy) in r and ("forced_pcie", strategy) in r]
            if ratios:
                print(f"  {strategy}: {' / '.join(f'{x:.2f}' for x in ratios)} -> min_slowdown {math.floor(min(ratios) * args.floor * 100) / 100:.2f}")
        print("strategy spread (fastest over slowest) NVLink -> host path, per run:")
        for run in runs:
            spread = {}
            for wire in ("nvswitch", "forced_pcie"):
                tps = [run[(wire, s)]["tokens_per_s"] for s in NAMES if (wire, s) in run]
                spread[wire] = max(tps) / min(tps) if tps else float("nan")
            print(f"  {spread['nvswitch']:.2f} -> {spread['forced_pcie']:.2f} "
                  f"(ratio {spread['forced_pcie'] / spread['nvswitch']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
