"""Inputs from other nodes are data: records read by `wirecheck judge`, `wirecheck report`
and `wirecheck fleet report`, recorded topologies and thresholds files, carrying markup in every
string field, numbers no measurement has, deep nesting and YAML tags and alias bombs. Each ends in
a page with the markup escaped, or a clear message naming the file, never a traceback and never
anything executed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e import PROJECT, pythonpath
from test_fleet_report import JITTER, write_node

from wirecheck.cli.fleet.report import main as fleet_report
from wirecheck.cli.judge import main as judge
from wirecheck.cli.report import main as report
from wirecheck.core import exit_codes
from wirecheck.report.html import CSP
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.node.topo_text import load_recorded

SIM = PROJECT / "selftests" / "data" / "sim-h200-sxm-2.jsonl"
MARKUP = '</script><script>alert(1)</script>"><img src=x onerror=alert(2)>'
# Fields whose value picks code (a check, an op, a strategy...): a changed one is a record wirecheck
# cannot judge, which test_a_field_that_picks_code_is_a_clear_error covers; every other string is tainted.
CHOOSERS = {"type", "check", "outcome", "kind", "status", "class", "op", "strategy", "placement_class", "backend",
            "path", "fabric", "started", "time", "finished", "since", "direction", "precision"}
STRUCTURAL_NUMBERS = {"schema", "index", "n_gpus", "world_size"}


def _map(obj, fn, key=None):
    if isinstance(obj, dict):
        return {k: _map(v, fn, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map(v, fn, key) for v in obj]
    return fn(key, obj)


def _lines(path=SIM) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _write(path: Path, lines: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + tail)
    return path


def tainted(path: Path, source=SIM) -> Path:
    """The simulated record with MARKUP after every string that picks no code: host, placement ids,
    tests, messages, units, sources, versions, GPU names, thresholds path."""
    return _write(path, [_map(line, lambda k, v: v + MARKUP if isinstance(v, str) and k not in CHOOSERS else v)
                         for line in _lines(source)])


def huge(path: Path, everywhere: bool) -> Path:
    """1e308 for every measured figure (or, `everywhere`, for every number that is not a count)."""
    def big(key, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or key in STRUCTURAL_NUMBERS:
            return value
        return 1e308 if everywhere or key in ("value", "measured", "busbw", "algbw", "time_s") else value
    return _write(path, [_map(line, big) for line in _lines()])


def with_line(path: Path, raw: str) -> tuple[Path, int]:
    """The simulated record with `raw` as its second line (what a node could have written there)."""
    text = SIM.read_text().splitlines()
    path.write_text("\n".join([text[0], raw, *text[1:]]) + "\n")
    return path, 2


DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = json.dumps({"type": "measurement", "kind": "collective", "placement": "x", "what": "x",
                       "value": 10**400, "unit": "GB/s", "details": {}})


def unescaped(page: str) -> list[str]:
    """Every tag in the page that a record's markup could have made: <script ...> or <img src=x ...>."""
    return re.findall(r"<script\b[^>]*>|<img\s+src=x[^>]*>", page, re.I)


# ---- wirecheck judge --------------------------------------------------------------------------------


def test_judge_takes_markup_as_text(tmp_path, capsys):
    record = tainted(tmp_path / "node.jsonl")
    assert judge([str(record)]) == 10  # a simulated run, judged as before
    out = capsys.readouterr().out
    assert MARKUP in out and "121 verdicts" in out


