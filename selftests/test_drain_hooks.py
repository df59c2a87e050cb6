"""The hooks that act on the verdict, run as a site installs them, without a cluster: the Slurm prolog and
HealthCheckProgram (scripts/slurm/) and the node-problem-detector plugin (scripts/k8s/node-problem-detector/).

Each test copies the scripts into an install of its own (root's files when run as root, as CI does) whose
settings (wirecheck-drain.conf, wirecheck-plugin.conf) point WIRECHECK at a fake `wirecheck validate` that
writes the record of one outcome (pass, a failed check, NVML broken, busy, a usage error, a simulation, a
hang) and hands `node-state` to the real command, and SCONTROL at a fake that logs what it was asked. What
is checked is the plumbing: the exit codes of each hook's contract, one line, what was drained and with
which reason; the decision itself is test_node_state.py's. The real Slurm: test_slurm_e2e.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import PROJECT
from wirecheck.core import problems

RECORD_HEADER = {"type": "run", "schema": 2, "host": "n1", "started": "2026-12-01T10:00:00+00:00",
                 "gpus": [{"index": 0}, {"index": 1}], "placements": []}
FAILED_BUSBW = {"type": "verdict", "test": "tests/test_collectives.py::test_busbw", "check": "busbw",
                "what": "all_reduce busbw at 1 GiB", "where": "nvswitch-2gpu-0.1", "outcome": "fail", "message": "m",
                "measured": 12.34, "unit": "GB/s", "limit": {"min": 360.0, "max": None}}
PASSED_BUSBW = dict(FAILED_BUSBW, outcome="pass", measured=400.0)
HOLDER = {"pid": 4321, "command": "wirecheck validate", "since": "2026-12-01T10:00:00+00:00", "host": "n1", "user": "root"}


def _lines(*objs: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


# outcome -> (the record the fake validate writes, or None; its output; its exit code)
OUTCOMES = {
    "pass": (_lines(dict(RECORD_HEADER, simulated=False), PASSED_BUSBW, {"type": "end", "status": "complete"}), "", 0),
    "fail": (_lines(dict(RECORD_HEADER, simulated=False), FAILED_BUSBW, {"type": "end", "status": "complete"}), "", 1),
    "nvml": (None, "wirecheck validate: NVML failed: NVML could not start (NVMLError_DriverNotLoaded: Driver Not Loaded)\n"
             + problems.state_line(problems.NVML_UNREADABLE,
                                   error="NVML could not start (NVMLError_DriverNotLoaded: Driver Not Loaded)"), 11),
    "busy": (_lines(dict(RECORD_HEADER, simulated=False), {"type": "end", "status": "busy", "exit_status": 75,
                                                           "holder": HOLDER}), "", 75),
    "usage": (None, "ERROR: --thresholds: /etc/x.yaml does not exist", 4),
    "simulated": (_lines(dict(RECORD_HEADER, simulated=True), FAILED_BUSBW, {"type": "end", "status": "complete"}), "", 1),
    "hang": (None, "", None),  # sleeps past the hook's time limit
    # the disk filled mid-run: a check had failed before it, the record ends naming the fault, exit 74
    "fault": (_lines(dict(RECORD_HEADER, simulated=False), FAILED_BUSBW,
                     {"type": "end", "status": "fault", "exit_status": 74,
                      "fault": {"what": "the record file", "path": "/var/lib/wirecheck/prolog.jsonl",
                                "cause": "No space left on device (ENOSPC)", "code": "ENOSPC"}}),
              "wirecheck validate: HARNESS FAULT, not a verdict on this node (exit 74): cannot write the record file "
              "/var/lib/wirecheck/prolog.jsonl: No space left on device (ENOSPC); free space there; exit 74", 74),
    "crash": (None, "wirecheck validate: the wirecheck plugin crashed, not a verdict on this node; exit 70", 70),
}

FAKE_WIRECHECK = """#!/bin/bash
# validate: record the call, then play the outcome in {root}/outcome; anything else: the real command.
if [ "$1" != validate ]; then
  PYTHONPATH={src} exec {python} -m wirecheck.cli.main "$@"
