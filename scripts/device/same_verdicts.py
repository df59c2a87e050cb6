"""Two runs of scripts/device/level_times.sh side by side: per level, the wall times of each repeat; for
every test either ran, its outcome in each run (a test whose outcome differs between any two runs is
listed); and every measured figure, the median of the before runs beside the median of the after runs
(a figure that moved more than 3 % is marked). Reads the records.tgz of each folder.

    python3 scripts/device/same_verdicts.py BEFORE_DIR AFTER_DIR
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import tarfile
from collections import defaultdict
from pathlib import Path


def runs(folder: Path) -> dict[str, dict[str, tuple]]:
    """{run name (level-i): {test id: (outcome, measured, unit)}} from the folder's records.tgz."""
    out: dict[str, dict[str, tuple]] = {}
    with tarfile.open(folder / "records.tgz") as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".jsonl"):
                continue
            verdicts = {}
            for line in tar.extractfile(member).read().decode().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line
                if rec.get("type") == "verdict":
                    verdicts[rec["test"]] = (rec["outcome"], rec.get("measured"), rec.get("unit") or "")
            out[Path(member.name).stem] = verdicts
    return out


def times(folder: Path) -> dict[str, list[str]]:
    out = defaultdict(list)
    with open(folder / "times.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out[row["level"]].append(f"{row['wall_s']} s (exit {row['exit']})")
    return out


def main(before: Path, after: Path) -> int:
    tb, ta = times(before), times(after)
    for level in sorted(set(tb) | set(ta)):
        print(f"{level}: before {', '.join(tb.get(level, ['-']))}; after {', '.join(ta.get(level, ['-']))}")
    rb, ra = runs(before), runs(after)
    differ = 0
    for level in sorted({name.rsplit('-', 1)[0] for name in list(rb) + list(ra)}):
        named = {f"before/{n}": v for n, v in rb.items() if n.startswith(level + "-")}
        named |= {f"after/{n}": v for n, v in ra.items() if n.startswith(level + "-")}
        tests = sorted(set().union(*named.values())) if named else []
        for test in tests:
            seen = {name: v.get(test, ("absent",))[0] for name, v in named.items()}
            if len(set(seen.values())) > 1:
                differ += 1
                print(f"  {level} {test}: " + ", ".join(f"{k}={o}" for k, o in sorted(seen.items())))
        print(f"{level}: {len(tests)} tests over {len(named)} runs, "
              f"{sum(1 for t in tests if len({v.get(t, ('absent',))[0] for v in named.values()}) == 1)} with one outcome")
        for test in tests:
            figures = {side: [v[test][1] for n, v in named.items() if n.startswith(side) and test in v
                              and isinstance(v[test][1], (int, float)) and not isinstance(v[test][1], bool)]
                       for side in ("before", "after")}
            if figures["before"] and figures["after"]:
                b, a = statistics.median(figures["before"]), statistics.median(figures["after"])
                unit = next(v[test][2] for v in named.values() if test in v)
                moved = (a - b) / b * 100 if b else 0.0
                mark = "  <-- moved" if abs(moved) > 3 else ""
                print(f"    {test.split('::')[-1]:<58} {b:>10.4g} -> {a:>10.4g} {unit:<8} {moved:+6.1f} %{mark}")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
