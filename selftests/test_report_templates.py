"""The report's markup is its templates (src/wirecheck/report/templates/): the sections say what a page holds as
plain data, the templates how it looks.

- No module of wirecheck.report writes a tag: a string literal there with markup in it fails here.
- A change to how the page looks is a change to a template: in a scratch copy of the package, the template of a
  heading is changed and the page drawn from the same record shows it, with nothing else edited.
- Whatever a record holds is escaped by the templates (a message quoting `<script>` stays text).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from e2e import PROJECT
from wirecheck.report.html import Section, heading, para, table

REPORT = PROJECT / "src" / "wirecheck" / "report"
SIM = PROJECT / "selftests" / "data" / "sim-h200-sxm-2.jsonl"
TAG = re.compile(r"</?[a-z][a-z0-9]*[\s>/]")


def markup_in(source: str, filename: str = "<source>") -> list[str]:
    """(line: text) of each string literal (f-strings' text too) of `source` that holds an HTML tag."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TAG.search(node.value):
            found.append(f"{filename}:{node.lineno}: {node.value[:80]!r}")
    return found


def test_no_report_module_writes_markup():
    found = [line for path in sorted(REPORT.glob("*.py")) for line in markup_in(path.read_text(), path.name)]
    assert not found, "markup in the report's code (it belongs in report/templates/):\n" + "\n".join(found)
    assert markup_in('x = f"<h3>{title}</h3>"\ny = "a < b and c > d"\n') == ["<source>:1: '<h3>'", "<source>:1: '</h3>'"]


def test_what_a_record_holds_is_escaped():
    s = Section("x", "a <title>").add(heading("<script>alert(1)</script>"), para("1 < 2 & 3"),
                                       table(["<th>"], [["<td>"]]))
    html = str(s.html())
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "1 &lt; 2 &amp; 3" in html and "&lt;th&gt;" in html and "&lt;td&gt;" in html and "a &lt;title&gt;" in html


def test_a_change_to_the_page_is_a_change_to_a_template(tmp_path):
    scratch = tmp_path / "src"
    shutil.copytree(PROJECT / "src", scratch, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    blocks = scratch / "wirecheck" / "report" / "templates" / "blocks.html.j2"
    text = blocks.read_text()
    old = '''{%- elif b.kind == "heading" -%}<h3>{{ parts(b.parts) }}</h3>'''
    assert text.count(old) == 1, "the heading's template moved: update this test"
    blocks.write_text(text.replace(old, '''{%- elif b.kind == "heading" -%}<h4 class="sub">{{ parts(b.parts) }}</h4>'''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(scratch), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "page.html"
    done = subprocess.run([sys.executable, "-m", "wirecheck.cli.main", "report", str(SIM), "-o", str(out)], env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode in (0, 10), done.stdout + done.stderr
    page = out.read_text()
    assert '<h4 class="sub">all_reduce</h4>' in page and "<h3>" not in page