fi
record=; for a in "$@"; do [ "$prev" = --wirecheck-json ] && record=$a; prev=$a; done
call={root}/validate-call; outcome=$(cat {root}/outcome)
# node-state's re-test of the failed tests: {root}/retest names its outcome (default: the first run's)
case $record in *-retest.jsonl) call={root}/retest-call; [ -f {root}/retest ] && outcome=$(cat {root}/retest) ;; esac
{{ echo "cwd=$PWD"; echo "args=$*"; env | sort; }} > $call
[ -f {root}/$outcome.jsonl ] && cp {root}/$outcome.jsonl "$record"
[ -f {root}/$outcome.out ] && cat {root}/$outcome.out
[ "$outcome" = hang ] && exec sleep 60
exit $(cat {root}/$outcome.code)
"""

FAKE_SINFO = """#!/bin/bash
# the guard's view: wc2 and three more nodes in one partition, none drained
if [ "$1" = -R ]; then exit 0; fi
printf '%s\\n' 'wc1|gpu*' 'wc2|gpu*' 'wc3|gpu*' 'wc4|gpu*'
"""

FAKE_SCONTROL = """#!/bin/bash
# show node -o NAME: the state in {root}/node-state; update ...: logged, one call a line.
if [ "$1" = show ]; then echo "NodeName=$4 Arch=x86_64 State=$(cat {root}/node-state 2>/dev/null || echo IDLE) Reason=x"; exit 0; fi
printf '%s\\n' "$*" >> {root}/scontrol-calls
"""


@pytest.fixture
def install(tmp_path):
    """A site's install of the hooks, its settings pointing at the fakes."""
    root = tmp_path / "site"
    for rel in ("scripts/lib/wirecheck-hook.sh", "scripts/slurm/wirecheck-prolog.sh",
                "scripts/slurm/wirecheck-healthcheck.sh", "scripts/k8s/node-problem-detector/wirecheck-plugin.sh"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT / rel, root / rel)
    for outcome, (record, output, code) in OUTCOMES.items():
        if record is not None:
            (root / f"{outcome}.jsonl").write_text(record)
        (root / f"{outcome}.out").write_text(output + "\n" if output else "")
        (root / f"{outcome}.code").write_text(str(code))
    fakes = {"wirecheck": FAKE_WIRECHECK.format(root=root, src=PROJECT / "src", python=sys.executable),
             "scontrol": FAKE_SCONTROL.format(root=root), "sinfo": FAKE_SINFO}
    for name, text in fakes.items():
        (root / "bin").mkdir(exist_ok=True)
        (root / "bin" / name).write_text(text)
        (root / "bin" / name).chmod(0o755)
    settings = (f"WIRECHECK={root}/bin/wirecheck\nRECORDS={root}/records\nSCONTROL={root}/bin/scontrol\nSINFO={root}/bin/sinfo\n"
                "GPU_NODE=yes\nARGS=--profile h200-sxm-2\nENV=NCCL_NVLS_ENABLE=0\nPROLOG_TIMEOUT=45\nPLUGIN_TIMEOUT=45\n")
    (root / "scripts/slurm/wirecheck-drain.conf").write_text(settings)
    (root / "scripts/k8s/node-problem-detector/wirecheck-plugin.conf").write_text(settings + "MAX_LENGTH=80\n")
    return root


def run_hook(root: Path, hook: str, outcome: str, node_state: str = "IDLE", retest: str | None = None,
             env: dict | None = None):
    (root / "outcome").write_text(outcome)
    (root / "node-state").write_text(node_state)
    (root / "retest").unlink(missing_ok=True)
    if retest:
        (root / "retest").write_text(retest)
    for left in ("validate-call", "retest-call", "scontrol-calls"):
        (root / left).unlink(missing_ok=True)
    script = {"prolog": "scripts/slurm/wirecheck-prolog.sh", "healthcheck": "scripts/slurm/wirecheck-healthcheck.sh",
              "plugin": "scripts/k8s/node-problem-detector/wirecheck-plugin.sh"}[hook]
    # What slurmd gives a prolog, and what a careless caller might leave: none of it may reach the run.
    env = {"SLURMD_NODENAME": "wc2", "SLURM_JOB_ID": "7", "PYTHONPATH": "/home/user/evil", "PYTEST_ADDOPTS": "-k evil",
           "PYTHONHOME": "/home/user/evil", **(env or {})}
    done = subprocess.run([str(root / script)], env=env, cwd=root, capture_output=True, text=True, timeout=60)
    calls = (root / "scontrol-calls").read_text().splitlines() if (root / "scontrol-calls").exists() else []
    return done, calls


