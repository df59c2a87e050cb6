"""`wirecheck report`: the page for a simulated run, a device run, failures, a run cut short,
the trend, and bad input.

Records: selftests/data/sim-h200-sxm-2.jsonl is a whole simulated run of the suite
(`pytest --simulate=h200-sxm-2 --benchmark-disable --wirecheck-json=...`; make it again when
the record schema changes); the device run of 2026-11-30 comes from reference_record.
"""

from __future__ import annotations

import base64
import html
import json
import re
import struct
from pathlib import Path

import pytest

from reference_record import convert
from wirecheck.cli.report import main as report
from wirecheck.report.figures import mad_band
from wirecheck.checks.words import WORDS
from wirecheck.report.sections import SECTION_IDS

DATA = Path(__file__).parent / "data"
SIM = DATA / "sim-h200-sxm-2.jsonl"
# A busbw figure per op the recorded run measured (the ops of its day), the wire check's, the links', the dial's.
SIM_OPS = {json.loads(x)["details"]["op"] for x in SIM.read_text().splitlines() if '"kind": "collective"' in x}
SIM_FIGURES = {f"fig-busbw-{op}" for op in SIM_OPS} | {"fig-wire-forced_pcie-2gpu-0.1", "fig-link-matrix", "fig-strategy-dial"}


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def write(path: Path, objs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def make(tmp_path: Path, *records: Path, name="report.html", extra=()) -> str:
    out = tmp_path / name
    assert report([*map(str, records), "-o", str(out), *extra]) == 0
    return out.read_text()


def figure_ids(page: str) -> list[str]:
    return re.findall(r'<figure id="([^"]+)"', page)


def meta(page: str, name: str) -> list[str]:
    return re.search(rf'<meta name="{name}" content="([^"]*)"', page).group(1).split()


def section(page: str, sid: str) -> str:
    return re.search(rf'<section id="{sid}"[^>]*>(.*?)</section>', page, re.S).group(1)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_simulated_run_every_section_every_figure(tmp_path, capsys):
    page = make(tmp_path, SIM)
    assert meta(page, "wirecheck-sections") == list(SECTION_IDS)
    for sid in SECTION_IDS:
        assert re.search(rf'<section id="{sid}"( class="folded")?>', page), sid
    assert set(figure_ids(page)) == SIM_FIGURES == set(meta(page, "wirecheck-figures"))
    for fid, uri, w, h in re.findall(r'<figure id="([^"]+)"[^>]*><img src="data:image/png;base64,([^"]+)" alt="[^"]+" '
                                     r'width="(\d+)" height="(\d+)"', page):
        assert png_size(base64.b64decode(uri)) == (int(w), int(h)), fid
    assert '<div class="banner sim">SIMULATION' in page and "(SIMULATION)</title>" in page
    # Self-contained: no script, nothing to fetch.
    assert "<script" not in page and not re.search(r'(src|href)="(https?:)?//', page)
    assert "Content-Security-Policy" in page
    out = capsys.readouterr().out
    assert "8 figures" in out and "SIMULATION" in out
    # Sections without data say why, in one line (folded: their title and why)
    assert re.search(r'<section id="copies" class="folded"><h2 title="[^"]*">[^<]*<span class="why">[^<]*</span></h2>'
                     r'</section>', page)
    assert "simulation: no GPU memory to copy" in section(page, "copies")
    assert "gloo on CPU stands in for NCCL" in section(page, "nccl-path")
    assert "No error-counter readings" in section(page, "health")
    assert "No GPU health measurements" in section(page, "gpus")
    assert "One run only" in section(page, "trends")


def test_device_run_shows_the_wire_the_dial_and_the_counters(tmp_path):
    page = make(tmp_path, convert(tmp_path / "dev.jsonl"))
    assert '<div class="banner pass">PASSED' in page
    assert {"fig-wire-forced_pcie-2gpu-0.1", "fig-strategy-dial", "fig-counter-growth", "fig-link-matrix"} <= set(figure_ids(page))
    wire = section(page, "wire")
    assert "nvswitch-2gpu-0.1 vs forced_pcie-2gpu-0.1" in wire
    ratio = re.search(r"<td>all_reduce</td><td class=\"num\">([\d.]+)</td><td class=\"num\">([\d.]+)</td><td class=\"num\">([\d.]+)x", wire)
    assert 300 < float(ratio.group(1)) < 340 and 25 < float(ratio.group(2)) < 30 and 10 < float(ratio.group(3)) < 13
    dial = section(page, "strategies")
    assert "30.4 GiB" in dial  # DDP's peak allocated, as the device measured it
    assert "+0.0 %" in dial  # DDP model state equals the memory model
    links = section(page, "links")
    assert "fig-link-matrix" in links


def test_failures_come_first_each_in_a_few_lines_and_each_limit_is_sourced_once(tmp_path):
    objs = lines(SIM)
    failing = next(o for o in objs if o["type"] == "verdict" and o["check"] == "busbw")
    failing.update(outcome="fail", limit={"min": 5000.0, "max": None}, source="selftest: raised <floor>",
                   yaml_path="thresholds.yaml: collectives.simulated_floors.all_reduce.any", rule="simulated",
                   message="all_reduce busbw at 4 MiB on nvswitch-2gpu-0.1: measured 0.5 GB/s < floor 5000.0 GB/s "
                           "(thresholds.yaml: ...; source: selftest: raised <floor>). A recorded hint that repeats")
    page = make(tmp_path, write(tmp_path / "fail.jsonl", objs))
    verdict = section(page, "verdict")
    assert verdict.index("<h3>Failures</h3>") < verdict.index("skipped, with the reason")
    # one row of facts: check, where, what, measured, limit, by how much, the rule
    row = re.search(r'<tr class="fail">(.*?)</tr>', verdict).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[:2] == ["busbw", failing["where"]] and cells[4] == "&gt;= 5000 GB/s", cells
    assert cells[5].endswith("% below") and cells[6] == "simulated", cells
    # beneath it, across the table: what it means and what to do (the check's words, as the terminal's
    # failure block gives them), its code and test
    said = re.search(r'<tr class="fail said">(.*?)</tr>', verdict).group(1)
    for text in (WORDS["busbw"].means, WORDS["busbw"].todo, "WC2021", failing["test"]):
        assert html.escape(text) in said, text
    # the limit's source: once, behind a disclosure, never in the failure's rows nor its recorded words
    assert "selftest: raised &lt;floor&gt;" not in row + said and "A recorded hint" not in page
    assert page.count("selftest: raised &lt;floor&gt;") == 1
    assert re.search(r"<details><summary>Where each limit comes from \(\d+ limits\)</summary>.*selftest: raised "
                     r"&lt;floor&gt;", verdict, re.S)
    assert page.index('id="verdict"') < page.index('id="node"')
    # a simulated run says SIMULATION in one banner, at the top
    assert page.count('class="banner') == 1 and '<div class="banner sim">SIMULATION' in page


def test_the_terminal_says_a_failed_run_failed_naming_its_failures(tmp_path, capsys):
    """`report` printed only "wrote x.html" for a run with failures, though it said SIMULATION, INCOMPLETE and
    DAMAGED: a log or a script never learned the run failed. The line counts the verdicts as judge does and names
    each failure as its drain reason does; the exit code stays 0 (written)."""
    objs = lines(SIM)
    failing = [o for o in objs if o["type"] == "verdict" and o["check"] == "busbw"][:7]
    for o in failing:
        o.update(outcome="fail", limit={"min": 5000.0, "max": None})
    counts = {k: sum(o["type"] == "verdict" and o["outcome"] == k for o in objs) for k in ("pass", "skip")}
    make(tmp_path, write(tmp_path / "fail.jsonl", objs))
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "FAILED" in x)
    assert line.startswith(f"wirecheck report: {tmp_path / 'fail.jsonl'}: FAILED: 7 failed, {counts['pass']} passed, ")
    assert f"busbw {failing[0]['where']} " in line and "< 5000 GB/s" in line and line.count("busbw ") == 5
    assert "; and 2 more; the page leads with them" in line
    make(tmp_path, SIM)  # nothing failed: no such line
    assert "FAILED" not in capsys.readouterr().out


