"""Each GPU against its own history (wirecheck.checks.history, records.figures.history_figures): a 10 %
drop caught and named with the GPU's serial, its history's values and dates and the limit; a normal
night passing; night one and a swapped GPU said, not failed; a noisy history said too noisy; a failed
night kept out of the history; the verdict judged again from its inputs alone."""

from __future__ import annotations

import json
import sys

import fake_pynvml
import pytest

from calibration_records import CLEAN, edited
from wirecheck import checks
from wirecheck.checks import rejudge
from wirecheck.checks.history import figures_of, past_figures
from wirecheck.records.file import read_run
from wirecheck.thresholds.file import load_thresholds
from wirecheck.core.paths import suite_paths
from wirecheck.node.nvml import read_topology
from wirecheck.records.run import topology_fields

SERIAL = "1652823000001"


@pytest.fixture(scope="module")
def thresholds():
    return load_thresholds(suite_paths().thresholds)


def _nights(folder, serial=SERIAL, n=6):
    """n nights of the 1x H200 at the acceptance level, one per day, its GPU named by `serial`."""
    return [edited(p, folder / f"night-{i}.jsonl", serial=serial, started=f"2026-11-{10 + i:02d}T02:00:00+00:00",
                   level="acceptance")
            for i, p in enumerate(CLEAN[:n])]


def _judged(thresholds, tonight, folder):
    past, _ = past_figures(folder, exclude=tonight)
    figures = [f for f in figures_of(read_run(tonight)) if f.figure in thresholds.history.figures]
    return {f.figure: checks.history.history(thresholds, **checks.history.history_inputs(f, past, thresholds.history.runs))
            for f in figures}


def test_a_10_percent_drop_fails_naming_the_serial_the_history_and_the_limit(thresholds, tmp_path):
    _nights(tmp_path)
    tonight = edited(CLEAN[6], tmp_path / "tonight.jsonl", serial=SERIAL, started="2026-11-20T02:00:00+00:00",
                     level="acceptance", scale={"hbm_copy": 0.9, "gemm_fp8": 0.9, "sustained_bf16": 0.9})
    verdicts = _judged(thresholds, tonight, tmp_path)
    for figure in ("hbm_copy", "gemm_fp8", "sustained_bf16"):
        v = verdicts[figure]
        assert v.outcome == "fail" and v.rule == "history", v.message
        assert f"serial {SERIAL}" in v.message and "(2026-11-10)" in v.message and "(2026-11-15)" in v.message
        assert v.yaml_path == "thresholds.yaml: history" and v.limit["min"] < v.details["median"]
    assert verdicts["hbm_read"].outcome == "pass", verdicts["hbm_read"].message
    assert "4387.2 GB/s (2026-11-1" in verdicts["hbm_read"].message
    again = rejudge(verdicts["hbm_copy"], thresholds)  # from its inputs alone: no folder needed
    assert again.outcome == "fail" and again.message == verdicts["hbm_copy"].message


def test_a_normal_night_passes(thresholds, tmp_path):
    _nights(tmp_path)
    tonight = edited(CLEAN[6], tmp_path / "tonight.jsonl", serial=SERIAL, started="2026-11-20T02:00:00+00:00",
                     level="acceptance")
    verdicts = _judged(thresholds, tonight, tmp_path)
    assert not [v.message for v in verdicts.values() if v.outcome == "fail"]
    for figure in ("hbm_copy", "hbm_read", "gemm_fp8", "sustained_bf16"):
        assert verdicts[figure].outcome == "pass", verdicts[figure].message
    # host copies are in 2 of those nights only (the others ran -m health or the quick level): said, not judged
    assert verdicts["h2d"].outcome == "skip" and "has 2 earlier run(s)" in verdicts["h2d"].message


def test_night_one_is_said_not_failed(thresholds, tmp_path):
    tonight = edited(CLEAN[6], tmp_path / "tonight.jsonl", serial=SERIAL, scale={"hbm_copy": 0.5})
    v = _judged(thresholds, tonight, tmp_path)["hbm_copy"]
    assert v.outcome == "skip" and f"first run of serial {SERIAL}: nothing to compare yet" in v.message, v.message


def test_a_swapped_gpu_starts_a_new_history_and_says_so(thresholds, tmp_path):
    _nights(tmp_path)
    tonight = edited(CLEAN[6], tmp_path / "tonight.jsonl", serial="1652823999999", level="acceptance",
                     scale={"hbm_copy": 0.9})
    v = _judged(thresholds, tonight, tmp_path)["hbm_copy"]
    assert v.outcome == "skip", v.message
    assert f"serial 1652823999999 replaces serial {SERIAL} in vm 00000000:00:06.0" in v.message
    assert "a new GPU starts a new history" in v.message


