"""A site's own package of checks, installed beside wirecheck with an entry point of the group
`wirecheck.checks` (as wirecheck's own checks are: pyproject.toml's `builtin`): its check's Floor is a key
the thresholds loader reads, refused while the entry point is not there; the figure its verdicts record
is calibrated (`wirecheck calibrate`) and held to its history with no edit to wirecheck.records.figures.
Without any entry point (wirecheck only on PYTHONPATH, never installed) or with one whose package fails
to import, the loader says so and how to fix it, never reads against an empty registry.

The site package is a folder on sys.path with a metadata folder (`*.dist-info/entry_points.txt`) beside
it: what `pip install` of such a package leaves, found by importlib.metadata as any installed one is.
"""

from __future__ import annotations

import copy
import json
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml

from calibration_records import CLEAN, REFERENCE, edited
from wirecheck import checks
from wirecheck.checks import rejudge
from wirecheck.checks.calibration import calibrate
from wirecheck.checks.history import figures_of, history, history_inputs, past_figures
from wirecheck.cli.main import main
from wirecheck.core.paths import suite_paths
from wirecheck.records.file import read_run
from wirecheck.thresholds import declared
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

CHECK, FIGURE, PACKAGE = "selftest_site_link_share", "selftest_link_share", "selftest_site_checks"
SERIAL = "1652823000077"
# Six clean runs of a 1x H200 node whose every figure calibrates within the rule (the limits probe's)
STEADY = [REFERENCE / f"wirecheck-2026-12-01-limits/clean-{i}.jsonl" for i in range(1, 7)]
# A check of a site's own: a GPU's loopback bandwidth as a share of its HBM copy figure, a "%" floor per
# GPU model (a kind, percent, that no shipped GPU figure has: its unit must come from the declaration).
SITE_PACKAGE = f'''"""A site's checks: registered on import, found through the wirecheck.checks entry point."""
from wirecheck.checks import SECTION_GPU, check
from wirecheck.checks.words import Words
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip
from wirecheck.thresholds.declared import Floor

WORDS = Words("loopback per HBM copy", "the GPU's loopback is slow for its memory", "reseat the GPU",
              say={{"no_floor": "no {FIGURE} floor for {{gpu_model!r}}"}})


@check("{CHECK}", section=SECTION_GPU, figure=lambda inputs: "{FIGURE}",
       limits=(Floor("gpu_health.floors.<model>.{FIGURE}", unit="%", label="loopback per HBM copy (site)"),),
       words=WORDS)
def link_share(thresholds, *, gpu, gpu_model, share, simulated=False):
    what, where = WORDS.judged(), f"GPU{{gpu}}"
    floor = thresholds.gpu_health.floor("{FIGURE}", gpu_model, simulated)
    if floor is None:
        return skip(what, where, WORDS.said("no_floor", gpu_model=gpu_model), measured=share * 100, unit="%")
    return Verdict("", what, where, PASS if share >= floor.min else FAIL, measured=share * 100, unit="%",
                   limit={{"min": floor.min * 100}}, bound="floor", source=floor.source, yaml_path=floor.yaml_path)
'''