def _sweeps(spec: dict, slow: str):
    from wirecheck.report.model import Floor, SizePoint, Sweep

    sweeps, floors = [], {}
    for klass, n in spec.items():
        for k in range(n):
            name = f"{klass}-{k}"
            factor = 0.5 if name == slow else 1.0
            sweeps.append(Sweep(name, klass, "all_reduce", 2, [SizePoint(2**e, 1e11 * factor * (e - 9), 0, 0, 0)
                                                                for e in range(10, 31, 4)]))
            floors[name] = Floor(2**30, 80.0, None, "fail" if factor < 1 else "pass", "selftest")
    return sweeps, floors


def test_busbw_of_38_placements_is_drawn_per_class_with_the_worst_named():
    """An 8-GPU NVL node (h200-nvl-8) has 38 placements: one panel per class; a class of 17 is its band,
    median and worst placement (the one below its floor), not 17 lines and a legend nobody can read."""
    from wirecheck.report import figures

    sweeps, floors = _sweeps({"nvl_pair": 4, "nvl_quad": 17, "cross_quad": 12, "forced_pcie": 4, "nvl_group": 1},
                             slow="nvl_quad-7")
    img = figures.busbw_vs_size("all_reduce", sweeps, floors, simulated=False)
    assert "one panel per placement class (nvl_pair, nvl_quad, cross_quad, forced_pcie, nvl_group) of 38" in img.alt
    assert png_size(img.png) == (img.width, img.height) and img.width > 1000  # 3 panels across
    assert figures._worst(sweeps[4:21], floors).placement == "nvl_quad-7"
    few, few_floors = _sweeps({"nvswitch": 1, "forced_pcie": 1}, slow="")
    assert "one panel" not in figures.busbw_vs_size("all_reduce", few, few_floors, simulated=False).alt


