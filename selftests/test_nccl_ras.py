"""NCCL RAS as evidence: its answers read into fields (text and JSON, the readiness diagnostics), the client
against a stand-in of RAS's listener (JSON where the library answers it, text otherwise, its absence said),
a worker group that asks RAS when a call hangs, before its ranks are killed (and the burn-in that it
stops), and a rank of `fleet multinode` that asks its node's RAS when a step fails, before it leaves.

The samples (selftests/data/ras/) follow NCCL's own format strings (each names its source file) or its
documented examples; none is recorded on a node yet.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from e2e import records
from fake_ras import FakeRas, free_port, sample
from wirecheck import checks
from wirecheck.burnin import faults
from wirecheck.core.exit_codes import FAILED
from wirecheck.fleet.multinode import Judge, failure_ras, print_ras
from wirecheck.workers import ras, ras_report
from wirecheck.workers.launcher import WorkerGroup, WorkerTimeout

FAULTY = "selftests.faulty_workers"


def _kinds(reading: dict) -> list[tuple]:
    return [(f["kind"], f.get("rank"), f.get("gpu"), f.get("pid")) for f in reading["findings"]]


# ---- the formats ---------------------------------------------------------------------------------------

def test_text_one_rank_running_ok():
    reading = ras_report.parse_text(sample("status-ok-1rank.txt"))
    assert reading["nccl_version"] == "2.28.9" and reading["cuda_driver_version"] == 13000
    assert reading["communicators"] == [{"group": 0, "comms": 1, "nodes_per_comm": 1, "ranks_per_node": "1", "size": 1,
                                         "ranks_in_group": 1, "status": "RUNNING", "errors": ["OK"]}]
    assert reading["findings"] == [] and reading["timeouts"] == 0 and reading["collection_s"] == 0.0


def test_text_unresponsive_process_and_missing_rank_by_host_pid_gpu():
    reading = ras_report.parse_text(sample("status-unresponsive-4rank.txt"))
    assert reading["communicators"][0]["errors"] == ["INCOMPLETE"]
    assert _kinds(reading) == [("UNRESPONSIVE", None, 2, 51234), ("UNRESPONSIVE", 2, 2, 51234), ("TIMEOUT", None, None, None)]
    missing = reading["findings"][1]
    assert missing["comm"] == "0x9e17999afaa87dbb" and missing["host"] == "10.0.0.5" and missing["nvml_gpu"] == 2
    assert reading["timeouts"] == 2


def test_text_dead_process():
    reading = ras_report.parse_text(sample("status-dead-4rank.txt"))
    dead = [f for f in reading["findings"] if f["kind"] == "DEAD"]
    assert [(f["pid"], f["host"], f["gpu"]) for f in dead] == [(51234, "10.0.0.5", 2)]
    assert "considered dead" in dead[0]["detail"]


def test_text_mismatch_names_the_rank_behind():
    reading = ras_report.parse_text(sample("status-mismatch-4rank.txt"))
    assert _kinds(reading) == [("MISMATCH", 3, 3, 51235)]
    assert "AllReduce operation counts: has launched up to operation 6649" in reading["findings"][0]["detail"]


def test_json_of_nccl_2_28_9_is_repaired_and_read():
    text = sample("status-unresponsive-4rank-2.28.9.json")
    with pytest.raises(ValueError):  # as NCCL 2.28.9 writes it, it is no JSON: the repair is what reads it
        __import__("json").loads(text)
    reading = ras_report.parse_json(text)
    assert reading["repaired"] and reading["nccl_version"] == "2.28.9"
    comm = reading["communicators"][0]
    assert (comm["hash"], comm["size"], comm["ranks_count"], comm["missing_ranks_count"]) == ("0x9e17999afaa87dbb", 4, 3, 1)
    assert comm["status"] == "RUNNING" and comm["errors"] == ["INCOMPLETE"]
    assert comm["missing_ranks"] == [{"rank": 2, "host": "10.0.0.5", "pid": 51234, "gpu": 2, "nvml_gpu": 2,
                                      "unresponsive": True, "considered_dead": False}]
    assert [r["rank"] for r in comm["ranks"]] == [0, 1, 3] and comm["ranks"][0]["collective_counts"]["AllReduce"] == 412
    assert _kinds(reading) == [("UNRESPONSIVE", 2, 2, 51234), ("TIMEOUT", None, None, None)]
    assert any("2.28.7-2.28.9" in line for line in ras_report.lines({**reading, "answered": True}))


def test_json_counts_mismatch_and_dead_and_errors():
    reading = ras_report.parse_json(sample("status-counts-2rank-2.29.2.json"))
    assert not reading["repaired"]
    assert _kinds(reading) == [("MISMATCH", 1, 1, 51241)]
    assert reading["communicators"][0]["errors"] == ["MISMATCH"]
    # the same communicator, its rank 1 dead and rank 0 with an async error: what RAS's text would call DEAD, ERROR
    doc = __import__("json").loads(sample("status-counts-2rank-2.29.2.json"))
    comm = doc["communicators"][0]
    comm["ranks"][0]["status"]["async_error"] = 6
    comm["missing_ranks"] = [{**comm["ranks"].pop(1), "status": {"unresponsive": True, "considered_dead": True}}]
    reading = ras_report.parse_json(__import__("json").dumps(doc))
    assert ("DEAD", 1, 1, 51241) in _kinds(reading)
    assert [f["detail"] for f in reading["findings"] if f["kind"] == "ERROR"] == ["async error ncclRemoteError"]


@pytest.mark.parametrize("text", ["", "hello", "{}", '{"communicators": 3}', "Job summary\n===========\n"])
def test_what_is_not_ras_is_refused(text):
    with pytest.raises(ValueError):
        (ras_report.parse_json if text.startswith("{") else ras_report.parse_text)(text)


def test_diagnostics_warn_where_ranks_differ_and_note_what_is_unread():
    ok = ras_report.parse_diagnostics(sample("diagnostics-ok.txt"))
    assert len(ok["lines"]) == 5 and ok["differ"] == [] and ok["completed"].startswith("RAS diagnostics completed")
    differ = ras_report.parse_diagnostics(sample("diagnostics-differ.txt"))
    assert [d.split(":")[0] for d in differ["differ"]] == ["CUDA driver version", "ECC", "NVLink"] + ["NCCL environment"] * 4
    assert differ["notes"] == ["GPU inventory: unavailable via NVML across 8 ranks in comm 0x5678"]
    assert differ["lines"][0]["host"] == "node042" and differ["lines"][0]["pid"] == 12345
    with pytest.raises(ValueError):
        ras_report.parse_diagnostics("nothing")


# ---- the client ----------------------------------------------------------------------------------------

def test_json_where_the_library_answers_it():
    with FakeRas(text=sample("status-ok-1rank.txt"), json=sample("status-unresponsive-4rank-2.28.9.json")) as fake:
        reading = ras.ask_status({"NCCL_RAS_ADDR": fake.address})
    assert reading["answered"] and reading["format"] == "json" and reading["address"] == fake.address
    assert fake.commands[:4] == ["CLIENT PROTOCOL 2", "TIMEOUT 3", "SET FORMAT json", "VERBOSE STATUS"]
    assert _kinds(reading)[0] == ("UNRESPONSIVE", 2, 2, 51234) and reading["raw"].startswith("{")


def test_text_when_json_is_refused():
    with FakeRas(text=sample("status-dead-4rank.txt")) as fake:  # NCCL before 2.28.7: SET FORMAT is unknown
        reading = ras.ask_status({"NCCL_RAS_ADDR": fake.address})
    assert reading["answered"] and reading["format"] == "text"
    assert "NCCL before 2.28.7" in reading["format_note"]
    assert ("DEAD", None, 2, 51234) in _kinds(reading)


@pytest.mark.parametrize(("env", "said"), [
    ({"NCCL_RAS_ENABLE": "0"}, "NCCL_RAS_ENABLE=0"),
    ({"NCCL_RAS_ADDR": "no-port-here"}, "NCCL_RAS_ADDR='no-port-here'"),
    ("free", "nothing listens on 127.0.0.1:"),
])
def test_absence_is_said_never_raised(env, said):
    env = {"NCCL_RAS_ADDR": f"127.0.0.1:{free_port()}"} if env == "free" else env
    reading = ras.ask_status(env, wait_s=2)
    assert reading["answered"] is False and said in reading["absent"]
    assert ras_report.summary(reading).startswith("NCCL RAS not read: ")


def test_something_else_on_the_port_is_not_taken_for_ras():
    with FakeRas(text="x", hello="HTTP/1.1 400 Bad Request") as fake:
        reading = ras.ask_status({"NCCL_RAS_ADDR": fake.address}, wait_s=3)
    assert not reading["answered"] and "not NCCL RAS's handshake" in reading["absent"]
    with FakeRas(text="garbage only\n") as fake:
        reading = ras.ask_status({"NCCL_RAS_ADDR": fake.address}, wait_s=3)
    assert not reading["answered"] and "answered something RAS would not" in reading["absent"]


def test_diagnostics_where_present_and_said_absent_before_2_31():
    with FakeRas(diagnostics=sample("diagnostics-differ.txt")) as fake:
        got = ras.ask_diagnostics({"NCCL_RAS_ADDR": fake.address})
    assert got["answered"] and len(got["differ"]) == 7 and "DIAGNOSTICS" in fake.commands
    with FakeRas(text=sample("status-ok-1rank.txt")) as fake:  # NCCL 2.28.9: no such command
        got = ras.ask_diagnostics({"NCCL_RAS_ADDR": fake.address})
    assert not got["answered"] and "no diagnostics" in got["absent"] and got["differ"] == []


# ---- a worker group asks RAS when a call hangs ------------------------------------------------------

def test_a_hang_carries_ras_evidence_into_the_failure_and_the_verdict(tmp_path):
    """The gloo group is told to ask (ras_evidence=True) a stand-in RAS whose answer names a stuck rank; the
    failure holds the reading (taken while the ranks ran), its message says it, measurement_completed shows it."""
    with FakeRas(text=sample("status-unresponsive-4rank.txt")) as fake:
        group = WorkerGroup("ras-hang", 1, "gloo", env={"NCCL_RAS_ADDR": fake.address}, log_dir=tmp_path,
                            ras_evidence=True, use_spares=False)
        try:
            with pytest.raises(WorkerTimeout) as info:
                group.run(f"{FAULTY}:hang", {"rank": 0}, timeout_s=2, what="hang-test")
        finally:
            group.close()
        assert "VERBOSE STATUS" in fake.commands
    failure = info.value.failure
    assert failure.ras["answered"] and failure.ras["group_pids"] and ("UNRESPONSIVE", 2, 2, 51234) in _kinds(failure.ras)
    assert "NCCL RAS (127.0.0.1:" in str(info.value) and "RAS UNRESPONSIVE 0x9e17999afaa87dbb: rank 2" in str(info.value)
    assert failure.as_dict(message=False)["ras"]["findings"]  # the record keeps it
    verdict = checks.measurement_completed(None, what="hang-test", placement="ras-hang", error=str(info.value),
                                           ras=failure.ras)
    assert verdict.outcome == "fail" and verdict.inputs["ras"]["answered"]
    assert any("RAS UNRESPONSIVE" in p for p in verdict.details["problems"][0].splitlines())
    # the same failure stopping a burn-in: its hard fault and verdict keep the reading
    fault = faults.from_error(info.value, 4, {}, (0,))
    assert fault.kind == faults.HANG and fault.ras is failure.ras
    burn_in = checks.burn_in.burn_in_no_hard_fault(None, status="stopped by a hard fault", rounds=4, seconds=9.0,
                                                   duration_s=60.0, fault=fault.as_record(), checked={})
    assert "RAS UNRESPONSIVE 0x9e17999afaa87dbb: rank 2, GPU 2, pid 51234 on 10.0.0.5" in burn_in.message


def test_gloo_says_it_has_no_ras(tmp_path):
    with WorkerGroup("no-ras", 1, "gloo", log_dir=tmp_path, use_spares=False) as group:
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout) as info:
            group.run(f"{FAULTY}:hang", {"rank": 0}, timeout_s=1, what="hang-test")
        assert time.monotonic() - t0 < 8  # nothing waited on a RAS that cannot be there
    assert info.value.failure.ras == ras.not_read("not asked: the gloo backend has no NCCL RAS")
    assert "NCCL RAS not read: not asked: the gloo backend has no NCCL RAS" in str(info.value)
    assert faults.from_error(info.value, 1, {}, (0,)).ras == info.value.failure.ras  # a burn-in's hang says it too


# ---- a rank of fleet multinode asks its node's RAS before it leaves --------------------------------

def _rank_0(tmp_path):
    """Rank 0's judge of a two-node job, without torch.distributed: it only records here."""
    job = SimpleNamespace(started=time.monotonic(), thresholds=None, node="node0", nodes=["node0", "node1"], world=2,
                          simulated=False)
    return Judge(job, str(tmp_path / "network.jsonl"))