DRAIN_BUSBW = "update NodeName=wc2 State=DRAIN Reason=wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s"
DRAIN_NVML = ("update NodeName=wc2 State=DRAIN Reason=wirecheck: NVML failed: NVML could not start "
              "(NVMLError_DriverNotLoaded: Driver Not Loaded)")


@pytest.mark.parametrize("outcome, code, calls", [
    ("pass", 0, []),
    ("fail", 1, [DRAIN_BUSBW]),  # drained with the failed check, then 1: Slurm requeues the job held
    ("nvml", 1, [DRAIN_NVML]),  # a broken driver
    ("busy", 0, []),  # the job runs unchecked: a non-zero prolog would drain the node
    ("usage", 0, []),
    ("simulated", 0, []),  # a failed check in a simulation drains nothing
    ("hang", 0, []),  # past PROLOG_TIMEOUT without a failed check
    ("fault", 0, []),  # a full disk is ours, not the node's: even the failed check before it drains nothing
    ("crash", 0, []),
])
def test_the_prolog_drains_only_on_a_failed_check_or_a_broken_driver(install, outcome, code, calls):
    if outcome == "hang":  # a limit it runs past at once
        conf = install / "scripts/slurm/wirecheck-drain.conf"
        conf.write_text(conf.read_text().replace("PROLOG_TIMEOUT=45", "PROLOG_TIMEOUT=30"))  # the run: 5 s
    done, made = run_hook(install, "prolog", outcome)
    assert (done.returncode, made) == (code, calls), done.stderr
    assert done.stdout == ""