def _burn_in_rounds(n: int) -> list[dict]:
    """n rounds of a 2-GPU burn-in as the loop records them, 4 windows and 4 NVML samples per GPU each."""
    rounds = []
    for k in range(n):
        t = 1000.0 + 10 * k
        series = {f"GPU{g}": {"windows": [[t + w, 1.0, 7e14, 0] for w in range(4)],
                              "samples": [[t + w, 1980, 650.0, 60 + g, 0] for w in range(4)]} for g in (0, 1)}
        rounds.append({"type": "measurement", "kind": "burn_in_round", "placement": None, "what": f"round {k + 1}",
                       "value": k + 1, "unit": "round", "details": {
                           "round": k + 1, "started": t, "ended": t + 9.5, "gpus": {
                               f"GPU{g}": {"flops_per_s": 7e14, "power_w": 650.0, "temperature": {"max_c": 61}}
                               for g in (0, 1)},
                           "collectives": {"nvswitch-2gpu-0.1 all_reduce": {"median": 3e11}}, "series": series}})
    return rounds


class _CountedRound(dict):
    """A round's details that count how often its start is read (the page's cost grew with those reads)."""

    reads = 0

    def get(self, key, default=None):
        if key == "started":
            _CountedRound.reads += 1
        return super().get(key, default)

    def __getitem__(self, key):
        if key == "started":
            _CountedRound.reads += 1
        return super().__getitem__(key)


def test_a_long_burn_in_is_drawn_in_linear_time():
    """4,800 rounds: every row is drawn relative to the first round's start, computed once (it was computed again
    for every row, from every round's start: 55 s for the page). Counted, not timed: the reads of a round's start
    stay a few per round whatever the count of rounds (a row-by-row computation reads n of them per row), and four
    times the rounds read exactly four times as many. (A timed comparison on a loaded 2-core machine measured 12x
    the work for four times the rounds, in linear code.)"""
    from wirecheck.report.burn_in import burn_in_view

    def reads(n: int):
        measurements = [dict(m, details=_CountedRound(m["details"])) for m in _burn_in_rounds(n)]
        view = burn_in_view(measurements, [])
        _CountedRound.reads = 0
        for gpu in view.gpus:
            view.windows(gpu), view.samples(gpu, "power_w"), view.samples(gpu, "temperature_c")
        view.busbw()
        return _CountedRound.reads, view

    small, _ = reads(1200)
    large, view = reads(4800)
    assert len(view.rounds) == 4800 and len(view.windows("GPU0")) == 4800 * 4
    assert view.windows("GPU1")[-1][0] == pytest.approx(10 * 4799 + 3)
    assert large == 4 * small and large <= 3 * 4800, (small, large)


