"""`wirecheck fleet report` on record files written the way a node writes them (RecordFile, the suite's
own check functions), with 2x H200 SXM figures: the table, the exit codes, what a missing or cut
node looks like, bad input, the JSON and the HTML page.
"""

from __future__ import annotations

from dataclasses import replace
import json
from pathlib import Path

import pytest
import yaml

from e2e import PROJECT
from wirecheck import checks
from wirecheck.cli.fleet.report import main as report
from wirecheck.core.pair_schedule import all_pairs, pair_rounds
from wirecheck.records.file import Measurement, RecordFile
from wirecheck.thresholds.file import load_thresholds

GB, GIB, MIB = 1e9, 2**30, 2**20
PLACEMENT = "nvswitch-2gpu-0.1"
# Readings on 2x H200 SXM, 2026-11-30 (README): busbw GB/s at 1 GiB, DDP tokens/s.
REFERENCE = {"all_reduce": 326.2, "all_gather": 270.8, "reduce_scatter": 274.2}
DDP_TOKENS = 88_000.0
TH = load_thresholds(PROJECT / "thresholds.yaml")


def write_node(path: Path, scale: dict | None = None, *, simulated: bool = False, end: bool = True,
               jitter: float = 0.0, thresholds=TH, header: dict | None = None, end_extra: dict | None = None) -> Path:
    """One node's record: busbw at the floor size per op (REFERENCE x scale x (1 + jitter)), judged by
    the busbw check against `thresholds` as tests/test_collectives.py does, and a DDP training run.
    `header`: keys added to the run header (what a run records of its thresholds and wirecheck)."""
    scale = scale or {}
    header = {"host": path.stem, **(header or {})}  # each node's record names its own host, as a node's does
    size = thresholds.collective_settings(simulated).floor_size
    rf = RecordFile(path)
    rf.header({"simulated": simulated, "profile": "h200-sxm-2", "thresholds": str(thresholds.path), "versions": {},
               "env": {}, "fabric": "nvswitch", "gpus": [], "groups": [[0, 1]], "matrix": [],
               "placements": [{"id": PLACEMENT, "class": "nvswitch", "gpus": [0, 1]}], **(header or {})})
    for op, gbps in REFERENCE.items():
        busbw = gbps * scale.get(op, 1.0) * (1 + jitter) * GB / (1000 if simulated else 1)
        rf.measurement(Measurement("collective", PLACEMENT, f"{op} busbw", busbw / GB, "GB/s", {
            "op": op, "placement_class": "nvswitch", "n_gpus": 2, "backend": "gloo" if simulated else "nccl",
            "simulated": simulated, "bytes": size, "requested_bytes": size, "busbw": busbw, "algbw": busbw}))
        v = checks.collectives.busbw(thresholds, op=op, placement=PLACEMENT, placement_class="nvswitch", n_gpus=2,
                                     simulated=simulated, busbw_bytes_per_s=busbw, size_bytes=size,
                                     link_ceiling_bytes_per_s=None)
        rf.verdict(v, f"tests/test_collectives.py::test_busbw[{PLACEMENT}-{op}]")
    tokens = DDP_TOKENS * scale.get("ddp", 1.0) * (1 + jitter)
    rf.measurement(Measurement("strategy", PLACEMENT, "ddp training", tokens, "tokens/s",
                               {"strategy": "ddp", "n_gpus": 2, "ranks": [], "error": None}))
    if end:
        rf.end({"status": "complete", "exit_status": 0, "simulated": simulated, "tests": {"passed": 3},
                "verdicts": {"pass": 3}, "wall_s": 1.0, **(end_extra or {})})
    rf.close()
    return path


JITTER = (0.004, -0.006, 0.001, 0.007, -0.002, 0.0, -0.004, 0.003)


def fleet(tmp_path: Path, n: int = 6, slow: dict | None = None, simulated: bool = False) -> Path:
    d = tmp_path / "results"
    d.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        write_node(d / f"gpu{k:02d}.jsonl", (slow or {}).get(f"gpu{k:02d}"), simulated=simulated, jitter=JITTER[k])
    return d