def test_the_prolog_runs_the_quick_level_cleanly_and_keeps_the_evidence(install):
    done, _ = run_hook(install, "prolog", "fail")
    call = (install / "validate-call").read_text().splitlines()
    records = install / "records"
    assert call[0] == f"cwd={records}"  # never the job's folder (python -m imports from the working directory)
    assert call[1] == (f"args=validate --wirecheck-json {records}/prolog.jsonl --trust-recent --level quick "
                       "--wait-for-node 60s --profile h200-sxm-2")
    # the failed test once more, with the same arguments and environment, by node-state (never --trust-recent)
    again = (install / "retest-call").read_text().splitlines()
    assert again[1] == ("args=validate --level quick --wait-for-node 60s --profile h200-sxm-2 -k (test_collectives.py "
                        f"and test_busbw) --wirecheck-json {records}/prolog-retest.jsonl"), again[1]
    assert "NCCL_NVLS_ENABLE=0" in again and not [line for line in again if line.startswith("PYTHONPATH=/home")]
    env = dict(line.split("=", 1) for line in call[2:] if "=" in line)
    assert env.get("NCCL_NVLS_ENABLE") == "0" and env["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert not {"PYTHONPATH", "PYTEST_ADDOPTS", "PYTHONHOME", "SLURM_JOB_ID"} & set(env), env
    kept = sorted(p.name for p in records.iterdir() if p.name.startswith("prolog"))
    # this run's, its re-test's and the decision's warnings, replaced by the next; the unhealthy run's stay
    unhealthy = [name for name in kept if name.startswith("prolog-unhealthy-")]
    assert sorted(set(kept) - set(unhealthy)) == ["prolog-decision.err", "prolog-retest.jsonl", "prolog-retest.log",
                                                  "prolog.jsonl", "prolog.lock", "prolog.log"], kept
    assert len(unhealthy) == 2 and unhealthy[0].endswith(".jsonl") and unhealthy[1].endswith(".log"), kept
    assert (records / "drain-events.jsonl").is_file() and (records / "wirecheck-drain.prom").is_file()
    assert "drained wc2: wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s" in done.stderr
    first = (records / "prolog.jsonl").read_bytes()
    run_hook(install, "prolog", "pass")  # the last run's record stays, aside, for validate --trust-recent to read
    assert (records / "prolog-previous.jsonl").read_bytes() == first


def test_a_node_drained_already_keeps_its_reason(install):
    done, calls = run_hook(install, "prolog", "fail", node_state="MIXED+DRAIN")
    assert (done.returncode, calls) == (1, []), done.stderr  # the job still goes back to the queue
    assert "is MIXED+DRAIN already: left as it is; this run found: wirecheck: busbw" in done.stderr
    done, calls = run_hook(install, "healthcheck", "fail", node_state="IDLE+DRAIN")  # not even checked
    assert (done.returncode, calls) == (0, []) and not (install / "validate-call").exists(), done.stderr


def test_the_healthcheck_drains_like_the_prolog_without_waiting(install):
    """The same decision as the prolog's (one helper); it does not wait for another run (that one checks)."""
    done, made = run_hook(install, "healthcheck", "fault")
    assert (done.returncode, made) == (0, []), done.stderr  # a full disk: not checked, never drained
    assert ("not checked: wirecheck: not checked (harness fault, exit 74): No space left on device (ENOSPC): the "
            "record file /var/lib/wirecheck/prolog.jsonl") in done.stderr
    done, made = run_hook(install, "healthcheck", "fail")
    assert (done.returncode, made) == (1, [DRAIN_BUSBW]), done.stderr
    assert "--level quick --wait-for-node 0s --profile" in (install / "validate-call").read_text()
    assert (install / "records" / "healthcheck.jsonl").is_file()


@pytest.mark.parametrize("outcome, code, line", [
    ("pass", 0, "wirecheck: passed: 1 checks on 2 GPU(s)"),
    ("fail", 1, "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s"),
    ("nvml", 1, "wirecheck: NVML failed: NVML could not start (NVMLError_DriverNotLoaded: Driv..."),
    ("busy", 2, "wirecheck: node busy: pid 4321 (wirecheck validate), user root, since 2026-12..."),
    ("simulated", 2, "wirecheck: SIMULATION: no GPU of this node was validated"),
    ("fault", 2, "wirecheck: not checked (harness fault, exit 74): No space left on device (ENO..."),
])
def test_the_npd_plugin_speaks_npds_protocol(install, outcome, code, line):
    """0 OK, 1 NonOK, 2 Unknown, and one line of at most max_output_length (80) on stdout."""
    done, calls = run_hook(install, "plugin", outcome)
    assert (done.returncode, done.stdout, calls) == (code, line + "\n", []), done.stderr
    assert len(line) <= 80 and line.isascii()


def test_settings_or_a_helper_another_user_could_change_are_not_used(install):
    """Root runs what the settings name: settings another user can write are refused, and so is the shared
    helper; nothing runs, nothing is drained, and the hooks say why (the prolog lets the job run)."""
    conf = install / "scripts/slurm/wirecheck-drain.conf"
    conf.chmod(0o666)
    done, calls = run_hook(install, "prolog", "fail")
    assert (done.returncode, calls) == (0, []) and not (install / "validate-call").exists()
    assert f"cannot run: {conf} (owner " in done.stderr and "mode 666) could be changed by another user" in done.stderr
    conf.chmod(0o644)
    lib = install / "scripts/lib/wirecheck-hook.sh"
    lib.chmod(0o646)
    done, calls = run_hook(install, "plugin", "fail")
    assert (done.returncode, done.stdout.count("\n")) == (2, 1) and not (install / "validate-call").exists()
    assert done.stdout.startswith("wirecheck: not checked: ") and "could be changed by another user" in done.stdout
    lib.chmod(0o644)
    (install / "scripts/slurm/wirecheck-drain.conf").write_text("WIRECHECK=bin/wirecheck\n")
    done, calls = run_hook(install, "prolog", "fail")
    assert (done.returncode, calls) == (0, []) and "WIRECHECK=bin/wirecheck: give an absolute path" in done.stderr
    (install / "scripts/slurm/wirecheck-drain.conf").write_text("WIRECHEK=/bin/true\n")
    done, calls = run_hook(install, "prolog", "fail")
    assert (done.returncode, calls) == (0, []) and "'WIRECHEK=/bin/true' is not KEY=VALUE with a known key" in done.stderr


def test_the_npd_config_runs_this_plugin_within_its_limits():
    folder = PROJECT / "scripts/k8s/node-problem-detector"
    monitor = json.loads((folder / "wirecheck-monitor.json").read_text())
    rule, = monitor["rules"]
    assert monitor["plugin"] == "custom" and rule["type"] == "permanent" and rule["condition"] == "WirecheckFailed"
    assert [c["type"] for c in monitor["conditions"]] == ["WirecheckFailed"]
    assert rule["path"] == "/opt/wirecheck/scripts/k8s/node-problem-detector/wirecheck-plugin.sh"  # the image's install
    settings = dict(line.split("=", 1) for line in (folder / "wirecheck-plugin.conf").read_text().splitlines()
                    if line and not line.startswith("#"))
    assert monitor["pluginConfig"]["max_output_length"] == int(settings["MAX_LENGTH"]) == 80
    assert int(settings["PLUGIN_TIMEOUT"]) + 10 < int(rule["timeout"].rstrip("s"))  # the plugin ends before NPD kills it
    assert os.access(folder / "wirecheck-plugin.sh", os.X_OK)


@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl"),
                    reason="this machine has the NVIDIA kernel driver")