def test_everything_from_a_record_is_escaped(tmp_path):
    objs = lines(SIM)
    objs[1]["message"] = "<script>alert(1)</script>"
    objs[0]["host"] = '<img src="http://x">'
    page = make(tmp_path, write(tmp_path / "evil.jsonl", objs))
    assert "<script>alert" not in page and '<img src="http://x">' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_run_cut_short_and_a_run_with_nothing_measured(tmp_path):
    objs = lines(SIM)
    page = make(tmp_path, write(tmp_path / "cut.jsonl", objs[:40]), name="cut.html")
    assert "the run was cut short" in section(page, "verdict") and "no end record" in section(page, "node")
    assert "No training measurements" in section(page, "strategies")
    hw = [{**objs[0], "simulated": False}, objs[-1]]
    page = make(tmp_path, write(tmp_path / "empty.jsonl", hw), name="empty.html")
    assert figure_ids(page) == ["fig-link-matrix"]
    for sid, text in (("collectives", "No collective measurements"), ("wire", "No host-path placement"),
                      ("strategies", "No training measurements"), ("nccl-path", "No NCCL path probe"),
                      ("copies", "No copy-bandwidth measurement"), ("gpus", "No GPU health measurements"),
                      ("health", "No error-counter readings")):
        assert text in section(page, sid), sid


def _night(objs: list[dict], day: int, scale: float, path: Path) -> Path:
    night = json.loads(json.dumps(objs))
    night[0]["started"] = f"2026-11-{day:02d}T02:00:00+00:00"
    for o in night:
        if o["type"] == "measurement" and o["kind"] == "collective" and o["placement"] == "nvswitch-2gpu-0.1":
            o["details"]["busbw"] *= scale
    return write(path, night)


def test_history_draws_the_trend_and_flags_a_night_outside_its_band(tmp_path):
    objs = lines(SIM)
    hist = tmp_path / "history"
    hist.mkdir()
    for day, scale in ((1, 1.0), (2, 1.02), (3, 0.98), (4, 1.01)):
        _night(objs, day, scale, hist / f"night{day}.jsonl")
    (hist / "notes.jsonl").write_text("not a record\n")
    other = json.loads(json.dumps(objs))
    other[0]["host"] = "another-node"
    write(hist / "other.jsonl", other)
    tonight = _night(objs, 5, 0.5, tmp_path / "tonight.jsonl")
    page = make(tmp_path, tonight, extra=["--history", str(hist)])
    trends = section(page, "trends")
    assert {"fig-trend-busbw", "fig-trend-tokens", "fig-trend-verdicts"} <= set(figure_ids(page))
    outside = re.findall(r'<tr class="fail"><td>busbw: ([^<]+)</td><td>([^<]+)</td>', trends)
    assert outside and {series for _, series in outside} == {"nvswitch-2gpu-0.1"}
    assert "OUTSIDE" in trends and "5 run(s) in the trend" in trends
    assert "notes.jsonl" in trends and "another host (another-node)" in trends


def test_a_simulated_trend_keeps_to_one_simulated_topology(tmp_path, capsys):
    objs = lines(SIM)
    hist = tmp_path / "history"
    hist.mkdir()
    for day in (1, 2, 3):
        _night(objs, day, 1.0, hist / f"night{day}.jsonl")
    eight = json.loads(json.dumps(objs))
    eight[0].update(simulation_source="h200-nvl-8", fabric="bridged", groups=[[0, 1, 2, 3], [4, 5, 6, 7]])
    write(hist / "nvl8.jsonl", eight)
    page = make(tmp_path, _night(objs, 4, 1.0, tmp_path / "tonight.jsonl"), extra=["--history", str(hist)])
    trends = section(page, "trends")
    assert "4 run(s) in the trend" in trends and "a simulation of another topology (h200-nvl-8)" in trends
    assert "left out of the trend: " in capsys.readouterr().out  # said on the terminal too


