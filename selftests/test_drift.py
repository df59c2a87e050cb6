"""The drift rule (wirecheck.core.trend, wirecheck.checks.drift) on synthetic series: a slow ramp the median rule
cannot see warned, then failed at its bound, naming the run where it began; a flat noisy series not; too few or
too noisy runs said, not judged; and a step that moves every node of a fleet at once named as one change across
the fleet, not as that many node failures (wirecheck.fleet.changes)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from wirecheck import checks
from wirecheck.checks import rejudge
from wirecheck.cli.fleet.report import main as fleet_report
from wirecheck.core import trend
from wirecheck.core.paths import suite_paths
from wirecheck.records.file import RecordFile
from wirecheck.thresholds.file import load_thresholds

KEY = "gpu_health.floors.NVIDIA H200.gemm_bf16"


@pytest.fixture(scope="module")
def thresholds():
    return load_thresholds(suite_paths().thresholds)


def _series(n: int, ramp_from: int | None = None, per_run: float = 0.0025, sd: float = 0.003, seed: int = 1,
            level: float = 670e12) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, sd)) * (1 - (max(0, i - ramp_from + 1) * per_run if ramp_from is not None else 0))
            for i in range(n)]


def _inputs(values: list[float], subject: str = "serial 1") -> dict:
    *past, tonight = values
    return {"figure": "gemm_bf16", "key": KEY, "subject": subject, "where": "GPU0", "kind": "compute",
            "unit": "TFLOP/s", "value": tonight,
            "history": [{"value": v, "date": f"2026-{10 + (i // 28):02d}-{i % 28 + 1:02d}", "record": f"night-{i}.jsonl"}
                        for i, v in enumerate(past)]}


def test_cusum_finds_a_ramp_and_where_it_began():
    values = _series(24, ramp_from=12)
    d = trend.cusum(values, baseline=8, sigma_floor=0.001)
    assert d.alarm and 9 <= d.began <= 14, d
    assert 0.02 < d.loss < 0.045 and 0.0015 < d.per_run < 0.004, d


def test_cusum_on_flat_noise_finds_no_loss_worth_a_warning():
    found = [trend.cusum(_series(30, seed=s), baseline=8, sigma_floor=0.001) for s in range(200)]
    alarmed = [d for d in found if d.alarm]
    # with its reference's noise measured from 8 runs the sum alarms on some flat series; what it finds there
    # is no fall: the drift rule warns only from warn_at (1 %) and noise_k x its noise, which none reaches
    assert len(alarmed) < 30 and all(d.loss < 0.01 for d in alarmed), [(d.loss, d.sigma) for d in alarmed]


def test_the_robust_slope_sees_a_steady_fall_and_not_noise():
    assert trend.slope(_series(14, ramp_from=0, per_run=0.004)).alarm
    assert not trend.slope(_series(14, seed=7)).alarm


def test_a_slow_ramp_warns_then_fails_naming_the_run_it_began(thresholds):
    rule = thresholds.history.drift
    early = checks.drift.drift(thresholds, **_inputs(_series(20, ramp_from=12)))  # ~2 % lost
    late = checks.drift.drift(thresholds, **_inputs(_series(26, ramp_from=12)))  # ~3.7 % lost
    assert early.outcome == "warn", early.message
    assert late.outcome == "fail" and late.rule == "history", late.message
    began = late.details["began"]
    assert began in ("2026-10-12", "2026-10-13", "2026-10-14") and f"falling since {began}" in late.message
    assert late.limit["min"] == pytest.approx(late.details["reference"] * (1 - rule.fail_at), rel=1e-6)
    # the median rule over the same runs does not see it: the fall drags its median along
    median_rule = checks.history.history(thresholds, **_inputs(_series(26, ramp_from=12)[-15:]))
    assert median_rule.outcome == "pass", median_rule.message
    assert rejudge(late, thresholds).outcome == "fail"  # judged again from its inputs alone


def test_a_flat_noisy_history_passes(thresholds):
    for seed in range(20):
        v = checks.drift.drift(thresholds, **_inputs(_series(30, seed=seed, sd=0.005)))
        assert v.outcome == "pass", v.message


def test_too_few_or_too_noisy_runs_are_said_not_judged(thresholds):
    few = checks.drift.drift(thresholds, **_inputs(_series(6)))
    assert few.outcome == "skip" and "the drift rule reads" in few.message
    noisy = checks.drift.drift(thresholds, **_inputs(_series(30, sd=0.06)))
    assert noisy.outcome == "skip" and "too noisy to judge its drift" in noisy.message


# -- a change across the fleet --------------------------------------------------------------------------


def _node(path: Path, thresholds, history: list[float], tonight: float, serial: str, driver: str) -> Path:
    """A node's record: its GPU's history verdict on gemm_bf16 (tonight against its own past) and its figure."""
    rf = RecordFile(path)
    rf.header({"simulated": False, "profile": None, "thresholds": str(thresholds.path), "versions": {"driver": driver},
               "env": {}, "fabric": "pcie", "gpus": [{"index": 0, "name": "NVIDIA H200", "serial": serial}],
               "groups": [], "matrix": [], "placements": []})
    verdict = checks.history.history(thresholds, **_inputs(history + [tonight], subject=f"serial {serial}"))
    rf.verdict(verdict, "tests/test_history.py::test_figures_against_history")
    rf.end({"status": "complete", "exit_status": 1 if verdict.outcome == "fail" else 0, "simulated": False,
            "tests": {}, "verdicts": {verdict.outcome: 1}, "wall_s": 1.0})
    rf.close()
    return path


def test_a_step_that_moves_every_node_at_once_is_one_change_not_node_failures(thresholds, tmp_path, capsys):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for k in range(6):  # a new driver: every node's GEMM 4 % slower tonight
        history = _series(10, seed=k)
        _node(fleet / f"n{k:02d}.jsonl", thresholds, history, history[-1] * 0.96, f"10{k}", "580.2")
    code = fleet_report([str(fleet)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "fleet-wide changes (1)" in out and "fell on 6 of 6 nodes at once" in out, out
    assert "not 6 node failures" in out and "driver 580.2" in out, out
    assert "0 of 6 node(s) failed" in out and "1 change(s) across the fleet" in out, out


def test_one_node_slowing_alone_stays_a_node_failure(thresholds, tmp_path, capsys):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for k in range(6):
        history = _series(10, seed=k)
        _node(fleet / f"n{k:02d}.jsonl", thresholds, history, history[-1] * (0.96 if k == 3 else 1.0), f"10{k}", "580.1")
    code = fleet_report([str(fleet)])
    out = capsys.readouterr().out
    assert code == 1 and "fleet-wide changes" not in out, out
    assert "n03: [history]" in out and "1 of 6 node(s) failed" in out, out


def test_the_report_draws_each_gpus_figure_over_its_history_with_the_bound_that_judged_it(thresholds, tmp_path):
    """A night whose GEMM fell slowly: its record's history and drift verdicts carry the history, so the page
    draws the trend, the history bound and the drift finding, and the GPU bar shows the bound that failed it."""
    import json

    from calibration_records import REFERENCE, edited
    from wirecheck.checks.history import figures_of, history_inputs, past_figures
    from wirecheck.records.file import read_run
    from wirecheck.report.gpus import gpu_points
    from wirecheck.report.history_view import history_series
    from wirecheck.cli.main import main

    src = REFERENCE / "wirecheck-2026-12-01-limits" / "clean-1.jsonl"
    nights = tmp_path / "nights"
    gemm = _series(26, ramp_from=12, seed=3, level=1.0)
    for i, factor in enumerate(gemm[:-1]):
        edited(src, nights / f"n{i:02d}.jsonl", serial="1652823000009", started=f"2026-11-{i + 1:02d}T02:00:00+00:00",
               level="acceptance", scale={"gemm_bf16": factor})
    tonight = edited(src, tmp_path / "tonight.jsonl", serial="1652823000009", started="2026-11-27T02:00:00+00:00",
                     level="acceptance", scale={"gemm_bf16": gemm[-1]})
    past, _ = past_figures(nights, exclude=tonight)
    fig = next(f for f in figures_of(read_run(tonight)) if f.figure == "gemm_bf16")
    lines = tonight.read_text().splitlines()
    end = lines.pop()
    for v in (checks.history.history(thresholds, **history_inputs(fig, past, thresholds.history.runs)),
              checks.drift.drift(thresholds, **history_inputs(fig, past, thresholds.history.drift.runs))):
        lines.append(json.dumps({"type": "verdict", "test": "tests/test_history.py::test_figures_against_history",
                                 **v.as_record()}))
    tonight.write_text("\n".join(lines + [end]) + "\n")
    run = read_run(tonight)
    series = {s.figure: s for s in history_series(run.verdicts, run.run["started"])}
    gemm_series = series["gemm_bf16"]
    assert gemm_series.drift["outcome"] == "fail" and len(gemm_series.past) == 25, gemm_series
    assert gemm_series.history["bound"] is not None and gemm_series.drift["began"]
    point = gpu_points(run.measurements, run.verdicts)[0]
    assert point.own_past["gemm_bf16"].drift == "fail" and point.outcome("gemm_bf16") == "fail"
    assert point.own_past["gemm_bf16"].drift_bound is not None
    page = tmp_path / "page.html"
    assert main(["report", str(tonight), "-o", str(page)]) == 0
    html = page.read_text()
    assert 'id="fig-history"' in html and "Each GPU and placement against its own history" in html
    assert f"falling since {gemm_series.drift['began']}" in html