def _pci(install: Path, *functions: tuple[str, str]) -> None:
    """The PCI functions the hooks see (vendor, class each), in a folder of the install's own."""
    pci = install / "pci"
    shutil.rmtree(pci, ignore_errors=True)
    pci.mkdir()
    for i, (vendor, klass) in enumerate(functions):
        (pci / f"0000:{i + 0x17:02x}:00.0").mkdir()
        (pci / f"0000:{i + 0x17:02x}:00.0" / "vendor").write_text(vendor + "\n")
        (pci / f"0000:{i + 0x17:02x}:00.0" / "class").write_text(klass + "\n")
    lib = install / "scripts/lib/wirecheck-hook.sh"
    lib.write_text(lib.read_text().replace("HOOK_PCI=/sys/bus/pci/devices", f"HOOK_PCI={pci}"))


@pytest.mark.skipif(Path("/proc/driver/nvidia").exists() or Path("/dev/nvidiactl").exists(),
                    reason="this machine has the NVIDIA driver: every node is a GPU node here")
def test_a_node_without_the_nvidia_driver_is_left_alone_unless_it_must_be_a_gpu_node(install):
    """GPU_NODE=auto (the default): CPU nodes under the same slurm.conf are not checked, and never drained. A node
    whose NVIDIA module did not load (a kernel update whose module build failed) still shows its GPUs on the PCI
    bus: it is checked, and NVML's failure drains it (it was left alone as a CPU node)."""
    conf = install / "scripts/slurm/wirecheck-drain.conf"
    conf.write_text(conf.read_text().replace("GPU_NODE=yes\n", "GPU_NODE=auto\n"))
    _pci(install, ("0x8086", "0x060000"), ("0x15b3", "0x020700"))  # a host bridge, a ConnectX NIC
    done, calls = run_hook(install, "prolog", "nvml")
    assert (done.returncode, calls) == (0, []) and not (install / "validate-call").exists(), done.stderr
    assert "no NVIDIA GPU here (no NVIDIA driver, no NVIDIA GPU on the PCI bus)" in done.stderr
    _pci(install, ("0x8086", "0x060000"), ("0x10de", "0x030200"))  # an H100's 3D controller
    done, calls = run_hook(install, "prolog", "nvml")
    assert (done.returncode, calls) == (1, [DRAIN_NVML]), done.stderr