def _install(site: Path, package: str, source: str, monkeypatch) -> None:
    """`package` (its __init__ `source`) and its entry point of the group, as an install leaves them."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(source)
    meta = site / f"{package}-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text(f"[{declared.GROUP}]\nsite = {package}\n")
    monkeypatch.syspath_prepend(str(site))


@pytest.fixture
def rediscover(monkeypatch):
    """The entry points read again at the next declarations() (restored after: the shipped set stays loaded)."""
    monkeypatch.setattr(declared, "_LOADED", None)
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in (PACKAGE, "selftest_broken_checks")]:
        del sys.modules[name]


@pytest.fixture
def site_checks(tmp_path, monkeypatch, rediscover):
    """A factory: the site package installed (and its check forgotten when the test ends)."""
    def install():
        _install(tmp_path / "site", PACKAGE, SITE_PACKAGE, monkeypatch)
        monkeypatch.setattr(declared, "_LOADED", None)

    yield install
    checks.forget(CHECK)


def _with_floor(tmp_path: Path, floor: str = "90 %") -> Path:
    data = yaml.safe_load(suite_paths().thresholds.read_text())
    data = copy.deepcopy(data)
    data["gpu_health"]["floors"]["NVIDIA H200"][FIGURE] = {"min": floor, "source": "a site's floor (self-test)"}
    path = tmp_path / "site-thresholds.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def _with_site_verdict(src: Path, dst: Path, share: float, **edits) -> Path:
    """`src` edited (calibration_records.edited) and given one verdict line of the site check, as the
    suite's reporter writes it: inputs, measured in its unit, skipped (no floor in the runs' file)."""
    edited(src, dst, serial=SERIAL, **edits)
    verdict = {"type": "verdict", "test": "tests/test_site.py::test_link_share[GPU0]", "time": "2026-11-20T02:00:00Z",
               "check": CHECK, "what": "loopback per HBM copy", "where": "GPU0", "outcome": "skip",
               "measured": share * 100, "unit": "%", "message": "no floor",
               "inputs": {"gpu": 0, "gpu_model": "NVIDIA H200", "share": share, "simulated": False}}
    lines = dst.read_text().splitlines()
    end = next(i for i, line in enumerate(lines) if json.loads(line).get("type") == "end")
    dst.write_text("\n".join(lines[:end] + [json.dumps(verdict)] + lines[end:]) + "\n")
    return dst


def test_wirecheck_own_checks_are_an_installed_entry_point():
    """What pyproject.toml declares is installed (`pip install -e .`, install.sh), and it is what loaded them."""
    found = {(ep.name, ep.value) for ep in entry_points(group=declared.GROUP)}
    assert ("builtin", "wirecheck.checks") in found, found
    declared.declarations()
    assert "builtin = wirecheck.checks" in declared._LOADED, declared._LOADED


def test_a_site_floor_is_read_only_with_its_entry_point(tmp_path, site_checks):
    path = _with_floor(tmp_path)
    with pytest.raises(ThresholdsError, match=f"unknown GPU figure '{FIGURE}'"):
        load_thresholds(path)  # no package declares it yet: a typo to the loader
    site_checks()
    floor = load_thresholds(path).gpu_health.floor(FIGURE, "NVIDIA H200", simulated=False)
    assert (floor.min, floor.kind, floor.source) == (0.9, "percent", "a site's floor (self-test)")
    assert declared.floor_checks()[FIGURE] == CHECK and "site = selftest_site_checks" in declared._LOADED
    assert declared._LOADED[0] == "builtin = wirecheck.checks"  # wirecheck's own first: a clash names the site's


def test_a_site_gpu_figure_reaches_calibrate_and_history_with_no_edit_to_records(tmp_path, site_checks, capsys):
    runs = [_with_site_verdict(p, tmp_path / "runs" / f"night-{i}.jsonl", 0.930 + 0.001 * i,
                               started=f"2026-11-{10 + i:02d}T02:00:00+00:00", level="acceptance")
            for i, p in enumerate(STEADY)]
    assert FIGURE not in {f.figure for f in figures_of(read_run(runs[0]))}  # undeclared: not a figure of the run
    site_checks()
    fig = next(f for f in figures_of(read_run(runs[2])) if f.figure == FIGURE)
    assert (fig.key, fig.kind, fig.unit, fig.value) == (("gpu_health", "floors", "NVIDIA H200", FIGURE), "percent",
                                                        "%", pytest.approx(0.932))
    assert (fig.subject, fig.shown()) == (f"serial {SERIAL}", "93.2 %")

    # calibrate: its floor made from the runs, written in its own unit, and the file loads
    made = {c.figure: c for c in calibrate([read_run(p) for p in runs], load_thresholds(suite_paths().thresholds).calibration).entries}
    assert made[FIGURE].unit == "%" and made[FIGURE].floor < 0.930
    out = tmp_path / "site.yaml"
    assert main(["calibrate", *map(str, runs), "-o", str(out)]) == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    assert f"gpu_health.floors.NVIDIA H200.{FIGURE}: floor 9" in said and " % = lowest 9" in said, said
    floor = load_thresholds(out).gpu_health.floor(FIGURE, "NVIDIA H200", simulated=False)
    assert floor.rule == "calibrated" and 0.85 < floor.min < 0.930, floor

    # history: a drop to 80 % fails against its own nights, said in its unit; judged again from its inputs
    rule = load_thresholds(suite_paths().thresholds).history
    tonight = _with_site_verdict(CLEAN[6], tmp_path / "tonight.jsonl", 0.80, started="2026-11-20T02:00:00+00:00",
                                 level="acceptance")
    past, _ = past_figures(tmp_path / "runs", exclude=tonight)
    fig = next(f for f in figures_of(read_run(tonight)) if f.figure == FIGURE)
    thresholds = load_thresholds(suite_paths().thresholds)
    v = history(thresholds, **history_inputs(fig, past, rule.runs))
    assert v.outcome == "fail" and "measured 80.0 % < floor 9" in v.message and "93.0 % (2026-11-10)" in v.message, v.message
    assert v.unit == "%" and v.measured == pytest.approx(80.0)
    again = rejudge(v, thresholds)
    assert again.outcome == "fail" and again.message == v.message
    fine = next(f for f in figures_of(read_run(runs[5])) if f.figure == FIGURE)
    assert history(thresholds, **history_inputs(fine, [p for p in past if p.record != str(runs[5])], rule.runs)).ok


def test_no_entry_point_says_to_install(monkeypatch, rediscover, capsys):
    monkeypatch.setattr(declared, "entry_points", lambda group: [])  # wirecheck on PYTHONPATH, never installed
    for _ in range(2):  # said again on the next read, not an empty registry from then on
        with pytest.raises(declared.DeclarationsError) as exc:
            load_thresholds(suite_paths().thresholds)
        assert "no package of checks is registered under the entry-point group 'wirecheck.checks'" in str(exc.value)
        assert "`bash install.sh` (or `pip install -e .`)" in str(exc.value)
    assert main(["limits"]) != 0
    err = capsys.readouterr().err
    assert "not installed in this Python's environment" in err and "Traceback" not in err, err


def test_a_package_that_fails_to_load_is_named(tmp_path, monkeypatch, rediscover):
    _install(tmp_path / "site", "selftest_broken_checks",
             'raise RuntimeError("the site inventory service is unreachable")\n', monkeypatch)
    for _ in range(2):
        with pytest.raises(ThresholdsError) as exc:
            declared.floors()
        text = str(exc.value)
        assert "entry point site = selftest_broken_checks of the group 'wirecheck.checks'" in text, text
        assert "(from the distribution selftest-broken-checks)" in text, text
        assert "RuntimeError: the site inventory service is unreachable" in text and "uninstall it" in text, text
