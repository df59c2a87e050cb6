"""The report in a real browser (headless Chromium, Debian's package): every section there, every
figure decoded, nothing on the console. The screenshot and the page are kept as CI artifacts in
$WIRECHECK_ARTIFACTS (default: .artifacts/ in the checkout, not committed).

Without Chromium the test skips on a workstation and fails in CI (CI=true), saying how to install it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil

from browser import chromium, console_lines, probe
from e2e import PROJECT
from gpu_health_record import write_node
from test_report import SIM, SIM_FIGURES, lines, make, write
from wirecheck.report.sections import SECTION_IDS

ARTIFACTS = os.environ.get("WIRECHECK_ARTIFACTS") or str(PROJECT / ".artifacts")


def _with_history(tmp_path):
    """The simulated run and two earlier nights of it (a trend needs more than one run)."""
    objs = lines(SIM)
    hist = tmp_path / "history"
    hist.mkdir()
    for day in (1, 2):
        night = json.loads(json.dumps(objs))
        night[0]["started"] = f"2026-11-{day:02d}T02:00:00+00:00"
        write(hist / f"night{day}.jsonl", night)
    return make(tmp_path, SIM, extra=["--history", str(hist)])


def test_simulated_report_renders_in_chromium(tmp_path):
    browser = chromium()
    _with_history(tmp_path)
    page = tmp_path / "report.html"
    screenshot = tmp_path / "report.png"
    console = console_lines(browser, page, screenshot)
    seen = probe(browser, page)
    os.makedirs(ARTIFACTS, exist_ok=True)
    shutil.copy(screenshot, os.path.join(ARTIFACTS, "report-simulated.png"))
    shutil.copy(page, os.path.join(ARTIFACTS, "report-simulated.html"))
    assert console == [], "the page logged to the console:\n" + "\n".join(console)
    assert seen["sections"] == list(SECTION_IDS)
    ids = {f["id"] for f in seen["figures"]}
    assert SIM_FIGURES | {"fig-trend-busbw", "fig-trend-tokens", "fig-trend-verdicts"} <= ids
    broken = [f for f in seen["figures"] if not (f["complete"] and f["width"] > 100 and f["height"] > 100)]
    assert broken == [], f"figures that did not decode: {broken}"
    assert "SIMULATION" in seen["title"]


def test_the_gpu_section_renders_in_chromium(tmp_path):
    """A hardware record of the GPU health checks (gpu_health_record): the GPU section's figures decode."""
    browser = chromium()
    make(tmp_path, write_node(tmp_path / "gpus.jsonl", slow={(2, "hbm_copy"): 0.8}), name="gpus.html")
    page = tmp_path / "gpus.html"
    console = console_lines(browser, page, tmp_path / "gpus.png")
    os.makedirs(ARTIFACTS, exist_ok=True)
    shutil.copy(tmp_path / "gpus.png", os.path.join(ARTIFACTS, "report-gpus.png"))
    assert console == [], "the page logged to the console:\n" + "\n".join(console)
    seen = probe(browser, page)
    assert seen["sections"] == list(SECTION_IDS)
    figures = {f["id"]: f for f in seen["figures"]}
    for fid in ("fig-gpu-bars", "fig-gpu-sustained"):
        assert figures[fid]["complete"] and figures[fid]["width"] > 100 and figures[fid]["height"] > 100, figures


def test_a_slow_gemm_on_a_1x_h200_reads_in_a_few_lines_and_the_page_fits_its_width(tmp_path):
    """A -m health run of a 1x H200 whose bf16 GEMM is 20 % slow: its failure is a row of facts and its check's
    words beneath (a few lines, not a message repeating the source, the means and the to-do beside the columns
    that hold them), the page no wider than the window, and every section the record has nothing for (the
    collectives, the strategy dial, NCCL's path, the copies, the burn-in...) one line. Narrow and wide windows."""
    browser = chromium()
    make(tmp_path, write_node(tmp_path / "gemm.jsonl", gpus=1, slow={(0, "gemm_bf16"): 0.8}), name="gemm.html")
    page = tmp_path / "gemm.html"
    console = console_lines(browser, page, tmp_path / "gemm.png")
    os.makedirs(ARTIFACTS, exist_ok=True)
    shutil.copy(tmp_path / "gemm.png", os.path.join(ARTIFACTS, "report-slow-gemm.png"))
    assert console == [], "the page logged to the console:\n" + "\n".join(console)
    for width in (1400, 1000):
        layout = probe(browser, page, width=width)["layout"]
        assert layout["width"] <= layout["viewport"], layout  # nothing runs off the page to the right
        rows, line = layout["failure_rows_px"], layout["failure_line_px"]
        assert len(rows) == 2 and line > 0, layout  # the failure's facts, and its words beneath
        assert sum(rows) / line <= 8, f"a failure takes {sum(rows) / line:.0f} lines at {width} px: {layout}"
        folded = {f["id"]: f for f in layout["folded"]}
        assert {"collectives", "strategies", "nccl-path", "copies", "burn-in"} <= set(folded), layout
        assert all(f["height"] <= 1.5 * f["line"] for f in folded.values()), layout  # one line each


def test_the_browser_check_sees_a_broken_figure_and_a_fetch(tmp_path):
    """The check above can fail: a figure whose PNG does not decode, and a page that tries the network."""
    browser = chromium()
    text = make(tmp_path, SIM)
    page = tmp_path / "report.html"
    first = re.search(r'<figure id="([^"]+)"[^>]*><img src="data:image/png;base64,([^"]+)"', text)
    damaged = text.replace(first.group(2), base64.b64encode(b"\x89PNG\r\n\x1a\n not a png").decode())
    damaged = damaged.replace("</body>", '<img src="https://example.invalid/x.png" alt=""></body>')
    page.write_text(damaged)
    console = console_lines(browser, page, tmp_path / "damaged.png")
    assert any("example.invalid" in line for line in console), console
    figures = {f["id"]: f for f in probe(browser, page)["figures"]}
    assert figures[first.group(1)]["width"] == 0
    assert all(f["width"] > 0 for fid, f in figures.items() if fid != first.group(1))