def test_a_flaky_check_or_the_guard_keeps_the_node_in_service(install):
    """The drain rules' decisions as each hook acts on them (the rules: test_drain_decision.py): a check that
    passes its re-test drains nothing and the job runs; the guard holding sets the node's comment instead."""
    done, calls = run_hook(install, "prolog", "fail", retest="pass")
    assert (done.returncode, calls) == (0, []), done.stderr
    assert "wc2 not drained: wirecheck: flaky (1 of 3 in 1 d drains): failed, then passed its re-test: busbw" in done.stderr
    done, calls = run_hook(install, "plugin", "fail", retest="pass")  # NPD: OK, the line says flaky
    assert done.returncode == 0 and done.stdout.startswith("wirecheck: flaky (2 of 3"), done.stdout
    (install / "records" / "guard").write_text('{"since": "2026-12-01T10:00:00+00:00", "line": "3 of 4 drained"}\n')
    done, calls = run_hook(install, "healthcheck", "fail")
    assert done.returncode == 0 and len(calls) == 1 and calls[0].startswith(
        "update NodeName=wc2 Comment=wirecheck: GUARD (held since 2026-12-01T10:00:00+00:00): not draining wc2"), calls
    assert "NOT DRAINED wc2: wirecheck: GUARD" in done.stderr
    done, calls = run_hook(install, "plugin", "fail")  # NPD: Unknown, no condition for a controller to drain on
    assert done.returncode == 2 and done.stdout.startswith("wirecheck: GUARD (held since"), done.stdout


def _nvidia_smi(install: Path, output: str, code: int = 0) -> None:
    """The nvidia-smi the hooks ask which processes use the GPUs: prints `output`, exits `code`."""
    fake = install / "bin" / "nvidia-smi"
    fake.write_text(f"#!/bin/bash\nprintf '%s' '{output}'\nexit {code}\n")
    fake.chmod(0o755)
    lib = install / "scripts/lib/wirecheck-hook.sh"
    lib.write_text(lib.read_text().replace("HOOK_NVIDIA_SMI=nvidia-smi", f"HOOK_NVIDIA_SMI={fake}"))


def _validate_env(install: Path, call: str = "validate-call") -> dict:
    lines = (install / call).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines[2:] if "=" in line)


def test_the_prolog_checks_the_jobs_gpus_on_a_node_other_jobs_share(install):
    """Another job's processes on a shared node failed no_foreign_processes on every GPU, and the prolog drained a
    healthy node. It checks the job's GPUs (Slurm's SLURM_JOB_GPUS, also for the re-test); without them, a node
    whose GPUs are in use is not checked, as the health check does."""
    _nvidia_smi(install, "4242\n")
    done, calls = run_hook(install, "prolog", "fail", retest="fail", env={"SLURM_JOB_GPUS": "2-3,6"})
    assert done.returncode == 1 and calls == [DRAIN_BUSBW], done.stderr  # a failure on the job's GPUs still drains
    assert _validate_env(install)["CUDA_VISIBLE_DEVICES"] == "2,3,6"
    assert _validate_env(install, "retest-call")["CUDA_VISIBLE_DEVICES"] == "2,3,6"
    done, calls = run_hook(install, "prolog", "fail")
    assert (done.returncode, calls) == (0, []) and not (install / "validate-call").exists(), done.stderr
    assert "1 process(es) on the GPUs and no SLURM_JOB_GPUS: not checked, the job runs" in done.stderr


