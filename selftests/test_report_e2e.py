"""From the suite to the page: three simulated runs of the suite, then `wirecheck report --history`
over them draws the key figures over time and writes the Prometheus file (the page in a browser:
test_report_browser.py)."""

from __future__ import annotations

import re

from e2e import make_project, run_suite
from wirecheck.cli.report import main as report

SELECTION = ("-k", "test_busbw and nvswitch and all_reduce", "--benchmark-disable")


def test_history_of_three_simulated_runs_draws_the_trend(pytester, tmp_path):
    root = make_project(pytester)
    history = root / "history"
    for night in range(3):
        run_suite(pytester, "--simulate=h200-sxm-2", *SELECTION,
                  f"--wirecheck-json={history / f'night{night}.jsonl'}").assert_outcomes(passed=1)
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
