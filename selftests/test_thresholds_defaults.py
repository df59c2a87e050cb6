"""`"*"` and `inherit:` in a thresholds file (resolved by the reader, so every section has them), the
errors they can raise, and the JSON Schema made from the loader's reads: equal to the committed
thresholds.schema.json, the shipped file conforming to it, broken files not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wirecheck.cli import limits as limits_cli
from wirecheck.core.paths import suite_paths
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.thresholds.schema import KEYWORDS, schema_of, validate
from wirecheck.thresholds.yaml_reader import _read_yaml

SHIPPED = suite_paths().thresholds
COMMITTED = SHIPPED.parent / "thresholds.schema.json"
TEXT = SHIPPED.read_text()
SIM_FLOOR = '  simulated_floors: {"*": {any: {min: "0.005 GB/s", source: "CPU gloo sanity floor: catches a broken path, not speed"}}}'
SIM_LINE = next(i for i, line in enumerate(TEXT.splitlines(), 1) if line.startswith(SIM_FLOOR))


def _load(tmp_path: Path, text: str):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return load_thresholds(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ThresholdsError) as info:
        _load(tmp_path, text)
    return str(info.value)


def _replace(old: str, new: str) -> str:
    assert TEXT.count(old) == 1, old
    return TEXT.replace(old, new)


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(SHIPPED)


def test_star_stands_for_every_op_not_named_and_lies_under_those_named(tmp_path, shipped):
    assert SIM_FLOOR in TEXT
    t = _load(tmp_path, _replace(SIM_FLOOR, SIM_FLOOR[:-1] + ', broadcast: {any: {min: "0.5 GB/s"}}}'))
    base = shipped.busbw_limit("nvswitch", "all_reduce", 2, simulated=True)
    mine = t.busbw_limit("nvswitch", "all_reduce", 2, simulated=True)
    assert (mine.min, mine.source, mine.yaml_path) == (base.min, base.source, base.yaml_path.replace("thresholds", "t"))
    assert base.yaml_path == "thresholds.yaml: collectives.simulated_floors.all_reduce.any"  # cited by the op's own path
    broadcast = t.busbw_limit("nvswitch", "broadcast", 8, simulated=True)
    assert (broadcast.min, broadcast.source) == (0.5e9, base.source)  # its own min over the "*" block's source


def test_inherit_takes_the_sibling_and_its_own_keys_win(tmp_path, shipped):
    old = shipped.profile("h200-sxm-8")
    assert old.gpu_memory == shipped.profile("h200-sxm-2").gpu_memory and "inherit: h200-sxm-2" in TEXT
    t = _load(tmp_path, _replace("h200-sxm-8: {inherit: h200-sxm-2, gpu_count: 8,",
                                 'h200-sxm-8: {inherit: h200-sxm-2, gpu_count: 8, gpu_memory: "140 GB",'))
    assert t.profile("h200-sxm-8").gpu_memory == 140e9 and t.profile("h200-sxm-8").sm_count == old.sm_count


def test_inherit_of_an_unknown_sibling_names_the_ones_it_could_mean(tmp_path):
    message = _error(tmp_path, _replace("h200-sxm-8: {inherit: h200-sxm-2,", "h200-sxm-8: {inherit: h200-sxm-22,"))
    assert "profiles.h200-sxm-8.inherit: names no sibling block 'h200-sxm-22' (did you mean 'h200-sxm-2'?)" in message
    line = next(i for i, text in enumerate(TEXT.splitlines(), 1) if text.startswith("  h200-sxm-8: {inherit"))
    assert "h200-nvl-8" in message and f"(line {line})" in message and str(Path(tmp_path) / "t.yaml") in message


def test_inherit_in_a_circle_is_named(tmp_path):
    text = _replace("h200-sxm-2: {gpu_count: 2,", "h200-sxm-2: {inherit: h100-sxm-8, gpu_count: 2,")
    message = _error(tmp_path, text)
    assert "inherit from each other in a circle" in message and "(h200-sxm-2 -> h100-sxm-8 -> h200-sxm-8 -> h200-sxm-2)" in message
    assert "write one of them out in full" in message


def test_a_mistake_under_star_names_the_op_it_reached_and_the_line_it_was_written_on(tmp_path):
    message = _error(tmp_path, _replace(SIM_FLOOR, SIM_FLOOR.replace('"0.005 GB/s"', '"0.005 GB"')))
    assert "collectives.simulated_floors.all_reduce.any.min" in message and f"(line {SIM_LINE})" in message


def test_star_beside_any_in_a_count_table_is_refused(tmp_path):
    message = _error(tmp_path, _replace(SIM_FLOOR, SIM_FLOOR[:-1] + ', all_reduce: {"*": {min: "1 GB/s", source: x}, '
                                                   'any: {min: "1 GB/s", source: x}}}'))
    assert "appears twice" in message and '"*" are the same entry' in message


def test_an_unknown_op_beside_star_names_the_fix(tmp_path):
    message = _error(tmp_path, _replace(SIM_FLOOR, SIM_FLOOR[:-1] + ", all_reduse: {}}"))
    assert "unknown op 'all_reduse' (did you mean 'all_reduce'?)" in message and '"*" for every op not named' in message


def test_the_committed_schema_is_what_the_command_prints(capsys):
    parser = __import__("argparse").ArgumentParser()
    limits_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["limits", "--schema"])
    assert limits_cli.run(args, []) == 0
    printed = capsys.readouterr().out
    assert printed.rstrip("\n") == COMMITTED.read_text().rstrip("\n"), "run: wirecheck limits --schema > thresholds.schema.json"
    assert TEXT.startswith("# yaml-language-server: $schema=thresholds.schema.json\n")


def _keywords(schema) -> set:
    if isinstance(schema, dict):
        mine = set(schema) - {"properties", "definitions"}
        inner = list(schema.get("properties", {}).values()) + list(schema.get("definitions", {}).values())
        inner += [v for k, v in schema.items() if k in ("additionalProperties", "propertyNames")]
        inner += schema.get("anyOf", [])
        return mine | {k for s in inner for k in _keywords(s)}
    return set()


def test_the_shipped_file_conforms_and_the_validator_knows_every_keyword_used():
    schema = json.loads(COMMITTED.read_text())
    assert _keywords(schema) <= KEYWORDS
    assert validate(schema, _read_yaml(SHIPPED)) == []
    # what the schema says where: "*" and inherit accepted, the unit of a quantity, counts as integers
    floors = schema["properties"]["collectives"]["properties"]["floors"]
    profile = schema["definitions"][schema["properties"]["profiles"]["additionalProperties"]["$ref"].rsplit("/", 1)[-1]]
    assert "*" in floors["properties"] and "inherit" in profile["properties"]
    assert profile["properties"]["sm_count"] == {"type": "integer", "minimum": 1}
    assert "|GB/s|" in schema["definitions"]["bandwidth"]["pattern"] and "GB/s" not in schema["definitions"]["size"]["pattern"]


@pytest.mark.parametrize("old, new, problem", [
    ('floor_size: "1 GiB"', 'floor_size: "1 GB/s"', "collectives.hardware.floor_size: '1 GB/s' does not match a size"),
    ("warmup_iters: 5, iters: 20,", 'warmup_iters: 5, iters: "20",', "collectives.hardware.iters: expected"),
    ("  hardware: {sweeps:", "  hardwar: {sweeps:", "collectives.hardwar: unknown key"),
    ("      all_to_all: {any: {max: \"200 µs\"}}\n      forced_pcie:", "      all_to_al: {any: {max: \"200 µs\"}}\n      forced_pcie:",
     "all_to_al: unknown key"),
    ("precision: bf16,", "precision: bf17,", "training.hardware.precision: 'bf17' is not one of"),
])
def test_a_broken_file_fails_the_schema(old, new, problem, tmp_path):
    schema = json.loads(COMMITTED.read_text())
    problems = validate(schema, _read_yaml(tmp_path / "t.yaml", _replace(old, new).encode()))
    assert any(problem in p for p in problems), problems


def test_the_schema_follows_the_loader_reads(tmp_path):
    # Made from the reads: a file without the optional history section has no history keys typed.
    text = TEXT[:TEXT.index("\n# Each GPU and placement against its own last runs")] + "\n"
    path = tmp_path / "t.yaml"
    path.write_text(text)
    typed = json.loads(COMMITTED.read_text())["properties"]["history"]
    assert typed["properties"]["runs"] == {"type": "integer", "minimum": 3}  # min_runs, as the reader asks
    untyped = schema_of(path)["properties"]["history"]
    assert list(untyped) == ["description"] and untyped["description"].startswith("e.g. {runs: 10")  # named, not typed
