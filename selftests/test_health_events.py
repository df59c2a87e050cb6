"""Verdicts out as health events: NVSentinel's HealthEvents (checked against a schema made from its
health_event.proto: field names, types, enum names) and gpud's component health states (against its API's
types), one per failed or warned verdict and one healthy per check and class that passed (clearing that check's earlier failure), the action following the
drain decision; a simulation or a fault of the harness never yields an event.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import json_schema
from wirecheck.cli import drain_hook
from wirecheck.cli.events import main as events_main
from wirecheck.core.verdict import FAIL, PASS, WARN, Verdict
from wirecheck.records import events
from wirecheck.records.file import RunRecord

DATA = Path(__file__).parent / "data"
NVSENTINEL = json_schema.load("nvsentinel-health-events.schema.json")
GPUD = json_schema.load("gpud-component-health-states.schema.json")

GPUS = [{"index": i, "name": "NVIDIA H200", "bus_id": f"00000000:{0x19 + i:02X}:00.0", "uuid": f"GPU-aaaa-{i}",
         "serial": f"165512340001{i}"} for i in range(2)]
PLACEMENTS = [{"id": "nvswitch-2gpu-0.1", "class": "nvswitch", "gpus": [0, 1]},
              {"id": "forced_pcie-2gpu-0.1", "class": "forced_pcie", "gpus": [0, 1]},
              {"id": "single-1gpu-0", "class": "single", "gpus": [0]}]


def _v(check, where, outcome, **extra) -> dict:
    v = Verdict(check, f"{check} figure", where, outcome, **extra)
    return {"type": "verdict", "test": f"tests/x.py::test_{check}", "time": "2026-12-14T09:12:40+00:00", **v.as_record()}


def _run(verdicts, simulated=False, end=None) -> RunRecord:
    header = {"type": "run", "host": "gpu-node-7.cluster", "started": "2026-12-14T09:10:00+00:00", "simulated": simulated,
              "gpus": GPUS, "placements": PLACEMENTS}
    end = end or {"status": "complete", "exit_status": 1 if any(v["outcome"] == FAIL for v in verdicts) else 0}
    return RunRecord(Path("run.jsonl"), header, [], verdicts, end)


FAILED = _run([_v("busbw", "nvswitch-2gpu-0.1", FAIL, measured=300.0, limit={"min": 360.0}, unit="GB/s"),
               _v("busbw", "forced_pcie-2gpu-0.1", PASS),
               _v("hbm_bandwidth", "GPU0", PASS), _v("hbm_bandwidth", "GPU1", PASS),
               _v("gemm_throughput", "GPU0", PASS), _v("gemm_throughput", "GPU1", WARN),
               _v("no_foreign_processes", None, PASS)])


def _nvs(run, decision=None) -> dict:
    found, _ = events.events(run, decision)
    doc = events.nvsentinel(found, "gpu-node-7")
    assert json_schema.problems(NVSENTINEL, doc) == []
    return doc


def test_a_failed_run_gives_one_event_per_failure_and_warning_and_healthy_components():
    doc = _nvs(FAILED)
    unwell = [e for e in doc["events"] if not e["isHealthy"]]
    assert [(e["checkName"], e["componentClass"], e["isFatal"]) for e in unwell] == [
        ("busbw", "NVLINK", True), ("gemm_throughput", "GPU", False)]
    busbw = unwell[0]
    assert busbw["errorCode"] == ["WC2021"] and busbw["recommendedAction"] == "RUN_FIELDDIAG"
    assert busbw["processingStrategy"] == "EXECUTE_REMEDIATION" and busbw["nodeName"] == "gpu-node-7"
    assert {"entityType": "GPU_UUID", "entityValue": "GPU-aaaa-1"} in busbw["entitiesImpacted"]
    assert {"entityType": "PCI", "entityValue": "00000000:1A:00.0"} in busbw["entitiesImpacted"]
    assert {"entityType": "GPU_SERIAL", "entityValue": "1655123400011"} in busbw["entitiesImpacted"]
    assert busbw["generatedTimestamp"] == "2026-12-14T09:12:40Z" and busbw["metadata"]["code"] == "WC2021"
    warned = unwell[1]
    assert (warned["errorCode"], warned["recommendedAction"], warned["processingStrategy"]) == (
        ["WC4022"], "NONE", "STORE_ONLY")
    assert (busbw["metadata"]["measured"], busbw["metadata"]["unit"], busbw["metadata"]["limit"]) == (
        "300.0", "GB/s", '{"min": 360.0}')
    healthy = {(e["componentClass"], e["checkName"],
                tuple(x["entityValue"] for x in e["entitiesImpacted"] if x["entityType"] == "GPU"))
               for e in doc["events"] if e["isHealthy"]}
    # per check: the host path's busbw passed (PCIE, both GPUs); HBM on both; GEMM on GPU0 only (GPU1 warned);
    # the node's own check with no GPU
    assert healthy == {("PCIE", "busbw", ("0", "1")), ("MEMORY", "hbm_bandwidth", ("0", "1")),
                       ("GPU", "gemm_throughput", ("0",)), ("NODE", "no_foreign_processes", ())}
    assert all(e["errorCode"] == [] and not e["isFatal"] for e in doc["events"] if e["isHealthy"])
    assert [e["isHealthy"] for e in doc["events"]] == [True] * 4 + [False] * 2  # a run's failures come last


def _nvsentinel_store(stored: set, doc: dict) -> set:
    """What NVSentinel's fault quarantine keeps of a node's events (its health events annotation map): an
    unhealthy event is stored once per entity, keyed by agent, component class, check name, node and entity;
    a healthy event removes each stored key of its agent, class, check name and node whose entity it lists,
    or, listing none, every key of that check. The node is released once nothing is stored."""
    stored = set(stored)
    for e in doc["events"]:
        check = (e["agent"], e["componentClass"], e["checkName"], e["nodeName"], e["version"])
        entities = {(x["entityType"], x["entityValue"]) for x in e["entitiesImpacted"]}
        if not e["isHealthy"]:
            stored |= {(*check, entity) for entity in entities or {None}}
        else:
            stored = {k for k in stored if k[:5] != check or (entities and k[5] not in entities)}
    return stored


def test_a_node_that_passes_again_is_cleared_and_one_that_fails_again_is_not():
    """The healthy events of a run that passes carry each earlier failure's check name, class and entities, so
    NVSentinel clears every event that failure stored; a run that fails the same way stores it again."""
    link = _v("counter_growth", "GPU1", FAIL, inputs={"deltas": [{"link": 3, "counter": "nvlink_replay", "grew_by": 9}]})
    failing = _run([*FAILED.verdicts, link, _v("no_foreign_processes", None, FAIL)])
    stored = _nvsentinel_store(set(), _nvs(failing))
    assert {k[2] for k in stored} == {"busbw", "counter_growth", "no_foreign_processes", "gemm_throughput"}  # a warning too
    assert next(e for e in _nvs(failing)["events"] if e["checkName"] == "counter_growth")["metadata"]["nvlinks"] == "3"
    passing = _run([_v(v["check"], v.get("where"), PASS) for v in failing.verdicts])
    assert _nvsentinel_store(stored, _nvs(passing)) == set()
    assert _nvsentinel_store(stored, _nvs(failing)) == stored
    # one GPU passing again clears that GPU's keys only
    half = _run([_v("gemm_throughput", "GPU0", PASS), _v("gemm_throughput", "GPU1", FAIL)])
    left = _nvsentinel_store(_nvsentinel_store(set(), _nvs(_run([_v("gemm_throughput", "GPU0", FAIL),
                                                                  _v("gemm_throughput", "GPU1", FAIL)]))), _nvs(half))
    assert left and all(k[5] in {("GPU", "1"), ("GPU_UUID", "GPU-aaaa-1"), ("GPU_SERIAL", "1655123400011"),
                                 ("PCI", "00000000:1A:00.0")} for k in left)


@pytest.mark.parametrize(("decision", "action", "strategy", "fatal"), [
    ("drain", "RUN_FIELDDIAG", "EXECUTE_REMEDIATION", True),
    ("replace", "CONTACT_SUPPORT", "EXECUTE_REMEDIATION", True),
    ("flaky", "NONE", "STORE_ONLY", False),
    ("guard_hold", "NONE", "STORE_ONLY", False),
])
def test_the_action_follows_the_drain_decision(decision, action, strategy, fatal):
    failed = next(e for e in _nvs(FAILED, decision)["events"] if e["checkName"] == "busbw" and not e["isHealthy"])
    assert (failed["recommendedAction"], failed["processingStrategy"], failed["isFatal"]) == (action, strategy, fatal)


@pytest.mark.parametrize("run", [
    _run(FAILED.verdicts, simulated=True),
    _run(FAILED.verdicts, end={"status": "fault", "exit_status": 74}),
    _run(FAILED.verdicts, end={"status": "complete", "exit_status": 70}),
], ids=["simulation", "harness-fault", "bug-of-ours"])
def test_a_simulation_or_a_harness_fault_yields_no_event(run):
    for decision in (None, "drain", "replace"):
        assert events.events(run, decision) == ([], "unknown")


def test_an_uncorrectable_memory_fault_replaces_the_gpu():
    run = _run([_v("ecc_uncorrected", "GPU1", FAIL)])
    assert events.decision_of(run) == "replace"
    (event,) = _nvs(run)["events"]
    assert (event["componentClass"], event["recommendedAction"], event["errorCode"]) == ("MEMORY", "CONTACT_SUPPORT",
                                                                                       ["WC1071"])


def test_the_schema_refuses_what_the_proto_does_not_define():
    """The check is not vacuous: a misspelt field, an unknown enum, a wrong type are each refused."""
    doc = _nvs(FAILED)
    event = doc["events"][0]
    for broken in ({**event, "componentclass": "GPU"}, {**event, "recommendedAction": "DRAIN"},
                   {**event, "isFatal": "true"}, {**event, "errorCode": "WC2021"},
                   {**event, "generatedTimestamp": "2026-12-14 09:12:40"},
                   {**event, "entitiesImpacted": [{"type": "GPU", "value": "0"}]}):
        assert json_schema.problems(NVSENTINEL, {"version": 1, "events": [broken]}), broken


def test_gpud_states():
    found, _ = events.events(FAILED)
    doc = events.gpud(found)
    assert json_schema.problems(GPUD, doc) == []
    states = {(c["component"], s["name"], s["health"]) for c in doc for s in c["states"]}
    assert ("wirecheck-nvlink", "busbw", "Unhealthy") in states and ("wirecheck-gpu", "gemm_throughput", "Degraded") in states
    assert ("wirecheck-memory", "hbm_bandwidth", "Healthy") in states
    bad = next(s for c in doc for s in c["states"] if s["health"] == "Unhealthy")
    assert bad["suggested_actions"]["repair_actions"] == ["HARDWARE_INSPECTION"] and bad["error"] == "WC2021"
    assert json_schema.problems(GPUD, [{"component": "x", "states": [{**bad, "health": "Broken"}]}])


def _write(run: RunRecord, path: Path) -> Path:
    lines = [{**run.run, "schema": 2}, *run.verdicts, {"type": "end", **run.end}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_command(tmp_path, capsys):
    record = _write(FAILED, tmp_path / "run.jsonl")
    assert events_main([str(record), "--format", "gpud", "-o", str(tmp_path / "e.json")]) == 0
    assert json_schema.problems(GPUD, json.loads((tmp_path / "e.json").read_text())) == []
    assert events_main([str(record), "--format", "nvsentinel", "--exit-code", "74"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"version": 1, "events": []} and "no event" in out.err
    assert events_main([str(record), "--format", "nvsentinel", "--decision", "flaky", "--node", "n1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {e["processingStrategy"] for e in doc["events"] if not e["isHealthy"]} == {"STORE_ONLY"}
    assert events_main([str(tmp_path / "missing.jsonl"), "--format", "gpud"]) == 2


def test_the_drain_hook_writes_its_decision_as_events(tmp_path):
    hook = drain_hook.Hook(hook="slurm", node="n1", records=tmp_path, wirecheck=[], validate_args=[], time_left_s=0,
                           limit=255, events="nvsentinel")
    drain_hook.write_events(hook, FAILED, 32)  # NODE_REPLACE
    doc = json.loads((tmp_path / drain_hook.EVENTS_OUT).read_text())
    assert json_schema.problems(NVSENTINEL, doc) == []
    assert {e["recommendedAction"] for e in doc["events"] if e["isFatal"]} == {"CONTACT_SUPPORT"}
    drain_hook.write_events(hook, FAILED, 2)  # unknown: nothing said about the node
    assert json.loads((tmp_path / drain_hook.EVENTS_OUT).read_text()) == {"version": 1, "events": []}


@pytest.mark.parametrize("args, said", [(["--exit-code", "999"], "999 is not an exit code"),
                                        (["--exit-code", "-7"], "-7 is not an exit code"),
                                        (["--node", "bad\nname"], "is not a node name")])
def test_an_exit_code_or_node_name_that_cannot_be_is_refused(tmp_path, capsys, args, said):
    """node-state refuses them; events wrote drain events for exit 999 and a node name with a newline into
    NVSentinel's nodeName."""
    record = tmp_path / "r.jsonl"
    record.write_text('{"type": "run", "schema": 2, "simulated": false, "gpus": [], "placements": []}\n')
    with pytest.raises(SystemExit) as info:
        events_main([str(record), "--format", "nvsentinel", *args])
    assert info.value.code == 2 and said in capsys.readouterr().err
