"""The compact thresholds.yaml (`"*"` defaults, `inherit:`, short comments) holds every limit the
longer file before it held: both are loaded and the loaded objects walked generically (every dataclass
field, mapping entry and sequence item: values, units, rules, sources, YAML paths, hardware), so a limit
dropped or changed anywhere fails here, whichever section it sits in. Then every limit `wirecheck limits`
lists for every profile at every level is compared too. The only differences allowed are the ones
named below: the entries measured or guessed on one GPU model that now say so (`hardware:`), and what was
added after the compaction (`ADDED_*`)."""

from __future__ import annotations

import dataclasses
import enum
import re
from pathlib import Path
from typing import Any, Mapping

import pytest

from wirecheck.core.paths import suite_paths
from wirecheck.node import hardware as node_hardware
from wirecheck.node import profile_topology
from wirecheck.node.topo_text import load_recorded
from wirecheck.thresholds import listing
from wirecheck.thresholds.file import Thresholds, load_thresholds
from wirecheck.vocab.ops import OPS

SHIPPED = suite_paths().thresholds
BEFORE = Path(__file__).parent / "data" / "thresholds-before-compaction.yaml"
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp")  # the strategies of the file before the compaction
# What came after the compaction, on purpose, with self-tests of its own: ops the file before it never
# names (reduce: a "*" of the compact file covers it now) and the rule of the ops' other dtypes and reductions.
ADDED_OPS = tuple(op for op in OPS if not re.search(rf"\b{op}\s*:", BEFORE.read_text()))
ADDED_FIELDS = ("collectives.axes_floor",)
ADDED_ROWS = " at every other dtype"  # wirecheck limits' row of an op's other dtypes and reductions
ADDED_CHECKS = ("drift",)  # wirecheck limits' row of the drift rule over each GPU's and placement's history
# The history and calibration rules, retuned since from the recorded runs' measured noise (a margin from the
# prediction bound, the drift rule): docs/records.md#sensitivity says how, test_resolution and test_drift hold them.
# The simulated fleet rule, widened from 80 % to 90 % when three simulated nodes beside the self-tests measured
# 5.6x apart (thresholds.yaml's source says it).
# The drain rules' guard, from guard_min drains on (the only node of a partition held its own failure forever).
# The H100's fp8 GEMM floor, measured on a 1x H100 SXM node where the guess failed a healthy GPU.
# The profiles' GPU memory, NVML's total as the H200 and H100 records read it (it was the datasheet's "141 GB" and
# "80 GB" read as decimal GB): the sources that say so (the values: CHANGED).
RETUNED = ("/'history'/", "/'calibration'/", "/'fleet'/simulated/", "/'drain'",
           "/'gpu_health.floors'/('NVIDIA H100 80GB HBM3', 'gemm_fp8')/",
           *(f"/'profiles'/'{name}'/source: " for name in ("h200-sxm-2", "h200-nvl-8", "h100-sxm-8", "a100-sxm-8")))
# The training throughput guesses made from an H200 (or H200 NVL) node's figures now judge that GPU model
# only: YAML path -> the `hardware:` added. Nothing else may differ.
TAGGED = {
    **{f"training.throughput_floors.{klass}.{s}.any": {"gpu_model": "NVIDIA H200"}
       for klass in ("nvswitch", "forced_pcie") for s in STRATEGIES},
    **{f"training.throughput_floors.{klass}.{s}.any": {"gpu_model": "NVIDIA H200 NVL"}
       for klass in ("nvl_pair", "nvl_quad", "nvl_group", "cross_quad") for s in STRATEGIES},
}


# The limits' rows of the floors RETUNED above from a measurement (the YAML path each row names).
MEASURED_SINCE = ("gpu_health.floors.NVIDIA H100 80GB HBM3.gemm_fp8",)

# Changed on purpose since the compaction: (the walk's path) -> (before, after).
CHANGED = {
    # the HGX H200's dry run is wired as its own recorded topology, not an H100's (the profile inherited it)
    "/'profiles'/'h200-sxm-8'/topology": ("h100-sxm-8-nics", "h200-sxm-8.synthetic"),
    # one GPU's memory as NVML reports it (an H200 143771 MiB, an H100 81559 MiB), not the datasheet's GB
    **{f"/'profiles'/'{name}'/gpu_memory": (141_000_000_000, 143771 * 2**20)
       for name in ("h200-sxm-2", "h200-sxm-8", "h200-nvl-8")},
    "/'profiles'/'h100-sxm-8'/gpu_memory": (80_000_000_000, 81559 * 2**20),
}


def _changed_on_purpose(diffs: list[str]) -> list[str]:
    return [d for d in diffs if not any(d == f"{where}: {old!r} -> {new!r}" for where, (old, new) in CHANGED.items())]


