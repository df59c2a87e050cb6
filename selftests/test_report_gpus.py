"""The GPU health checks in the report and in Prometheus, from a small synthetic record of four
H200s (gpu_health_record): GPU2's HBM copy 20 % below its peers, GPU1 an XID during the run, GPU3
two wrong words in the memory test."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_health_record import H200, READINGS, write_node
from test_report import SIM, figure_ids, make, meta, section
from wirecheck.records.file import read_run
from wirecheck.report.model import RunView
from wirecheck.report.prometheus import exposition

XID = {"time": 1_796_000_003.0, "gpu": 1, "bus_id": "00000000:28:00.0", "kind": "xid", "code": 79}


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return write_node(tmp_path_factory.mktemp("gpus") / "node.jsonl", slow={(2, "hbm_copy"): 0.8}, events=[XID],
                      bad_words={3: 2})


def test_the_gpu_section_draws_every_gpu_against_its_floor_and_peers(tmp_path, record):
    page = make(tmp_path, record)
    assert {"fig-gpu-bars", "fig-gpu-sustained"} <= set(figure_ids(page)) == set(meta(page, "wirecheck-figures"))
    gpus = section(page, "gpus")
    rows = re.findall(r"<tr( class=\"fail\")?><td>GPU(\d)</td>(.*?)</tr>", gpus)
    failed = {gpu for cls, gpu, _ in rows if cls}
    assert failed == {"1", "2", "3"}, rows  # GPU1 the XID, GPU2 its HBM copy, GPU3 the memory test
    gpu2 = next(body for _, gpu, body in rows if gpu == "2")
    assert f"{READINGS['hbm_copy'] * 0.8 / 1e9:.4g}" in gpu2 and '<span class="outcome-fail">FAIL</span>' in gpu2
    assert "<h3>Memory test coverage</h3>" in gpus and "<td class=\"num\">92.0 %</td>" in gpus
    assert "<td>xid</td><td>79</td>" in gpus
    # the failed peer rule is in the verdict list, open, with its message
    assert "<details open>" in gpus and "more than the 10 % allowed" in gpus


def test_a_record_without_gpu_health_says_why(tmp_path):
    assert "No GPU health measurements in this record" in section(make(tmp_path, SIM), "gpus")


@pytest.fixture(scope="module")
def families(record) -> dict:
    text = exposition(RunView.of(read_run(record)))
    return {f.name: f for f in text_string_to_metric_families(text)}


def _by_gpu(family, **labels) -> dict:
    return {s.labels["gpu"]: s.value for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())}


def test_prometheus_has_each_gpus_figures_with_its_labels(families):
    copy = families["wirecheck_gpu_hbm_copy_bytes_per_second"]
    for s in copy.samples:
        assert set(s.labels) == {"gpu", "bus_id", "model"} and s.labels["model"] == H200
        assert re.fullmatch(r"00000000:[0-9A-F]{2}:00\.0", s.labels["bus_id"])
    assert _by_gpu(copy) == {"0": 4271e9, "1": 4271e9, "2": pytest.approx(0.8 * 4271e9), "3": 4271e9}
    gemm = families["wirecheck_gpu_gemm_flops_per_second"]
    assert _by_gpu(gemm, precision="fp8") == {g: 1399e12 for g in "0123"}
    assert _by_gpu(gemm, precision="bf16") == {g: 738e12 for g in "0123"}
    assert set(_by_gpu(families["wirecheck_gpu_sustained_flops_per_second"])) == set("0123")
    assert _by_gpu(families["wirecheck_gpu_xid_events"]) == {"0": 0, "1": 1, "2": 0, "3": 0}
    assert _by_gpu(families["wirecheck_gpu_memory_test_mismatches"]) == {"0": 0, "1": 0, "2": 0, "3": 2}
    assert max(_by_gpu(families["wirecheck_gpu_peak_power_watts"]).values()) <= 700
    assert set(_by_gpu(families["wirecheck_gpu_max_temperature_celsius"]).values()) == {56}
    for name in ("wirecheck_gpu_hbm_read_bytes_per_second", "wirecheck_gpu_max_temperature_celsius",
                 "wirecheck_gpu_peak_power_watts"):
        assert families[name].type == "gauge" and families[name].documentation


def test_a_run_without_gpu_health_has_no_gpu_families():
    assert "wirecheck_gpu_" not in exposition(RunView.of(read_run(SIM)))


def test_judge_rejudges_the_gpu_health_verdicts(record, tmp_path, capsys):
    """`wirecheck judge` calls the GPU health checks again on their recorded inputs: a raised floor fails them."""
    import yaml

    from gpu_health_record import PROJECT
    from wirecheck.cli.judge import main as judge

    assert judge([str(record), "-q"]) == 1  # as recorded: GPU2's HBM copy, GPU1's XID, GPU3's memory test
    assert "3 failed" in capsys.readouterr().out
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    data["gpu_health"]["floors"][H200]["gemm_bf16"]["min"] = "800 TFLOP/s"
    raised = tmp_path / "raised.yaml"
    raised.write_text(yaml.safe_dump(data, sort_keys=False))
    assert judge([str(record), "-q", "--thresholds", str(raised)]) == 1
    out = capsys.readouterr().out
    assert "7 failed" in out and "4 changed since recorded" in out
    assert re.search(r"FAIL gemm_throughput +GPU0 .*< floor 800.0 TFLOP/s", out), out
