"""Stable failure codes: each check and kind has one from the declared table (never a hash), a code never changes
its meaning (the ledger of every code ever issued holds the table to it), and the code is in every verdict, the
record, the failure block, Prometheus and the docs' catalog.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wirecheck import checks
from wirecheck.checks import catalog, failure_block
from wirecheck.core import failure_codes as fc
from wirecheck.core.verdict import FAIL, PASS, SKIP, WARN, Verdict

PROJECT = Path(__file__).resolve().parents[1]
LEDGER = Path(__file__).parent / "data" / "failure_codes.txt"
NOT_REGISTERED = {"diagnosis"}  # made by wirecheck.diagnose.findings, not a registered check


def test_the_table_keeps_the_ledger():
    assert fc.ledger_problems(LEDGER.read_text().splitlines()) == []


def test_a_reused_renamed_or_new_code_is_caught(monkeypatch):
    ledger = LEDGER.read_text().splitlines()
    # the number of busbw given to another check: busbw's line now names the wrong holder
    monkeypatch.setitem(fc.TABLE, "busbw", fc.Entry(203, fc.FABRIC))
    monkeypatch.delitem(fc.TABLE, "wire_check")
    said = fc.ledger_problems(ledger)
    assert any(p.startswith("WC2021 was busbw fail; the table now gives it to no check") for p in said)
    assert any(p.startswith("WC2031 was wire_check fail; the table now gives it to busbw fail") for p in said)
    monkeypatch.undo()
    # a renamed check: its old name's lines break unless RENAMED maps it
    monkeypatch.setitem(fc.TABLE, "bus_bandwidth", fc.TABLE["busbw"])
    monkeypatch.delitem(fc.TABLE, "busbw")
    assert any("WC2021 was busbw fail" in p for p in fc.ledger_problems(ledger))
    monkeypatch.setitem(fc.RENAMED, "busbw", "bus_bandwidth")
    assert not [p for p in fc.ledger_problems(ledger) if p.startswith("WC2021 was")]
    monkeypatch.undo()
    # a new check: its codes must be appended to the ledger
    monkeypatch.setitem(fc.TABLE, "new_check", fc.Entry(999, fc.NODE))
    assert "WC9991 (new_check fail) is not in the ledger: append `WC9991 new_check fail`" in fc.ledger_problems(ledger)


def test_numbers_are_refused_twice_and_retired_ones_never_given(monkeypatch):
    monkeypatch.setitem(fc.TABLE, "copy_of_busbw", fc.Entry(202, fc.GPU))
    with pytest.raises(ValueError, match="share the number 202"):
        fc._refuse_duplicates()
    monkeypatch.delitem(fc.TABLE, "copy_of_busbw")
    monkeypatch.setitem(fc.RETIRED, 202, "old_check")
    with pytest.raises(ValueError, match="retired old_check"):
        fc._refuse_duplicates()


def test_every_check_has_a_code_and_every_code_a_check():
    registered = set(checks.CHECKS)
    assert registered - set(fc.TABLE) == set(), "a check without a failure code: add it to core/failure_codes.py"
    assert set(fc.TABLE) - registered == NOT_REGISTERED


def test_codes_are_structural():
    assert fc.code("busbw", FAIL) == "WC2021" and fc.code("busbw", WARN) == "WC2022"
    assert fc.code("busbw", PASS) is None and fc.code("busbw", SKIP) is None and fc.code("a_site_check", FAIL) is None
    assert fc.parse("wc2021") == ("busbw", "fail") and fc.parse("WC2023") is None and fc.parse("WC99991") is None
    assert fc.component_of("busbw", fc.PCIE) == fc.PCIE and fc.component_of("busbw") == fc.NVLINK
    assert fc.component_of("hbm_bandwidth", fc.PCIE) == fc.MEMORY and fc.component_of("unknown") == fc.NODE


def test_the_code_is_in_the_verdict_its_record_its_failure_block():
    v = checks.measurement_completed(None, what="all_reduce sweep", placement="nvswitch-2gpu-0.1", error="hung")
    assert v.code == "WC8011"
    record = v.as_record()
    assert record["code"] == "WC8011" and Verdict.from_record(record).code == "WC8011"
    assert "  code      WC8011 (docs/failure-codes.md)" in failure_block.render(v)
    passed = checks.measurement_completed(None, what="x", placement=None, error=None)
    assert passed.code is None and not any(line.lstrip().startswith("code") for line in failure_block.render(passed))


def test_the_docs_catalog_is_the_tables():
    assert (PROJECT / "docs" / "failure-codes.md").read_text() == catalog.markdown(), \
        "docs/failure-codes.md is stale: wirecheck codes --markdown > docs/failure-codes.md"
    assert all(not row["means"].startswith("the measured value is outside") for row in catalog.rows()), \
        "a coded check without words: declare its Words (@check(..., words=Words(...)))"
