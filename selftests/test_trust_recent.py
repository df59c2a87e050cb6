"""`wirecheck validate --trust-recent`: a recent pass stands for a run only while nothing changed.

The node is the fake NVML (selftests/fake_pynvml.py): the pass's snapshot and the node now are read from
it through wirecheck.node.snapshot, then one thing is changed per case and the pure decision
(wirecheck.records.trust.decide) must refuse for that reason and no other. One end-to-end run of the
command, in-process: it trusts a pass written by the record writer, then refuses once the kernel log holds
an Xid line, and runs the level (pytest's command is taken, not run: the decision is what is tested).
"""

from __future__ import annotations

import sys
import time

import pytest

from selftests import fake_pynvml
from wirecheck.cli import validate as validate_cli
from wirecheck.cli.foreground import Outcome
from wirecheck.cli.main import main
from wirecheck.core import exit_codes
from wirecheck.core.paths import suite_paths
from wirecheck.node import kernel_xid, nvml, snapshot, visible
from wirecheck.records import trust
from wirecheck.records.run import COMPLETE, RunWriter, run_header

NOW = 1_800_000_000.0
HOUR = 3600.0


def _scenario():
    scenario = fake_pynvml.nvswitch(2, links=4)
    for i, gpu in enumerate(scenario.gpus):
        gpu.serial = f"165200000{i}"
    return scenario


def _read(monkeypatch, scenario) -> dict:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.build(scenario))
    return snapshot.read_snapshot()


def _pass(snap: dict, **changes) -> trust.LastRun:
    fields = dict(path="/var/lib/wirecheck/prolog-previous.jsonl", started="2027-01-15T08:00:00+00:00",
                  ended_at=NOW - HOUR, level="quick", status="complete", exit_status=0, simulated=False, failed=0,
                  thresholds_digest="abc", snapshot=snap, selection=(),
                  ran_on=tuple(trust.gpu_key(g) for g in snap["gpus"]))
    fields.update({key: value(snap) if callable(value) else value for key, value in changes.items()})
    return trust.LastRun(**fields)


def _gpu(s, i=1):
    return s.gpus[i]


# case -> (a change to the node now, a change to the pass, xid lines now, the one refusal it must give)
CHANGES = {
    "unchanged": (None, {}, None, None),
    "new XID line": (None, {}, [{"xid": 79, "where": "PCI:0000:19:00", "at": NOW - 60}], "xid"),
    "volatile ECC growth": (lambda s: setattr(_gpu(s), "volatile_uncorrected", 1), {}, None, "ecc"),
    "aggregate ECC growth": (lambda s: setattr(_gpu(s), "aggregate_uncorrected", 3), {}, None, "ecc"),
    "row remap pending": (lambda s: setattr(_gpu(s), "remapped", (0, 1, 1, 0)), {}, None, "remap"),
    "driver change": (lambda s: setattr(s, "driver", "580.200.01"), {}, None, "driver"),
    "a GPU swapped": (lambda s: setattr(_gpu(s), "serial", "1652999999"), {}, None, "gpu_swapped"),
    "a GPU gone": (lambda s: s.gpus.pop(), {}, None, "gpu_count"),
    "a link down": (lambda s: setattr(_gpu(s).links[2], "active", False), {}, None, "link_down"),
    "link counter growth": (lambda s: setattr(_gpu(s, 0).links[3], "counters", (0, 0, 7, 0, 0)), {}, None, "link_errors"),
    "foreign process": (lambda s: _gpu(s, 0).processes.append((4242, "python", 2**30)), {}, None, "foreign_process"),
    "expired window": (None, {"ended_at": NOW - 7 * HOUR}, None, "expired"),
    "simulated pass": (None, {"simulated": True}, None, "simulated"),
    "failed pass": (None, {"exit_status": 1, "failed": 1}, None, "not_passed"),
    "different thresholds": (None, {"thresholds_digest": "def"}, None, "thresholds"),
    "a reboot": (None, {"snapshot": lambda snap: {**snap, "booted_at": snap["booted_at"] - HOUR}}, None, "rebooted"),
    "no snapshot kept": (None, {"snapshot": None}, None, "no_snapshot"),
    # the drain hook's re-test of one failed check passed: it says nothing of the level's other checks
    "a re-test's selection": (None, {"selection": ("-k (test_collectives.py and test_busbw)",)}, None, "selection"),
    "a record that does not say its selection": (None, {"selection": None}, None, "selection"),
    # a pass under CUDA_VISIBLE_DEVICES=0 validated GPU 0 alone; NVML's snapshot lists both GPUs all the same
    "a pass on some of the GPUs": (None, {"ran_on": lambda snap: (trust.gpu_key(snap["gpus"][0]),),
                                          "visible_then": "0"}, None, "gpus_not_run"),
    "a record that lists no GPU": (None, {"ran_on": None}, None, "gpus_unlisted"),
    # a pass without --profile skipped the profile's GPU count and fabric checks, and had other limits
    "a pass under another profile": (None, {"profile": "h200-sxm-8"}, None, "profile"),
}


