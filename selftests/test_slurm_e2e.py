"""The Slurm batch script (scripts/slurm/fleet-acceptance.sbatch) under a real Slurm, as an operator
submits it: three Slurm nodes, each a host of its own on this machine (a network namespace with its
own address and hostname, one slurmd), a controller beside them, and the script run unchanged in its
rehearsal mode (SIMULATE: CPU processes and gloo for GPUs and NCCL).

What only a real Slurm shows: srun's one task per node, $SLURMD_NODENAME naming each record,
`scontrol show hostnames` writing nodes.txt, `wirecheck fleet multinode` taking the node count, the
rendezvous host (the job's first node, resolved by name and reached over the bridge, as gloo's
connections between the nodes are) and the job id from Slurm's variables, and
the job's exit status carrying the fleet report's. Two jobs on one cluster: a fleet that passes
(exit 10: a rehearsal, never 0), and one whose node wc2 leaves no record and whose multi-node step
leaves none either (exit 1, wc2 and the network named).

Needs Debian's slurmd, slurmctld and slurm-client (.ci/run installs them), iproute2, root, and
`unshare --mount --net --uts`.
Elsewhere it skips, unless WIRECHECK_REQUIRE_SLURM is set (CI): then it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from e2e import PROJECT, pythonpath, records

NODES = ("wc1", "wc2", "wc3")
SELECTION = "test_busbw and all_reduce and nvswitch"
SBATCH = PROJECT / "scripts" / "slurm" / "fleet-acceptance.sbatch"
CLUSTER = Path(__file__).with_name("slurm_cluster.sh")
# The cluster's own mount, network and hostname namespaces: nothing of the machine's is touched.
UNSHARE = ["unshare", "--mount", "--net", "--uts", "--propagation", "private"]
# The second job: wc2's `wirecheck validate` dies before writing anything, and the multi-node step
# fails on every node before rank 0 writes a line (as a failed rendezvous does). The report runs for real.
BROKEN = """#!/usr/bin/env bash
if [ "$SLURMD_NODENAME" = wc2 ] && [ "$1" = validate ]; then echo "wc2: validate broke" >&2; exit 3; fi
if [ "$1 $2" = "fleet multinode" ]; then echo "multinode: the rendezvous failed" >&2; exit 2; fi
exec "{wirecheck}" "$@"
"""


def _missing() -> str | None:
    packages = {"slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client", "sinfo": "slurm-client",
                "scontrol": "slurm-client", "unshare": "util-linux", "nsenter": "util-linux", "mount": "mount",
                "ip": "iproute2"}
    for tool, package in packages.items():
        if shutil.which(tool) is None:
            return f"{tool} not found (Debian: apt-get install {package})"
    if os.geteuid() != 0:
        return "needs root: slurmd runs the tasks as root here, and /etc/hosts is replaced in a mount namespace"
    if subprocess.run(UNSHARE + ["true"], capture_output=True).returncode:
        return f"`{' '.join(UNSHARE)}` is not permitted on this machine"
    return None


def _write_cluster(root: Path, extra: tuple[str, ...] = (), nodes: tuple[str, ...] = NODES) -> None:
    """slurm.conf (with `extra` lines), the hosts file and the node list for slurm_cluster.sh. Every address
    is inside the network namespaces the test makes; each host has its own stack, so Slurm's default ports do."""
    addresses = {node: f"10.77.0.{11 + k}" for k, node in enumerate(nodes)}
    lines = [
        "ClusterName=wirecheck-selftest",
        "SlurmctldHost=wc-ctl(10.77.0.1)",
        # Test-only: no munge daemon to run. A real cluster keeps auth/munge.
        "AuthType=auth/none", "CredType=cred/none",
        "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/slurmctld.log", f"SlurmdLogFile={root}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "ReturnToService=2", "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SlurmdParameters=config_overrides",  # three nodes' CPUs on one machine's cores
    ]
    lines += [f"NodeName={node} NodeHostname={node} NodeAddr={address} CPUs=2 RealMemory=2000"
              for node, address in addresses.items()]
    lines.append(f"PartitionName=all Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP")
    lines += extra
    (root / "state").mkdir()
    (root / "spool").mkdir()
    (root / "slurm.conf").write_text("\n".join(lines) + "\n")
    hosts = ["127.0.0.1 localhost", "10.77.0.1 wc-ctl", *(f"{a} {n}" for n, a in addresses.items())]
    (root / "hosts").write_text("\n".join(hosts) + "\n")
    (root / "nodes").write_text("".join(f"{n} {a}\n" for n, a in addresses.items()))


