"""Headless Chromium for the report's browser test: the command line, what the console said,
and which figures the page really decoded.

Two visits per page. The page as shipped, with Chromium's console logged to stderr: the report
has no script, so any console line is a problem (a Content-Security-Policy violation for
something it tried to fetch, a resource that failed). And a copy with one probe script added
(its CSP widened for that script only), which after `load` writes every figure's decoded size,
every section id and the layout (the page's width against the window's, each failure row's height,
each folded section's) into the DOM that `--dump-dom` prints: an image whose data does not decode
has naturalWidth 0. Flags as the machine notes give them: no sandbox (root), no GPU, no
background networking (this machine's network is closed), a fresh profile each time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--hide-scrollbars", "--virtual-time-budget=10000"]
INSTALL = "apt-get install -y --no-install-recommends chromium (Debian's package; .ci/run installs it)"
CONSOLE = re.compile(r":CONSOLE[:(]")

PROBE = """<script>
window.addEventListener("load", () => {
  const figures = [...document.querySelectorAll("figure.wirecheck-figure")].map(f => {
    const img = f.querySelector("img");
    return {id: f.id, complete: !!img && img.complete, width: img ? img.naturalWidth : 0,
            height: img ? img.naturalHeight : 0};
  });
  const sections = [...document.querySelectorAll("section")].map(s => s.id);
  const px = (el) => el ? parseFloat(getComputedStyle(el).lineHeight) : 0;
  const cell = document.querySelector("#verdict tr.fail td");
  const failures = [...document.querySelectorAll("#verdict tr.fail")].map(r => Math.round(r.getBoundingClientRect().height));
  const folded = [...document.querySelectorAll("section.folded")].map(
    s => ({id: s.id, height: Math.round(s.getBoundingClientRect().height), line: px(s.querySelector("h2"))}));
  const layout = {width: document.documentElement.scrollWidth, viewport: window.innerWidth,
                  failure_rows_px: failures, failure_line_px: px(cell), folded};
  const out = document.createElement("pre");
  out.id = "wirecheck-probe";
  out.textContent = JSON.stringify({figures, sections, title: document.title, layout});
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    """The browser's path; a clear failure in CI (CI=true), a skip elsewhere, when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = f"headless Chromium is not installed: {INSTALL}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the browser test: {message}", pytrace=False)
    pytest.skip(message)


def _run(browser: str, args: list[str], timeout: float = 90) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="wirecheck-chromium-") as profile:
        return subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                              timeout=timeout)


def console_lines(browser: str, page: Path, screenshot: Path, width: int = 1400, height: int = 6000) -> list[str]:
    """Visit the page as shipped; take a screenshot; every line the page's console produced."""
    result = _run(browser, ["--enable-logging=stderr", "--v=0", f"--window-size={width},{height}",
                            f"--screenshot={screenshot}", page.resolve().as_uri()])
    assert screenshot.exists() and screenshot.stat().st_size > 0, f"no screenshot:\n{result.stderr[-3000:]}"
    return [line for line in result.stderr.splitlines() if CONSOLE.search(line)]


def probe(browser: str, page: Path, width: int = 1400, height: int = 6000) -> dict:
    """Visit a probed copy of the page; {"figures": [{id, complete, width, height}], "sections": [...]}."""
    text = page.read_text(encoding="utf-8")
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', text)
    assert csp, "the report has no Content-Security-Policy"
    text = text.replace(csp.group(0), csp.group(0).replace(csp.group(1), csp.group(1) + "; script-src 'unsafe-inline'"))
    probed = page.with_name(page.stem + ".probe.html")
    probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    result = _run(browser, [f"--window-size={width},{height}", "--dump-dom", probed.resolve().as_uri()])
    found = re.search(r'<pre id="wirecheck-probe">(.*?)</pre>', result.stdout, re.S)
    assert found, f"the probe did not run (Chromium exit {result.returncode}):\n{result.stderr[-3000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
