"""NCCL's path as evidence: the log parser and the check that reads it.

Logs: selftests/data/nccl/composed-* follow NCCL's own format strings (see the README there);
the device run's recorded logs, once kept under fixtures/reference/*/nccl-path/, are read by
test_recorded_logs too. Every check is shown passing on the right path and failing, with the
pair named and NCCL's line quoted, on the wrong one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import PROJECT
from wirecheck import checks
from wirecheck.nccl import log as nccl_log
from wirecheck.node.placement import Placement
from wirecheck.thresholds.file import load_thresholds

DATA = Path(__file__).parent / "data" / "nccl"
THRESHOLDS = load_thresholds(PROJECT / "thresholds.yaml")
NV18 = {"0-1": 18}


def _summary(name: str) -> dict:
    return nccl_log.summarize(p.read_text() for p in sorted(DATA.glob(f"composed-{name}.rank*.log")))


def _judge(summary: dict, p2p_disabled: bool, nv: dict = NV18, gpus=(0, 1), placement="nvswitch-2gpu-0.1"):
    return checks.nccl_path.nccl_path(
        THRESHOLDS, placement=placement, gpus=list(gpus), nv=nv, p2p_disabled=p2p_disabled,
        evidence={k: summary[k] for k in ("connections", "path_types", "info_lines")}, simulated=False)


def test_parser_reads_what_nccl_chose_on_nvlink():
    s = _summary("nvswitch-2gpu-0.1")
    assert s["nccl_version"] == "2.28.9"
    assert s["ranks"] == {"0": {"bus": "60", "cuda_dev": 0, "nvml_dev": 0, "nranks": 2},
                          "1": {"bus": "70", "cuda_dev": 1, "nvml_dev": 1, "nranks": 2}}
    assert [(c["src"], c["dst"], c["transport"], c["detail"], len(c["channels"])) for c in s["connections"]] == [
        (0, 1, "P2P", "CUMEM/read", 16), (1, 0, "P2P", "CUMEM/read", 16)]
    assert s["connections"][0]["line"] == "[0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
    assert s["path_types"] == {"0-1": "NVL", "1-0": "NVL"}
    assert s["graphs"] == [{"pattern": 4, "cross_nic": 0, "n_channels": 16, "bw_intra": 40.0, "bw_inter": 40.0,
                            "type_intra": "NVL", "type_inter": "PIX"}]
    assert s["channel_counts"] == {"coll": 16, "collnet": 16, "nvls": 0, "p2p": 32, "p2p_per_peer": 32}
    assert {"op": "AllReduce", "bytes": 1073741824, "algo": "RING", "proto": "SIMPLE", "channels": 16} in s["collectives"]
    assert s["env"] == {"NCCL_NVLS_ENABLE": "0"}


def test_parser_reads_the_host_path():
    s = _summary("forced_pcie-2gpu-0.1")
    assert {(c["transport"], c["detail"]) for c in s["connections"]} == {("SHM", "direct/direct")}
    assert s["connections"][0]["line"] == "[0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"
    assert s["path_types"]["0-1"] == "PHB"
    assert s["env"]["NCCL_P2P_DISABLE"] == "1"


def test_parser_reads_older_numbered_tuning_lines():
    s = nccl_log.summarize([(DATA / "composed-nccl-2.21-tuning.log").read_text()])
    assert {"op": "AllReduce", "bytes": 1073741824, "algo": "RING", "proto": "SIMPLE"} in s["collectives"]
    assert {"op": "AllReduce", "bytes": 1048576, "algo": "RING", "proto": "LL128"} in s["collectives"]


@pytest.mark.parametrize("line, expected", [
    ("h:1:2 [3] NCCL INFO Channel 07/1 : 3[3] -> 0[0] via P2P/IPC/read", ("P2P", "IPC/read", 7, 1)),
    ("h:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/direct pointer", ("P2P", "direct pointer", 2, 0)),
    ("h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 2[2] via P2P/indirect/1[1]/read", ("P2P", "indirect/1[1]/read", 1, 0)),
    ("[2026-11-30 10:00:00] h:1:2 [1] NCCL INFO Channel 03/0 : 1[1] -> 2[0] [send] via NET/IB/3/GDRDMA",
     ("NET", "IB/3/GDRDMA", 3, 0)),
])
def test_parser_reads_every_transport_line(line, expected):
    (c,) = nccl_log.parse([line]).connections
    assert (c.transport, c.detail, c.channel, c.conn) == expected


def test_parser_ignores_ring_listings_and_foreign_lines():
    facts = nccl_log.parse(["h:1:2 [0] NCCL INFO Channel 00/24 : 0 1 2 3", "not NCCL at all",
                            "h:1:2 [0] NCCL WARN Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"])
    assert facts.connections == [] and facts.info_lines == 1


def test_nvlink_placement_on_p2p_over_nvlink_passes():
    v = _judge(_summary("nvswitch-2gpu-0.1"), p2p_disabled=False)
    assert v.outcome == "pass", v.message
    assert "GPU0-GPU1: P2P/CUMEM/read over NVL" in v.message


def test_nvlink_placement_on_shm_fails_naming_the_pair_and_quoting_nccl():
    """What an exported NCCL_P2P_DISABLE=1 does to an NVSwitch placement."""
    v = _judge(_summary("forced_pcie-2gpu-0.1"), p2p_disabled=False)
    assert v.outcome == "fail"
    assert "GPU0-GPU1 (ranks 0-1): NV18, but NCCL used SHM/direct/direct, not P2P over NVLink" in v.message
    assert "'[0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct'" in v.message


def test_p2p_over_pcie_between_nvlink_gpus_fails():
    s = _summary("nvswitch-2gpu-0.1")
    s["path_types"] = {"0-1": "PIX", "1-0": "PIX"}
    v = _judge(s, p2p_disabled=False)
    assert v.outcome == "fail" and "NCCL's path between them is PIX, not NVLink" in v.message


def test_forced_host_path_passes_on_shm_and_fails_on_p2p():
    assert _judge(_summary("forced_pcie-2gpu-0.1"), p2p_disabled=True, placement="forced_pcie-2gpu-0.1").ok
    v = _judge(_summary("nvswitch-2gpu-0.1"), p2p_disabled=True, placement="forced_pcie-2gpu-0.1")
    assert v.outcome == "fail"
    assert "GPU0-GPU1 (ranks 0-1): P2P although NCCL_P2P_DISABLE=1: '[0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read'" in v.message


def test_a_pair_without_nvlink_is_not_judged_but_a_silent_nvlink_pair_is():
    s = _summary("forced_pcie-2gpu-0.1")
    assert _judge(s, p2p_disabled=False, nv={"0-1": 0}, placement="cross_quad-2gpu-0.1").ok
    # Three GPUs, the logs only show ranks 0 and 1: the NVLink pairs with rank 2 lack evidence.
    v = _judge(_summary("nvswitch-2gpu-0.1"), p2p_disabled=False, nv={"0-1": 18, "0-2": 18, "1-2": 18}, gpus=(0, 1, 2))
    assert v.outcome == "fail" and "GPU0-GPU2 (ranks 0-2): NV18, but NCCL logged no connection" in v.message


def test_no_evidence_fails_and_simulation_skips():
    v = checks.nccl_path.nccl_path(THRESHOLDS, placement="nvswitch-2gpu-0.1", gpus=[0, 1], nv=NV18, p2p_disabled=False,
                                   evidence={"connections": [], "path_types": {}, "info_lines": 3}, simulated=False)
    assert v.outcome == "fail" and "NCCL logged no connection line (3 INFO lines read)" in v.message
    v = checks.nccl_path.nccl_path(THRESHOLDS, placement="nvswitch-2gpu-0.1", gpus=[0, 1], nv=NV18, p2p_disabled=False,
                                   evidence=None, simulated=True)
    assert v.outcome == "skip" and "simulation" in v.message


def test_the_verdict_can_be_judged_again_from_its_record():
    v = _judge(_summary("forced_pcie-2gpu-0.1"), p2p_disabled=False)
    again = checks.rejudge(type(v).from_record(v.as_record()), THRESHOLDS)
    assert (again.outcome, again.message) == (v.outcome, v.message)


RECORDED = sorted(PROJECT.glob("fixtures/reference/*/nccl-path/*"))


@pytest.mark.parametrize("directory", [d for d in RECORDED if d.is_dir()] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no recorded NCCL logs yet: scripts/device/report_check.sh writes "
                                                     "them; keep them under fixtures/reference/<node>/nccl-path/<placement>/"))])
def test_recorded_logs(directory):
    """A device run's logs: NVLink placements read P2P over NVLink, forced_pcie reads no P2P."""
    summary = nccl_log.summarize(p.read_text(errors="replace") for p in sorted(directory.glob("*.log")))
    forced = directory.name.startswith("forced_pcie")
    gpus = [int(g) for g in directory.name.rsplit("-", 1)[-1].split(".")]
    nv = {f"{a}-{b}": 18 for i, a in enumerate(gpus) for b in gpus[i + 1:]}
    v = _judge(summary, p2p_disabled=forced, nv=nv, gpus=gpus, placement=directory.name)
    assert v.ok, v.message
    assert summary["collectives"], "no TUNING line: algorithm and protocol were not logged"


