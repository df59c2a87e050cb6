"""scripts/training_limits.py on the shipped 2x H200 records: the figures the thresholds cite
come out of it, and a run missing from the set changes them (it reads the records, not a table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SCRIPT = PROJECT / "scripts" / "training_limits.py"
RUNS = PROJECT / "fixtures" / "reference" / "h200-sxm-2" / "wirecheck-2026-12-01b"


def _limits(*names: str) -> str:
    out = subprocess.run([sys.executable, str(SCRIPT), *(str(RUNS / n) for n in names)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_three_runs_give_the_cited_spread_floors_and_slowdowns():
    out = _limits("run1.jsonl", "run2.jsonl", "run3.jsonl")
    assert "micro-batch [8]" in out
    # ZeRO-3 on NVLink: 107,357 / 115,589 / 119,237, 7.1 % from the median; floor 0.85 x 107,357.
    zero3_nvlink = [l for l in out.split("\nnvswitch\n")[1].splitlines() if l.startswith("zero3")][0]
    assert "107,357 / 115,589 / 119,237" in zero3_nvlink and "7.1%" in zero3_nvlink and "91,200" in zero3_nvlink
    assert "ddp: 1.72 / 1.72 / 1.74 -> min_slowdown 1.45" in out
    assert "zero3: highest 24.53 -> 30.7" in out


def test_one_run_has_no_spread_and_its_own_floor():
    out = _limits("run2.jsonl")
    zero3_nvlink = [l for l in out.split("\nnvswitch\n")[1].splitlines() if l.startswith("zero3")][0]
    assert "115,589 / 115,589 / 115,589" in zero3_nvlink and "0.0%" in zero3_nvlink and "98,200" in zero3_nvlink