def test_a_multinode_rank_asks_ras_where_nccl_ras_addr_says_and_rank_0_records_it(tmp_path, capsys):
    """A step failed on an NCCL job: the rank reads RAS at NCCL_RAS_ADDR (a stand-in naming a dead process),
    prints it in its torchrun log, and rank 0's failure verdict in the record holds it (inputs and problems)."""
    with FakeRas(text=sample("status-dead-4rank.txt")) as fake:
        reading = failure_ras("nccl", 0, "node0", {"NCCL_RAS_ADDR": fake.address})
        assert fake.commands[-1] == "VERBOSE STATUS"
    assert reading["answered"] and reading["address"] == fake.address and reading["format"] == "text"
    assert reading["asked_by"]["rank"] == 0 and reading["asked_by"]["node"] == "node0"
    assert ("DEAD", None, 2, 51234) in _kinds(reading)
    print_ras(reading)
    assert f"wirecheck multinode: rank 0 (node0): NCCL RAS ({fake.address}, text" in capsys.readouterr().err
    judge = _rank_0(tmp_path)
    error = RuntimeError("NCCL error in: ProcessGroupNCCL.cpp, remote process exited or there was a network error")
    assert judge.record_break("all_reduce across 2 nodes", error, reading) == FAILED
    (verdict,) = [v for v in records(judge.writer.path) if v["type"] == "verdict"]
    assert verdict["check"] == "measurement_completed" and verdict["outcome"] == "fail"
    assert [f["pid"] for f in verdict["inputs"]["ras"]["findings"] if f["kind"] == "DEAD"] == [51234]
    assert any(p.startswith("  RAS DEAD") and "pid 51234 on 10.0.0.5" in p for p in verdict["details"]["problems"])


@pytest.mark.parametrize(("backend", "env", "said"), [
    ("gloo", {}, "not asked: the gloo backend has no NCCL RAS"),
    ("nccl", "free", "nothing listens on 127.0.0.1:"),
    ("nccl", {"NCCL_RAS_ENABLE": "0"}, "NCCL_RAS_ENABLE=0"),
])
def test_a_multinode_rank_without_ras_says_why_in_the_record(tmp_path, backend, env, said):
    env = {"NCCL_RAS_ADDR": f"127.0.0.1:{free_port()}"} if env == "free" else env
    reading = failure_ras(backend, 1, "node1", env)
    assert reading["answered"] is False and said in reading["absent"]
    judge = _rank_0(tmp_path)
    judge.record_break("the pair schedule", TimeoutError("timed out"), reading)
    (verdict,) = [v for v in records(judge.writer.path) if v["type"] == "verdict"]
    assert verdict["outcome"] == "fail" and verdict["details"]["problems"][-1].startswith("NCCL RAS not read: ")
    assert said in verdict["details"]["problems"][-1]
