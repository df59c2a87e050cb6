"""The one loader: every section of thresholds.yaml is read because a check (or the run settings) declares it,
a check's new Table or Rule is read as data with no parser to edit, a name of the vocabulary without its
limit is named when the file loads, and the limits stay typed (Quantity) from the file to the tables."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from wirecheck import checks
from wirecheck.core.quantity import Quantity
from wirecheck.core.verdict import no_problems
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Qty, Source, spec
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.thresholds.limits import COUNT, Axis, Entry, Table
from wirecheck.vocab import strategies
from wirecheck.vocab.ops import OPS

SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"


@pytest.fixture(scope="module")
def shipped_data():
    return yaml.load(SHIPPED.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                              allow_unicode=True))
    return path


def _error(tmp_path: Path, data) -> str:
    path = _write(tmp_path, data)
    with pytest.raises(ThresholdsError) as info:
        load_thresholds(path)
    message = str(info.value)
    assert str(path) in message and "(line " in message, message  # the file and the line, always
    return message


def test_every_section_is_declared(shipped_data):
    """Each top-level section the shipped file holds is read by a declaration: a check's, or the settings'."""
    from wirecheck.thresholds.file import _declared

    places = _declared()
    for section in shipped_data:
        assert any(p == section or p.startswith(section + ".") for p in places), section
    owners = {owner for owner, _ in places.values()}
    assert {"busbw", "peak_memory", "host_copy", "gpu_count", "hbm_bandwidth", "wirecheck.thresholds"} <= owners


def test_a_strategy_without_a_peak_memory_limit_is_named(tmp_path, shipped_data):
    # Before, it loaded and the strategy's peak-memory check skipped on hardware, saying nothing at load.
    data = copy.deepcopy(shipped_data)
    del data["training"]["peak_memory"]["any"]["zero2"]
    message = _error(tmp_path, data)
    assert "training.peak_memory: no peak-memory limit for the strategy 'zero2'" in message, message
    assert 'add any: {zero2: {max: "...", source: ...}}' in message, message
    # A class of its own is enough: the limit is somewhere, for that class.
    data["training"]["peak_memory"]["nvswitch"] = {"zero2": {"max": "27 GiB", "source": "a self-test"}}
    assert load_thresholds(_write(tmp_path, data)).training_limits(False).peak_memory("nvswitch", "zero2").max == 27 * 2**30


def test_an_op_or_strategy_without_its_simulated_floor_is_named(tmp_path, shipped_data):
    data = copy.deepcopy(shipped_data)
    data["collectives"]["simulated_floors"] = {"all_reduce": {"any": {"min": "0.005 GB/s", "source": "a self-test"}}}
    message = _error(tmp_path, data)
    assert f"collectives.simulated_floors: no busbw floor for the op {OPS[1]!r}" in message, message
    data = copy.deepcopy(shipped_data)
    data["training"]["simulated_throughput_floors"] = {"ddp": {"any": {"min": "1 tokens/s", "source": "a self-test"}}}
    message = _error(tmp_path, data)
    assert f"training.simulated_throughput_floors: no throughput floor for the strategy {strategies.NAMES[1]!r}" in message


@dataclass(frozen=True)
class _Idle:
    WHAT = "idle power rule"
    max_power: float = spec(Qty('"100 W"', "power", positive=True))
    source: str = spec(Source())
    yaml_path: str


def test_a_checks_table_and_rule_are_read_as_data(tmp_path, shipped_data):
    """A check declares a Table (keyed by op and GPU count) and a Rule (a typed model): the file holds them, the
    loader reads them, refuses them when wrong, and answers the lookup; no parser was written."""
    table = Table("collectives.selftest_floors", (Axis("op", lambda: OPS, "op", "ops are"), COUNT),
                  Entry("time", ("max",), ("max",)), "self-test ceiling", example="{all_reduce: {any: {max: ...}}}")
    rule = Rule("collectives.selftest_idle", _Idle, '{max_power: "100 W", source: ...}')
    data = copy.deepcopy(shipped_data)
    data["collectives"]["selftest_floors"] = {"all_reduce": {"any": {"max": "40 µs", "source": "a self-test"}}}
    data["collectives"]["selftest_idle"] = {"max_power": "100 W", "source": "a self-test"}
    assert "collectives.selftest_floors: unknown key 'selftest_floors' in collectives sections" in _error(tmp_path, data)

    checks.check("selftest_declared", limits=(table, rule))(lambda thresholds: no_problems("x", None, []))
    try:
        loaded = load_thresholds(_write(tmp_path, data))
        limit, why = loaded.limit("collectives.selftest_floors", ("all_reduce",), 8)
        assert (limit.max.to("µs"), limit.kind, limit.source, why) == (pytest.approx(40), "time", "a self-test", "")
        assert limit.yaml_path == "thresholds.yaml: collectives.selftest_floors.all_reduce.any"
        assert loaded.limit("collectives.selftest_floors", ("broadcast",), 8) == (None, "")
        idle = loaded.values["collectives.selftest_idle"]
        assert (idle.max_power, idle.yaml_path) == (100.0, "thresholds.yaml: collectives.selftest_idle")
        data["collectives"]["selftest_idle"]["max_power"] = "100 GB/s"
        assert ('collectives.selftest_idle.max_power: "100 GB/s" is a bandwidth, not a power'
                in _error(tmp_path, data))
        del data["collectives"]["selftest_floors"]  # declared: required, as every limit a check reads
        assert "collectives: missing required key 'selftest_floors' in collectives sections" in _error(tmp_path, data)
    finally:
        checks.forget("selftest_declared")


def test_limits_stay_typed_from_the_file_to_the_tables():
    loaded = load_thresholds(SHIPPED)
    floor = loaded.busbw_limit("nvswitch", "all_reduce", 2, simulated=False)
    assert isinstance(floor.min, Quantity) and floor.min.kind == "bandwidth" and floor.min.to("GB/s") == 295.0
    assert floor.min.text() == "295.0 GB/s" and pickle.loads(pickle.dumps(floor.min)).kind == "bandwidth"
    derived = loaded.busbw_limit("pair", "all_reduce", 2, simulated=False, link_ceiling_bytes_per_s=6 * 26.562e9)
    assert isinstance(derived.min, Quantity) and derived.rule == "derived"  # made by code, typed all the same
    with pytest.raises(ValueError, match="no unit of a bandwidth"):
        floor.min.to("µs")


def test_a_missing_bound_is_asked_for_in_its_tables_own_unit(tmp_path, shipped_data):
    data = copy.deepcopy(shipped_data)
    del data["collectives"]["latency"]["ceilings"]["nvswitch"]["all_reduce"][2]["max"]
    del data["training"]["peak_memory"]["any"]["ddp"]["max"]
    message = _error(tmp_path, data)  # the first of the two, in the file's order
    assert ("collectives.latency.ceilings.nvswitch.all_reduce.2: missing required key 'max' in a limit entry; "
            'add max: "30 µs"') in message, message
    data["collectives"]["latency"]["ceilings"]["nvswitch"]["all_reduce"][2]["max"] = "12 µs"
    assert 'training.peak_memory.any.ddp: missing required key \'max\' in a limit entry; add max: "40 GiB"' in \
        _error(tmp_path, data)


def test_a_check_declaring_again_replaces_its_own_limits_and_another_check_still_clashes():
    """pytester restores sys.modules after an in-process run, so a check module imported after it declares its limits
    again with reader classes made anew: `wirecheck judge` in that process then raised, on any file, "check
    'burn_in_throughput_drift' declares burn_in as Rule(...); check 'burn_in_throughput_drift' declares burn_in as
    Rule(...)" (selftests/test_records_e2e.py under -n 2 without --dist loadfile). The same check
    declaring again is not a clash; another check declaring the key differently still is."""
    from wirecheck.thresholds import declared

    def reader():  # a reader class, as a module imported anew makes it: same name, another object
        @dataclass
        class SelftestLimits:
            rounds: int = 3
        return SelftestLimits

    first, again = Rule("selftest_redeclared", reader()), Rule("selftest_redeclared", reader())
    assert first != again
    try:
        declared.declare("selftest_check", (first,))
        declared.declare("selftest_check", (again,))
        assert declared.DECLARED["selftest_redeclared"] == ("selftest_check", again)
        with pytest.raises(ValueError, match="check 'selftest_other' declares selftest_redeclared as .*; check "
                                             "'selftest_check' declares selftest_redeclared as"):
            declared.declare("selftest_other", (Rule("selftest_redeclared", reader()),))
        declared.declare("selftest_other", (again,))  # two checks may read one limit, declared alike
        assert declared.DECLARED["selftest_redeclared"] == ("selftest_check", again)
    finally:
        declared.undeclare("selftest_check")
        declared.undeclare("selftest_other")
    assert "selftest_redeclared" not in declared.DECLARED
