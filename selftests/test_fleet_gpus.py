"""`wirecheck fleet report` compares GPUs across nodes: each GPU's HBM and GEMM figures against every
other GPU of its model in the fleet, naming the node and the GPU (text, JSON, HTML). Records: small
synthetic nodes of H200s (gpu_health_record), written as a node writes them."""

from __future__ import annotations

import json

from gpu_health_record import write_node
from wirecheck.cli.fleet.report import main as report


def _fleet(tmp_path, n: int = 3, slow: dict | None = None):
    d = tmp_path / "results"
    d.mkdir()
    for k in range(n):
        write_node(d / f"n{k:02d}.jsonl", host=f"n{k:02d}", gpus=2, slow=(slow or {}).get(f"n{k:02d}"))
    return d


def test_a_gpu_20_percent_below_its_peers_on_another_node_is_named(tmp_path, capsys):
    d = _fleet(tmp_path, slow={"n02": {(1, "hbm_copy"): 0.8}})
    page = tmp_path / "fleet.html"
    code = report([str(d), "--expect", "3", "--json", str(tmp_path / "fleet.json"), "--html", str(page)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "GPUs below the fleet's GPUs of their model: n02/GPU1 (HBM copy (read+write))" in out
    failure = next(line for line in out.splitlines() if "[fleet_gpu_outlier]" in line)
    assert failure.startswith("  n02: ") and "node n02 GPU1 (00000000:28:00.0)" in failure
    assert "20.0 % below the median 4271.0 GB/s of 5 other NVIDIA H200 GPUs (" in failure and "(fleet limit)" in failure
    row = next(line for line in out.splitlines() if line.startswith("n02 "))
    assert row.split()[3:] == ["-", "1", "of", "2", "-", "FAIL"], row  # below peers: no node figure; 1 of 2 GPUs
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert data["named"]["gpus"] == ["n02/GPU1"]
    n02 = next(n for n in data["nodes"] if n["node"] == "n02")
    named = [v for v in n02["gpus"] if v["outcome"] == "fail"]
    assert [(v["where"], v["inputs"]["gpu_model"], v["inputs"]["figure"]) for v in named] == [
        ("n02/GPU1", "NVIDIA H200", "HBM copy (read+write)")]
    # every other GPU figure of the fleet passes the rule: 5 figures x 2 GPUs x 3 nodes, one named
    # (each as a row of gpu_figures; the verdicts that did not pass in full, in gpus)
    judged = [v for n in data["nodes"] for v in n["gpu_figures"]]
    assert len(judged) == 30 and sum(v["outcome"] == "fail" for v in judged) == 1
    assert [v["where"] for n in data["nodes"] for v in n["gpus"]] == ["n02/GPU1"]
    html = page.read_text()
    assert "<h2>GPUs against the fleet's GPUs of their model</h2>" in html
    assert "<b>n02/GPU1</b>" in html


def test_fewer_nodes_than_the_median_needs_are_not_judged(tmp_path, capsys):
    d = _fleet(tmp_path, n=2, slow={"n01": {(1, "hbm_copy"): 0.8}})
    report([str(d), "--expect", "2", "--json", str(tmp_path / "fleet.json")])
    out = capsys.readouterr().out
    assert "GPUs below the fleet's GPUs of their model: none" in out
    data = json.loads((tmp_path / "fleet.json").read_text())
    skipped = [v for n in data["nodes"] for v in n["gpus"]]
    assert skipped and all(v["outcome"] == "skip" and "needs 3 (fleet.min_nodes)" in v["message"] for v in skipped)