@pytest.mark.parametrize("case", CHANGES)
def test_a_pass_stands_only_while_nothing_changed(monkeypatch, case):
    change, pass_changes, xids, refusal = CHANGES[case]
    then = _read(monkeypatch, _scenario())
    scenario = _scenario()
    if change:
        change(scenario)
    now = _read(monkeypatch, scenario)
    decision = trust.decide(_pass(then, **pass_changes), now, now=NOW, window_s=6 * HOUR, window_where="test",
                            asked_level="quick", thresholds="abc", version=then["wirecheck"], xid_lines=xids)
    assert {r.kind for r in decision.refusals} == ({refusal} if refusal else set()), [r.text() for r in decision.refusals]
    assert decision.trusted is (refusal is None)
    for r in decision.refusals:  # every reason reads as words, naming what changed
        assert r.text() and "{" not in r.text()


def test_an_acceptance_run_is_not_stood_for_by_a_quick_pass(monkeypatch):
    then = _read(monkeypatch, _scenario())
    decision = trust.decide(_pass(then), then, now=NOW, window_s=6 * HOUR, window_where="test",
                            asked_level="acceptance", thresholds="abc", version=then["wirecheck"])
    assert [r.kind for r in decision.refusals] == ["level"]


def _write_pass(path, scenario, monkeypatch, visible_devices: str | None = None) -> None:
    """A quick pass's record, as the suite writes it: its header lists the GPUs it ran on (those
    CUDA_VISIBLE_DEVICES names), its end line the node's snapshot (every GPU)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.build(scenario))
    if visible_devices is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible_devices)  # the header keeps it among its env
    topology = visible.from_environment(nvml.read_topology())
    writer = RunWriter(path)
    writer.header(run_header(simulated=False, simulation_source=None, thresholds=suite_paths().thresholds,
                             versions={}, placements=[], topology=topology, level="quick", selection=[]))
    writer.end(COMPLETE, 0, {"passed": 12}, node_snapshot=snapshot.snapshot_or_reason())
    writer.close()


def test_validate_trusts_a_recent_pass_and_runs_quick_after_a_new_xid(tmp_path, monkeypatch, capsys):
    record = tmp_path / "prolog-previous.jsonl"
    _write_pass(record, _scenario(), monkeypatch)
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("6,1,1000,-;Linux version 6.8.0\n")  # booted long before the pass: no Xid since
    monkeypatch.setattr(kernel_xid, "KMSG", str(kmsg))
    ran = []
    monkeypatch.setattr(validate_cli, "run_foreground", lambda cmd, *a, **k: ran.append(cmd) or Outcome(0, 0, False))
    args = ["validate", "--level", "quick", "--trust-recent", "--wirecheck-json", str(tmp_path / "prolog.jsonl")]

    assert main(args) == 0
    out = capsys.readouterr()
    assert not ran, "the trusted path runs no pytest"
    assert f"trusted the quick pass of {record}" in out.out and "exit 0" in out.out
    assert "2 GPU(s), the same by serial" in out.err and "no Xid line in the kernel log since the pass" in out.err

    since_boot_us = int((time.time() - (time.time() - time.clock_gettime(time.CLOCK_MONOTONIC))) * 1e6)
    kmsg.write_text(f"3,2,{since_boot_us},-;NVRM: Xid (PCI:0000:19:00): 79, pid=1, GPU has fallen off the bus.\n")
    assert main(args) == 0  # pytest "ran" and passed
    out = capsys.readouterr()
    assert ran and "--level" in ran[0] and "quick" in ran[0], "refused: the quick level runs"
    assert "1 new Xid line(s) in the kernel log since the pass: Xid 79 on PCI:0000:19:00" in out.err
    assert "trusted the" not in out.out


def test_the_window_comes_from_the_option_else_the_thresholds_key_and_a_bad_one_names_its_place():
    assert trust.trust_window({"trust_window": "6 h", "source": "s"}, "t.yaml") == (6 * HOUR, "t.yaml: prolog.trust_window")
    assert trust.trust_window({"trust_window": "6 h"}, "t.yaml", "90min") == (5400.0, "--trust-recent=90min")
    assert trust.trust_window(None, "t.yaml")[0] == trust.DEFAULT_WINDOW_S
    with pytest.raises(trust.TrustWindowError, match="--trust-recent: .*has no unit"):
        trust.trust_window(None, "t.yaml", "5")
    with pytest.raises(trust.TrustWindowError, match='t.yaml: prolog.trust_window: "soon" is not a duration'):
        trust.trust_window({"trust_window": "soon"}, "t.yaml")
    with pytest.raises(trust.TrustWindowError, match="give a mapping of trust_window and source"):
        trust.trust_window({"window": "6 h"}, "t.yaml")


def test_a_pass_on_some_gpus_stands_only_for_a_run_on_those(tmp_path, monkeypatch, capsys):
    """A pass of `CUDA_VISIBLE_DEVICES=0 wirecheck validate` says nothing of GPU 1: a prolog for the whole node
    runs the level, one for GPU 0 alone may trust it, unless it asks a --profile the pass was not held to; a
    CUDA_VISIBLE_DEVICES the suite would refuse is refused here too, naming it."""
    record = tmp_path / "prolog-previous.jsonl"
    _write_pass(record, _scenario(), monkeypatch, visible_devices="0")
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("6,1,1000,-;Linux version 6.8.0\n")
    monkeypatch.setattr(kernel_xid, "KMSG", str(kmsg))
    ran = []
    monkeypatch.setattr(validate_cli, "run_foreground", lambda cmd, *a, **k: ran.append(cmd) or Outcome(0, 0, False))
    args = ["validate", "--level", "quick", "--trust-recent", "--wirecheck-json", str(tmp_path / "prolog.jsonl")]

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert main(args) == 0 and ran, "the whole node: refused, the level ran"
    err = capsys.readouterr().err
    assert "the pass ran on GPU 0 only (CUDA_VISIBLE_DEVICES=0); this run would validate GPU 1 too" in err

    ran.clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    busy = _scenario()
    busy.gpus[1].processes.append((4242, "another job", 2**30))  # another job's process on GPU 1: not ours
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.build(busy))
    assert main(args) == 0 and not ran, "GPU 0 alone: the pass stands"
    out = capsys.readouterr()
    assert "the pass ran on every GPU this run would validate (1)" in out.err and "trusted the quick pass" in out.out

    assert main(args + ["--profile", "h200-sxm-2"]) == 0 and ran, "a profile the pass was not held to: refused"
    assert ("the pass was held to no --profile (the limits derived from the node), this run to --profile "
            "h200-sxm-2") in capsys.readouterr().err

    ran.clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert main(args) == exit_codes.USAGE_ERROR and not ran
    assert "CUDA_VISIBLE_DEVICES=7: there is no GPU 7 on this node" in capsys.readouterr().err


def test_tests_deselected_by_other_than_the_level_make_a_part():
    """A plugin or --sw deselects tests the header's options cannot name: the end line counts them, and the pass is
    of a part."""
    assert trust._selection({"selection": []}, {"deselected_other": 3}) == ("3 test(s) deselected (--lf, --sw or a plugin)",)
    assert trust._selection({"selection": []}, {"deselected_other": 0}) == ()
    assert trust._selection({}, None) is None
