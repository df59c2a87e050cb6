"""`wirecheck node-state --hook`: the drain rules applied after a failed run (wirecheck.cli.drain_hook), on
this machine without a cluster: the re-test runs through a fake `wirecheck` (a shell script that plays the
re-test's outcome and a diagnosis, as test_drain_hooks.py's fake validate does), the guard reads a fake
`sinfo` or `kubectl` (their output as Slurm 22.05 and kubectl print it). The rules themselves are
test_drain_policy.py's; under a real Slurm: test_slurm_e2e.py.
"""

from __future__ import annotations

import json
import re
import tarfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from wirecheck.cli.main import main
from wirecheck.core import exit_codes as codes
from wirecheck.records import drain_policy as dp
from wirecheck.records import retest
from wirecheck.records.file import read_run
from wirecheck.report.drain import drain_section
from wirecheck.report.model import view_of

BUSBW = "tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]"
HEADER = {"type": "run", "schema": 2, "simulated": False, "host": "wc2",
          "gpus": [{"index": 0, "serial": "1650123456789"}, {"index": 1, "serial": "1650123456790"}]}
FAILED = {"type": "verdict", "test": BUSBW, "check": "busbw", "what": "all_reduce busbw at 1 GiB",
          "where": "nvswitch-2gpu-0.1", "outcome": "fail", "message": "m", "measured": 12.34, "unit": "GB/s",
          "limit": {"min": 360.0, "max": None}, "gpus": [1]}
PASSED = dict(FAILED, outcome="pass", measured=400.0)
END = {"type": "end", "status": "complete"}
CULPRIT = "GPU1 NVLink 11 CRC +412 under pair load"
DIAGNOSIS = {"type": "verdict", "check": "diagnosis", "what": "busbw", "where": "nvswitch-2gpu-0.1", "outcome": "fail",
             "message": "m", "details": {"result": "found", "culprit": CULPRIT}}

FAKE = """#!/bin/bash
# validate: log the call, write {root}/retest.jsonl as its record, exit with {root}/retest.code;
# diagnose: write {root}/diagnosis.jsonl as its record when there is one.
out=; prev=
for a in "$@"; do [ "$prev" = --wirecheck-json ] || [ "$prev" = --json ] && out=$a; prev=$a; done
case $1 in
  validate) printf '%s\\n' "$*" >>{root}/validate-calls; cp {root}/retest.jsonl "$out"; exit $(cat {root}/retest.code) ;;
  diagnose) printf '%s\\n' "$*" >>{root}/diagnose-calls; [ -f {root}/diagnosis.jsonl ] && cp {root}/diagnosis.jsonl "$out"; exit 20 ;;
esac
exit 4
"""