def _job(root: Path, name: str, wirecheck: Path) -> str:
    """The script as an operator submits it, its results in root/name, its exit status in root/name.rc.
    Polled every 0.2 s rather than `sbatch --wait`, which polls at growing intervals (20-30 s late here)."""
    return (f"id=$(WIRECHECK={wirecheck} sbatch --parsable --nodes={len(NODES)} --gpus-per-node=0 --time=10 "
            f"--job-name={name} --output={root}/{name}.out {SBATCH} {root}/{name}) || exit 1; "
            f"while [ -n \"$(squeue -h -j $id -o %T)\" ]; do sleep 0.2; done; "
            f"scontrol show job $id | grep -o ' ExitCode=[0-9]*' | cut -d= -f2 > {root}/{name}.rc")


@pytest.fixture(scope="module")
def slurm_jobs(tmp_path_factory):
    missing = _missing()
    if missing:
        if os.environ.get("WIRECHECK_REQUIRE_SLURM"):
            pytest.fail(f"WIRECHECK_REQUIRE_SLURM is set but {missing}")
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("slurm")
    _write_cluster(root)
    wirecheck = Path(sys.executable).with_name("wirecheck")
    broken = root / "wirecheck-broken"
    broken.write_text(BROKEN.format(wirecheck=wirecheck))
    broken.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update(PYTHONPATH=pythonpath(), SIMULATE="h200-sxm-2", PROFILE="h200-sxm-2",
               PYTEST_ADDOPTS=f"-p no:cacheprovider -k '{SELECTION}'")
    jobs = " && ".join([_job(root, "passing", wirecheck), _job(root, "missing", broken)])
    try:
        done = subprocess.run([*UNSHARE, "bash", str(CLUSTER), str(root), "--", "bash", "-c", jobs], env=env,
                              cwd=root, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        _stop_daemons(root)  # the cluster script was killed before its own clean-up
        pytest.fail(f"the Slurm jobs took over {exc.timeout} s\n{_logs(root)}")
    assert done.returncode == 0, done.stdout + done.stderr + _logs(root)
    return root, _logs(root)


def _logs(root: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(root.glob("*.out")) + sorted(root.glob("*.log")))


def _stop_daemons(root: Path) -> None:
    for pid_file in root.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), 15)
        except (OSError, ValueError):
            pass


def _fleet(results: Path) -> dict:
    return json.loads((results / "fleet.json").read_text())


def test_the_rehearsal_runs_every_step_and_exits_10(slurm_jobs):
    root, logs = slurm_jobs
    results = root / "passing"
    assert (root / "passing.rc").read_text().strip() == "10", logs  # a rehearsal never reads as accepted
    assert (results / "nodes.txt").read_text().split() == list(NODES)  # scontrol show hostnames
    for node in NODES:  # each node validated itself, its record named by $SLURMD_NODENAME
        run = records(results / f"{node}.jsonl")
        assert run[0]["simulated"] and run[-1]["type"] == "end" and run[-1]["exit_status"] == 10, node
        assert any(r.get("kind") == "collective" for r in run), node
        assert (results / f"{node}.xml").is_file()
        log = (results / f"validate-{node}.log").read_text()  # srun --output=validate-%N.log
        assert "no GPU was validated; no failures, exit 10" in log, log
        assert "wirecheck fleet multinode: " in (results / f"multinode-{node}.log").read_text()
    network = next(results.glob("network-*.jsonl"))
    head = records(network)[0]
    assert head["multinode"]["nodes"] == list(NODES), head  # torchrun joined all three through Slurm's variables
    assert re.fullmatch(r"network-\d+\.jsonl", network.name), network.name  # named after $SLURM_JOB_ID
    fleet = _fleet(results)
    assert [n["node"] for n in fleet["nodes"]] == list(NODES) and all(n["ok"] for n in fleet["nodes"]), fleet
    assert fleet["simulated"]
    text = (results / "fleet.txt").read_text()
    assert "SIMULATION" in text, text
    assert (results / "fleet.html").read_text().lower().startswith("<!doctype html>")


