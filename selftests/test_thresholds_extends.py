"""`extends:` in a thresholds file: the base's document with the file's own keys laid over it (mappings
merged key by key, leaves replaced), chains, the shipped file by name, errors naming the file and line
that hold the mistake, and a record that keeps every layer so judge reads it after the base is gone.
Entries may say `rule: calibrated` with their provenance."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import shutil

import pytest

from wirecheck.cli.main import main
from wirecheck.core.paths import suite_paths
from wirecheck.records.run import recorded_bases, recorded_thresholds, thresholds_fields
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

SHIPPED = suite_paths().thresholds
CALIBRATED = ('{min: "4100 GB/s", rule: calibrated, source: "calibrated: test", '
              'provenance: {nodes: [a], gpus: [serial 1], dates: ["2026-12-01"], n: 3, spread: "0.1 %"}}')


def _write(path, text):
    path.write_text(text)
    return path


def test_extends_the_shipped_file_by_name_and_replaces_only_its_own_keys(tmp_path):
    site = _write(tmp_path / "site.yaml", f'extends: wirecheck\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                          f'      hbm_copy: {CALIBRATED}\n')
    t, base = load_thresholds(site), load_thresholds(SHIPPED)
    floor = t.gpu_health.floor("hbm_copy", "NVIDIA H200", False)
    assert (floor.min, floor.rule, floor.yaml_path) == (4100e9, "calibrated", "site.yaml: gpu_health.floors.NVIDIA H200.hbm_copy")
    assert t.gpu_health.floor("hbm_read", "NVIDIA H200", False) == base.gpu_health.floor("hbm_read", "NVIDIA H200", False)
    assert t.gpu_health.floor("hbm_copy", "NVIDIA H100 80GB HBM3", False) is not None  # a sibling model kept
    assert t.gpu_health.settings(False) == base.gpu_health.settings(False)
    assert t.path == site and base.gpu_health.floor("hbm_copy", "NVIDIA H200", False).rule == "measured"


def test_a_relative_chain_and_a_list_replaced_whole(tmp_path):
    shutil.copy(SHIPPED, tmp_path / "base.yaml")
    (tmp_path / "site").mkdir()
    _write(tmp_path / "mid.yaml", "extends: base.yaml\nhistory:\n  runs: 20\n")
    site = _write(tmp_path / "site" / "site.yaml", "extends: ../mid.yaml\nhistory:\n  figures: [hbm_copy]\n")
    h = load_thresholds(site).history
    assert (h.runs, h.figures, h.min_runs) == (20, ("hbm_copy",), 3)


@pytest.mark.parametrize("site_text, expected", [
    ("extends: wirecheck\nhistory:\n  runs: two\n", "site.yaml: history.runs: expected a count"),
    ("extends: wirecheck\ngpu_health:\n  floors:\n    \"NVIDIA H200\":\n      hbm_copy: {min: \"4100 GB/s\", "
     "source: x, rule: calibrated}\n", "site.yaml: gpu_health.floors.NVIDIA H200.hbm_copy: rule: calibrated without "
     "provenance"),
    ("extends: wirecheck\ngpu_health:\n  floors:\n    \"NVIDIA H200\":\n      hbm_copy: {min: \"4100 GB/s\", "
     "source: x, rule: guessed}\n", "hbm_copy.rule: the string \"guessed\" is not allowed"),
    # a rule its own source contradicts: a guess said measured, or a measurement said guess
    ("extends: wirecheck\ngpu_health:\n  floors:\n    \"NVIDIA H200\":\n      hbm_copy: {min: \"4100 GB/s\", "
     "source: \"guess: ours\", rule: measured}\n", "hbm_copy.rule: rule: measured, but its source is a guess"),
    ("extends: wirecheck\ngpu_health:\n  floors:\n    \"NVIDIA H200\":\n      hbm_copy: {min: \"4100 GB/s\", "
     "source: \"measured: ours\", rule: guess}\n", "hbm_copy.rule: rule: guess, but its source is no guess"),
    ("extends: nowhere.yaml\n", "site.yaml: extends: 'nowhere.yaml' names"),
    ("extends: 3\n", "site.yaml: extends: expected the thresholds file this one is laid over"),
    ("extends: site.yaml\n", "the files extend each other in a circle"),
])
def test_errors_name_the_file_and_line_that_hold_them(tmp_path, site_text, expected):
    site = _write(tmp_path / "site.yaml", site_text)
    with pytest.raises(ThresholdsError) as err:
        load_thresholds(site)
    assert expected in str(err.value) and str(site) in str(err.value), str(err.value)
    assert "(line " in str(err.value)


def test_a_mistake_in_the_base_names_the_base_not_the_file_that_extends_it(tmp_path):
    text = SHIPPED.read_text().replace("history: {runs: 14,", "history: {runs: ten,", 1)
    assert text != SHIPPED.read_text()
    _write(tmp_path / "base.yaml", text)
    site = _write(tmp_path / "site.yaml", "extends: base.yaml\ngpu_health: {}\n")
    with pytest.raises(ThresholdsError) as err:
        load_thresholds(site)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("history: {runs: ten"))
    assert str(err.value).startswith(f"{tmp_path / 'base.yaml'}: history.runs:") and f"(line {line})" in str(err.value)


def test_a_record_keeps_every_layer_and_judge_reads_them_after_the_base_is_gone(tmp_path):
    shutil.copy(SHIPPED, tmp_path / "base.yaml")
    site = _write(tmp_path / "site.yaml", f'extends: base.yaml\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                          f'      hbm_copy: {CALIBRATED}\n')
    header = thresholds_fields(site)
    assert [b["path"] for b in header["thresholds_bases"]] == [str(tmp_path / "base.yaml")]
    (tmp_path / "base.yaml").unlink()
    with pytest.raises(ThresholdsError):
        load_thresholds(site)
    data, _ = recorded_thresholds(header)
    t = load_thresholds(site, content=data, bases=recorded_bases(header))
    assert t.gpu_health.floor("hbm_copy", "NVIDIA H200", False).min == 4100e9
    header["thresholds_bases"][0]["sha256"] = "0" * 64
    with pytest.raises(ValueError, match="do not match their recorded sha256"):
        recorded_bases(header)


def test_a_record_made_on_another_machine_is_judged_against_its_own_base(tmp_path):
    """`extends: wirecheck` there named that machine's shipped file: the recorded bytes count, not this one's."""
    site = _write(tmp_path / "site.yaml", "extends: wirecheck\n")
    header = thresholds_fields(site)
    there = re.sub(r'(hbm_copy: \{min: ")[^"]+', r"\g<1>3333 GB/s", SHIPPED.read_text(), count=1)  # the H200's
    assert load_thresholds(SHIPPED).gpu_health.floor("hbm_copy", "NVIDIA H200", False).min != 3333e9
    header["thresholds_bases"][0]["path"] = "/opt/elsewhere/thresholds.yaml"
    header["thresholds_bases"][0]["gz_b64"] = base64.b64encode(gzip.compress(there.encode())).decode()
    header["thresholds_bases"][0]["sha256"] = hashlib.sha256(there.encode()).hexdigest()
    data, _ = recorded_thresholds(header)
    t = load_thresholds(site, content=data, bases=recorded_bases(header))
    assert t.gpu_health.floor("hbm_copy", "NVIDIA H200", False).min == 3333e9


def _listed(capsys, *args) -> dict:
    assert main(["limits", "--profile", "h200-sxm-2", "--json", *args]) == 0
    rows = json.loads(capsys.readouterr().out)["limits"]
    return next(r for r in rows if r["key"] == "gpu_health.floors.NVIDIA H200.hbm_copy" and r["rule"] != "history")


def test_a_bound_set_over_another_files_entry_keeps_none_of_its_source_rule_or_resolution(tmp_path, capsys):
    """`{min: "3000 GB/s"}` over the shipped entry was listed with the shipped floor's source, `measured`, and the
    10.6 % step the recorded runs measured for 3821 GB/s; a site's calibrated entry overridden so, as calibrated."""
    shipped = _listed(capsys)
    assert (round(shipped["min"]), shipped["rule"], shipped["resolution"]["step"]) == (3821, "measured", 0.1059)
    bare = _write(tmp_path / "bare.yaml", 'extends: wirecheck\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                          '      hbm_copy: {min: "3000 GB/s"}\n')
    row = _listed(capsys, "--thresholds", str(bare))
    assert (round(row["min"]), row["rule"], row["resolution"]) == (3000, "site", None), row
    assert row["source"].startswith("none: bare.yaml sets min here without a source: of its own"), row
    # its own source and rule count; the recorded resolution is the shipped value's, not this one's
    own = _write(tmp_path / "own.yaml", 'extends: wirecheck\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                        '      hbm_copy: {min: "3000 GB/s", source: "guess: half of nothing"}\n')
    row = _listed(capsys, "--thresholds", str(own))
    assert (row["rule"], row["source"], row["resolution"]) == ("guess", "guess: half of nothing", None), row
    same = _write(tmp_path / "same.yaml", 'extends: wirecheck\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                          '      hbm_copy: {min: "3821 GB/s", source: "measured: ours"}\n')
    assert _listed(capsys, "--thresholds", str(same))["resolution"] == shipped["resolution"]
    # a calibrated entry's rule and provenance (its resolution) stay with the value they were written for
    site = _write(tmp_path / "site.yaml", f'extends: wirecheck\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                          f'      hbm_copy: {CALIBRATED}\n')
    over = _write(tmp_path / "over.yaml", 'extends: site.yaml\ngpu_health:\n  floors:\n    "NVIDIA H200":\n'
                                          '      hbm_copy: {min: "3000 GB/s"}\n')
    floor = load_thresholds(over).gpu_health.floor("hbm_copy", "NVIDIA H200", False)
    assert (floor.min, floor.rule, floor.resolution) == (3000e9, "site", None) and "site.yaml" in floor.source, floor


def test_a_guess_is_listed_as_a_guess(capsys):
    """46 limits of an 8x H200 SXM node whose source says `guess: ... replace after a run` were listed `measured`."""
    assert main(["limits", "--profile", "h200-sxm-8", "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["limits"] if r["rule"] in ("measured", "guess")]
    guesses = [r for r in rows if r["source"].startswith("guess")]
    assert guesses and all(r["rule"] == "guess" for r in guesses), [r["yaml_path"] for r in guesses if r["rule"] != "guess"]
    assert all(r["rule"] == "measured" for r in rows if not r["source"].startswith("guess"))
