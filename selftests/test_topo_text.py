"""Parsing `nvidia-smi topo -m` text: every recorded file, unseen formats, broken input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wirecheck.node.topo_text import load_recorded, parse_topo_text, recorded_names
from wirecheck.node.topology import BRIDGED, NVSWITCH, PCIE

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "fixtures" / "pytest_wirecheck" / "topologies"

ALL8 = ((0, 1, 2, 3, 4, 5, 6, 7),)

# name: (fabric, groups, NV# values off the diagonal, NIC count)
RECORDED = {
    "h200-sxm-2": (NVSWITCH, ((0, 1),), {18}, 0),
    "h200-nvl-8.synthetic": (BRIDGED, ((0, 1, 2, 3), (4, 5, 6, 7)), {0, 6}, 0),
    "h100-sxm-8-nics": (NVSWITCH, ALL8, {18}, 6),
    "hgx-h100-8-nics.partial": (NVSWITCH, ALL8, {18}, 10),
    "h100-nv6-4-nics.spaces": (BRIDGED, ((0, 1, 2, 3),), {6}, 4),
    "rtx4090-pcie-8": (PCIE, tuple((i,) for i in range(8)), {0}, 2),
    "a100-pcie-nv12-pairs-4": (BRIDGED, ((0, 1), (2, 3)), {0, 12}, 0),
    "a100-sxm-8.synthetic": (NVSWITCH, ALL8, {12}, 0),
    "h200-sxm-8.synthetic": (NVSWITCH, ALL8, {18}, 0),
    "b200-8.synthetic": (NVSWITCH, ALL8, {18}, 0),
    "h100-pcie-8.synthetic": (PCIE, tuple((i,) for i in range(8)), {0}, 0),
    "l40s-8.synthetic": (PCIE, tuple((i,) for i in range(8)), {0}, 0),
}


def _parse(name: str):
    path = TOPOLOGIES / f"{name}.txt"
    return parse_topo_text(path.read_text(), source=str(path))


def _off_diagonal(topo) -> set[int]:
    return {topo.nv(i, j) for i in range(topo.n_gpus) for j in range(topo.n_gpus) if i != j}


def test_every_recorded_file_is_covered():
    assert {p.name[: -len(".txt")] for p in TOPOLOGIES.glob("*.txt")} == set(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_topology(name):
    fabric, groups, nv_values, n_nics = RECORDED[name]
    topo = _parse(name)
    assert topo.fabric == fabric
    assert topo.groups == groups
    assert _off_diagonal(topo) == nv_values
    assert len(topo.nics) == n_nics
    assert topo.indices == tuple(range(topo.n_gpus))
    assert topo.declared_fabric is None  # text cannot know link types


def test_nvl8_matrix_cells():
    topo = _parse("h200-nvl-8.synthetic")
    assert topo.matrix()[0] == ["X", "NV6", "NV6", "NV6", "SYS", "SYS", "SYS", "SYS"]
    assert topo.pcie_paths[0][4] == "SYS" and topo.pcie_paths[0][1] is None


def test_affinity_columns_with_blank_cpu_cells():
    topo = _parse("h100-sxm-8-nics")
    assert (topo.gpus[0].cpu_affinity, topo.gpus[0].numa_affinity) == (None, "0")
    assert (topo.gpus[4].cpu_affinity, topo.gpus[4].numa_affinity) == ("1", "1")
    assert topo.nics == tuple(f"mlx5_{k}" for k in range(6))


def test_partial_copy_keeps_header_nics_without_legend():
    topo = _parse("hgx-h100-8-nics.partial")
    assert topo.nics == tuple(f"NIC{k}" for k in range(10))
    assert topo.gpus[7].cpu_affinity == "56-111,168-223"


def test_space_separated_copy():
    topo = _parse("h100-nv6-4-nics.spaces")
    assert (topo.gpus[2].cpu_affinity, topo.gpus[2].numa_affinity) == ("7,15,23,31", "7")
    assert topo.matrix()[3] == ["NV6", "NV6", "NV6", "X"]


def test_ansi_header_and_reference_copy_agree():
    recorded = _parse("h200-sxm-2")
    ref_path = ROOT / "fixtures" / "reference" / "h200-sxm-2" / "nvidia-smi-topo-m.txt"
    assert "\x1b[4m" in ref_path.read_text()
    reference = parse_topo_text(ref_path.read_text(), source=str(ref_path))
    assert reference.matrix() == recorded.matrix() == [["X", "NV18"], ["NV18", "X"]]
    assert reference.gpus[0].cpu_affinity == "0-31"


H200_TEXT = (TOPOLOGIES / "h200-sxm-2.txt").read_text()


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s.replace("\x1b", ""),  # "[4mGPU0" as in pasted environment dumps
        lambda s: s.replace("\x1b", "\ufffd"),
        lambda s: s.replace("\n", "\r\n"),
        lambda s: "$ nvidia-smi topo -m\n" + s,
        lambda s: s.lstrip("\t"),  # header lost its leading TAB
    ],
    ids=["ansi-without-esc", "ansi-replacement-char", "crlf", "prompt-line-first", "no-leading-tab"],
)
def test_copies_of_the_same_output(mangle):
    topo = parse_topo_text(mangle(H200_TEXT), source="copy.txt")
    assert topo.matrix() == [["X", "NV18"], ["NV18", "X"]] and topo.gpus[1].numa_affinity == "0"


# Old drivers: NIC devices as columns, SOC for SYS, only a CPU Affinity trailer (the DGX-1 era).
OLD_FORMAT = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tmlx5_1\tCPU Affinity\n"
    "GPU0\t X \tNV1\tNV1\tSOC\tPIX\tSOC\t0-19\n"
    "GPU1\tNV1\t X \tNV1\tSOC\tPIX\tSOC\t0-19\n"
    "GPU2\tNV1\tNV1\t X \tSOC\tPHB\tSOC\t0-19\n"
    "GPU3\tSOC\tSOC\tSOC\t X \tSOC\tPIX\t20-39\n"
    "mlx5_0\tPIX\tPIX\tPHB\tSOC\t X \tSOC\t\n"
    "mlx5_1\tSOC\tSOC\tSOC\tPIX\tSOC\t X \t\n"
    "\n"
    "Legend:\n"
    "  X   = Self\n"
    "  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)\n"
)


def test_old_format_with_device_named_nic_columns():
    topo = parse_topo_text(OLD_FORMAT, source="old.txt")
    assert topo.nics == ("mlx5_0", "mlx5_1")
    assert topo.groups == ((0, 1, 2), (3,))
    assert topo.cell(0, 3) == "SYS"
    assert (topo.gpus[3].cpu_affinity, topo.gpus[3].numa_affinity) == ("20-39", None)


def test_cpu_and_numa_affinity_without_gpu_numa_id():
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tPXB\t0-11\t0\n"
        "GPU1\tPXB\t X \t12-23\t1\n"
    )
    topo = parse_topo_text(text, source="t.txt")
    assert topo.fabric == PCIE and topo.cell(0, 1) == "PXB"
    assert (topo.gpus[1].cpu_affinity, topo.gpus[1].numa_affinity) == ("12-23", "1")


def test_unseen_nic_names_and_many_gpus():
    n = 16
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tbnxt_re0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    rows = "".join(
        f"GPU{i}\t" + "\t".join(" X " if i == j else "NV12" for j in range(n)) + "\tNODE\t0-47\t0\t\tN/A\n" for i in range(n)
    )
    topo = parse_topo_text(header + rows + "bnxt_re0\t" + "\t".join(["NODE"] * n) + "\t X \n", source="dgx2.txt")
    assert topo.n_gpus == 16 and topo.nics == ("bnxt_re0",) and topo.fabric == NVSWITCH


# -- malformed input: one ValueError naming file, line and what was expected -------------

GOOD = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n\nLegend:\n"

BROKEN = {
    "no-gpu-header": (
        "Legend:\n  X = Self\n",
        "bad.txt, line 1: no header with GPU columns",
    ),
    "row-missing-a-cell": (
        GOOD.replace("GPU1\tNV18\t X \t", "GPU1\t X \t"),
        "bad.txt, line 3: row GPU1 has 1 matrix cell; expected 2",
    ),
    "row-with-an-extra-cell": (
        GOOD.replace("GPU0\t X \tNV18\t", "GPU0\t X \tNV18\tNV18\t"),
        "bad.txt, line 2: row GPU0 has 3 matrix cells; expected 2",
    ),
    "empty-cell": (
        GOOD.replace("GPU0\t X \tNV18\t", "GPU0\t X \t\t"),
        "bad.txt, line 2: row GPU0 has 1 matrix cell; expected 2",
    ),
    "unknown-cell-code": (
        GOOD.replace("GPU1\tNV18\t", "GPU1\tQPI\t"),
        "bad.txt, line 3: unknown cell code 'QPI' in row GPU1, column GPU0; expected a cell code: X (self), NV<n>",
    ),
    "asymmetric": (
        GOOD.replace("GPU1\tNV18\t", "GPU1\tNV12\t"),
        "bad.txt, line 3: GPU1/GPU0 reads NV12 but line 2 has GPU0/GPU1 = NV18; expected a symmetric matrix",
    ),
    "gpu-row-missing": (
        GOOD.replace("GPU1\tNV18\t X \t0-31\t0\t\tN/A\n", ""),
        "bad.txt, line 3: the matrix ends without a row for GPU1; expected one row per GPU column",
    ),
    "self-cell-off-diagonal": (
        GOOD.replace("GPU0\t X \tNV18", "GPU0\tNV18\tNV18"),
        "bad.txt, line 2: row GPU0 has 'NV18' on the diagonal; expected X exactly where",
    ),
    "row-not-in-header": (
        GOOD.replace("\n\nLegend", "\nGPU7\tSYS\tSYS\t0-31\t0\t\tN/A\n\nLegend"),
        "bad.txt, line 4: row label 'GPU7' is not a column of the header; expected one of GPU0, GPU1",
    ),
    "duplicate-row": (
        GOOD.replace("\n\nLegend", "\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n\nLegend"),
        "bad.txt, line 4: second row for GPU1 (first at line 3)",
    ),
    "p2p-matrix-not-topo": (
        " \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n",
        "bad.txt, line 2: unknown cell code 'OK' in row GPU0, column GPU1",
    ),
}


def test_good_base_parses():
    assert parse_topo_text(GOOD, source="bad.txt").nv(0, 1) == 18


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_malformed_input(case):
    text, message = BROKEN[case]
    with pytest.raises(ValueError) as info:
        parse_topo_text(text, source="bad.txt")
    assert str(info.value).startswith(message), str(info.value)


# -- load_recorded ----------------------------------------------------------------------


def test_load_by_name_path_and_synthetic_suffix():
    by_name = load_recorded("h200-nvl-8", TOPOLOGIES)
    assert by_name.source.endswith("h200-nvl-8.synthetic.txt")
    assert load_recorded("h200-nvl-8.synthetic", TOPOLOGIES).groups == by_name.groups
    by_path = load_recorded(str(TOPOLOGIES / "a100-pcie-nv12-pairs-4.txt"), Path("/nonexistent"))
    assert by_path.groups == ((0, 1), (2, 3))


def test_json_snapshot_wins_over_text_and_round_trips(tmp_path):
    topo = _parse("h100-sxm-8-nics")
    topo.save(tmp_path / "node.json")
    (tmp_path / "node.txt").write_text(H200_TEXT)
    loaded = load_recorded("node", tmp_path)
    assert loaded.source == str(tmp_path / "node.json")
    assert loaded.matrix() == topo.matrix() and loaded.nics == topo.nics
    assert load_recorded(str(tmp_path / "node.json"), TOPOLOGIES).gpus == topo.gpus


def test_unknown_name_lists_available():
    with pytest.raises(ValueError) as info:
        load_recorded("dgx-b200", TOPOLOGIES)
    message = str(info.value)
    assert "'dgx-b200'" in message and "available names:" in message
    assert all(name in message for name in recorded_names(TOPOLOGIES))
    assert "h200-nvl-8," in message  # the synthetic file is offered by its short name


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_recorded(str(tmp_path / "gone.txt"), TOPOLOGIES)
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "format": "wirecheck-topology/1",\n oops\n}\n')
    with pytest.raises(ValueError, match=r"bad\.json, line 3: not valid JSON"):
        load_recorded(str(bad), TOPOLOGIES)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"gpus": []}))
    with pytest.raises(ValueError, match="not a wirecheck topology snapshot"):
        load_recorded(str(wrong), TOPOLOGIES)