@pytest.mark.parametrize("case", ["1e308 everywhere", "10**400", "100000-deep array", "not an object", "not UTF-8"])
def test_judge_names_the_file_of_a_record_it_cannot_take(tmp_path, capsys, case):
    path, where = tmp_path / "node.jsonl", str(tmp_path / "node.jsonl")
    if case == "1e308 everywhere":
        huge(path, everywhere=True)
        expected = f"{where}: the verdict "
    elif case == "10**400":
        with_line(path, HUGE_INT)
        expected = f"{where}:2: a number of 401 digits"
    elif case == "100000-deep array":
        with_line(path, DEEP)
        expected = f"{where}:2: JSON nested more than 64 levels deep"
    elif case == "not an object":
        with_line(path, "[1, 2, 3]")
        expected = f"{where}:2: a JSON list, where each line is an object"
    else:
        # a bad byte loses its own line, not the record: the line is named and skipped, every other
        # verdict judged, and the exit says the record is damaged
        lines = SIM.read_bytes().count(b"\n")
        path.write_bytes(SIM.read_bytes() + b"\xff\xfe\n")
        expected = f"{where}:{lines + 1}: not UTF-8 text"
    t0 = time.monotonic()
    assert judge([str(path)]) == (exit_codes.RECORD_DAMAGED if case == "not UTF-8" else exit_codes.BAD_INPUT)
    said = capsys.readouterr()
    err = said.err if case != "not UTF-8" else said.out + said.err  # a damaged record is judged: said with its verdicts
    assert expected in err and "Traceback" not in err, err
    assert time.monotonic() - t0 < 30