def _plain(value: Any, name: str) -> Any:
    """A loaded object as nested dicts, lists and scalars, every field included; the file's own name
    (in each limit's YAML path) written as the shipped file's. A Thresholds is what it read: its values."""
    if isinstance(value, Thresholds):
        return _plain(value.values, name)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"<type>": type(value).__name__,
                **{f.name: _plain(getattr(value, f.name), name) for f in dataclasses.fields(value) if f.name != "path"}}
    if isinstance(value, Mapping):
        return {repr(k): _plain(v, name) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        items = [_plain(v, name) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, str):
        return value.replace(name, SHIPPED.name)
    if value is None or isinstance(value, (bool, int, float, enum.Enum)):
        return value
    if isinstance(value, Path):
        return value.name
    return {"<type>": type(value).__name__, **{k: _plain(v, name) for k, v in vars(value).items() if k != "path"}}


def _added_since(difference: str) -> bool:
    return (any(f"'{op}'" in difference.split(" only after")[0] for op in ADDED_OPS if " only after" in difference)
            or any(difference == f": {name!r} only after" for name in ADDED_FIELDS)
            or difference.startswith(RETUNED))


def _differences(before: Any, after: Any, where: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        out = [f"{where}: {k} only before" for k in before.keys() - after.keys()]
        out += [f"{where}: {k} only after" for k in after.keys() - before.keys()]
        for k in before.keys() & after.keys():
            out += _differences(before[k], after[k], f"{where}/{k}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in _differences(b, a, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {before!r} -> {after!r}"]


def _limits_of(plain: Any) -> list[dict]:
    if isinstance(plain, dict):
        mine = [plain] if plain.get("<type>") == "Limit" else []
        return mine + [x for v in plain.values() for x in _limits_of(v)]
    if isinstance(plain, list):
        return [x for v in plain for x in _limits_of(v)]
    return []


def _untagged(plain: Any) -> Any:
    """`plain` with the hardware the compact file adds on purpose taken back off."""
    if isinstance(plain, dict):
        out = {k: _untagged(v) for k, v in plain.items()}
        if out.get("<type>") == "Limit":
            path = str(out["yaml_path"]).split(": ", 1)[-1]
            if path in TAGGED:
                assert out["hardware"] == {repr(k): v for k, v in TAGGED[path].items()}, path
                out["hardware"] = None
        return out
    if isinstance(plain, list):
        return [_untagged(v) for v in plain]
    return plain


@pytest.fixture(scope="module")
def both():
    # The file before is older than the ops added since: read as a kept copy is (a run's record), which asks
    # no limit of an op it never measured.
    return load_thresholds(BEFORE, content=BEFORE.read_bytes()), load_thresholds(SHIPPED)


def test_every_loaded_value_is_the_same_as_before_the_compaction(both):
    before, after = (_plain(t, Path(t.path).name) for t in both)
    assert len(_limits_of(before)) > 150  # the walk reaches the limit tables (each once), not only the settings
    assert [d for d in _changed_on_purpose(_differences(before, _untagged(after))) if not _added_since(d)] == []
    tagged = {str(x["yaml_path"]).split(": ", 1)[-1] for x in _limits_of(after) if x["hardware"]}
    assert set(TAGGED) <= tagged


def test_the_walk_sees_a_changed_source_unit_or_rule(both, tmp_path):
    # The comparison can fail: one source changed under a "*" block, one bound through an inherit.
    text = SHIPPED.read_text()
    broken = text.replace('"CPU gloo sanity floor: catches a broken path, not speed"', '"CPU gloo: changed"', 1)
    assert broken != text
    (tmp_path / "t.yaml").write_text(broken)
    diff = _changed_on_purpose(_differences(_plain(both[0], BEFORE.name),
                                            _untagged(_plain(load_thresholds(tmp_path / "t.yaml"), "t.yaml"))))
    diff = [d for d in diff if not _added_since(d)]
    assert diff and all("collectives.simulated_floors" in d and "changed" in d for d in diff), diff
    assert len(diff) == len(OPS) - len(ADDED_OPS)  # the "*" block stands for every op the file before named


def _profile_node(thresholds, name):
    profile = thresholds.profile(name)
    topology = (load_recorded(profile.topology, suite_paths().topologies) if profile.topology
                else profile_topology.from_profile(profile, str(thresholds.path)))
    return topology, node_hardware.from_profile(profile)


def _added_row(row) -> bool:
    # the history rule's rows: retuned (RETUNED), its figures those its noise can judge; held by test_resolution
    return ADDED_ROWS in row.check or row.check in ADDED_CHECKS or row.check.startswith("history ") or any(f" {op}" in row.check and row.check.endswith(f" {op}") for op in ADDED_OPS)


def test_every_profiles_listing_is_the_same_but_for_the_tagged_entries(both):
    before, after = both
    assert before.profile_names == after.profile_names
    changed = 0
    for name in after.profile_names:
        topology, hardware = _profile_node(after, name)
        for level in ("quick", "acceptance", "burn-in"):
            old = [r.as_json() for r in listing.node_limits(before, topology, hardware, level) if not _added_row(r)]
            new = [r.as_json() for r in listing.node_limits(after, topology, hardware, level) if not _added_row(r)]
            assert len(old) == len(new), (name, level)
            for o, n in zip(old, new):
                o = {k: v.replace(BEFORE.name, SHIPPED.name) if isinstance(v, str) else v for k, v in o.items()}
                if o == n:
                    continue
                # Allowed: a tagged entry now said not to apply (or applying, tagged) on this GPU model, and a
                # floor retuned from measurements since (RETUNED).
                path = (o["yaml_path"] or "").split(": ", 1)[-1]
                if path in MEASURED_SINCE:
                    continue
                assert path in TAGGED and o["check"] == n["check"] and o["where"] == n["where"], (name, level, o, n)
                changed += 1
    assert changed > 0
