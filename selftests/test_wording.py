"""A check's words are in one place, its `Words` (wirecheck.checks.words): the check gives facts, never prose.

- Rewording a check is one edit: in a scratch copy of the package, busbw's declared words are changed (one
  replacement in one file) and every face shows the new words and none of the old: the verdict's line, the
  failure block, `wirecheck judge`, the report's failure table, the catalog of failure codes.
- No shipped check writes prose where a verdict's words go (`what`, `hint`, a problem list's `intro`, a skip's
  reason, an expected value's failure): each is a sentence of the check's Words, filled with facts (read from
  the source: a string literal or f-string there fails here).
- The words fill every sentence with facts the check gives, and say which fact is missing.
"""

from __future__ import annotations

import ast
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import PROJECT
from wirecheck import checks
from wirecheck.checks.words import WORDS, Words

CHECKS_DIR = PROJECT / "src" / "wirecheck" / "checks"

# busbw's words, as its declaration writes them, and the new ones of the scratch copy
OLD_WHAT, NEW_WHAT = 'what="{op} busbw at {size_bytes:size}"', 'what="bus bandwidth of {op} at {size_bytes:size}"'
OLD_MEANS = "the GPUs of this placement move data slower than their fabric allows"
NEW_MEANS = "this placement's wires carry less than they are built for"

FACES = r'''
import json, sys
from pathlib import Path
from wirecheck import checks
from wirecheck.checks import catalog, failure_block
from wirecheck.cli.judge import main as judge
from wirecheck.records.file import RecordFile
from wirecheck.report.model import view_of
from wirecheck.report.sections import verdict_section
from wirecheck.thresholds.file import load_thresholds

out = Path(sys.argv[1])
th = load_thresholds(Path(sys.argv[2]))
v = checks.collectives.busbw(th, op="all_reduce", placement="nvswitch-2gpu-0.1", placement_class="nvswitch", n_gpus=2,
                             simulated=True, busbw_bytes_per_s=1e6, size_bytes=2**22, link_ceiling_bytes_per_s=None)
f = RecordFile(out / "run.jsonl")
f.header({"simulated": True, "gpus": [], "placements": []})
f.verdict(v, "tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]")
f.end({"status": "complete"})
f.close()
import contextlib, io
said = io.StringIO()
with contextlib.redirect_stdout(said):
    judge([str(out / "run.jsonl"), "--thresholds", sys.argv[2]])
json.dump({"message": v.message, "block": "\n".join(failure_block.render(v)), "judge": said.getvalue(),
           "report": verdict_section(view_of(out / "run.jsonl")).html(),
           "catalog": next(r for r in catalog.rows() if r["check"] == "busbw")}, open(out / "faces.json", "w"))
'''


def _faces(src: Path, out: Path) -> dict:
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", FACES, str(out), str(PROJECT / "thresholds.yaml")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "faces.json").read_text())


def test_rewording_a_check_is_one_edit_in_one_place(tmp_path):
    scratch = tmp_path / "src"
    shutil.copytree(PROJECT / "src", scratch, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    before = _faces(scratch, tmp_path / "before")
    module = scratch / "wirecheck" / "checks" / "collectives.py"
    text = module.read_text()
    assert text.count(OLD_WHAT) == 1 and text.count(f'means="{OLD_MEANS}"') == 1, "busbw's words moved: update this test"
    module.write_text(text.replace(OLD_WHAT, NEW_WHAT).replace(f'means="{OLD_MEANS}"', f'means="{NEW_MEANS}"'))
    changed = [p.relative_to(scratch) for p in scratch.rglob("*.py")
               if p.read_bytes() != (PROJECT / "src" / p.relative_to(scratch)).read_bytes()]
    assert changed == [Path("wirecheck/checks/collectives.py")]  # one place
    after = _faces(scratch, tmp_path / "after")
    for face in ("message", "block", "judge", "report"):
        assert "bus bandwidth of all_reduce at 4 MiB" in after[face], (face, after[face])
        assert "all_reduce busbw at 4 MiB" in before[face] and "all_reduce busbw at 4 MiB" not in after[face], face
    for face in ("block", "report"):
        shown = html.unescape(after[face])
        assert NEW_MEANS in shown and OLD_MEANS not in shown, face
    assert after["catalog"]["means"] == NEW_MEANS and before["catalog"]["means"] == OLD_MEANS


# Where a verdict's words go: the `what` of every helper and of Verdict, a problem list's intro, a hint, a
# skip's reason, an expected value's failure text. A check hands these over from its Words, never as text.
_WORD_ARGS = {"Verdict": {1: "what"}, "skip": {0: "what", 2: "reason"}, "not_measured": {0: "what"},
              "within": {0: "what"}, "at_least": {0: "what"}, "at_most": {0: "what"},
              "expect": {0: "what", 5: "failure"}, "no_problems": {0: "what"}}
_WORD_KEYWORDS = {"what", "hint", "intro", "failure", "reason", "note"}


def _prose(node: ast.expr) -> bool:
    """A string the code writes itself: a literal with words in it, an f-string, or text joined to text."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and any(c.isalpha() for c in node.value)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and any(c.isalpha() for c in str(v.value)) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _prose(node.left) or _prose(node.right)
    if isinstance(node, ast.IfExp):
        return _prose(node.body) or _prose(node.orelse)
    return False


def prose_in_words(source: str, filename: str = "<source>") -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name not in _WORD_ARGS:
            continue
        args = [(f"argument {i + 1}", a) for i, a in enumerate(node.args) if i in _WORD_ARGS[name]]
        args += [(k.arg, k.value) for k in node.keywords if k.arg in _WORD_KEYWORDS]
        found += [f"{filename}:{node.lineno}: {name}(... {what}=prose)" for what, a in args if _prose(a)]
    return found


def test_no_check_writes_its_words_in_code():
    found = []
    for path in sorted(CHECKS_DIR.glob("*.py")):
        if path.name in ("words.py", "__init__.py"):
            continue
        found += prose_in_words(path.read_text(), str(path.relative_to(PROJECT)))
    assert not found, "prose where a check's Words belong:\n" + "\n".join(found)


def test_the_scan_sees_prose_in_each_place():
    planted = '''
def c(th, *, gpu):
    skip("GPU count", None, "no profile")
    at_least(WORDS.judged(), "GPU0", 1, 2, "x", None, None, hint=f"slow on GPU{gpu}")
    no_problems(W.judged(), None, [], intro="links " + "down")
    Verdict("", W.judged(), None, "fail", note=W.said("x"), hint=W.said("y"))
'''
    found = prose_in_words(planted)
    assert len(found) == 4 and all(":3:" in f or ":4:" in f or ":5:" in f for f in found), found


def test_every_shipped_check_declares_its_words():
    assert not sorted(name for name, spec in checks.SPECS.items() if spec.words is None)
    assert all(WORDS[name] == spec.words for name, spec in checks.SPECS.items())


def test_a_sentence_names_the_fact_it_lacks():
    words = Words("{op} busbw at {size_bytes:size}", "m", "t", say={"slow": "{mine:bandwidth} on GPU{a}"})
    assert words.judged(op="all_reduce", size_bytes=2**30) == "all_reduce busbw at 1 GiB"
    assert words.said("slow", mine=12.5e9, a=3) == "12.5 GB/s on GPU3"
    with pytest.raises(KeyError, match="names the fact 'size_bytes'; given: op"):
        words.judged(op="all_reduce")
    with pytest.raises(KeyError, match="no sentence 'fast'"):
        words.said("fast")
