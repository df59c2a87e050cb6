"""One scripts/device/level_times.sh folder on its own: per level, the wall time of each repeat (min, median,
max) and the record's own seconds; every test with its outcome in each run (a test whose outcome differs between
runs is listed); every measured figure over the runs with its spread ((max - min) / median); and where the time
went, per test, as the records' end lines give it (the median over the runs, the largest first).

    python3 scripts/device/level_spread.py OUTDIR

Exit 1 when a test's outcome differs between runs or a run did not exit 0; 0 otherwise.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

TOP = 8  # the tests that took longest, per level


def records(folder: Path) -> dict[str, list[dict]]:
    """{run name (level-i): the record's lines} from the folder's records.tgz."""
    out: dict[str, list[dict]] = {}
    with tarfile.open(folder / "records.tgz") as tar:
        for member in tar.getmembers():
            if member.name.endswith(".jsonl"):
                lines = []
                for text in tar.extractfile(member).read().decode().splitlines():
                    try:
                        lines.append(json.loads(text))
                    except ValueError:
                        continue  # a torn last line
                out[Path(member.name).stem] = lines
    return out


def by_test(lines: list[dict]) -> dict[str, dict]:
    """A run's verdicts by test id; a test that records several (the history's, one per figure) by id and what."""
    verdicts = [v for v in lines if v.get("type") == "verdict"]
    count = defaultdict(int)
    for v in verdicts:
        count[v["test"]] += 1
    return {v["test"] if count[v["test"]] == 1 else f"{v['test']} {v.get('what')}": v for v in verdicts}


def spread(values: list[float]) -> str:
    mid = statistics.median(values)
    rel = (max(values) - min(values)) / mid * 100 if mid else 0.0
    return f"{min(values):.4g} / {mid:.4g} / {max(values):.4g} ({rel:.1f} %)"


def main(folder: Path) -> int:
    walls, bad = defaultdict(list), 0
    with open(folder / "times.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            walls[row["level"]].append(float(row["wall_s"]))
            bad += row["exit"] != "0"
    runs = records(folder)
    for level in sorted({name.rsplit("-", 1)[0] for name in runs}):
        mine = {name: lines for name, lines in sorted(runs.items()) if name.startswith(level + "-")}
        header = next(iter(mine.values()))[0] if mine else {}
        ends = [lines[-1] for lines in mine.values() if lines and lines[-1].get("type") == "end"]
        print(f"== {level}: {len(mine)} runs; wall (command) min / median / max: {spread(walls[level])} s; "
              f"record's wall_s {spread([e['wall_s'] for e in ends if e.get('wall_s')]) if ends else '-'} s")
        trained = (header.get("training") or {}).get("set")
        print(f"   spare workers {header.get('spare_workers')}, training set {trained}")
        verdicts = {name: by_test(lines) for name, lines in mine.items()}
        tests = sorted(set().union(*verdicts.values())) if verdicts else []
        differ = [t for t in tests if len({v.get(t, {}).get("outcome", "absent") for v in verdicts.values()}) > 1]
        bad += len(differ)
        for test in differ:
            print(f"   OUTCOME DIFFERS {test}: " + ", ".join(f"{n}={v.get(test, {}).get('outcome', 'absent')}"
                                                          for n, v in verdicts.items()))
        outcomes = defaultdict(int)
        for t in tests:
            outcomes[next(v[t]["outcome"] for v in verdicts.values() if t in v)] += 1
        print(f"   {len(tests)} tests, {len(tests) - len(differ)} with one outcome in every run "
              f"({', '.join(f'{k} {n}' for k, n in sorted(outcomes.items()))})")
        print(f"   {'figure':<62} {'min / median / max (spread)':<40} unit")
        for test in tests:
            values = [v[test]["measured"] for v in verdicts.values() if test in v
                      and isinstance(v[test].get("measured"), (int, float)) and not isinstance(v[test]["measured"], bool)]
            if values:
                unit = next(v[test].get("unit") or "" for v in verdicts.values() if test in v)
                print(f"   {test.split('::')[-1]:<62} {spread(values):<40} {unit}")
        seconds = defaultdict(list)
        for end in ends:
            for test, s in (end.get("test_durations_s") or {}).items():
                seconds[test].append(s)
        longest = sorted(seconds.items(), key=lambda kv: -statistics.median(kv[1]))[:TOP]
        print("   where the time went (each test's setup, call and teardown: min / median / max s):")
        for test, values in longest:
            print(f"     {test.split('::')[-1]:<60} {spread(values)}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