def test_the_pool_hands_back_each_communicators_own_log_lines(tmp_path, monkeypatch):
    """The plumbing on CPU: two gloo ranks make the sub-groups 0.1 and 1 in one order; while each is
    connected its lines land in the ranks' log files (as NCCL writes them), and each rank returns the byte
    ranges of each communicator it is in. Read by this process from the files (no call on the workers), the
    ranges of 0.1 hold that communicator's lines only, which judge as on a node; those of the other
    communicator are not among them. The parent's NCCL switches reach the ranks beside the logging ones."""
    from wirecheck.nccl import path as nccl_path
    from wirecheck.workers.launcher import WorkerGroup

    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # a site's switch: logging must not drop it
    ours = [x for p in sorted(DATA.glob("composed-nvswitch-2gpu-0.1.rank*.log")) for x in p.read_text().splitlines()]
    other = ["vm:410:1 [1] NCCL INFO Channel 00/0 : 0[1] -> 0[1] via SHM/direct/direct"]  # rank 0 of group 1
    with WorkerGroup("pool", 2, "gloo", env=nccl_path.debug_env(tmp_path, nccl_path.POOL_SUBSYS)) as group:
        made = group.run("selftests.faulty_workers:nccl_pool_with_a_log",
                         {"groups": [[0, 1], [1]], "ops": ["all_reduce", "all_to_all"], "size": 64,
                          "log_lines": {"0.1": ours, "1": other}}, timeout_s=60)
    assert [r["rank"] for r in made] == [0, 1]
    assert set(made[0]["slices"]) == {"0.1"} and set(made[1]["slices"]) == {"0.1", "1"}
    texts = []
    for r in made:
        assert r["log_path"] == str(tmp_path / f"nccl.{r['pid']}.log")
        assert r["nccl_env"]["NCCL_DEBUG_SUBSYS"] == nccl_path.POOL_SUBSYS
        assert r["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"
        texts.append(nccl_path.read_lines(r["log_path"], r["slices"]["0.1"]))
        assert "SHM" not in texts[-1]  # the other communicator's lines stay its own
    alone = nccl_path.read_lines(made[1]["log_path"], made[1]["slices"]["1"])
    assert "SHM/direct/direct" in alone and "P2P" not in alone
    summary = nccl_log.summarize(texts)
    assert len(summary["connections"]) == 2 and summary["ranks"].keys() == {"0", "1"}
    assert _judge(summary, p2p_disabled=False).outcome == "pass"
    assert _judge(summary, p2p_disabled=True).outcome == "fail"  # the same lines on the forced host path
    assert nccl_path.read_lines(str(tmp_path / "nccl.none.log"), [[0, 10]]) == ""  # NCCL wrote no file: no lines


def test_the_path_read_starts_no_group_where_the_pool_made_the_communicator(tmp_path):
    """read_pool_log reads what the last pool start logged for the placement, from the files; it starts the
    pool only for a placement no pool start has made (and then as the collectives' would be made). What a
    start keeps per placement is make_groups' answer for the placement's ranks."""
    from wirecheck.nccl import path as nccl_path
    from wirecheck.workers.pool import WorkerPool

    log = tmp_path / "nccl.7.log"
    log.write_text("head\n" + "\n".join(x for p in sorted(DATA.glob("composed-nvswitch-2gpu-0.1.rank0.log"))
                                        for x in p.read_text().splitlines()) + "\n")
    size = log.stat().st_size
    pool, started = WorkerPool([], backend="nccl", simulated=False, timeout_s=120), []
    pool.shared = lambda p: started.append(p.id)  # what a start would be: recorded, not made
    placement = Placement("nvswitch", (0, 1))
    answers = [{"rank": 0, "pid": 7, "log_path": str(log), "slices": {"0.1": [[0, 0], [5, size]]},
                "nccl_env": {"NCCL_DEBUG": "INFO"}}]
    start = nccl_path.logging_start(tmp_path / "nccl", ["all_reduce"], 8, fix="")(1)
    pool.kept.update(start.keep(answers, {placement.id: (0, 1), "single-1gpu-1": (1,)}))
    assert pool.kept["single-1gpu-1"] == []  # rank 0 is not in it
    (r,) = nccl_path.read_pool_log(pool, placement)
    assert started == [] and r["text"].startswith("vm:") and "P2P/CUMEM/read" in r["text"]
    assert r["nccl_env"] == {"NCCL_DEBUG": "INFO"}
    other = Placement("forced_pcie", (0, 1), {"NCCL_P2P_DISABLE": "1"})
    assert nccl_path.read_pool_log(pool, other) == [] and started == [other.id]  # not made yet: the pool starts for it