def test_a_node_or_a_network_step_that_leaves_no_record_fails_the_job_by_name(slurm_jobs):
    root, logs = slurm_jobs
    results = root / "missing"
    assert (root / "missing.rc").read_text().strip() == "1", logs
    assert not (results / "wc2.jsonl").exists() and not list(results.glob("network-*.jsonl"))
    assert "wc2: validate broke" in (results / "validate-wc2.log").read_text()  # stderr is in the node's log
    fleet = _fleet(results)
    failed = [n["node"] for n in fleet["nodes"] if not n["ok"]]
    assert failed == ["wc2"], fleet
    # Without --expect-network the report would have passed a fleet whose network was never measured.
    assert fleet["network_record"]["outcome"] == "fail", fleet["network_record"]
    text = (results / "fleet.txt").read_text()
    assert "wc2: [node_record] validation record on wc2: no record wc2.jsonl" in text, text
    assert "network run: MISSING" in text and "network: [network_record] multi-node record on network: the multi-node step wrote none" in text, text


# ---- the drain hooks under the same Slurm ----------------------------------------------------------------
# A cluster of their own, as a site configures them: Prolog and HealthCheckProgram set to the hooks of an
# install (scripts/slurm/ and scripts/lib/ copied into a root-only folder), whose settings point WIRECHECK at a
# fake `wirecheck validate` (and `diagnose`) that plays one node's outcome by host and record name; `wirecheck
# node-state --hook` is the real command, reading the real sinfo for the guard, and so is every step after.
# Four nodes in one partition, the guard at its 50 %:
#   wc1  its prolog's check fails, then passes its re-test: flaky, the job runs, the node stays idle;
#   wc2  its prolog's check fails again on the re-test: diagnosed, drained with the culprit, the job requeued held;
#   wc3  its health check (when slurmd starts) fails GPU 1 a third time this week: "replace", with the bundle;
#   wc4  then its prolog's check keeps failing too: 3 of 4 would be drained within 5 minutes, the guard holds.
DRAIN_NODES = ("wc1", "wc2", "wc3", "wc4")
DRAIN_HOOKS = ("scripts/lib/wirecheck-hook.sh", "scripts/slurm/wirecheck-prolog.sh", "scripts/slurm/wirecheck-healthcheck.sh")
GPU_SERIALS = ("1650123456789", "1650123456790")
DRAIN_RECORD = {"header": {"type": "run", "schema": 2, "simulated": False,
                           "gpus": [{"index": i, "serial": s} for i, s in enumerate(GPU_SERIALS)]},
                "failed": {"type": "verdict", "test": "tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]",
                           "check": "busbw", "what": "all_reduce busbw at 1 GiB", "where": "nvswitch-2gpu-0.1",
                           "outcome": "fail", "message": "m", "measured": 12.34, "unit": "GB/s",
                           "limit": {"min": 360.0, "max": None}, "gpus": [1]},
                "passed": {"type": "verdict", "test": "tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]",
                           "check": "busbw", "what": "all_reduce busbw at 1 GiB", "where": "nvswitch-2gpu-0.1",
                           "outcome": "pass", "message": "m", "measured": 401.2, "unit": "GB/s",
                           "limit": {"min": 360.0, "max": None}, "gpus": [1]},
                "diagnosis": {"type": "verdict", "check": "diagnosis", "what": "busbw", "where": "nvswitch-2gpu-0.1",
                              "outcome": "fail", "message": "m",
                              "details": {"result": "found", "culprit": "GPU1 NVLink 11 CRC +412 under pair load"}},
                "end": {"type": "end", "status": "complete"}}
