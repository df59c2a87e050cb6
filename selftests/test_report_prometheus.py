"""`wirecheck report --prometheus FILE`: the text exposition format, read back by Prometheus' own
Python parser (prometheus_client), checked against the naming rules, and written atomically."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_health_record import write_node
from reference_record import convert
from test_report import SIM, lines, write
from wirecheck.cli.report import main as report
from wirecheck.report.model import RunView
from wirecheck.report.prometheus import exposition
from wirecheck.core.safefs import write_atomically
from wirecheck.records.file import read_run

NAME = re.compile(r"^wirecheck_[a-z0-9_]+$")
# Base units in the name (Prometheus naming practice), at its end.
UNIT_WORDS = {"bytes", "seconds", "second", "ratio", "celsius", "watts"}
UNIT_ENDINGS = ("_bytes", "_bytes_per_second", "_tokens_per_second", "_flops_per_second", "_seconds", "_ratio",
                "_celsius", "_watts")


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def device_text(tmp_path_factory) -> str:
    path = convert(tmp_path_factory.mktemp("dev") / "dev.jsonl")
    return exposition(RunView.of(read_run(path)))


@pytest.fixture(scope="module")
def gpu_text(tmp_path_factory) -> str:
    """The GPU health checks' families: a synthetic record of four H200s (gpu_health_record)."""
    path = write_node(tmp_path_factory.mktemp("gpus") / "gpus.jsonl", slow={(2, "hbm_copy"): 0.8})
    return exposition(RunView.of(read_run(path)))


@pytest.fixture(params=["device_text", "gpu_text"])
def any_text(request) -> str:
    return request.getfixturevalue(request.param)


def test_parses_and_carries_the_runs_figures(device_text):
    fams = families(device_text)
    assert {"wirecheck_run_info", "wirecheck_run_simulated", "wirecheck_run_timestamp_seconds", "wirecheck_verdicts",
            "wirecheck_busbw_bytes_per_second", "wirecheck_training_tokens_per_second",
            "wirecheck_training_peak_allocated_bytes", "wirecheck_link_error_growth"} <= set(fams)
    for fam in fams.values():
        assert fam.type == "gauge" and fam.documentation, fam.name
    assert [s.value for s in fams["wirecheck_run_simulated"].samples] == [0]
    busbw = {(s.labels["placement"], s.labels["op"], s.labels["size_bytes"]): s.value
             for s in fams["wirecheck_busbw_bytes_per_second"].samples}
    ar = busbw[("nvswitch-2gpu-0.1", "all_reduce", str(2**30))]
    assert 300e9 < ar < 340e9  # base unit: bytes per second, not GB/s
    tokens = {(s.labels["placement"], s.labels["strategy"]): s.value for s in fams["wirecheck_training_tokens_per_second"].samples}
    assert 80_000 < tokens[("nvswitch-2gpu-0.1", "ddp")] < 95_000
    outcomes = {s.labels["outcome"]: s.value for s in fams["wirecheck_verdicts"].samples}
    assert set(outcomes) == {"pass", "warn", "fail", "skip"} and outcomes["pass"] > 50


SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")


def test_follows_the_naming_and_format_rules(any_text):
    assert any_text.endswith("\n")
    series, declared = set(), []
    for line in any_text.splitlines():
        if line.startswith("# HELP "):
            declared.append(line.split()[2])
            continue
        if line.startswith("# TYPE "):
            assert line.split()[2:] == [declared[-1], "gauge"], "TYPE right after its HELP; gauges only"
            continue
        m = SAMPLE.match(line)
        assert m, f"not '<name>{{labels}} <value>' (a timestamp would make a third field): {line}"
        assert m["name"] == declared[-1], f"{m['name']}: a sample outside its family"
        float(m["value"])
        assert (m["name"], m["labels"]) not in series, f"duplicate series: {line}"
        series.add((m["name"], m["labels"]))
    assert len(declared) == len(set(declared)), "a family declared twice"
    for name in declared:
        assert NAME.match(name), name
        if UNIT_WORDS & set(name.split("_")):
            assert name.endswith(UNIT_ENDINGS), f"{name}: the unit goes at the end"
        assert not name.endswith("_total"), "a run's reading is a gauge, not a counter"


def test_label_values_are_escaped(tmp_path):
    objs = lines(SIM)
    m = next(o for o in objs if o["type"] == "measurement" and o["kind"] == "collective")
    m["placement"] = 'odd "id"\\with\nnewline'
    text = exposition(RunView.of(read_run(write(tmp_path / "odd.jsonl", objs))))
    placements = {s.labels["placement"] for s in families(text)["wirecheck_busbw_bytes_per_second"].samples}
    assert 'odd "id"\\with\nnewline' in placements


def test_simulation_says_so(tmp_path):
    text = exposition(RunView.of(read_run(SIM)))
    assert [s.value for s in families(text)["wirecheck_run_simulated"].samples] == [1]


def test_written_atomically(tmp_path):
    target = tmp_path / "wirecheck.prom"
    target.write_text("old\n")
    write_atomically(target, "new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["wirecheck.prom"]
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    blocked = tmp_path / "dir.prom"
    blocked.mkdir()  # rename over a directory fails: the old target stays, no temp file is left
    with pytest.raises(OSError):
        write_atomically(blocked, "x\n")
    assert sorted(os.listdir(tmp_path)) == ["dir.prom", "wirecheck.prom"]


def test_the_command_writes_both_files(tmp_path, capsys):
    prom = tmp_path / "wirecheck.prom"
    assert report([str(SIM), "-o", str(tmp_path / "r.html"), "--prometheus", str(prom)]) == 0
    assert "wirecheck_busbw_bytes_per_second" in families(prom.read_text())
    assert report([str(SIM), "-o", str(tmp_path / "r.html"), "--prometheus", "/proc/nope/x.prom"]) == 2
    assert "cannot write /proc/nope" in capsys.readouterr().err


def test_promtool_check_metrics(any_text):
    if shutil.which("promtool") is None:
        message = "promtool is not installed (Debian: apt-get install prometheus; the parser tests above stand)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run promtool's check: {message}", pytrace=False)  # .ci/run installs it
        pytest.skip(message)
    result = subprocess.run(["promtool", "check", "metrics"], input=any_text, text=True, capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr
