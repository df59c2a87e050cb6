"""No node is held to a table entry measured (or guessed) on another GPU generation: for every profile,
each limit `wirecheck limits` lists with the rule `measured` must come from an entry whose GPU (its
`hardware: {gpu_model}`, else the GPUs its source names) has the profile's compute capability. The
derived rule (the node's own peak x an efficiency) is how another generation is judged instead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wirecheck.core.paths import suite_paths
from wirecheck.node import hardware as node_hardware
from wirecheck.node import profile_topology
from wirecheck.node.topo_text import load_recorded
from wirecheck.thresholds import listing
from wirecheck.thresholds.file import load_thresholds

SHIPPED = suite_paths().thresholds
BEFORE = Path(__file__).parent / "data" / "thresholds-before-compaction.yaml"
_GPU = re.compile(r"\b([ABHL]\d{2,3}S?)\b")  # H200, H100, A100, B200, L40S as NVML names and sources write them


def _generations(thresholds) -> dict[str, set[str]]:
    """GPU name as sources write it (H200) -> the compute capabilities of the profiles' GPUs of that name."""
    out: dict[str, set[str]] = {}
    for name in thresholds.profile_names:
        p = thresholds.profile(name)
        for gpu in _GPU.findall(p.gpu_model):
            out.setdefault(gpu, set()).add(node_hardware.from_profile(p).compute_capability)
    return out


def foreign_limits(thresholds, level: str = "acceptance") -> list[str]:
    """'profile: check at where from yaml_path (GPUs)' for each measured limit made on another generation."""
    generations = _generations(thresholds)
    out = []
    for name in thresholds.profile_names:
        profile = thresholds.profile(name)
        hardware = node_hardware.from_profile(profile)
        topology = (load_recorded(profile.topology, suite_paths().topologies) if profile.topology
                    else profile_topology.from_profile(profile, str(thresholds.path)))
        for row in listing.node_limits(thresholds, topology, hardware, level):
            if row.rule not in ("measured", "guess", "calibrated"):  # a guess from another generation's figures too
                continue
            named = (row.measured_on or {}).get("gpu_model") or row.source
            gpus = {g for g in _GPU.findall(named) if g in generations}
            if any(hardware.compute_capability not in generations[g] for g in gpus):
                out.append(f"{name}: {row.check} at {row.where} from {row.yaml_path} ({', '.join(sorted(gpus))})")
    return out


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(SHIPPED)


def test_every_profile_has_a_gpu_generation_the_check_can_tell_apart(shipped):
    generations = _generations(shipped)
    assert {"H200", "H100", "A100", "B200", "L40S"} <= set(generations)
    assert generations["A100"] == {"8.0"} and generations["B200"] == {"10.0"} and generations["H200"] == {"9.0"}


def test_no_profile_is_judged_by_another_generations_measurement(shipped):
    assert foreign_limits(shipped) == []


def test_the_check_finds_the_untagged_guesses_of_the_file_before(shipped):
    # Before the training guesses said which GPU model they were made for, an A100 and a B200 node
    # were held to floors made from an H200's tokens/s.
    found = foreign_limits(load_thresholds(BEFORE, content=BEFORE.read_bytes()), level="acceptance")  # older than reduce
    assert any(f.startswith("a100-sxm-8: throughput ddp") and "training.throughput_floors.nvswitch.ddp.any" in f
               for f in found), found
    assert any(f.startswith("b200-8: ") for f in found)
    # The shipped file judges them by nothing measured on an H200; the row says why, naming the entry.
    rows = [r for r in _rows(shipped, "a100-sxm-8") if r.check == "throughput ddp" and r.where.startswith("nvswitch")]
    assert rows and all(r.rule is None and "measured on NVIDIA H200" in r.source for r in rows), rows


def _rows(thresholds, name):
    profile = thresholds.profile(name)
    topology = load_recorded(profile.topology, suite_paths().topologies)
    return listing.node_limits(thresholds, topology, node_hardware.from_profile(profile))