DRAIN_FAKE = """#!/bin/bash
if [ "$1" = diagnose ]; then
  out=; prev=; for a in "$@"; do [ "$prev" = --json ] && out=$a; prev=$a; done
  printf '%s\\n' '{header}' '{diagnosis}' '{end}' >"$out"; exit 20
fi
if [ "$1" != validate ]; then PYTHONPATH={src} exec {python} -m wirecheck.cli.main "$@"; fi
record=; prev=; for a in "$@"; do [ "$prev" = --wirecheck-json ] && record=$a; prev=$a; done
case "$(hostname)/${{record##*/}}" in
  wc1/prolog.jsonl|wc[24]/prolog*.jsonl|wc3/healthcheck*.jsonl) printf '%s\\n' '{header}' '{failed}' '{end}' >"$record"; exit 1 ;;
  *) printf '%s\\n' '{header}' '{passed}' '{end}' >"$record"; exit 0 ;;
esac
"""
# The flaky and the failing job at once; once wc2 and wc3 are drained, the job on wc4; then every node's state.
DRAIN_JOBS = """
flaky=$(sbatch --parsable -w wc1 --wrap=true -o /dev/null) && bad=$(sbatch --parsable -w wc2 --wrap=true -o /dev/null) || exit 1
for _ in $(seq 300); do
  [ -z "$(squeue -h -j "$flaky" -o %T)" ] && squeue -h -j "$bad" -o %r | grep -q held \\
    && [ "$(sinfo -h -N -n wc2,wc3 -t drained -o %N | sort -u | wc -l)" = 2 ] && break
  sleep 0.2
done
guarded=$(sbatch --parsable -w wc4 --wrap=true -o /dev/null) || exit 1
for _ in $(seq 300); do [ -z "$(squeue -h -j "$guarded" -o %T)" ] && break; sleep 0.2; done
squeue -h -j "$bad" -o '%T|%r' >{root}/bad-job
scontrol show job "$flaky" | grep -o 'JobState=[A-Z]*' >{root}/flaky-job
scontrol show job "$guarded" | grep -o 'JobState=[A-Z]*' >{root}/guarded-job
sinfo -h -N -o '%N|%T|%E' >{root}/node-states
scontrol show node wc4 >{root}/wc4-node
"""


def _needs_slurm() -> None:
    missing = _missing()
    if missing:
        if os.environ.get("WIRECHECK_REQUIRE_SLURM"):
            pytest.fail(f"WIRECHECK_REQUIRE_SLURM is set but {missing}")
        pytest.skip(missing)