def test_a_night_that_failed_stays_out_of_the_history_unless_only_a_table_floor_failed(thresholds, tmp_path):
    _nights(tmp_path, n=3)
    # a night whose HBM copy failed its floor (half speed): not part of the GPU's history
    bad = edited(CLEAN[4], tmp_path / "bad.jsonl", serial=SERIAL, started="2026-11-16T02:00:00+00:00",
                 level="acceptance")
    text = bad.read_text().replace('"check": "hbm_bandwidth", "what": "HBM copy bandwidth (read+write)", '
                                   '"where": "GPU0", "outcome": "pass"',
                                   '"check": "hbm_bandwidth", "what": "HBM copy bandwidth (read+write)", '
                                   '"where": "GPU0", "outcome": "fail"')
    assert text != bad.read_text()
    bad.write_text(text)
    # and one whose HBM copy failed only the model's table floor (a floor made for another GPU): still a reading
    floor_only = edited(CLEAN[5], tmp_path / "floor.jsonl", serial=SERIAL, started="2026-11-17T02:00:00+00:00",
                        level="acceptance")
    records = [json.loads(line) for line in floor_only.read_text().splitlines()]
    for r in records:
        if r.get("check") == "hbm_bandwidth" and r["inputs"]["kind"] == "copy":
            r["outcome"], r["details"]["failed_by"] = "fail", ["floor"]
    floor_only.write_text("".join(json.dumps(r) + "\n" for r in records))
    past, _ = past_figures(tmp_path)
    copies = [f for f in past if f.figure == "hbm_copy"]
    assert len(copies) == 4 and str(bad) not in {f.record for f in copies} and str(floor_only) in {f.record for f in copies}


def test_too_noisy_a_history_is_said_not_judged(thresholds):
    history = [{"value": v * 1e12, "date": f"2026-11-{10 + i}"} for i, v in enumerate([700, 790, 680, 795, 705])]
    v = checks.history.history(thresholds, figure="gemm_bf16", key="gpu_health.floors.NVIDIA H200.gemm_bf16",
                               subject=f"serial {SERIAL}", where="GPU0", kind="compute", value=600e12, history=history)
    assert v.outcome == "skip" and "too noisy to judge against its history" in v.message, v.message


def test_a_gpu_the_record_names_by_slot_only_has_no_history(thresholds, tmp_path):
    f = next(f for f in figures_of(read_run(CLEAN[6])) if f.figure == "hbm_copy")
    v = checks.history.history(thresholds, **checks.history.history_inputs(f, [], 10))
    assert v.outcome == "skip" and "names no GPU serial or UUID" in v.message


def test_a_figure_is_compared_with_runs_of_its_own_level_only(thresholds, tmp_path):
    for i, p in enumerate(CLEAN[:4]):
        edited(p, tmp_path / f"quick-{i}.jsonl", serial=SERIAL, level="quick", started=f"2026-11-{10 + i}T02:00:00+00:00")
    tonight = edited(CLEAN[6], tmp_path / "tonight.jsonl", serial=SERIAL, level="acceptance")
    v = _judged(thresholds, tonight, tmp_path)["sustained_bf16"]
    assert v.outcome == "skip" and "first run of serial" in v.message, v.message  # a 5-s load is not a 60-s one



def test_the_run_header_names_each_gpu_by_uuid_and_serial(monkeypatch):
    nv = fake_pynvml.build(fake_pynvml.nvswitch(2, links=0))
    nv.nvmlDeviceGetSerial = lambda h: f"165282300000{h.index}"
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    gpus = topology_fields(read_topology())["gpus"]
    assert [(g["uuid"], g["serial"]) for g in gpus] == [
        ("GPU-00000000-0000-0000-0000-000000000000", "1652823000000"),
        ("GPU-00000001-0000-0000-0000-000000000000", "1652823000001")]

    def broken(h):
        raise nv.NVMLError_Unknown("Unknown Error")

    nv.nvmlDeviceGetSerial = broken  # a driver that cannot answer it: the run goes on, the UUID names the GPU
    assert [g["serial"] for g in topology_fields(read_topology())["gpus"]] == [None, None]


def test_a_strategy_figure_is_compared_with_runs_of_its_own_training_set_only():
    """A strategy's throughput on a placement is held to runs that trained the same set (the header's
    training.set): another set ran other runs before it. A record from before the set is compared as before."""
    from wirecheck.checks.history import history_inputs
    from wirecheck.records.figures import Figure

    def night(day: int, training_set: str | None) -> Figure:
        return Figure(("training", "throughput_floors", "nvl_quad", "ddp", 4), "ddp", "throughput", 1.0e5,
                      "placement nvl_quad-4gpu-0.1.2.3 on serial 1, serial 2", "nvl_quad-4gpu-0.1.2.3",
                      "node nvl_quad-4gpu-0.1.2.3 ddp", ("NVIDIA H200 NVL",), ("serial 1", "serial 2"), True, "node",
                      f"2026-11-{day:02d}T02:00:00+00:00", f"night-{day}.jsonl", "pass", level="acceptance",
                      training_set=training_set)

    past = [night(10, None), night(11, "all"), night(12, "all"), night(13, "selected")]
    compared = history_inputs(night(20, "selected"), past, 10)["history"]
    assert [h["record"] for h in compared] == ["night-10.jsonl", "night-13.jsonl"]
    assert [h["record"] for h in history_inputs(night(20, "all"), past, 10)["history"]] == [
        "night-10.jsonl", "night-11.jsonl", "night-12.jsonl"]
