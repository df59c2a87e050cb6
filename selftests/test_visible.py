"""CUDA_VISIBLE_DEVICES narrows the node to the GPUs it names (wirecheck.node.visible), for the suite,
`wirecheck topo` and `wirecheck nccl-tests` alike; a value that cannot be used is named with the fix."""

from __future__ import annotations

import sys

import pytest

from e2e import make_project, run_suite
from wirecheck.cli import main as cli
from wirecheck.node import nvml, visible
from wirecheck.node.placement import enumerate_placements
from wirecheck.node.topology import BRIDGED, NVSWITCH

try:  # selftests/ may or may not be a package
    from selftests import fake_pynvml as fake
except ModuleNotFoundError:
    import fake_pynvml as fake


@pytest.fixture
def node(monkeypatch):
    """NVML of a node built from a scenario; returns its topology as NVML reads it."""

    def _node(scenario: fake.Scenario):
        monkeypatch.setitem(sys.modules, "pynvml", fake.build(scenario))
        return nvml.read_topology()

    return _node


def test_unset_or_every_gpu_leaves_the_node_as_it_is(node):
    topo = node(fake.nvswitch(8))
    assert visible.restrict(topo, None) is topo
    assert visible.restrict(topo, "7,6,5,4,3,2,1,0") is topo


def test_indices_narrow_an_nvswitch_node_and_its_placements(node):
    topo = visible.restrict(node(fake.nvswitch(8)), "4,5,6,7")
    assert topo.indices == (4, 5, 6, 7) and topo.fabric == NVSWITCH and topo.nv_between(4, 7) == 18
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7: GPUs 4,5,6,7 of 8" in topo.source
    ids = [p.id for p in enumerate_placements(topo)]
    assert "nvswitch-4gpu-4.5.6.7" in ids and "nvswitch-2gpu-4.5" in ids
    assert not any(g in p.gpus for p in enumerate_placements(topo) for g in (0, 1, 2, 3))


def test_a_subset_across_bridges_is_what_it_crosses(node):
    topo = visible.restrict(node(fake.nvl_quads(8)), "0,1,4,5")
    assert topo.fabric == BRIDGED and topo.index_groups == ((0, 1), (4, 5))
    classes = {p.klass for p in enumerate_placements(topo)}
    assert {"nvl_pair", "cross_quad"} <= classes and "nvl_quad" not in classes
    assert topo.cell(0, 2) == topo.pcie_paths[0][2]  # the PCIe path between GPU 0 and GPU 4 is kept


def test_uuids_and_unique_prefixes_name_gpus(node):
    topo = node(fake.nvswitch(8))
    assert visible.visible_indices("GPU-00000003-0000-0000-0000-000000000000,GPU-00000006", topo.gpus) == (3, 6)
    with pytest.raises(visible.VisibleDevicesError, match="GPU-0000000 matches 8 GPUs"):
        visible.visible_indices("GPU-0000000", topo.gpus)
    with pytest.raises(visible.VisibleDevicesError, match="GPU-deadbeef matches no GPU of this node"):
        visible.visible_indices("GPU-deadbeef", topo.gpus)


@pytest.mark.parametrize("spec, message", [
    ("8", "there is no GPU 8 on this node (GPUs 0, 1, 2, 3, 4, 5, 6, 7)"),
    ("0,-1", "there is no GPU -1 on this node"),
    ("0,0", "GPU 0 listed twice"),
    ("0,,1", "an empty entry"),
    ("gpu0", "'gpu0' is neither a GPU index nor a GPU UUID"),
    ("MIG-1234", "MIG-1234 is a MIG instance; wirecheck validates whole GPUs"),
])
def test_a_value_that_cannot_be_used_names_the_entry_and_the_fix(node, spec, message):
    topo = node(fake.nvswitch(8))
    with pytest.raises(visible.VisibleDevicesError) as caught:
        visible.restrict(topo, spec)
    assert message in str(caught.value) and "unset CUDA_VISIBLE_DEVICES to validate every GPU" in str(caught.value)
    assert not isinstance(caught.value, visible.NoVisibleGpu)