def _lines(*objs: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def _sinfo_stamp(seconds_ago: float) -> str:
    """sinfo's %H: the controller's local time, no zone."""
    return (datetime.now() - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.fixture
def site(tmp_path):
    root = tmp_path
    (root / "records").mkdir()
    (root / "first.jsonl").write_text(_lines(HEADER, FAILED, END))
    fake = root / "wirecheck"
    fake.write_text(FAKE.format(root=root))
    fake.chmod(0o755)
    retest_outcome(root, "pass")
    set_sinfo(root, nodes=("wc1", "wc2", "wc3", "wc4"), drained=())
    return root


def retest_outcome(root: Path, outcome: str) -> None:
    verdict = PASSED if outcome == "pass" else FAILED
    (root / "retest.jsonl").write_text(_lines(HEADER, verdict, END))
    (root / "retest.code").write_text("0" if outcome == "pass" else "1")


def set_sinfo(root: Path, nodes: tuple[str, ...], drained: tuple[tuple[str, str, float], ...]) -> None:
    """A fake sinfo: `-h -N -o %N|%R` lists `nodes` in partition gpu; `-R` lists (node, reason, seconds ago)."""
    (root / "members").write_text("".join(f"{n}|gpu*\n" for n in nodes))
    (root / "reasons").write_text("".join(f"{n}|{r}|{_sinfo_stamp(ago)}\n" for n, r, ago in drained))
    sinfo = root / "sinfo"
    sinfo.write_text(f"#!/bin/bash\nif [ \"$1\" = -R ]; then cat {root}/reasons; else cat {root}/members; fi\n")
    sinfo.chmod(0o755)


def hook(root: Path, *more: str, hook_kind: str = "slurm", code: int = 1, capsys=None) -> tuple[int, str, str]:
    args = ["node-state", "--exit-code", str(code), "--record", str(root / "first.jsonl"), "--hook", hook_kind,
            "--node", "wc2", "--records", str(root / "records"), "--mode", "prolog", "--wirecheck", str(root / "wirecheck"),
            "--sinfo", str(root / "sinfo"), "--time-left", "30",
            # the whole line, whatever the temporary folder's length (pytest-xdist's is longer); the cut to Slurm's
            # reason length has its own self-test (test_node_state.py)
            "--max-length", "2000", *more, "--", "--level", "quick", "--profile", "h200-sxm-2"]
    rc = main(args)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 1, out  # one decision, one line
    return rc, lines[0], err


def test_the_retest_selects_exactly_the_failed_tests_by_k():
    """pytest's own -k matcher: the failed test, not its neighbours (gpu1 is not gpu10), several at once."""
    tests = [BUSBW, "tests/test_gpu_health.py::test_clocks[gpu1]", "tests/test_x.py::test_odd[a b=c]"]
    expr = retest.selection(tests)
    compiled = Expression.compile(expr)

    def selected(module: str, name: str) -> bool:
        keywords = {module, name}
        return compiled.evaluate(lambda k: any(k.lower() in w.lower() for w in keywords))

    assert selected("test_collectives.py", "test_busbw[nvswitch-2gpu-0.1-all_reduce]")
    assert not selected("test_collectives.py", "test_busbw[nvswitch-2gpu-0.1-all_gather]")
    assert selected("test_gpu_health.py", "test_clocks[gpu1]") and not selected("test_gpu_health.py", "test_clocks[gpu10]")
    assert selected("test_x.py", "test_odd[z]")  # a name -k cannot hold: its function, more than failed, never fewer
    assert retest.selection([]) is None


def _write(folder: Path, name: str, *objs: dict) -> Path:
    path = folder / name
    path.write_text(_lines(*objs))
    return path


def test_failed_tests_are_read_from_the_record_once_each(tmp_path):
    run = read_run(_write(tmp_path, "r.jsonl", HEADER, FAILED, dict(FAILED, check="latency"), PASSED, END))
    assert retest.failed_tests(run) == [BUSBW]


def test_a_check_that_passes_its_retest_is_flaky_and_stays_in_service(site, capsys):
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_FLAKY == 30, line
    assert line.startswith("wirecheck: flaky (1 of 3 in 1 d drains): failed, then passed its re-test: busbw "), line
    call = (site / "validate-calls").read_text().splitlines()
    assert call == ["validate --level quick --profile h200-sxm-2 -k (test_collectives.py and "
                    f"test_busbw[nvswitch-2gpu-0.1-all_reduce]) --wirecheck-json {site}/records/prolog-retest.jsonl"]
    events = dp.read_events(site / "records" / "drain-events.jsonl")
    assert [e["event"] for e in events] == ["flaky"] and events[0]["node"] == "wc2", events
    prom = (site / "records" / "wirecheck-drain.prom").read_text()
    assert 'wirecheck_drain_flaky_events{node="wc2"} 1' in prom and 'decision="flaky"' in prom, prom
    # the third within a day drains, saying so
    hook(site, capsys=capsys)
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_UNHEALTHY and line.startswith("wirecheck: flaky 3 times in 1 d (failed, then passed"), line
    # the report of a record in the hook's folder shows them (the hook's own record is RECORDS/prolog.jsonl)
    record = _write(site / "records", "prolog.jsonl", HEADER, FAILED, END)
    shown = drain_section(view_of(record)).html()
    assert shown.count("flaky: not drained") == 2 and "flaky: drained (too many)" in shown, shown
    assert "3 flaky re-test(s) and 1 failure(s)" in shown, shown
    assert "flaky (1 of 3 in 1 d drains): failed, then passed its re-test: busbw" in shown
    elsewhere = drain_section(view_of(_write(site, "other.jsonl", HEADER, FAILED, END))).html()
    assert "No drain decisions beside this record" in elsewhere and "flaky: not drained" not in elsewhere


def test_a_check_that_fails_again_drains_with_the_diagnosed_culprit(site, capsys):
    retest_outcome(site, "fail")
    rc, line, _ = hook(site, capsys=capsys)
    assert (rc, line) == (codes.NODE_UNHEALTHY, "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s"), line
    assert not (site / "diagnose-calls").exists()  # not asked for
    (site / "diagnosis.jsonl").write_text(_lines(dict(HEADER, type="run"), DIAGNOSIS, END))
    rc, line, _ = hook(site, "--diagnose", capsys=capsys)
    assert (rc, line) == (codes.NODE_UNHEALTHY, f"wirecheck: {CULPRIT}"), line
    assert (site / "diagnose-calls").read_text().startswith(f"diagnose {site}/records/prolog-retest.jsonl --run --json")
    assert [e["event"] for e in dp.read_events(site / "records" / "drain-events.jsonl")] == ["failed", "failed"]


def test_a_retest_without_a_verdict_drains_on_the_first_failure_and_says_why(site, capsys):
    (site / "retest.code").write_text("75")  # busy: the retest did not run
    (site / "retest.jsonl").write_text(_lines(HEADER, {"type": "end", "status": "busy", "exit_status": 75}))
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_UNHEALTHY and line.startswith("wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s (re-test "
                                                          "gave no verdict (node busy"), line
    rc, line, _ = hook(site, "--time-left", "2", capsys=capsys)  # the last --time-left counts
    assert rc == codes.NODE_UNHEALTHY and re.search(r"\(not re-tested: [0-2] s of the hook's time left\)$", line), line
    # a --wirecheck that names nothing that runs: the first failure drains, the line says why, no traceback
    rc, line, err = hook(site, "--wirecheck", str(site / "nowhere"), capsys=capsys)
    # (the third failure of this GPU in the test's week: it escalates to replace, as any third failure does)
    assert rc == codes.NODE_REPLACE and (f"(not re-tested: --wirecheck {site / 'nowhere'} cannot be run (No such file "
                                         "or directory); fix the hook's WIRECHECK setting)") in line, line
    assert "Traceback" not in err


def test_the_guard_holds_above_half_the_partition_until_its_file_is_removed(site, capsys):
    retest_outcome(site, "fail")
    set_sinfo(site, ("wc1", "wc2", "wc3", "wc4"), (("wc1", "wirecheck: busbw x", 30), ("wc3", "wirecheck: y", 60),
                                                   ("wc4", "a person's reason", 10)))
    rc, line, _ = hook(site, capsys=capsys)
    guard = site / "records" / "guard"
    assert rc == codes.NODE_GUARD_HOLD == 31, line
    assert line.startswith("wirecheck: GUARD: not draining wc2: 2 of 4 nodes drained by wirecheck in 5 min, 3 would be "
                           "75% > 50%"), line
    assert f"remove {guard} to drain again" in line and line.endswith("[partition gpu]"), line
    prom = (site / "records" / "wirecheck-drain.prom").read_text()
    assert 'wirecheck_drain_guard_held{node="wc2"} 1' in prom and \
        'wirecheck_drain_guard_recent_drains{node="wc2",where="partition gpu"} 2' in prom, prom
    # the window has passed and nothing is drained now: the guard still holds, until a person removes the file
    set_sinfo(site, ("wc1", "wc2", "wc3", "wc4"), (("wc1", "wirecheck: busbw x", 900),))
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_GUARD_HOLD and line.startswith("wirecheck: GUARD (held since 20"), line
    guard.unlink()
    rc, line, _ = hook(site, capsys=capsys)
    # one old drain of 4: 2 would be 50 %, not above: it drains (GPU1's third failure today: replace it)
    assert rc == codes.NODE_REPLACE and line.startswith("wirecheck: replace the GPU 1650123456790"), line
    assert 'wirecheck_drain_guard_held{node="wc2"} 0' in (site / "records" / "wirecheck-drain.prom").read_text()


def test_without_sinfo_the_guard_is_not_available_and_says_so(site, capsys):
    retest_outcome(site, "fail")
    (site / "sinfo").unlink()
    rc, line, err = hook(site, capsys=capsys)
    assert rc == codes.NODE_UNHEALTHY and "GUARD NOT AVAILABLE: " in err and "sinfo not found" in err, err


def test_a_gpu_failing_the_third_time_in_a_week_is_replaced_with_its_evidence(site, capsys):
    retest_outcome(site, "fail")
    events = site / "records" / "drain-events.jsonl"
    for days in (3, 1):  # the same GPU failed twice this week; another GPU once
        dp.append_event(events, {"event": "failed", "at": time.time() - days * 86400, "gpus": ["1650123456790"]})
    dp.append_event(events, {"event": "failed", "at": time.time() - 3600, "gpus": ["1650123456789"]})
    (site / "records" / "prolog.log").write_text("validate's output\n")
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_REPLACE == 32, line
    assert line.startswith("wirecheck: replace the GPU 1650123456790 (failed 3 times in 7 d): busbw "), line
    bundle = Path(line.rsplit("; bundle ", 1)[1])
    assert bundle.parent == site / "records" and bundle.name.startswith("replace-wc2-") and bundle.name.endswith(".tar.gz")
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
        xid = tar.extractfile("kernel-xid.txt").read().decode()
    assert {"first.jsonl", "prolog-retest.jsonl", "prolog.log", "decision.txt", "kernel-xid.txt"} <= names, names
    assert xid.startswith("# "), xid  # where the Xid lines came from, or why none could be read
    # node-problem-detector keeps 80 characters: the reason stays whole enough to read, the bundle's path goes to
    # the log (a cut "...; bundle /var/lib/wirecheck/replace-ip-10-0-12-34.us-west-2.compute.int" said nothing)
    for days in (2, 1):
        dp.append_event(events, {"event": "failed", "at": time.time() - days * 3600, "gpus": ["1650123456790"]})
    retest_outcome(site, "fail")
    rc, line, err = hook(site, "--max-length", "80", capsys=capsys)
    assert rc == codes.NODE_REPLACE and line.startswith("wirecheck: replace the GPU 1650123456790 (failed ") and \
        "bundle" not in line and len(line) <= 80, line
    assert "replace-the-GPU evidence bundle: " in err and str(site / "records" / "replace-wc2-") in err, err
    # the other GPU failed once more only: its second time, no replacement; a run without a serial neither
    dp.append_event(events, {"event": "failed", "at": 0, "gpus": []})
    (site / "first.jsonl").write_text(_lines(HEADER, dict(FAILED, gpus=[0]), END))
    retest_outcome(site, "fail")
    (site / "retest.jsonl").write_text(_lines(HEADER, dict(FAILED, gpus=[0]), END))
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_UNHEALTHY, line


def test_an_uncorrectable_memory_fault_is_replaced_at_once(site, capsys):
    ecc = dict(FAILED, test="tests/test_gpu_health.py::test_ecc[gpu0]", check="ecc_uncorrected", what="uncorrected ECC",
               where="gpu0", gpus=[0], measured=2, unit="", limit={"min": None, "max": 0})
    (site / "first.jsonl").write_text(_lines(HEADER, ecc, END))
    (site / "retest.jsonl").write_text(_lines(HEADER, ecc, END))
    (site / "retest.code").write_text("1")
    rc, line, _ = hook(site, capsys=capsys)
    assert rc == codes.NODE_REPLACE and "replace the GPU 1650123456789: ecc_uncorrected" in line, line


def test_healthy_and_unknown_runs_pass_through_unchanged(site, capsys):
    (site / "first.jsonl").write_text(_lines(HEADER, PASSED, END))
    rc, line, _ = hook(site, code=0, capsys=capsys)
    assert (rc, line) == (0, "wirecheck: passed: 1 checks on 2 GPU(s)") and not (site / "validate-calls").exists()
    (site / "first.jsonl").write_text(_lines(dict(HEADER, simulated=True), FAILED, END))
    rc, line, _ = hook(site, capsys=capsys)
    assert (rc, line) == (2, "wirecheck: SIMULATION: no GPU of this node was validated")


def test_the_guard_on_kubernetes_counts_node_conditions(site, capsys):
    retest_outcome(site, "fail")
    now = datetime.now(timezone.utc)

    def node(name: str, failed_ago: float | None, plugin: bool = True) -> dict:
        conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        if plugin:  # node-problem-detector sets the condition (False while healthy) where the plugin runs
            conditions.append({"type": "WirecheckFailed", "status": "False" if failed_ago is None else "True",
                               "lastTransitionTime": (now - timedelta(seconds=failed_ago or 9000)).strftime(
                                   "%Y-%m-%dT%H:%M:%SZ")})
        return {"metadata": {"name": name}, "status": {"conditions": conditions}}

    # four GPU nodes the plugin watches, and CPU and control-plane nodes it does not: no share of the GPU fleet
    cpu = [node(f"cpu{i}", None, plugin=False) for i in range(30)]
    (site / "nodes.json").write_text(json.dumps({"items": [node("wc1", 20), node("wc2", None), node("wc3", 40),
                                                           node("wc4", 4000), *cpu]}))
    kubectl = site / "kubectl"
    kubectl.write_text(f"#!/bin/bash\ncat {site}/nodes.json\n")
    kubectl.chmod(0o755)
    rc, line, _ = hook(site, "--kubectl", str(kubectl), hook_kind="k8s", capsys=capsys)
    assert rc == codes.NODE_GUARD_HOLD and "2 of 4 nodes drained by wirecheck in 5 min" in line and \
        line.endswith("[nodes with WirecheckFailed]"), line
    (site / "records" / "guard").unlink()
    kubectl.write_text("#!/bin/bash\necho 'Error from server (Forbidden): nodes is forbidden' >&2; exit 1\n")
    rc, line, err = hook(site, "--kubectl", str(kubectl), hook_kind="k8s", capsys=capsys)
    assert rc == codes.NODE_UNHEALTHY and "GUARD NOT AVAILABLE: `" in err and "Forbidden" in err, err


def test_bad_drain_keys_or_folder_never_stop_a_failed_check_from_draining(site, capsys, tmp_path):
    """A thresholds file whose drain: section is wrong: the rules are not applied, loudly, and the failure
    drains as it would without them; a missing --records folder is this command's usage error (unknown)."""
    retest_outcome(site, "pass")  # a re-test would have said flaky
    bad = tmp_path / "site.yaml"
    bad.write_text("extends: wirecheck\ndrain:\n  guard_share: 3\n")
    args = ["node-state", "--exit-code", "1", "--record", str(site / "first.jsonl"), "--hook", "slurm", "--node", "wc2",
            "--records", str(site / "records"), "--wirecheck", str(site / "wirecheck"), "--sinfo", str(site / "sinfo"),
            "--", "--thresholds", str(bad)]
    rc = main(args)
    out, err = capsys.readouterr()
    assert (rc, out) == (1, "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s\n"), (out, err)
    assert "DRAIN RULES NOT APPLIED (no re-test, no guard): " in err and "guard_share" in err, err
    assert not (site / "validate-calls").exists()
    args[args.index("--records") + 1] = str(site / "nowhere")
    assert main(args) == 2 and "--hook needs --records DIR, an existing folder" in capsys.readouterr().err


def test_after_its_drain_a_hook_finds_whether_it_was_one_too_many(site, capsys):
    """Hooks that fail in the same second (a multi-node job's prologs after a bad push) each read the partition
    before the others' drains landed, and each drained: 16 of 16. Once its own drain has landed, each reads the
    order the controller stamped the drains in: the one beyond the share (here the third of four, with guard_min
    3) is told to take its drain back (exit 31, the guard file written); one within it keeps it (exit 0)."""
    reason = "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s"
    set_sinfo(site, nodes=("wc1", "wc2", "wc3", "wc4"), drained=(("wc1", reason, 20), ("wc3", reason, 20),
                                                                  ("wc2", reason, 0)))
    args = ["node-state", "--exit-code", "1", "--after-drain", "--hook", "slurm", "--node", "wc2", "--records",
            str(site / "records"), "--sinfo", str(site / "sinfo"), "--max-length", "2000", "--", "--level", "quick"]
    assert main(args) == codes.NODE_GUARD_HOLD
    line = capsys.readouterr().out.strip()
    assert line.startswith("wirecheck: GUARD: took back the drain of wc2: 2 of 4 nodes drained by wirecheck in 5 min, "
                           "3 would be 75% > 50%") and line.endswith("[partition gpu]"), line
    assert (site / "records" / "guard").is_file()
    (site / "records" / "guard").unlink()
    # the same drains, wc2's stamped first: the other two were the ones beyond the share
    set_sinfo(site, nodes=("wc1", "wc2", "wc3", "wc4"), drained=(("wc1", reason, 0), ("wc3", reason, 0),
                                                                  ("wc2", reason, 20)))
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("wirecheck: the drain stands: 0 drained before it in partition gpu")
    assert not (site / "records" / "guard").exists()