def test_a_run_that_read_no_gpu_is_not_called_a_hardware_run(tmp_path, capsys):
    """Bare `pytest --profile NAME` on a machine without a driver: not simulated, and no GPU measured. A
    simulated page called it "a hardware run" when it left it out of its trend."""
    from wirecheck.report.command import trend_runs
    from wirecheck.report.model import load_runs

    objs = lines(SIM)
    tonight = load_runs([str(write(tmp_path / "tonight.jsonl", objs))])[0]
    no_gpu = json.loads(json.dumps(objs))
    no_gpu[0].update(simulated=False, simulation_source=None, gpus=[],
                     unavailable="NVML could not start (NVMLError_LibraryNotFound): no NVIDIA driver on this machine")
    hardware = json.loads(json.dumps(objs))
    hardware[0].update(simulated=False, simulation_source=None, unavailable=None)
    runs = load_runs([str(write(tmp_path / "nogpu.jsonl", no_gpu)), str(write(tmp_path / "hw.jsonl", hardware))])
    assert [view.kind for view in (tonight, *runs)] == ["simulation", "no GPU", "hardware"]
    skipped = []
    assert trend_runs(tonight, [], runs, skipped) == []
    assert [why for _, why in skipped] == [
        "a run that read no GPU (not simulated, and NVML saw none: nothing was measured); this one is a simulation",
        "a hardware run; this one is a simulation"]
    skipped = []
    assert trend_runs(runs[1], [], [runs[0], tonight], skipped) == []
    assert [why for _, why in skipped] == [
        "a run that read no GPU (not simulated, and NVML saw none: nothing was measured); this one is a hardware run",
        "a simulation; this one is a hardware run"]


def test_the_trend_compares_like_with_like_and_each_run_once(tmp_path, capsys):
    """A band of the same node's runs, but of another GPU model, GPU count, level or selection, or with a copy of
    tonight's record in it, flagged a healthy run: only runs like this one enter it, each once, and the page says
    in one line what was left out and why."""
    objs = lines(SIM)
    hist = tmp_path / "history"
    hist.mkdir()
    for day in (1, 2, 3):
        _night(objs, day, 1.0, hist / f"night{day}.jsonl")
    unlike = {"h100": {"gpus": [dict(g, name="NVIDIA H100 80GB HBM3") for g in objs[0]["gpus"]]},
              "one-gpu": {"gpus": objs[0]["gpus"][:1]}, "quick": {"level": "quick"},
              "narrowed": {"selection": ["-k", "test_busbw"]}}
    for day, (name, header) in enumerate(unlike.items(), 6):
        night = json.loads(json.dumps(objs))
        night[0].update(header, started=f"2026-11-{day:02d}T02:00:00+00:00")
        write(hist / f"{name}.jsonl", night)
    tonight = _night(objs, 5, 1.0, tmp_path / "tonight.jsonl")
    (hist / "copy.jsonl").write_bytes(tonight.read_bytes())
    page = make(tmp_path, tonight, extra=["--history", str(hist)])
    trends = section(page, "trends")
    assert "4 run(s) in the trend" in trends, "tonight and its three like nights, tonight once"
    assert "5 file(s) left out of the trend: 2 other GPUs, 1 another level, 1 another selection, 1 the same run" in trends
    out = capsys.readouterr().out
    assert "other GPUs (1 x ?; this run: 2 x ?)" in out and "another level (quick; this run: none recorded)" in out
    assert "other GPUs (2 x NVIDIA H100 80GB HBM3; this run: 2 x ?)" in out