def run(capsys, *argv) -> tuple[int, str, str]:
    code = report([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _row(out: str, node: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(node + " "))


def test_a_healthy_fleet_passes(tmp_path, capsys):
    code, out, _ = run(capsys, fleet(tmp_path), "--expect", 6)
    assert code == 0, out
    assert "PASSED: 0 of 6 node(s) failed" in out
    assert _row(out, "gpu03").split()[-1] == "PASS" and "0/3/0" in _row(out, "gpu03")


def test_a_node_ten_percent_below_its_peers_fails_the_fleet_above_its_floors(tmp_path, capsys):
    d = fleet(tmp_path, slow={"gpu03": {"reduce_scatter": 0.9}})
    code, out, _ = run(capsys, d, "--expect", 6, "--json", tmp_path / "fleet.json")
    assert code == 1
    row = _row(out, "gpu03")
    assert "0/3/0" in row and "1 of 4" in row and row.endswith("FAIL"), "its own floors pass; the fleet names it"
    assert all(_row(out, f"gpu{k:02d}").endswith("PASS") for k in (0, 1, 2, 4, 5))
    failure = next(line for line in out.splitlines() if "[fleet_outlier]" in line)
    assert "gpu03" in failure and "reduce_scatter busbw on nvswitch-2gpu-0.1 at 1 GiB" in failure
    assert "below the median" in failure and failure.endswith("(fleet limit)") or "(fleet limit);" in failure
    assert "fleet.hardware.busbw" not in failure  # where the limit is written: the JSON's verdict, not every line
    assert "below their peers (fleet rule): gpu03;" in out
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert data["named"]["fleet_rule"] == ["gpu03"] and data["exit_status"] == 1
    node = next(n for n in data["nodes"] if n["node"] == "gpu03")
    assert node["figures"]["busbw:reduce_scatter:nvswitch-2gpu-0.1"]["value"] == pytest.approx(274.2 * 0.9 * 1.007)


def test_training_throughput_is_a_key_figure(tmp_path, capsys):
    code, out, _ = run(capsys, fleet(tmp_path, slow={"gpu01": {"ddp": 0.5}}))
    assert code == 1 and "ddp tokens/s on nvswitch-2gpu-0.1" in out and "(fleet limit)" in out
    code, out, _ = run(capsys, fleet(tmp_path / "b", slow={"gpu01": {"ddp": 0.85}}))
    assert code == 0, "15 % is inside a training step's run-to-run noise (thresholds: 30 %)"


def test_a_missing_node_fails(tmp_path, capsys):
    d = fleet(tmp_path, n=4)
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("# scontrol show hostnames\ngpu00\ngpu01\ngpu02\ngpu03\ngpu04\n")
    code, out, _ = run(capsys, d, "--nodes", nodes)
    assert code == 1
    assert _row(out, "gpu04").split()[1] == "MISSING" and _row(out, "gpu04").endswith("FAIL")
    assert "gpu04: [node_record] validation record on gpu04: no record gpu04.jsonl" in out
    code, out, _ = run(capsys, d, "--expect", 6)
    assert code == 1 and "MISSING: 2 node(s) wrote no record" in out


def test_a_cut_short_or_empty_record_is_a_failed_node(tmp_path, capsys):
    d = fleet(tmp_path, n=4)
    write_node(d / "gpu04.jsonl", end=False)
    (d / "gpu05.jsonl").write_text("")
    code, out, _ = run(capsys, d)
    assert code == 1
    assert _row(out, "gpu04").split()[1] == "CUT" and "cut short (no end line)" in out
    assert _row(out, "gpu05").split()[1] == "BROKEN" and "empty: the run died before writing its header" in out


def test_a_narrowed_or_stopped_run_is_no_pass_of_the_node(tmp_path, capsys):
    """A node whose run checked other than the fleet's (a -k, another level) or stopped at its first failure (-x)
    ran part of what the others ran: its passes are not the node's acceptance. A fleet that all ran one selection
    is judged on it."""
    d = fleet(tmp_path, n=4)
    write_node(d / "gpu04.jsonl", header={"level": "quick", "selection": ["-k", "test_hbm_bandwidth"]})
    write_node(d / "gpu05.jsonl", end_extra={"stopped_early": True})
    code, out, _ = run(capsys, d)
    assert code == 1
    assert _row(out, "gpu04").split()[1] == "PARTIAL", out
    assert "it ran quick, -k test_hbm_bandwidth, where 4 of the fleet's nodes ran no level" in out
    assert _row(out, "gpu05").split()[1] == "PARTIAL" and "stopped at a failure (-x or --maxfail)" in out
    assert _row(out, "gpu03").split()[1] == "complete" and "2 PARTIAL, 4 PASS" in out
    same = tmp_path / "same"
    same.mkdir()
    for k in range(3):
        write_node(same / f"gpu{k:02d}.jsonl", jitter=JITTER[k], header={"selection": ["-k", "test_busbw"]})
    code, out, _ = run(capsys, same)
    assert code == 0 and "PARTIAL" not in out, out


def test_node_figures_are_held_against_nodes_of_the_same_gpu_model(tmp_path, capsys):
    """An H100 node among H200 nodes has the H200 nodes' placement ids: its DDP tokens/s, 40 % under theirs, was
    named below its peers. Each node's figures are held against nodes of its GPU models only, and the report
    says once that the fleet mixes models."""
    d = tmp_path / "results"
    d.mkdir()

    def gpus(model):
        return {"gpus": [{"index": i, "name": model, "uuid": f"GPU-{model[-4:]}-{d.name}-{i}"} for i in (0, 1)]}

    for k in range(4):
        write_node(d / f"gpu{k:02d}.jsonl", jitter=JITTER[k], header=gpus("NVIDIA H200"))
    write_node(d / "gpu04.jsonl", {"ddp": 0.6}, jitter=JITTER[4], header=gpus("NVIDIA H100 80GB HBM3"))
    code, out, _ = run(capsys, d, "--json", tmp_path / "fleet.json")
    assert "[fleet_outlier]" not in out and _row(out, "gpu04").endswith("PASS"), out
    assert code == 0, out
    assert ("GPU models: 2 in this fleet (NVIDIA H200 on 4 node(s); NVIDIA H100 80GB HBM3 on 1 node(s)): each node's "
            "and GPU's figures are held against nodes and GPUs of the same model(s) only") in out
    assert "ddp tokens/s on nvswitch-2gpu-0.1 (NVIDIA H200): 4 values" in out
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert len(data["notes"]) == 1
    node = next(n for n in data["nodes"] if n["node"] == "gpu04")
    assert node["figures"]["tokens:ddp:nvswitch-2gpu-0.1"]["models"] == ["NVIDIA H100 80GB HBM3"]


def test_a_copy_of_a_nodes_record_is_one_run_judged_once(tmp_path, capsys):
    """gpu01's record copied as gpu09 was a node of its own that passed and entered every median twice: it is the
    same run (host and start), judged once as gpu01; gpu09 fails as DUPLICATE, its figures left out."""
    d = fleet(tmp_path, n=4)
    (d / "gpu09.jsonl").write_bytes((d / "gpu01.jsonl").read_bytes())
    code, out, _ = run(capsys, d, "--json", tmp_path / "fleet.json")
    assert code == 1, out
    assert _row(out, "gpu09").split()[1] == "DUPLICATE" and _row(out, "gpu01").endswith("PASS"), out
    assert "record gpu09.jsonl is the same run as gpu01.jsonl (host gpu01, started " in out
    assert "a copy, judged once as gpu01; gpu09 has no run of its own here" in out
    assert "1 DUPLICATE, 4 PASS" in out
    assert "ddp tokens/s on nvswitch-2gpu-0.1: 4 values" in out, "gpu01 in the medians once"
    # the host an FQDN, the file the short name: still the node that ran it; a run whose host names no file fails both
    fqdn = tmp_path / "fqdn"
    fqdn.mkdir()
    write_node(fqdn / "gpu-a00.jsonl", header={"host": "gpu-a01.cluster.local"})
    write_node(fqdn / "gpu-a01.jsonl", header={"host": "gpu-a01.cluster.local"})
    (fqdn / "gpu-a00.jsonl").write_bytes((fqdn / "gpu-a01.jsonl").read_bytes())
    write_node(fqdn / "gpu-a02.jsonl")
    code, out, _ = run(capsys, fqdn)
    assert _row(out, "gpu-a00").split()[1] == "DUPLICATE" and _row(out, "gpu-a01").endswith("PASS"), out
    (fqdn / "gpu-a01.jsonl").unlink()
    (fqdn / "gpu-a03.jsonl").write_bytes((fqdn / "gpu-a00.jsonl").read_bytes())
    code, out, _ = run(capsys, fqdn)
    assert _row(out, "gpu-a00").split()[1] == _row(out, "gpu-a03").split()[1] == "DUPLICATE", out
    assert "none of them named by its host gpu-a01.cluster.local: none judged" in out


def test_a_record_whose_header_lists_no_placements_meets_its_peers(tmp_path, capsys):
    """An older record names its GPUs but not its placements: its figures are of the node's GPU models, and so held
    against the same figures of the newer records of those GPUs, never a group of their own without peers."""
    d = tmp_path / "mixed"
    d.mkdir()
    gpus = [{"index": i, "name": "NVIDIA H200"} for i in range(2)]
    for k in range(4):
        header = {"gpus": gpus, **({"placements": []} if k == 3 else {})}
        write_node(d / f"gpu{k:02d}.jsonl", {"ddp": 0.5} if k == 3 else None, jitter=JITTER[k], header=header)
    code, out, _ = run(capsys, d)
    assert code == 1 and _row(out, "gpu03").endswith("FAIL"), out  # half the tokens/s of its three peers
    assert "ddp tokens/s on nvswitch-2gpu-0.1: 4 values" in out, out


def test_its_own_verdicts_are_judged_again(tmp_path, capsys):
    d = fleet(tmp_path)
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    data["collectives"]["floors"]["nvswitch"]["all_gather"][2]["min"] = "271 GB/s"
    raised = tmp_path / "raised.yaml"
    raised.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, _ = run(capsys, d, "--thresholds", raised)
    assert code == 1
    failing = sorted(line.split()[0] for line in out.splitlines() if line.startswith("gpu") and line.endswith("FAIL"))
    assert failing == ["gpu01", "gpu04", "gpu05"], out  # 270.8 GB/s with jitter -0.6 %, -0.2 %, 0 % stay under 271
    assert "[busbw] all_gather busbw at 1 GiB on nvswitch-2gpu-0.1: measured" in out and "raised.yaml" in out


def test_a_simulated_fleet_says_so(tmp_path, capsys):
    code, out, _ = run(capsys, fleet(tmp_path, simulated=True), "--html", tmp_path / "fleet.html")
    assert code == 10 and out.rstrip().splitlines()[-2].startswith("wirecheck fleet report: SIMULATION"), out
    assert "PASSED" not in out and "no failures in a SIMULATION" in out, out  # never a pass
    page = (tmp_path / "fleet.html").read_text()
    # headlined as loudly as a failure, and the pairs no multi-node run measured are "not measured", as in the text
    assert "<h1>wirecheck fleet: SIMULATION (no failures): no node validated</h1>" in page and "PASSED" not in page
    assert "class='banner sim'" in page and "Slow links: <b>not measured</b>" in page


def test_bad_input_is_named(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nowhere")
    assert code == 2 and "nowhere: no such directory" in err and "--wirecheck-json DIR/$(hostname).jsonl" in err
    d = fleet(tmp_path, n=3)
    (d / "notes.jsonl").write_text('{"hello": 1}\n')
    code, _, err = run(capsys, d)
    assert code == 2 and "notes.jsonl" in err and "not a wirecheck record file" in err and "move it out" in err
    (d / "notes.jsonl").unlink()
    write_node(d / "sim.jsonl", simulated=True)
    code, _, err = run(capsys, d)
    assert code == 2 and "mixes simulated and hardware records (simulated: sim)" in err
    (d / "sim.jsonl").unlink()
    code, _, err = run(capsys, d, "--nodes", tmp_path / "missing.txt")
    assert code == 2 and "--nodes" in err and "one node name per line" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, empty)
    assert code == 2 and "no record files" in err


def test_an_output_that_is_a_record_or_an_input_is_refused_before_anything_is_written(tmp_path, capsys):
    """`--json DIR/node.jsonl` replaced a node's record with the fleet's JSON, exit 0: the node was gone from the
    next report. A record, or a file the report reads, is refused by the option, before the records are read."""
    d = fleet(tmp_path, n=3)
    node = d / "gpu01.jsonl"
    before = node.read_bytes()
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("gpu00\ngpu01\ngpu02\n")
    for option, target, extra in (("--json", node, ()), ("--html", node, ()), ("--json", nodes, ("--nodes", nodes))):
        code, out, err = run(capsys, d, option, target, *extra)
        assert code == 2 and f"--{option.lstrip('-')}: {target}" in err and "pass a new path" in err, err
        assert "nothing was written" in err and "Traceback" not in err and not out
    assert node.read_bytes() == before and nodes.read_text() == "gpu00\ngpu01\ngpu02\n"
    # a file of its own from an earlier day is replaced, as before
    (tmp_path / "fleet.json").write_text("{}\n")
    code, _, _ = run(capsys, d, "--json", tmp_path / "fleet.json")
    assert code == 0 and json.loads((tmp_path / "fleet.json").read_text())["nodes"]


def _network_record(path: Path, nodes: list[str], slow: str) -> None:
    """A multi-node record as rank 0 of wirecheck.fleet.multinode writes it: pairs and their verdicts."""
    rf = RecordFile(path)
    rf.header({"simulated": False, "thresholds": str(TH.path), "placements": [],
               "multinode": {"nodes": nodes, "world_size": len(nodes)}})
    pairs = []
    for a, b in all_pairs(pair_rounds(nodes)):
        busbw = 48e9 * (0.8 if slow in (a, b) else 1.0)
        pairs.append({"a": a, "b": b, "busbw_bytes_per_s": busbw})
        rf.measurement(Measurement("pair", f"{a}~{b}", "pair", busbw / GB, "GB/s", {"a": a, "b": b}))
    for n in nodes:
        rf.verdict(checks.fleet.pair_node(TH, node=n, pairs=pairs, simulated=False), f"multinode::pair_node::{n}")
    rf.end({"status": "complete", "exit_status": 1, "verdicts": {}, "tests": {}, "wall_s": 1.0})
    rf.close()


def test_the_pair_schedule_names_its_slow_node_in_the_table_and_the_page(tmp_path, capsys):
    d = fleet(tmp_path)
    _network_record(d / "network-42.jsonl", [f"gpu{k:02d}" for k in range(6)], slow="gpu04")
    page = tmp_path / "fleet.html"
    code, out, _ = run(capsys, d, "--expect", 6, "--html", page)
    assert code == 1
    assert _row(out, "gpu04").split()[-2:] == ["SLOW", "FAIL"] and _row(out, "gpu03").split()[-2:] == ["ok", "PASS"]
    assert "slow with every partner (pair schedule): gpu04;" in out
    assert "network run network-42.jsonl: 6 nodes, complete" in out
    html = page.read_text()
    assert html.count("<img") == 2 and "gpu04" in html and "FAILED" in html


def test_expect_network_fails_a_fleet_whose_multinode_step_left_no_record(tmp_path, capsys):
    d = fleet(tmp_path)
    code, out, _ = run(capsys, d, "--expect", 6)
    assert code == 0 and "MISSING" not in out, "without the option a fleet may have no network run"
    page = tmp_path / "fleet.html"
    code, out, _ = run(capsys, d, "--expect", 6, "--expect-network", "--json", tmp_path / "fleet.json", "--html", page)
    assert code == 1, out
    assert "network run: MISSING" in out and "network: [network_record] multi-node record on network: the multi-node step wrote none" in out
    assert "multinode-<node>.log under Slurm" in out and "FAILED: 0 of 6 node(s) failed; 1 failed network verdict(s)" in out
    data = json.loads((tmp_path / "fleet.json").read_text())
    assert data["network_record"]["outcome"] == "fail" and data["exit_status"] == 1
    assert "no multi-node record" in page.read_text() and "FAILED" in page.read_text()
    # With the record there, the same option passes and says how many it found.
    healthy = fleet(tmp_path / "b")
    _network_record(healthy / "network-7.jsonl", [f"gpu{k:02d}" for k in range(6)], slow="none")
    code, out, _ = run(capsys, healthy, "--expect", 6, "--expect-network", "--json", tmp_path / "b.json")
    assert code == 0, out
    assert json.loads((tmp_path / "b.json").read_text())["network_record"]["outcome"] == "pass"


def test_the_wirecheck_fleet_commands_are_subcommands_under_the_one_protocol(tmp_path, capsys):
    """`wirecheck fleet report|inventory|multinode|diagnose`: argparse subcommands of `wirecheck fleet`, each a
    module of wirecheck.cli.fleet under wirecheck.cli.protocol (NAME, add_parser, run, main), as every command."""
    from wirecheck.cli import fleet as cli_fleet, protocol
    from wirecheck.cli.main import main as wirecheck
    from wirecheck.core import exit_codes

    found = protocol.commands(cli_fleet)
    assert [c.NAME for c in found] == ["diagnose", "inventory", "multinode", "report"]
    assert all(c.__name__ == f"wirecheck.cli.fleet.{c.NAME}" and callable(c.main) for c in found)
    assert cli_fleet.main(["report", str(fleet(tmp_path)), "--expect", "6"]) == 0
    assert "PASSED: 0 of 6 node(s) failed" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        wirecheck(["fleet", "--help"])
    listed = capsys.readouterr().out
    assert info.value.code == 0 and "usage: wirecheck fleet" in listed
    assert all(f"    {c.NAME} " in listed for c in found), listed
    with pytest.raises(SystemExit) as info:
        wirecheck(["fleet", "report", "--help"])
    shown = capsys.readouterr().out
    assert info.value.code == 0 and "usage: wirecheck fleet report" in shown and "--expect-network" in shown, shown
    for argv, said in ((["fleet", "nonsense"], "invalid choice: 'nonsense'"),
                       (["fleet"], "the following arguments are required"),
                       (["fleet", "inventory", "--expect", "3"], "unrecognized arguments: --expect 3")):
        with pytest.raises(SystemExit) as info:
            wirecheck(argv)
        err = capsys.readouterr().err
        assert info.value.code == exit_codes.BAD_INPUT and said in err, (argv, err)
    assert "usage: wirecheck fleet inventory" in err  # refused with the subcommand's own usage line


def test_wirecheck_fleet_inventory_imports_none_of_the_report_s_modules(tmp_path):
    """Each fleet subcommand imports its library when it runs: building `wirecheck`'s parser, or running the
    inventory, reads no record module of the fleet report."""
    import subprocess
    import sys

    script = ("import sys; from wirecheck.cli.main import main; code = main(['fleet', 'inventory', '--sysfs-root', "
              f"{str(tmp_path)!r}, '--simulate', 'h200-nvl-8']); "
              "print(code, ' '.join(sorted(m for m in sys.modules if m.startswith('wirecheck.fleet.'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    _, _, modules = done.stdout.strip().splitlines()[-1].partition(" ")  # the exit code, then the modules
    loaded = set(modules.split())
    assert "wirecheck.fleet.inventory" in loaded, done.stdout + done.stderr
    assert not loaded & {"wirecheck.fleet.report", "wirecheck.fleet.judging", "wirecheck.fleet.records",
                         "wirecheck.fleet.html", "wirecheck.fleet.diagnose", "wirecheck.fleet.launch"}, loaded


# ---- at cluster scale: statistics in the verdict, failures first ----------------------------------


def test_the_others_statistics_from_one_sort_are_those_of_the_list_without_each_value():
    import random

    from wirecheck.core.peer_stats import leave_one_out, reference_of

    rng = random.Random(7)
    for n in (2, 3, 4, 5, 10, 11, 40):
        values = [rng.choice([1.0, 2.0, 2.0, 3.0, rng.random()]) for _ in range(n)]
        assert leave_one_out(values) == [reference_of(values[:k] + values[k + 1:]) for k in range(n)], values


def test_a_verdict_with_the_fleets_statistics_only_fails_the_slow_node_and_is_judged_again_the_same(tmp_path, capsys):
    """The verdict keeps the other nodes' median, scaled MAD and n (and the three slowest), not every
    peer's value; rejudge on its inputs gives the same verdict; a record's old `peers` still judges."""
    d = fleet(tmp_path, slow={"gpu03": {"reduce_scatter": 0.9}})
    code, out, _ = run(capsys, d, "--expect", 6, "--json", tmp_path / "fleet.json")
    assert code == 1
    data = json.loads((tmp_path / "fleet.json").read_text())
    node = next(n for n in data["nodes"] if n["node"] == "gpu03")
    (rec,) = node["outliers"]  # the one that did not pass, in full
    assert rec["rule"] == "fleet" and rec["outcome"] == "fail" and "peers" not in rec["inputs"]
    stats = rec["inputs"]["fleet"]
    assert stats["n"] == 5 and set(stats) == {"median", "scaled_mad", "n", "slowest"} and len(stats["slowest"]) == 3
    assert rec["details"]["figure"] == "reduce_scatter busbw on nvswitch-2gpu-0.1 at 1 GiB"
    again = checks.rejudge(checks.fleet.fleet_outlier(TH, **rec["inputs"]), TH)
    assert (again.outcome, again.message, again.limit) == ("fail", rec["message"], rec["limit"])
    # the same judgement from the old shape, every peer's value (what a record written before kept)
    peers = {n["node"]: n["figures"]["busbw:reduce_scatter:nvswitch-2gpu-0.1"]["value"]
             for n in data["nodes"] if n["node"] != "gpu03"}
    old = dict(rec["inputs"], peers=peers)
    del old["fleet"]
    legacy = checks.fleet.fleet_outlier(TH, **old)
    assert (legacy.outcome, legacy.limit) == ("fail", rec["limit"])
    # a healthy node's figures pass and are rows, not whole verdicts
    healthy = next(n for n in data["nodes"] if n["node"] == "gpu02")
    assert healthy["outliers"] == [] and {r["outcome"] for r in healthy["judged"]} == {"pass"}
    assert len(healthy["judged"]) == 4
    # the same inputs with a stricter rule: judged again from the statistics alone, now it passes nobody
    looser = {**rec["inputs"], "value": rec["inputs"]["fleet"]["median"] * 0.97}
    assert checks.fleet.fleet_outlier(TH, **looser).outcome == "pass"


def test_a_large_fleet_leads_with_its_failures_then_a_summary(tmp_path, capsys, monkeypatch):
    """Past FULL_TABLE_UP_TO nodes the terminal lists failures first, then counts per state, the worst
    nodes and the figures a node was named in, then the failed nodes' rows only; --full every row.
    The page: failures and the summary before every node's row, which sits in a collapsed section."""
    from wirecheck.fleet import html as fleet_html, report as fleet_report

    monkeypatch.setattr(fleet_report, "FULL_TABLE_UP_TO", 4)
    monkeypatch.setattr(fleet_html, "MAX_BARS", 4)
    d = fleet(tmp_path, n=8, slow={"gpu02": {"all_reduce": 0.92}, "gpu06": {"ddp": 0.5}})
    page = tmp_path / "fleet.html"
    code, out, _ = run(capsys, d, "-q", "--html", page)
    assert code == 1
    body = out.splitlines()[1:]  # after the line naming the directory
    assert body[0] == "failures (2 failed verdict(s) on 2 node(s)):", out
    assert body[1].startswith("  gpu02: [fleet_outlier] ") and body[2].startswith("  gpu06: [fleet_outlier] ")
    assert "summary: 8 node(s): 2 below peers, 6 PASS" in out
    assert "furthest below the fleet's median: gpu06 50." in out  # the worst first
    assert "  all_reduce busbw on nvswitch-2gpu-0.1 at 1 GiB: 8 values, median" in out and "1 named: gpu02" in out
    rows = [line for line in out.splitlines() if line.startswith("gpu")]
    assert [r.split()[0] for r in rows] == ["gpu02", "gpu06"], "only the failed nodes' rows"
    assert out.index("failures (") < out.index("summary:") < out.index("the failed nodes")
    code, out, _ = run(capsys, d, "-q", "--full")
    assert len([line for line in out.splitlines() if line.startswith("gpu0") and line.endswith("PASS")]) == 6
    html = page.read_text()
    assert html.index("<h2>Failures (2)</h2>") < html.index("<h2>Summary</h2>") < html.index("<h2>Every node</h2>")
    table = html[html.index("<h2>Every node</h2>"):]
    assert "<details><summary>every node (8, the 2 failed first)</summary>" in table
    assert table.index("<td>gpu02</td>") < table.index("<td>gpu00</td>"), "failed nodes first"


def test_the_page_leads_with_the_failures_and_keeps_the_names_behind_a_disclosure(tmp_path, capsys, monkeypatch):
    """The page led with a paragraph of every node each rule named (14 of 40 long names before anything else):
    now the failures come first, the names below them, behind a disclosure that says the counts once they are many."""
    from wirecheck.fleet import html as fleet_html

    monkeypatch.setattr(fleet_html, "MAX_NAMED_OPEN", 3)
    d = fleet(tmp_path, n=8, slow={f"gpu0{k}": {"all_reduce": 0.85} for k in (1, 3, 5, 7)})
    page = tmp_path / "fleet.html"
    code, _, _ = run(capsys, d, "-q", "--html", page)
    assert code == 1
    html = page.read_text()
    body = html[html.index("<body>"):]
    first = body.index("<h2>")
    assert body[first:].startswith("<h2>Failures (8)</h2>"), body[:2000]
    assert body.index("gpu01") > first, body[:2000]  # no node's name before the failures
    named = body.index("<details><summary>named by each rule: below their peers (fleet rule): 4; slow with every "
                       "partner (pair schedule): not measured")
    assert first < named and body.index("gpu01, gpu03, gpu05, gpu07") > named, body[:3000]
    d = fleet(tmp_path / "few", n=6, slow={"gpu02": {"all_reduce": 0.85}})
    code, _, _ = run(capsys, d, "-q", "--html", page)
    assert "<details open><summary>named by each rule: below their peers (fleet rule): 1;" in page.read_text()


def test_figure_names_come_from_the_verdicts_structure_not_their_wording(tmp_path, capsys):
    """The report and page read a fleet verdict's figure from details, never by splitting its text."""
    from wirecheck.fleet.html import relative_values
    from wirecheck.fleet.judging import digest, judge_fleet
    from wirecheck.fleet.records import collect
    from wirecheck.fleet.report import _gpu_names, render

    d = fleet(tmp_path, slow={"gpu03": {"reduce_scatter": 0.9}})
    result = judge_fleet(collect(d, digest=digest(TH)), TH)
    for n in result.nodes:
        n.outliers = [replace(v, what="reworded by a later version") for v in n.outliers]
    assert "reduce_scatter busbw on nvswitch-2gpu-0.1 at 1 GiB" in relative_values(result)
    assert "1 named: gpu03" in render(result) and _gpu_names(result) == ""