def test_an_nvidia_smi_that_fails_is_no_process_on_the_gpus(install):
    """A driver/library mismatch makes nvidia-smi print numbers and fail: read as processes, the health check and
    the plugin skipped the very node whose driver was broken. Now validate runs and names it."""
    _nvidia_smi(install, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144\n", 18)
    done, calls = run_hook(install, "healthcheck", "nvml")
    assert (done.returncode, calls) == (1, [DRAIN_NVML]), done.stderr
    done, _ = run_hook(install, "plugin", "nvml")
    assert done.returncode == 1 and done.stdout.startswith("wirecheck: NVML failed"), done.stdout


def test_a_bad_max_length_or_an_output_that_cannot_be_written_is_never_a_drain(install):
    """MAX_LENGTH=abc broke the plugin's own line under `set -u` (exit 1: NonOK on every node of the image); a
    records file that cannot be written made validate's redirection fail with 1, read as a failed check."""
    conf = install / "scripts/k8s/node-problem-detector/wirecheck-plugin.conf"
    conf.write_text(conf.read_text().replace("MAX_LENGTH=80\n", "MAX_LENGTH=abc\n"))
    done, _ = run_hook(install, "plugin", "pass")
    assert done.returncode == 2 and done.stdout.startswith("wirecheck: cannot run: MAX_LENGTH=abc"), done.stdout
    conf.write_text(conf.read_text().replace("MAX_LENGTH=abc\n", "MAX_LENGTH=12\n"))  # node-state takes 20 at least
    done, _ = run_hook(install, "plugin", "pass")
    assert done.returncode == 2 and "MAX_LENGTH=12: give a number of characters, at least 20" in done.stdout
    (install / "records" / "prolog.log").mkdir(parents=True)
    done, calls = run_hook(install, "prolog", "fail")
    assert (done.returncode, calls) == (0, []) and "cannot write" in done.stderr, done.stderr


def test_the_guard_on_kubernetes_reaches_the_cluster_from_the_pod(install):
    """kubectl finds the cluster from the pod's KUBERNETES_SERVICE_HOST and _PORT: the hook's clean environment
    dropped them, so the guard was never available on Kubernetes."""
    kubectl = install / "bin" / "kubectl"
    kubectl.write_text(f"#!/bin/bash\nenv > {install}/kubectl-env\necho '{{\"items\": []}}'\n")
    kubectl.chmod(0o755)
    conf = install / "scripts/k8s/node-problem-detector/wirecheck-plugin.conf"
    conf.write_text(conf.read_text() + f"KUBECTL={kubectl}\n")
    run_hook(install, "plugin", "fail", env={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    seen = dict(line.split("=", 1) for line in (install / "kubectl-env").read_text().splitlines() if "=" in line)
    assert seen["KUBERNETES_SERVICE_HOST"] == "10.96.0.1" and seen["KUBERNETES_SERVICE_PORT"] == "443"


def test_two_runs_of_one_hook_take_turns(install):
    """Two prologs at once (jobs sharing a node): the second moved the first one's record aside while it was
    written, and the first drained on "tests failed without a recorded verdict", never re-tested. One runs at a
    time; one that waits out its time limit checks nothing."""
    import fcntl

    conf = install / "scripts/slurm/wirecheck-drain.conf"
    conf.write_text(conf.read_text().replace("PROLOG_TIMEOUT=45", "PROLOG_TIMEOUT=30"))  # the lock: 2 s
    (install / "records").mkdir(exist_ok=True)
    with open(install / "records" / "prolog.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another prolog's run
        done, calls = run_hook(install, "prolog", "fail")
    assert (done.returncode, calls) == (0, []) and not (install / "validate-call").exists(), done.stderr
    assert "another prolog run held" in done.stderr


def test_a_hook_ends_within_its_time_limit_whatever_hangs(install):
    """slurmd kills a HealthCheckProgram at 60 s: the re-test had all that was left of the limit and node-state 30 s
    more on top, so a hung re-test and a slow controller ended the hook after the limit, killed before it drained.
    The runs share the limit less node-state's reserve (25 s: its decision, the drain's confirmation), and the
    guard's reads fit in it."""
    import time

    conf = install / "scripts/slurm/wirecheck-drain.conf"
    conf.write_text(conf.read_text() + "HEALTHCHECK_TIMEOUT=40\n")
    sinfo = install / "bin" / "sinfo"
    sinfo.write_text("#!/bin/bash\nsleep 4\n" + sinfo.read_text().split("\n", 1)[1])  # a loaded slurmctld
    started = time.monotonic()
    done, calls = run_hook(install, "healthcheck", "fail", retest="hang")
    took = time.monotonic() - started
    assert done.returncode == 1 and len(calls) == 1 and calls[0].startswith(DRAIN_BUSBW), calls  # on the first run
    assert took < 45, f"the hook took {took:.1f} s of its 40-s limit (and timeout's 5-s grace to kill)"


def test_the_evidence_of_a_node_that_keeps_failing_does_not_grow_without_bound(install):
    """node-problem-detector runs the plugin every 30 minutes on a NonOK node too: each run kept a record and an
    output. The newest 20 of each stay."""
    records = install / "records"
    records.mkdir(exist_ok=True)
    for i in range(25):  # earlier runs' evidence, oldest first
        for ext in ("jsonl", "log"):
            old = records / f"plugin-unhealthy-2026010{i // 10}T0000{i % 10:02d}Z.{ext}"
            old.write_text("")
            os.utime(old, (1_700_000_000 + i, 1_700_000_000 + i))
    done, _ = run_hook(install, "plugin", "fail")
    assert done.returncode == 1, done.stdout
    kept = sorted(p.name for p in records.glob("plugin-unhealthy-*.jsonl"))
    assert len(kept) == 20 and not (records / "plugin-unhealthy-20260100T000000Z.jsonl").exists(), kept
    assert len(list(records.glob("plugin-unhealthy-*.log"))) == 20


def test_a_drain_one_too_many_is_taken_back_and_the_job_runs(install):
    """Four nodes failing in the same second each read the partition before the others' drains: the guard saw
    none and each drained. After its drain the prolog reads the order the controller stamped: as the third of
    four (guard_min 3, share 50 %) it resumes its node (its reason still ours), sets the GUARD comment, and the
    job runs (exit 0)."""
    from datetime import datetime, timedelta

    def stamp(ago: float) -> str:
        return (datetime.now() - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%S")

    reason = "wirecheck: busbw nvswitch-2gpu-0.1 12.34 < 360 GB/s"
    (install / "reasons-after").write_text(f"wc1|{reason}|{stamp(1)}\nwc3|{reason}|{stamp(1)}\n")
    # sinfo -R: nothing drained until this node's drain landed (its line is added by scontrol below)
    sinfo = install / "bin" / "sinfo"
    sinfo.write_text(f"#!/bin/bash\nif [ \"$1\" = -R ]; then [ -f {install}/drained ] && cat {install}/reasons-after; "
                     f"exit 0; fi\nprintf '%s\\n' 'wc1|gpu*' 'wc2|gpu*' 'wc3|gpu*' 'wc4|gpu*'\n")
    scontrol = install / "bin" / "scontrol"
    scontrol.write_text(f"""#!/bin/bash
if [ "$1" = show ]; then
  if [ -f {install}/drained ]; then echo "NodeName=$4 State=IDLE+DRAIN Reason={reason} [root@now]"
  else echo "NodeName=$4 State=IDLE Reason=none"; fi
  exit 0
fi
printf '%s\\n' "$*" >> {install}/scontrol-calls
case "$*" in
  *State=DRAIN*) touch {install}/drained; echo "wc2|{reason}|$(date +%Y-%m-%dT%H:%M:%S)" >> {install}/reasons-after ;;
  *State=RESUME*) rm -f {install}/drained ;;
esac
""")
    done, calls = run_hook(install, "prolog", "fail", retest="fail")
    assert done.returncode == 0, done.stderr
    assert calls[0] == DRAIN_BUSBW and calls[1] == "update NodeName=wc2 State=RESUME", calls
    assert calls[2].startswith("update NodeName=wc2 Comment=wirecheck: GUARD: took back the drain of wc2: 2 of 4 nodes"), calls
    assert (install / "records" / "guard").is_file()


def test_a_guard_hold_keeps_a_persons_comment(install):
    """The GUARD line replaced the node's comment, a person's note (an RMA ticket) with it; it now goes first and
    the person's stays after it (an earlier GUARD line of ours is replaced)."""
    scontrol = install / "bin" / "scontrol"
    scontrol.write_text(f"""#!/bin/bash
if [ "$1" = show ]; then echo "NodeName=$4 Arch=x86_64 State=IDLE Comment=$(cat {install}/comment) Reason=x"; exit 0; fi
printf '%s\\n' "$*" >> {install}/scontrol-calls
""")
    (install / "records").mkdir(exist_ok=True)
    (install / "records" / "guard").write_text('{"since": "2026-12-01T10:00:00+00:00", "line": "3 of 4 drained"}\n')
    (install / "comment").write_text("RMA 4411: PSU swap pending")
    done, calls = run_hook(install, "healthcheck", "fail")
    assert done.returncode == 0 and len(calls) == 1, (calls, done.stderr)
    assert calls[0].startswith("update NodeName=wc2 Comment=wirecheck: GUARD (held since") and \
        calls[0].endswith(" | RMA 4411: PSU swap pending"), calls
    (install / "comment").write_text("wirecheck: GUARD (held since yesterday): not draining wc2 | RMA 4411: PSU swap pending")
    done, calls = run_hook(install, "healthcheck", "fail")
    assert calls[0].endswith(" | RMA 4411: PSU swap pending") and calls[0].count("wirecheck: GUARD") == 1, calls
