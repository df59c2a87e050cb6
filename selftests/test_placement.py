"""Placements and their ids on recorded and hand-built topologies; JSON snapshot round trip."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from wirecheck.node.placement import FORCED_PCIE_ENV, enumerate_placements, find_placement
from wirecheck.node.topo_text import load_recorded
from wirecheck.node.topology import BRIDGED, NVSWITCH, Gpu, NvLink, Topology

TOPOLOGIES = Path(__file__).resolve().parent.parent / "fixtures" / "pytest_wirecheck" / "topologies"


def _ids(topo: Topology) -> list[str]:
    return [p.id for p in enumerate_placements(topo)]


def _ids_of(name: str) -> list[str]:
    return _ids(load_recorded(name, TOPOLOGIES))


def _hand_built(nvlinks: list[list[int]], pcie: str = "SYS") -> Topology:
    n = len(nvlinks)
    return Topology(
        gpus=tuple(Gpu(index=i) for i in range(n)),
        nvlinks=tuple(tuple(row) for row in nvlinks),
        pcie_paths=tuple(tuple(None if i == j else pcie for j in range(n)) for i in range(n)),
        source="test",
    )


def test_h200_nvl_8():
    ids = _ids_of("h200-nvl-8")
    quads = [(0, 1, 2, 3), (4, 5, 6, 7)]
    in_quad_pairs = [p for q in quads for p in combinations(q, 2)]
    expected = (
        [f"single-1gpu-{i}" for i in range(8)]
        + [f"nvl_pair-2gpu-{a}.{b}" for a, b in in_quad_pairs[:6]]
        + ["nvl_quad-4gpu-0.1.2.3"]
        + [f"nvl_pair-2gpu-{a}.{b}" for a, b in in_quad_pairs[6:]]
        + ["nvl_quad-4gpu-4.5.6.7"]
        + ["cross_quad-2gpu-0.4", "cross_quad-4gpu-0.1.4.5", "cross_quad-8gpu-0.1.2.3.4.5.6.7"]
        + ["forced_pcie-2gpu-0.1"]
        + [f"pair-{a}.{b}" for a, b in in_quad_pairs]
    )
    assert ids == expected
    assert len(in_quad_pairs) == 12


def test_h200_sxm_2():
    assert _ids_of("h200-sxm-2") == [
        "single-1gpu-0",
        "single-1gpu-1",
        "nvswitch-2gpu-0.1",
        "forced_pcie-2gpu-0.1",
        "pair-0.1",
    ]


def test_h100_sxm_8_one_subset_per_size():
    ids = _ids_of("h100-sxm-8-nics")
    assert [i for i in ids if i.startswith("nvswitch-")] == [
        "nvswitch-2gpu-0.1",
        "nvswitch-4gpu-0.1.2.3",
        "nvswitch-8gpu-0.1.2.3.4.5.6.7",
    ]
    assert len([i for i in ids if i.startswith("pair-")]) == 28


def test_pcie_only_node_has_no_nvlink_placements():
    ids = _ids_of("rtx4090-pcie-8")
    assert [i for i in ids if not i.startswith("single-")] == ["pcie-2gpu-0.1", "pcie-4gpu-0.1.2.3", "pcie-8gpu-0.1.2.3.4.5.6.7"]


def test_a100_pairs_cross_between_pairs():
    ids = _ids_of("a100-pcie-nv12-pairs-4")
    assert "nvl_pair-2gpu-0.1" in ids and "nvl_pair-2gpu-2.3" in ids
    assert "cross_quad-2gpu-0.2" in ids and "cross_quad-4gpu-0.1.2.3" in ids
    assert not [i for i in ids if i.startswith("nvl_quad")]


def test_irregular_bridged_groups_are_not_assumed_adjacent():
    topo = _hand_built([[0, 0, 0, 12], [0, 0, 12, 0], [0, 12, 0, 0], [12, 0, 0, 0]])
    assert topo.fabric == BRIDGED and topo.groups == ((0, 3), (1, 2))
    placements = enumerate_placements(topo)
    ids = [p.id for p in placements]
    assert "nvl_pair-2gpu-0.3" in ids and "nvl_pair-2gpu-1.2" in ids
    assert "nvl_pair-2gpu-0.1" not in ids
    cross = [p for p in placements if p.klass == "cross_quad"]
    assert cross and all({0, 3} & set(p.gpus) and {1, 2} & set(p.gpus) for p in cross)
    assert find_placement(placements, "forced_pcie-2gpu-0.3").env == FORCED_PCIE_ENV
    assert [i for i in ids if i.startswith("pair-")] == ["pair-0.3", "pair-1.2"]


@pytest.mark.parametrize("name", ["h200-nvl-8", "h200-sxm-2", "h100-sxm-8-nics", "rtx4090-pcie-8", "a100-pcie-nv12-pairs-4"])
def test_ids_unique_and_stable(name):
    """Ids depend on the topology only: the same node read again, or its GPUs listed in another
    order, gives the same ids (nightly history is keyed by them)."""
    topo = load_recorded(name, TOPOLOGIES)
    first = [p.id for p in enumerate_placements(topo)]
    assert len(set(first)) == len(first)
    order = list(range(topo.n_gpus))[::-1]
    shuffled = Topology(gpus=tuple(topo.gpus[i] for i in order),
                        nvlinks=tuple(tuple(topo.nvlinks[i][j] for j in order) for i in order),
                        pcie_paths=tuple(tuple(topo.pcie_paths[i][j] for j in order) for i in order),
                        source=topo.source, declared_fabric=topo.declared_fabric)
    assert sorted(p.id for p in enumerate_placements(shuffled)) == sorted(first)


def test_find_placement_unknown_id_lists_known():
    placements = enumerate_placements(load_recorded("h200-sxm-2", TOPOLOGIES))
    with pytest.raises(ValueError, match="unknown placement 'nvl_quad-4gpu-0.1.2.3'; this topology has: single-1gpu-0"):
        find_placement(placements, "nvl_quad-4gpu-0.1.2.3")


# -- JSON snapshot --------------------------------------------------------------------------


def _nvml_like() -> Topology:
    links = tuple(NvLink(index=k, active=k != 3, remote_type="switch", remote_bus_id="FFFFFFFF:FF:FF.0", version=6, speed_mbps=26562) for k in range(18))
    gpus = tuple(
        Gpu(index=i, name="NVIDIA H200", bus_id=f"00000000:00:0{6 + i}.0", memory_bytes=150754820096, nvlinks=links, pcie_gen=5, pcie_width=16)
        for i in range(2)
    )
    return Topology(
        gpus=gpus,
        nvlinks=((0, 17), (17, 0)),
        pcie_paths=((None, "PHB"), ("PHB", None)),
        source="nvml",
        driver_version="580.159.04",
        cuda_driver_version="13.0",
        declared_fabric=NVSWITCH,
    )


@pytest.mark.parametrize("name", ["nvml-like", "h100-sxm-8-nics", "h200-nvl-8"])
def test_snapshot_round_trip(name):
    topo = _nvml_like() if name == "nvml-like" else load_recorded(name, TOPOLOGIES)
    data = json.loads(json.dumps(topo.to_dict()))
    assert Topology.from_dict(data, source=topo.source) == topo


def test_snapshot_save_and_load(tmp_path):
    topo = _nvml_like()
    topo.save(tmp_path / "node.json")
    loaded = load_recorded(str(tmp_path / "node.json"), TOPOLOGIES)
    assert loaded.gpus == topo.gpus and loaded.fabric == NVSWITCH and loaded.matrix() == [["X", "NV17"], ["NV17", "X"]]


def _snapshot(**changes) -> dict:
    data = _nvml_like().to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        ({"gpus": []}, 'node.json: not a wirecheck topology snapshot (expected "format": "wirecheck-topology/1")'),
        ([1, 2], "node.json: not a wirecheck topology snapshot"),
        ({k: v for k, v in _snapshot().items() if k != "nvlinks"}, 'node.json: "nvlinks" is not 2x2, one row and column'),
        (_snapshot(nvlinks=[[0, "x"], ["x", 0]]), "node.json: \"nvlinks\"[0][1]: 'x' is not a whole number; re-save"),
        (_snapshot(gpus=[{"index": 0, "colour": "green"}, {"index": 1}]), "node.json: gpus[0]: unknown key(s) 'colour'"),
        (_snapshot(nvlinks=[[0, 18], [12, 0]]), "node.json: NVLink matrix is not symmetric at GPU0/GPU1 (18 vs 12)"),
        (_snapshot(nvlinks=[[0]]), 'node.json: "nvlinks" is not 2x2'),
        (_snapshot(pcie_paths=[[None]]), 'node.json: "pcie_paths" is not 2x2'),
        (_snapshot(declared_fabric="infiniband"), "node.json: unknown fabric 'infiniband'"),
        # a wrong type met later would be a traceback in the placements (sorting an index that is text)
        (_snapshot(gpus=[{"index": "zero"}, {"index": 1}]), "node.json: gpus[0].index: 'zero' is not a whole number"),
        (_snapshot(gpus=[{"index": 0, "nvlinks": [{"index": 0, "active": "yes", "remote_type": "gpu"}]}, {"index": 1}]),
         "node.json: gpus[0].nvlinks[0].active: 'yes' is not true or false"),
        (_snapshot(gpus=[{"index": True}, {"index": 1}]), "node.json: gpus[0].index: True is not a whole number"),
        (_snapshot(gpus=[{"index": 1}, {"index": 1}]), "node.json: the GPUs' indices [1, 1] are not distinct"),
        (_snapshot(gpus="oops"), 'node.json: "gpus" is no list'),
        (_snapshot(gpus=[]), 'node.json: "gpus" is empty'),
        (_snapshot(fabric=42), 'node.json: "fabric": 42 is not text'),
        (_snapshot(nics=[1]), 'node.json: "nics": [1] is not a list of NIC names'),
    ],
    ids=["no-format", "not-an-object", "missing-key", "non-int-nv", "unknown-gpu-key", "asymmetric", "wrong-shape",
         "pcie-shape", "bad-fabric", "text-index", "text-bool", "bool-index", "same-index", "gpus-text", "no-gpus",
         "fabric-number", "nic-number"],
)
def test_malformed_snapshot(data, message):
    with pytest.raises(ValueError) as info:
        Topology.from_dict(data, source="node.json")
    assert str(info.value).startswith(message), str(info.value)


def test_a_profile_describes_a_topology_to_simulate():
    from wirecheck.node.profile_topology import from_profile
    from wirecheck.thresholds.file import load_thresholds

    th = load_thresholds(Path(__file__).resolve().parents[1] / "thresholds.yaml")
    sxm8 = from_profile(th.profile("h200-sxm-8"))
    assert sxm8.fabric == NVSWITCH and sxm8.n_gpus == 8 and {g.name for g in sxm8.gpus} == {"NVIDIA H200"}
    assert "nvswitch-8gpu-0.1.2.3.4.5.6.7" in {p.id for p in enumerate_placements(sxm8)}
    nvl8 = from_profile(th.profile("h200-nvl-8"))
    assert nvl8.fabric == BRIDGED and [list(g) for g in nvl8.index_groups] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    recorded = load_recorded("h200-nvl-8", TOPOLOGIES)
    assert nvl8.nvlinks == recorded.nvlinks  # the recorded synthetic topology and the profile agree


def test_an_unknown_placement_is_answered_with_the_closest_and_a_listing_by_class():
    from wirecheck.node.placement import did_you_mean, listing

    placements = enumerate_placements(load_recorded("h200-nvl-8", TOPOLOGIES))
    assert did_you_mean("nvl_qaud", placements) == "did you mean nvl_quad?"
    assert did_you_mean("zzz", placements) == ""
    text = listing(placements, width=60)
    assert "  nvl_quad: nvl_quad-4gpu-0.1.2.3 nvl_quad-4gpu-4.5.6.7" in text.splitlines()
    assert max(len(line) for line in text.splitlines()) <= 60
