"""Every limit states its resolution (wirecheck.core.resolution, wirecheck.checks.sensitivity): the loss a rule
catches in 95 % of runs and its false alarms, from the measured noise; the history rule's margin from its runs'
own noise (tighter than 3 % where they are quiet, wider where they are few or noisy) and the loss each history
verdict says it catches; a rule coarser than 10 % says so; calibrate states and writes it, limits shows it."""

from __future__ import annotations

import random
import statistics

import pytest
import yaml

from calibration_records import REFERENCE
from wirecheck import checks
from wirecheck.checks import rejudge, sensitivity
from wirecheck.cli.calibrate import main as calibrate_main
from wirecheck.cli.limits import main as limits_main
from wirecheck.core.paths import suite_paths
from wirecheck.core.resolution import (Resolution, from_critical, of_bound, of_normal, prediction_factor,
                                       student_t_quantile, within_of)
from wirecheck.records.file import read_run
from wirecheck.records.figures import run_figures
from wirecheck.thresholds.file import load_thresholds

LIMITS = REFERENCE / "wirecheck-2026-12-01-limits"


@pytest.fixture(scope="module")
def thresholds():
    return load_thresholds(suite_paths().thresholds)


def test_student_t_and_the_prediction_bound_match_the_tables():
    assert student_t_quantile(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert student_t_quantile(0.99, 2) == pytest.approx(6.965, abs=1e-3)
    assert student_t_quantile(0.01, 5) == pytest.approx(-3.365, abs=1e-3)
    # few runs widen the bound: 3 runs ~8 standard deviations at 1 %, 14 runs ~2.7
    assert prediction_factor(3, 0.01) == pytest.approx(6.965 * (4 / 3) ** 0.5, abs=1e-3)
    assert prediction_factor(14, 0.01) < 2.8 < prediction_factor(6, 0.01)


def test_a_bound_on_normal_noise_catches_what_its_margin_and_noise_allow():
    r = of_normal(0.015, 0.005)
    # 1 - 0.985 / (1 + 1.645 x 0.5 %) = 2.3 %; false alarms: Phi(-3) = 0.13 %
    assert r.step == pytest.approx(0.0231, abs=5e-4) and r.false_alarm == pytest.approx(0.00135, abs=1e-4)
    assert not r.coarse and not r.cries_wolf and "catches a loss of 2.3 % in 95 % of runs" in r.words()
    assert of_normal(0.005, 0.005).cries_wolf  # a margin of one noise: 16 % false alarms
    assert "no resolution" in of_normal(0.005, 0.005).words()


def test_a_floor_far_below_the_readings_says_it_is_coarse():
    values = [100.0, 100.2, 99.9, 100.1, 99.8]
    coarse = of_bound(values, 88.0, within=[0.001])
    assert coarse.step > 0.10 and coarse.coarse and coarse.false_alarm == 0
    assert "coarse" in coarse.words() and "worse than 10 %" in coarse.words() and coarse.short().startswith("> 10 %")
    tight = of_bound(values, 98.0, within=[0.001])
    assert 0.015 < tight.step < 0.03 and not tight.coarse
    # a floor above some clean readings fails them: its false alarms say so
    assert of_bound(values, 100.0).cries_wolf


def test_critical_losses_give_the_rate_and_the_95th_percentile():
    r = from_critical([0.01] * 90 + [0.02] * 9 + [-0.01], "synthetic")
    assert r.false_alarm == pytest.approx(0.01) and r.cries_wolf
    assert from_critical([0.01] * 94 + [0.05] * 6, "x").step == pytest.approx(0.05, abs=1e-6)
    assert Resolution.from_dict(r.as_dict()) == r


def test_within_run_noise_is_the_standard_error_of_the_median_of_the_repeats():
    assert within_of(0.066, 700) == pytest.approx(1.2533 * 0.066 / 2.563 / 700 ** 0.5)
    assert within_of(None, 700) is None and within_of(0.1, 1) is None


def test_the_records_keep_each_figures_repeats_and_old_records_give_them_from_their_measurements():
    # a record written before verdicts kept `noise`: read from its measurement lines (per-call spread, windows)
    figs = {f.figure: f for f in run_figures(read_run(LIMITS / "clean-1.jsonl"), checks.gpu_figures())}
    assert 0 < figs["hbm_copy"].within < 2e-4  # 50 copies at a 0.1 % spread
    assert 0.0005 < figs["gemm_bf16"].within < 0.003  # 700 products at a 6.6 % spread
    assert figs["sustained_bf16"].within is not None


def test_the_gpu_inputs_keep_the_repeats_for_new_records():
    from wirecheck.gpu.inputs import _call_noise
    noise = _call_noise({"per_s": 1.0, "calls": 700, "spread": 0.066})
    assert noise == {"calls": 700, "spread": 0.066, "within": within_of(0.066, 700)}
    assert _call_noise({"per_s": 1.0}) is None


def _history(thresholds, values, value, within=None, figure="gemm_bf16"):
    return checks.history.history(
        thresholds, figure=figure, key=f"gpu_health.floors.NVIDIA H200.{figure}", subject="serial 1", where="GPU0",
        kind="compute", unit="TFLOP/s", value=value, within=within,
        history=[{"value": v, "date": f"2026-11-{i + 1:02d}", "record": f"n{i}.jsonl"} for i, v in enumerate(values)])


def test_a_quiet_figure_is_held_tighter_than_3_percent_and_a_1_percent_loss_fails(thresholds):
    rng = random.Random(1)
    quiet = [4273e9 * (1 + rng.gauss(0, 0.0001)) for _ in range(10)]  # HBM copy moves 0.01 %
    median = statistics.median(quiet)
    v = _history(thresholds, quiet, median * 0.99, figure="hbm_copy")
    assert v.outcome == "fail" and v.details["margin"] == pytest.approx(0.005), v.message
    assert "catches a loss of 0.5" in v.message and "false alarms" in v.message
    assert _history(thresholds, quiet, median * 0.998, figure="hbm_copy").outcome == "pass"
    # judged again from its inputs alone
    assert rejudge(v, thresholds).outcome == "fail"


def test_a_noisy_or_short_history_gets_a_wider_margin_that_it_says(thresholds):
    rng = random.Random(2)
    noisy = [670e12 * (1 + rng.gauss(0, 0.006)) for _ in range(14)]
    full = _history(thresholds, noisy, statistics.median(noisy))
    short = _history(thresholds, noisy[:3], statistics.median(noisy[:3]))
    assert full.outcome == short.outcome == "pass"
    assert 0.01 < full.details["margin"] < short.details["margin"], (full.message, short.message)
    assert "prediction bound for 3 runs" in short.message and "prediction bound for 14 runs" in full.message
    res = Resolution.from_dict(full.details["resolution"])
    assert res.step > full.details["margin"] and not res.cries_wolf
    # a 5 % loss is caught against the full history
    assert _history(thresholds, noisy, statistics.median(noisy) * 0.95).outcome == "fail"


def test_a_figure_with_its_own_least_margin_keeps_it(thresholds):
    flat = [55e9] * 10
    v = checks.history.history(thresholds, figure="h2d", key="copy_bandwidth.floors.pcie.h2d", subject="serial 1 h2d",
                               where="GPU0", kind="bandwidth", value=55e9 * 0.97,
                               history=[{"value": x, "date": "2026-11-01", "record": "r"} for x in flat])
    assert v.outcome == "pass" and v.details["margin"] == thresholds.history.least_margin("h2d") > 0.03, v.message


def test_a_file_without_the_prediction_bound_keeps_its_own_rule(tmp_path):
    text = suite_paths().thresholds.read_text()
    history = text[text.index("\nhistory: {"):]
    written = history.replace('false_alarms: "1 %", min_margin: "0.5 %"', 'mad_k: "3 x", min_margin: "3 %"')
    written = written[:written.index("  min_margins: {")] + written[written.index("  figures: ["):]
    assert "false_alarms" not in written.split("drift:")[0] and written != history
    (tmp_path / "old.yaml").write_text(text.replace(history, written))
    old = load_thresholds(tmp_path / "old.yaml")
    assert old.history.false_alarms is None and old.history.mad_k == 3.0 and old.history.min_margins == ()
    v = _history(old, [670e12] * 5, 670e12 * 0.975)
    assert v.outcome == "pass" and v.details["margin"] == pytest.approx(0.03), v.message


def test_the_history_rule_resampled_on_flat_noise_cries_no_wolf(thresholds):
    rngs = [random.Random(k) for k in range(5)]
    noise = sensitivity.Noise.of([[1 + rng.gauss(0, 0.005) for _ in range(6)] for rng in rngs])
    losses = sensitivity.history_losses(noise, thresholds.history, 14, draws=800)
    res = sensitivity.resolution(losses, noise)
    assert res.false_alarm < 0.01 and 0.01 < res.step < 0.04, res
    assert sensitivity.caught(losses, 0.05) > 0.95
    peers = sensitivity.resolution(sensitivity.peer_losses(noise, 0.10, 3.0, 8, draws=400), noise)
    assert peers.coarse  # the peer rule's 10 % is its resolution at best


def test_calibrate_states_and_writes_what_each_floor_catches(tmp_path, capsys):
    out = tmp_path / "site.yaml"
    runs = [LIMITS / f"clean-{i}.jsonl" for i in (1, 2, 3)] + [LIMITS / "further" / f"clean-{i}.jsonl" for i in (1, 2, 3)]
    assert calibrate_main([*map(str, runs), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "loss caught in 95 % of runs: the floor catches" in printed and "the history rule catches" in printed
    assert "the base file's table floor catches only" in printed and "coarser than 10 %" in printed
    entry = yaml.safe_load(out.read_text())["gpu_health"]["floors"]["NVIDIA H200"]["hbm_copy"]
    # the floor's own, the history rule's, and the base file's table floor, the peers' and the fleet's on the same runs
    assert set(entry["provenance"]["resolution"]) == {"step", "false_alarms", "history", "measured", "peers", "fleet"}
    assert float(entry["provenance"]["resolution"]["measured"].split()[0]) > 10  # the shipped floor is coarse
    assert "prediction bound" in entry["source"]
    floor, _ = load_thresholds(out).gpu_health.floor_rule("hbm_copy", "NVIDIA H200", False)
    assert floor.rule == "calibrated" and 0 < floor.resolution["step"] < 0.10
    # limits shows it beside the bound
    assert limits_main(["--profile", "h200-sxm-2", "--thresholds", str(out)]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("hbm_bandwidth (copy)"))
    assert "calibrated" in row and f"{floor.resolution['step'] * 100:.1f} %" in row, row
    assert "catches (95 %)" in table and any(line.startswith("history ") for line in table.splitlines())


def test_limits_shows_what_each_shipped_bound_catches_on_the_recorded_noise(capsys):
    """fixtures/pytest_wirecheck/resolution.yaml (scripts/bench/sensitivity.py --write) beside each bound: the
    shipped H200 GPU floors coarser than 10 %, the history rule's per figure, a bound of hardware nobody
    recorded "not measured"."""
    from wirecheck.thresholds import sensitivity as measured

    source, figures = measured.load()
    assert "scripts/bench/sensitivity.py" in source
    gemm = figures["gpu_health.floors.NVIDIA H200.gemm_bf16"]
    assert gemm["measured"].coarse and gemm["history"].step < 0.03 and not gemm["history"].cries_wolf
    assert limits_main(["--profile", "h200-sxm-2", "--json"]) == 0
    import json
    rows = json.loads(capsys.readouterr().out)["limits"]
    floor = next(r for r in rows if r["check"] == "gemm_throughput (bf16)")
    assert floor["resolution"]["coarse"] and floor["resolution"]["step"] > 0.10, floor
    history = next(r for r in rows if r["check"] == "history gemm_throughput (bf16)")
    assert history["rule"] == "history" and 0 < history["resolution"]["step"] < 0.03, history
    assert limits_main(["--profile", "h100-sxm-8"]) == 0
    table = capsys.readouterr().out
    assert "not measured" in table and "catches (95 %)" in table