@pytest.mark.parametrize("spec", ["", "-1", "-1,0"])
def test_a_value_that_hides_every_gpu_leaves_none(node, spec):
    with pytest.raises(visible.NoVisibleGpu, match="hides every GPU from this process"):
        visible.restrict(node(fake.nvswitch(8)), spec)


def test_an_index_on_a_node_of_mixed_models_needs_pci_order_or_a_uuid(node):
    scenario = fake.pcie_only(4)
    scenario.gpus[3].name = "NVIDIA L40S"
    topo = node(scenario)
    with pytest.raises(visible.VisibleDevicesError, match="GPU 3 is ambiguous on a node of mixed models"):
        visible.restrict(topo, "3")
    assert visible.restrict(topo, "2,3", device_order="PCI_BUS_ID").indices == (2, 3)
    scenario.gpus[3].uuid = "GPU-l40s"
    assert visible.restrict(node(scenario), "GPU-l40s").indices == (3,)


def test_wirecheck_topo_shows_the_visible_gpus(node, monkeypatch, capsys):
    node(fake.nvswitch(8))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert cli.main(["topo"]) == 0
    out = capsys.readouterr().out
    assert "nvswitch-2gpu-2.3" in out and "GPU0 " not in out and "CUDA_VISIBLE_DEVICES=2,3: GPUs 2,3 of 8" in out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "9")
    assert cli.main(["topo"]) == 2
    assert "wirecheck topo: CUDA_VISIBLE_DEVICES=9: there is no GPU 9 on this node" in capsys.readouterr().err


EIGHT_GPU_NODE = '''
import sys
import fake_pynvml

# An 8-GPU NVSwitch node as NVML describes it, whatever CUDA_VISIBLE_DEVICES says.
sys.modules["pynvml"] = fake_pynvml.build(fake_pynvml.nvswitch(8))
'''


def test_the_suite_validates_only_the_listed_gpus(pytester):
    make_project(pytester, tests_conftest=EIGHT_GPU_NODE)
    pytester._monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    result = run_suite(pytester, "--collect-only", "-q", "tests/test_collectives.py", "tests/test_inventory.py")
    out = result.stdout.str()
    assert "test_busbw[nvswitch-4gpu-4.5.6.7-all_reduce]" in out, out
    assert "gpu0]" not in out and "gpu4]" in out and "-0.1" not in out, out


def test_the_suite_header_says_which_gpus_it_validates(pytester):
    make_project(pytester, tests_conftest=EIGHT_GPU_NODE)
    pytester._monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    result = run_suite(pytester, "--collect-only", "tests/test_topology.py")
    result.stdout.fnmatch_lines(["*2 GPUs*fabric nvswitch*",
                                 "*only the GPUs CUDA_VISIBLE_DEVICES lists: nvml (CUDA_VISIBLE_DEVICES=6,7: GPUs 6,7 of 8)*"])


def test_a_bad_value_stops_the_suite_and_an_empty_one_fails_visibly(pytester):
    make_project(pytester, tests_conftest=EIGHT_GPU_NODE)
    pytester._monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,9")
    bad = run_suite(pytester, "--collect-only", "tests/test_inventory.py")
    assert bad.ret == 4, bad.stdout.str() + bad.stderr.str()
    assert "CUDA_VISIBLE_DEVICES=4,9: there is no GPU 9 on this node" in bad.stderr.str()
    pytester._monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    empty = run_suite(pytester, "tests/test_inventory.py", "-k", "test_gpus_visible", "--node-lock",
                      str(pytester.path / "node.lock"))
    assert empty.ret == 1, empty.stdout.str()
    assert "hides every GPU from this process" in empty.stdout.str()