def test_mad_band():
    assert mad_band([1.0, 2.0]) is None
    med, low, high = mad_band([10.0, 12.0, 11.0, 9.0, 10.0])  # MAD 1: +- 3 x 1.4826
    assert med == 10.0 and low == pytest.approx(10 - 4.4478) and high == pytest.approx(10 + 4.4478)
    assert not low <= 5.0 <= high
    # A series that repeats itself exactly still has a band: 1 % of the median.
    assert mad_band([10.0, 10.0, 10.0, 11.0]) == (10.0, pytest.approx(9.9), pytest.approx(10.1))
    # Figures that cannot go below zero (bandwidth, counts) never get a band below zero.
    assert mad_band([0.0, 0.0, 1.0, 5.0, 9.0])[1] == 0.0
    assert mad_band([-3.0, -1.0, 0.0, 1.0, 3.0])[1] < 0  # a signed figure keeps its band


def test_bad_input_is_one_clear_message(tmp_path, capsys):
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": 1}\n')
    assert report([str(junk), "-o", str(tmp_path / "r.html")]) == 2
    assert "not a wirecheck record file" in capsys.readouterr().err
    assert report([str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    assert report([str(SIM), "-o", "/proc/wirecheck/r.html"]) == 2
    err = capsys.readouterr().err
    assert "cannot write /proc/wirecheck" in err and "Traceback" not in err
    assert report([str(SIM), "-o", str(tmp_path / "r.html"), "--history", str(tmp_path / "nope")]) == 2
    assert "--history" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


def test_a_missing_package_is_said_as_the_install_not_as_a_damaged_record(tmp_path, capsys, monkeypatch):
    """A Python without markupsafe (jinja2's) once had `report` blame the record for it."""
    import sys

    import wirecheck.report

    # the page module imported afresh (`from wirecheck.report import html` reads the package's attribute first)
    monkeypatch.delitem(sys.modules, "wirecheck.report.html", raising=False)
    monkeypatch.delattr(wirecheck.report, "html", raising=False)
    monkeypatch.setitem(sys.modules, "markupsafe", None)  # import markupsafe raises ImportError
    assert report([str(SIM), "-o", str(tmp_path / "r.html")]) == 3
    err = capsys.readouterr().err
    assert "lacks a package wirecheck's report needs: `pip install markupsafe`" in err, err
    assert "damaged" not in err and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("where", ["/proc/x.html", "no such folder", "read-only folder", "/sys/x.html"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_read_or_drawn(where, tmp_path, capsys,
                                                                                      monkeypatch):
    """`report -o /proc/x.html` drew for 13 s, then failed: /proc takes no file, even from root, whom os.access lets
    write anything. The refusal names the path, why (a file was tried there) and the fix, before the record is read."""
    import os

    from wirecheck.report import command, model

    if where == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes a folder of mode 555: /proc and /sys stand for a folder no one may write")
        folder = tmp_path / "ro"
        folder.mkdir(mode=0o555)
        where = str(folder / "x.html")
    elif where == "no such folder":
        where = str(tmp_path / "nowhere" / "x.html")

    def never(*_, **__):
        raise AssertionError("read or drawn before the output was found unwritable")

    monkeypatch.setattr(model, "load_runs", never)
    monkeypatch.setattr(command, "build_html", never)
    assert report([str(SIM), "-o", where]) == 2
    err = capsys.readouterr().err
    assert f"wirecheck report: cannot write {where}: " in err and "nothing was drawn: pass a path in a folder" in err, err
    assert "Traceback" not in err


def test_an_output_that_is_an_input_or_a_record_is_refused_before_anything_is_written(tmp_path, capsys):
    """`report a.jsonl -o a.jsonl` replaced the record with its page, exit 0; so did `--prometheus` naming a record,
    and the default -o of a record named rec.html (the input itself). Each is refused by its option, the record
    kept; a page of an earlier day is replaced as before."""
    record = tmp_path / "a.jsonl"
    record.write_bytes(SIM.read_bytes())
    other = tmp_path / "b.jsonl"
    other.write_bytes(SIM.read_bytes())
    named_html = tmp_path / "rec.html"
    named_html.write_bytes(SIM.read_bytes())
    link = tmp_path / "link.html"
    link.symlink_to(record)
    for argv, option, target in (([record, "-o", record], "-o", record),
                                 ([record, "-o", link], "-o", link),
                                 ([record, "-o", tmp_path / "a.html", "--prometheus", other], "--prometheus", other),
                                 ([record, "-o", tmp_path / "a.html", "--prometheus", record], "--prometheus", record),
                                 ([named_html], "-o (not given: the first RESULTS file with .html)", named_html)):
        assert report([str(a) for a in argv]) == 2
        captured = capsys.readouterr()
        assert f"wirecheck report: {option}: {target} " in captured.err and "pass a new path" in captured.err
        assert "nothing was written" in captured.err and "Traceback" not in captured.err and not captured.out
    assert record.read_bytes() == other.read_bytes() == named_html.read_bytes() == SIM.read_bytes()
    assert not (tmp_path / "a.html").exists()
    (tmp_path / "a.html").write_text("<html>an earlier page</html>")
    assert report([str(record), "-o", str(tmp_path / "a.html")]) == 0
    assert "an earlier page" not in (tmp_path / "a.html").read_text()


def test_evidence_sections_nccl_path_and_copies(tmp_path):
    from reference_record import with_evidence

    page = make(tmp_path, with_evidence(tmp_path / "evidence.jsonl"))
    nccl = section(page, "nccl-path")
    assert nccl.count('<span class="outcome-pass">PASS</span>') == 2
    assert "<td>GPU0 -&gt; GPU1</td><td>P2P/CUMEM/read</td><td>NVL</td>" in nccl
    assert "<td>GPU0 -&gt; GPU1</td><td>SHM/direct/direct</td><td>PHB</td>" in nccl
    assert "<td>AllReduce</td><td class=\"num\">1073741824</td><td>RING</td><td>SIMPLE</td>" in nccl
    copies = section(page, "copies")
    assert "fig-copy-bandwidth" in copies and "<td>GPU1</td><td class=\"num\">52.50</td>" in copies
    assert "<td>GPU0 -&gt; GPU1</td><td class=\"num\">392.6</td><td>yes</td>" in copies
    assert "Gen5 x16 (max Gen5 x16)" in copies


def test_the_device_scripts_summary_reads_the_evidence(tmp_path):
    import subprocess
    import sys

    from e2e import PROJECT
    from reference_record import with_evidence

    record = with_evidence(tmp_path / "evidence.jsonl")
    out = subprocess.run([sys.executable, str(PROJECT / "scripts/device/report_check.py"), "evidence", str(record)],
                         capture_output=True, text=True, check=True).stdout
    assert re.search(r"GPU0->GPU1\s+P2P/CUMEM/read\s+NVL\s+16", out)
    assert re.search(r"GPU1->GPU0\s+SHM/direct/direct\s+PHB\s+16", out)
    assert "AllReduce        1073741824 B -> RING/SIMPLE, 16 channels" in out
    assert "GPU1: H2D    52.5 GB/s  D2H    55.2 GB/s  PCIe under load Gen5 x16" in out
    assert "GPU1 -> GPU0:   393.4 GB/s" in out and "PASS peer copy bandwidth" in out
    log = tmp_path / "pytest.log"
    log.write_text("============ slowest durations ============\n"
                   "5.01s call     tests/test_nccl_path.py::test_nccl_path[nvswitch-2gpu-0.1]\n"
                   "4.20s call     tests/test_nccl_path.py::test_nccl_path[forced_pcie-2gpu-0.1]\n"
                   "3.30s call     tests/test_copy_bandwidth.py::test_host_copy[gpu0-h2d]\n"
                   "0.00s setup    tests/test_copy_bandwidth.py::test_peer_copy[pair-0.1]\n"
                   "40.00s call    tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]\n")
    out = subprocess.run([sys.executable, str(PROJECT / "scripts/device/report_check.py"), "durations", str(log)],
                         capture_output=True, text=True, check=True).stdout
    assert "12.5 s  added by tests/test_nccl_path.py + tests/test_copy_bandwidth.py (aim: under 20 s), of 52.5 s" in out


def test_mfu_and_exposed_communication_are_drawn_when_the_records_have_them(tmp_path):
    from wirecheck.report.model import RunView
    from wirecheck.report.prometheus import exposition
    from wirecheck.records.file import read_run

    objs = lines(SIM)
    for o in objs:
        if o["type"] == "measurement" and o["kind"] == "strategy":
            for r in o["details"]["ranks"]:
                r.update(mfu=0.3 if r["rank"] == 0 else 0.25, exposed_comm_s=0.004 * (r["rank"] + 1))
    record = write(tmp_path / "mfu.jsonl", objs)
    dial = section(make(tmp_path, record), "strategies")
    assert "<td class=\"num\">25.0 %</td><td class=\"num\">0.008</td>" in dial  # slowest rank's MFU, worst exposure
    assert "wirecheck_training_mfu_ratio{" in exposition(RunView.of(read_run(record)))


def test_the_command_module_plugs_into_a_subcommand_parser(tmp_path):
    """`wirecheck report` as a subcommand: NAME, add_parser(subparsers), run(args, extra)."""
    import argparse

    from wirecheck.cli import report as command

    parser = argparse.ArgumentParser(prog="wirecheck")
    sub = parser.add_subparsers(dest="command")
    command.add_parser(sub)
    args = parser.parse_args([command.NAME, str(SIM), "-o", str(tmp_path / "r.html")])
    assert command.run(args, []) == 0 and (tmp_path / "r.html").stat().st_size > 100_000


@pytest.mark.parametrize("topology, links", [("h200-nvl-8.synthetic", 18), ("h100-sxm-8-nics", 18),
                                             ("a100-sxm-8.synthetic", 12), ("l40s-8.synthetic", 0)])
def test_a_simulated_page_counts_the_nvlinks_its_topology_shows(topology, links, tmp_path):
    """The simulated page listed every GPU of the header's NVLink groups {0,1,2,3} {4,5,6,7} with "NVLinks up 0": a
    `topo -m` text has no link objects. Counted from its NV# matrix: an NVL GPU's three NV6 peers, a switch's NV#."""
    from wirecheck.core.paths import suite_paths
    from wirecheck.node.topo_text import load_recorded
    from wirecheck.records.run import RunWriter, run_header

    topo = load_recorded(topology, suite_paths().topologies)
    assert [topo.nvlinks_up(g.index) for g in topo.gpus] == [links] * 8
    w = RunWriter(tmp_path / "sim.jsonl")
    w.header(run_header(simulated=True, simulation_source=topology, thresholds=suite_paths().thresholds, versions={},
                        placements=[], topology=topo))
    w.end("complete", 10, {"passed": 0})
    w.close()
    assert [g["nvlinks_active"] for g in lines(w.path)[0]["gpus"]] == [links] * 8
    rows = re.findall(r"<tr[^>]*><td[^>]*>(\d)</td><td[^>]*>\(not recorded\)</td><td[^>]*>[^<]*</td><td[^>]*>[^<]*</td>"
                      r"<td[^>]*>(\d+)</td>", make(tmp_path, w.path))
    assert rows == [(str(i), str(links)) for i in range(8)], rows


DIAGNOSES = Path(__file__).resolve().parents[1] / "fixtures/reference/h200-1/wirecheck-2026-12-01-after/diagnose"


@pytest.mark.parametrize(("name", "found"), [("diag-gone.jsonl", "0 finding(s) of a fault, 1 not reproduced"),
                                             ("diag-slowed.jsonl", "1 finding(s) of a fault, 0 not reproduced")])
def test_a_diagnosis_record_reads_as_a_diagnosis_never_as_a_passed_node(tmp_path, capsys, name, found):
    """A diagnosis whose fault was not reproduced read "PASSED: 1 checks" on the page and, to Prometheus, as a
    complete healthy run; one that found its fault read FAILED, as a node's run."""
    record = tmp_path / name
    record.write_bytes((DIAGNOSES / name).read_bytes())
    page, prom = tmp_path / "d.html", tmp_path / "d.prom"
    assert report([str(record), "-o", str(page), "--prometheus", str(prom)]) == 0
    said = capsys.readouterr().out
    assert f"DIAGNOSIS of /tmp/w/diag/slowed.jsonl ({found}): not a validation of the node" in said, said
    assert "FAILED" not in said and "PASSED" not in html.unescape(page.read_text())
    assert 'kind="diagnosis"' in next(line for line in prom.read_text().splitlines() if line.startswith("wirecheck_run_info"))