def _hook_site(root: Path, fake_text: str, settings: str, slurm_lines: tuple[str, ...], jobs: str,
               what: str) -> subprocess.CompletedProcess:
    """The drain hooks installed under `root`/site as root's, their WIRECHECK the fake `fake_text` (formatted with
    the record lines of DRAIN_RECORD), `settings` after WIRECHECK in wirecheck-drain.conf; a four-node cluster
    with `slurm_lines` (`{site}` in them: the install) runs `jobs` (`{root}` in it)."""
    site = root / "site"
    for rel in DRAIN_HOOKS:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT / rel, site / rel)
    fake = site / "wirecheck"
    fake.write_text(fake_text.format(src=PROJECT / "src", python=sys.executable,
                                     **{k: json.dumps(v) for k, v in DRAIN_RECORD.items()}))
    fake.chmod(0o755)
    (site / "scripts/slurm/wirecheck-drain.conf").write_text(f"WIRECHECK={fake}\n{settings}")
    _write_cluster(root, tuple(line.format(site=site) for line in slurm_lines), nodes=DRAIN_NODES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    try:
        done = subprocess.run([*UNSHARE, "bash", str(CLUSTER), str(root), "--", "bash", "-c", jobs.format(root=root)],
                              env=env, cwd=root, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired as exc:
        _stop_daemons(root)
        pytest.fail(f"{what} took over {exc.timeout} s\n{_logs(root)}")
    assert done.returncode == 0, done.stdout + done.stderr + _logs(root)
    return done


@pytest.fixture(scope="module")
def drained_cluster(tmp_path_factory):
    _needs_slurm()
    root = tmp_path_factory.mktemp("drain")
    # GPU 1 of wc3 failed twice this week already: the state file its hook keeps.
    (root / "records" / "wc3").mkdir(parents=True)
    now = time.time()
    (root / "records" / "wc3" / "drain-events.jsonl").write_text("".join(
        json.dumps({"event": "failed", "at": now - days * 86400, "gpus": [GPU_SERIALS[1]]}) + "\n" for days in (4, 2)))
    # Root's settings: one records folder per node (the four share this machine's disk), GPU_NODE=yes (no NVIDIA
    # driver here: the hooks would otherwise leave these nodes alone), a diagnosis on a second failure.
    done = _hook_site(root, DRAIN_FAKE, f"RECORDS={root}/records/%n\nGPU_NODE=yes\nSLURM_CONF={root}/slurm.conf\nDIAGNOSE=yes\n",
                      ("Prolog={site}/scripts/slurm/wirecheck-prolog.sh", "PrologFlags=Alloc", "PrologEpilogTimeout=180",
                       "HealthCheckProgram={site}/scripts/slurm/wirecheck-healthcheck.sh", "HealthCheckInterval=3600",
                       "HealthCheckNodeState=IDLE"), DRAIN_JOBS, "the drain jobs")
    states = {line.split("|")[0]: line.split("|")[1:] for line in (root / "node-states").read_text().splitlines()}
    return root, states, done.stderr + _logs(root)


def _events(root: Path, node: str) -> list[dict]:
    path = root / "records" / node / "drain-events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_check_that_fails_then_passes_its_retest_is_flaky_and_the_node_stays_idle(drained_cluster):
    root, states, logs = drained_cluster
    assert states["wc1"] == ["idle", "none"], (states, logs)  # never drained: its job ran
    assert (root / "flaky-job").read_text().strip() == "JobState=COMPLETED", logs
    flaky = [e for e in _events(root, "wc1") if e["event"] == "flaky"]
    assert len(flaky) == 1 and flaky[0]["node"] == "wc1" and flaky[0]["hook"] == "prolog", (_events(root, "wc1"), logs)
    assert (root / "records" / "wc1" / "prolog-retest.jsonl").is_file() and (root / "records" / "wc1" / "healthcheck.jsonl").is_file()


def test_a_check_that_keeps_failing_drains_with_the_culprit_and_requeues_the_job(drained_cluster):
    root, states, logs = drained_cluster
    assert states["wc2"] == ["drained", "wirecheck: GPU1 NVLink 11 CRC +412 under pair load"], (states, logs)
    # Slurm's prolog contract: the batch job goes back to the queue, held; Slurm's "Prolog error" kept our reason.
    assert (root / "bad-job").read_text().strip() == "PENDING|launch failed requeued held", logs
    assert list((root / "records" / "wc2").glob("prolog-unhealthy-*.jsonl")), logs  # the evidence stays
    assert (root / "records" / "wc2" / "prolog-diagnosis.jsonl").is_file()


def test_a_gpu_failing_a_third_time_is_to_be_replaced_with_its_bundle(drained_cluster):
    root, states, logs = drained_cluster
    state, reason = states["wc3"]
    assert state == "drained" and reason.startswith(
        f"wirecheck: replace the GPU {GPU_SERIALS[1]} (failed 3 times in 7 d): GPU1 NVLink 11 CRC"), (states, logs)
    bundle = Path(reason.rsplit("; bundle ", 1)[1])
    assert bundle.parent == root / "records" / "wc3" and bundle.is_file(), reason
    with tarfile.open(bundle) as tar:
        names = set(tar.getnames())
    assert {"healthcheck.jsonl", "healthcheck-retest.jsonl", "healthcheck-diagnosis.jsonl", "decision.txt",
            "kernel-xid.txt"} <= names, names


def test_above_the_guards_share_no_more_nodes_drain_and_the_guard_says_so(drained_cluster):
    root, states, logs = drained_cluster
    assert states["wc4"] == ["idle", "none"], (states, logs)  # held: 3 of 4 would be drained within 5 minutes
    assert (root / "guarded-job").read_text().strip() == "JobState=COMPLETED", logs
    comment = re.search(r"Comment=(.*)", (root / "wc4-node").read_text()).group(1)
    assert comment.startswith("wirecheck: GUARD: not draining wc4: 2 of 4 nodes drained by wirecheck in 5 min, 3 "
                              "would be 75% > 50%"), comment
    records = root / "records" / "wc4"
    assert f"remove {records}/guard to drain again" in comment and (records / "guard").is_file()
    assert 'wirecheck_drain_guard_held{node="wc4"} 1' in (records / "wirecheck-drain.prom").read_text()
    assert sum(s[0] == "drained" for s in states.values()) == 2, states


# A push that breaks every node: a four-node job's prologs fail at once. Every prolog's first look at the partition
# finds nothing drained yet; after its drain each reads the order the controller stamped the drains in.
TOGETHER_FAKE = """#!/bin/bash
if [ "$1" != validate ]; then PYTHONPATH={src} exec {python} -m wirecheck.cli.main "$@"; fi
record=; prev=; for a in "$@"; do [ "$prev" = --wirecheck-json ] && record=$a; prev=$a; done
printf '%s\\n' '{header}' '{failed}' '{end}' >"$record"; exit 1
"""
TOGETHER_JOBS = """
job=$(sbatch --parsable -N 4 -w wc1,wc2,wc3,wc4 --wrap=true -o /dev/null) || exit 1
for _ in $(seq 300); do
  [ "$(ls {root}/records/*/prolog-decision.err 2>/dev/null | wc -l)" = 4 ] && ! pgrep -f wirecheck-prolog.sh >/dev/null \\
    && break
  sleep 0.2
done
sleep 1
sinfo -h -N -o '%N|%T|%E' >{root}/node-states
for n in wc1 wc2 wc3 wc4; do scontrol show node "$n" | grep -o 'Comment=.*' | sed "s/^/$n|/"; done >{root}/comments
"""


def test_a_push_that_fails_every_prolog_at_once_drains_only_the_guards_share(tmp_path_factory):
    """Four prologs of one job fail in the same second: each drained before (on its first look at the partition,
    nothing was drained yet). Under a real slurmctld, the drains beyond the guard's share (50 %, from 3 drains)
    are taken back by their own hooks: exactly two nodes stay drained, the other two are idle with the GUARD
    comment."""
    _needs_slurm()
    root = tmp_path_factory.mktemp("together")
    done = _hook_site(root, TOGETHER_FAKE, f"RECORDS={root}/records/%n\nGPU_NODE=yes\nSLURM_CONF={root}/slurm.conf\n",
                      ("Prolog={site}/scripts/slurm/wirecheck-prolog.sh", "PrologFlags=Alloc", "PrologEpilogTimeout=180"),
                      TOGETHER_JOBS, "the prologs")
    logs = done.stdout + done.stderr + _logs(root)
    states = {line.split("|")[0]: line.split("|")[1] for line in (root / "node-states").read_text().splitlines()}
    comments = {line.split("|")[0]: line.split("|", 1)[1] for line in (root / "comments").read_text().splitlines()}
    drained = sorted(n for n, s in states.items() if s.startswith("drain"))
    assert len(drained) == 2, (states, comments, logs)
    for node in sorted(set(DRAIN_NODES) - set(drained)):
        assert not states[node].startswith("drain"), (states, logs)
        assert "wirecheck: GUARD: " in comments[node], (comments, logs)
