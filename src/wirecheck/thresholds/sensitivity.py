"""What each rule catches on the recorded noise: fixtures/pytest_wirecheck/resolution.yaml read into Resolutions.

The file is made by scripts/bench/sensitivity.py (`--write`) from the committed clean runs of the reference
nodes; for each figure (by the thresholds key of its floor: "gpu_health.floors.NVIDIA H200.gemm_bf16") and
each rule that can judge it (measured: the table entry, derived, calibrated, history, peers, fleet) the loss
it catches in 95 % of runs and its false alarms. `wirecheck limits` shows them beside the bounds; a figure or
rule the file does not hold (another GPU model, a site's own hardware) has no measured resolution, and the
listing says so rather than guessing. A calibrated entry states its own (its provenance, Limit.resolution).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Mapping

from wirecheck.core.paths import suite_paths
from wirecheck.core.resolution import Resolution
from wirecheck.thresholds.yaml_reader import _At, _read_yaml

FIX = "make the file again: .venv/bin/python scripts/bench/sensitivity.py --write"
RULES = ("measured", "derived", "calibrated", "history", "peers", "fleet")


def default_path() -> Path | None:
    return suite_paths().resolution


@functools.lru_cache(maxsize=4)
def load(path: str | None = None) -> tuple[str, Mapping[str, Mapping[str, Resolution]]]:
    """(the file's source, figure key -> rule -> Resolution); a file that is not there gives nothing (a site
    may delete it), a malformed one a ValueError naming the key and the fix."""
    file = Path(path) if path else default_path()
    if file is None or not file.is_file():
        return "", {}
    top = _At(str(file), (), _read_yaml(file)).fields("measured resolution", required={
        "source": '"scripts/bench/sensitivity.py over fixtures/reference"', "figures": "{...}"})
    figures: dict[str, dict[str, Resolution]] = {}
    for key in top["figures"].mapping("figure key -> rule -> resolution"):
        rules = top["figures"].child(key)
        figures[str(key)] = {}
        for rule in rules.mapping("rule -> resolution"):
            if rule not in RULES:
                raise rules.child(rule).error(f"unknown rule {rule!r}", f"one of {', '.join(RULES)}; {FIX}")
            f = rules.child(rule).fields("a resolution", required={"step": '"2.5 %"', "false_alarms": '"0.2 %"',
                                                                     "how": '"14 earlier runs"'})
            figures[str(key)][rule] = Resolution(f["step"].quantity("percent"), f["false_alarms"].quantity("percent"),
                                                 f["how"].text())
    return top["source"].text(), figures


def measured(key: str, rule: str, path: str | None = None) -> Resolution | None:
    """The recorded resolution of `rule` on the figure whose floor sits at `key`, or None."""
    return load(path)[1].get(key, {}).get(rule)