def test_a_field_that_picks_code_is_a_clear_error(tmp_path, capsys):
    """A direction or precision the checks do not know (a record changed by hand) names the verdict."""
    lines = _lines()
    for line in lines:
        if line.get("check") == "host_copy":
            line["inputs"]["direction"] = MARKUP
    path = _write(tmp_path / "node.jsonl", lines)
    assert judge([str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: the verdict host_copy (" in err and "cannot be judged again" in err, err


def test_a_fifo_among_the_records_is_refused_not_read(tmp_path):
    fifo = tmp_path / "node.jsonl"
    subprocess.run(["mkfifo", str(fifo)], check=True)
    # In a process of its own: reading a FIFO no one writes would hang this one.
    done = subprocess.run([sys.executable, "-m", "wirecheck.cli.main", "judge", str(fifo)], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and f"{fifo}: not a regular file" in done.stderr, done.stderr


# ---- wirecheck report (the node's page) ---------------------------------------------------------------


def _csp_meta(page: str) -> str:
    found = re.findall(r"<meta http-equiv=\"Content-Security-Policy\" content=\"[^\"]*\">", page)
    assert len(found) == 1, found
    return found[0]


# Errors, so that a warning matplotlib prints about the long labels shows here (it did: the layout's).
@pytest.mark.filterwarnings("error")
def test_the_node_report_escapes_markup_from_every_field(tmp_path, capsys):
    record = tainted(tmp_path / "node.jsonl")
    page_path = tmp_path / "node.html"
    assert report([str(record), "-o", str(page_path)]) == 0
    page = page_path.read_text()
    assert unescaped(page) == [], unescaped(page)[:3]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the markup is there, as text
    assert _csp_meta(page) == f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")  # matplotlib, at 1e308
def test_the_node_report_draws_huge_figures_or_names_the_file(tmp_path, capsys):
    figures = huge(tmp_path / "figures.jsonl", everywhere=False)
    assert report([str(figures), "-o", str(tmp_path / "figures.html")]) == 0  # drawn, off the scale
    assert (tmp_path / "figures.html").read_text().startswith("<!DOCTYPE html>")
    capsys.readouterr()
    for name, make, expected in [
            ("all.jsonl", lambda p: huge(p, everywhere=True), ": a line is not as wirecheck writes it"),
            ("int.jsonl", lambda p: with_line(p, HUGE_INT), ":2: a number of 401 digits"),
            ("deep.jsonl", lambda p: with_line(p, DEEP), ":2: JSON nested more than 64 levels deep")]:
        make(tmp_path / name)
        assert report([str(tmp_path / name), "-o", str(tmp_path / "x.html")]) == 2, name
        err = capsys.readouterr().err
        assert f"{tmp_path / name}{expected}" in err and "Traceback" not in err, err
    # In the history, such a file is listed as skipped, not fatal.
    history = tmp_path / "history"
    history.mkdir()
    with_line(history / "deep.jsonl", DEEP)
    assert report([str(figures), "-o", str(tmp_path / "h.html"), "--history", str(history)]) == 0


# ---- wirecheck fleet report (the fleet page) -------------------------------------------------------


def _fleet(tmp_path) -> Path:
    """Five nodes; two named after markup and mathtext ($...$), both 50 % below their peers (so named on
    the page and drawn in its figures), one with a figure of 1e308, plus a node whose every string
    field carries markup."""
    results = tmp_path / "results"
    names = ["n1", "n2", "n3", "$\\frac{<script>alert(1)<$", "n\"><img src=x onerror=alert(2)>"]
    for k, name in enumerate(names):
        write_node(results / f"{name}.jsonl", {"all_reduce": 0.5} if k >= 3 else None, jitter=JITTER[k])
    n2 = results / "n2.jsonl"
    _write(n2, [_map(line, lambda k, v: 1e308 if k in ("value", "measured", "busbw_bytes_per_s") else v)
                for line in _lines(n2)])
    write_node(tmp_path / "plain.jsonl")
    tainted(results / f"n4{MARKUP.replace('/', '|')}.jsonl", source=tmp_path / "plain.jsonl")
    return results


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")  # matplotlib, at 1e308
def test_the_fleet_page_escapes_markup_and_has_the_node_reports_policy(tmp_path, capsys):
    results = _fleet(tmp_path)
    page_path, json_path = tmp_path / "fleet.html", tmp_path / "fleet.json"
    code = fleet_report([str(results), "--html", str(page_path), "--json", str(json_path)])
    out = capsys.readouterr()
    assert code == 1 and "Traceback" not in out.err, out.err  # two nodes below their peers
    page = page_path.read_text()
    assert unescaped(page) == [], unescaped(page)[:3]
    assert "&lt;script&gt;alert(1)&lt;" in page and "n&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert page.count("data:image/png;base64,") >= 2  # the figures were drawn, names as text not mathtext
    node_page = tmp_path / "node.html"
    assert report([str(SIM), "-o", str(node_page)]) == 0
    assert _csp_meta(page) == _csp_meta(node_page.read_text())  # the same policy, from the same constant
    fleet = json.loads(json_path.read_text())
    assert {n["node"] for n in fleet["nodes"]} >= {"$\\frac{<script>alert(1)<$", f"n4{MARKUP.replace('/', '|')}"}


def test_the_fleet_report_names_a_record_it_cannot_take(tmp_path, capsys):
    results = tmp_path / "results"
    for k in range(3):
        write_node(results / f"n{k}.jsonl", jitter=JITTER[k])
    with_line(results / "deep.jsonl", DEEP)
    code = fleet_report([str(results)])
    out = capsys.readouterr().out
    assert code == 1 and "deep: [node_record]" in out and "nested more than 64 levels deep" in out, out
    (results / "deep.jsonl").unlink()
    lines = _lines(results / "n1.jsonl")
    for line in lines:
        if line["type"] == "measurement":
            line["value"] = "fast"  # a string where a figure goes
    _write(results / "n1.jsonl", lines)
    assert fleet_report([str(results)]) == 2
    err = capsys.readouterr().err
    assert f"{results / 'n1.jsonl'}: " in err and "Traceback" not in err, err


# ---- recorded topologies -----------------------------------------------------------------------------

TOPO = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" \
       "GPU0\t X \t{cell}\tSYS\t{aff}\t0\t\tN/A\n" \
       "GPU1\t{cell}\t X \tSYS\t{aff}\t0\t\tN/A\n" \
       "NIC0\tSYS\tSYS\t X \n\nNIC Legend:\n\n  NIC0: {nic}\n"


def _topo_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wirecheck.cli.main", "topo", *args], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"})


def test_a_topology_with_markup_is_data(tmp_path):
    text = tmp_path / "node.txt"
    nic = "mlx5_0</script><script>alert(1)</script>"  # a legend entry is one word
    text.write_text(TOPO.format(cell="NV18", aff=f"0-31{MARKUP}", nic=nic))
    topo = load_recorded(str(text), tmp_path)
    assert topo.nics == (nic,) and topo.gpus[0].cpu_affinity == f"0-31{MARKUP}"
    snapshot = tmp_path / "snap.json"
    topo.save(snapshot)
    data = json.loads(snapshot.read_text())
    data["gpus"][0]["name"], data["gpus"][0]["memory_bytes"] = MARKUP, 10**30  # whole bytes: a float is refused
    snapshot.write_text(json.dumps(data))
    done = _topo_cli("--simulate", str(snapshot), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gpus"][0]["name"] == MARKUP


@pytest.mark.parametrize("case", ["NV with 5000 digits", "100000-deep snapshot", "10**400 in a snapshot",
                                  "a list for a GPU"])
def test_a_topology_it_cannot_take_names_the_file(tmp_path, case):
    if case.startswith("NV"):
        path = tmp_path / "node.txt"
        path.write_text(TOPO.format(cell="NV" + "9" * 5000, aff="0-31", nic="mlx5_0"))
        expected = f"{path}, line 2: unknown cell code"
    else:
        path = tmp_path / "snap.json"
        load_recorded("h200-sxm-2", PROJECT / "fixtures" / "pytest_wirecheck" / "topologies").save(path)
        data = json.loads(path.read_text())
        if case.startswith("100000"):
            path.write_text(DEEP)
            expected = f"{path}: JSON nested more than 64 levels deep"
        elif case.startswith("10**400"):
            data["gpus"][0]["memory_bytes"] = 10**400
            path.write_text(json.dumps(data))
            expected = f"{path}: a number of 401 digits"
        else:
            data["gpus"][0] = ["not", "a", "gpu"]
            path.write_text(json.dumps(data))
            expected = f"{path}: gpus[0]: ['not', 'a', 'gpu'] is not an object"
    done = _topo_cli("--simulate", str(path))
    assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr, done.stderr


# ---- thresholds files --------------------------------------------------------------------------------


def test_a_yaml_tag_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "thresholds.yaml"
    path.write_text(f'profiles: !!python/object/apply:os.system ["touch {marker}"]\n'
                    + (PROJECT / "thresholds.yaml").read_text().split("\ncollectives:", 1)[1].join(["collectives:", ""]))
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    assert f"{path}: a YAML tag at line 1" in str(info.value) and "python/object/apply:os.system" in str(info.value)
    assert "remove the tag" in str(info.value)
    assert not marker.exists()


def test_a_billion_laughs_fails_fast(tmp_path):
    lines = ['lol0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "thresholds.yaml"
    # Where the shipped file's own checks would walk it (a profile), not an unknown key refused first.
    path.write_text("\n".join(lines) + "\n" + (PROJECT / "thresholds.yaml").read_text().replace(
        "profiles:\n", "profiles:\n  bomb: *a9\n", 1))
    t0 = time.monotonic()
    with pytest.raises(ThresholdsError, match=r"aliases \(\*name\) stand for more than 100000 values") as info:
        load_thresholds(path)
    assert time.monotonic() - t0 < 30 and str(info.value).startswith(f"{path}: line ")  # expanded: never ends


@pytest.mark.parametrize("depth, expected", [(990, "nested more than 32 levels deep"),
                                             (100_000, "exceeded maximum nesting depth")])
def test_deep_nesting_in_thresholds_is_a_clear_error(tmp_path, depth, expected):
    path = tmp_path / "thresholds.yaml"
    path.write_text("profiles: " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(ThresholdsError, match=expected) as info:
        load_thresholds(path)
    assert str(path) in str(info.value)
    block = tmp_path / "block.yaml"
    block.write_text("profiles:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(990)))
    with pytest.raises(ThresholdsError, match="nested more than 32 levels deep"):
        load_thresholds(block)
