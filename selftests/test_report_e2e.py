"""From the suite to the page: three simulated runs of the suite, then `wirecheck report --history`
over them draws the key figures over time and writes the Prometheus file (the page in a browser:
test_report_browser.py). The three runs are conftest.py's shared healthy_busbw_runs."""

from __future__ import annotations

import re
import shutil

from wirecheck.cli.report import main as report


def test_history_of_three_simulated_runs_draws_the_trend(healthy_busbw_runs, tmp_path):
    history = tmp_path / "history"
    history.mkdir()
    assert len(healthy_busbw_runs) == 3
    for night, (result, record) in enumerate(healthy_busbw_runs):
        result.assert_outcomes(passed=1)
        shutil.copy(record, history / f"night{night}.jsonl")
    last = history / "night2.jsonl"
    out = tmp_path / "report.html"
    prom = tmp_path / "wirecheck.prom"
    assert report([str(last), "--history", str(history), "-o", str(out), "--prometheus", str(prom)]) == 0
    page = out.read_text()
    figures = re.findall(r'<figure id="([^"]+)"', page)
    assert {"fig-busbw-all_reduce", "fig-trend-busbw", "fig-trend-verdicts"} <= set(figures)
    trends = re.search(r'<section id="trends">(.*?)</section>', page, re.S).group(1)
    assert "3 run(s) in the trend" in trends and "This run against its history" in trends
    assert 'wirecheck_busbw_bytes_per_second{op="all_reduce",placement="nvswitch-2gpu-0.1"' in prom.read_text()
    assert "wirecheck_run_simulated 1" in prom.read_text()
