"""`wirecheck validate`: a dry run never passes for a node.

Unit tests of the decision (hardware, simulation, refusal), the exit codes and the last line;
then the real command on this CPU machine: the simulation code and line, its own --help, and
Ctrl-C through a pseudo-terminal (pytest's summary, no traceback, records kept, exit 130).
"""

from __future__ import annotations

import os
import re
import subprocess
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from terminal import Terminal
from wirecheck.cli import node_decision
from wirecheck.cli import validate as cli_validate
from wirecheck.core import problems, refused_options
from wirecheck.node import driver, nvml
from wirecheck.cli.main import main
from wirecheck.core.exit_codes import CTRL_C, NODE_BUSY, NVML_BROKEN as NO_GPU_READABLE, SIMULATED, TERMINATED
from wirecheck.cli.validate import (
    EXIT_CODES,
    Mode,
    busy_lines,
    choose_mode,
    exit_code,
    last_line,
    simulation_target,
)
from wirecheck.cli.foreground import Outcome
from wirecheck.core.paths import suite_paths
from wirecheck.node.topo_text import load_recorded

PROJECT = Path(__file__).resolve().parents[1]
NVML_ERROR = "NVML could not start (NVMLError_DriverNotLoaded: Driver Not Loaded)"
NO_DRIVER = driver.DriverEvidence(False, False, False)
BROKEN_DRIVER = driver.DriverEvidence(False, False, True)  # library installed, module not loaded


def _nvml_fails():
    raise nvml.NvmlUnavailable(NVML_ERROR)


def _never(*_):
    raise AssertionError("must not be called")


# --- which run this machine allows ------------------------------------------------------------


@pytest.mark.parametrize(
    "args, target",
    [
        ([], None),
        (["-k", "inventory"], None),
        (["--simulate"], "h200-nvl-8"),
        (["--simulate", "-k", "x"], "h200-nvl-8"),
        (["--simulate", "h200-sxm-2", "-k", "x"], "h200-sxm-2"),
        (["-v", "--simulate=topo.txt"], "topo.txt"),
        (["--", "--simulate"], None),
        (["--profile", "h200-sxm-8", "--simulate"], "profile:h200-sxm-8"),  # the node the profile describes
        (["--simulate=h200-sxm-2", "--profile=h200-sxm-8"], "h200-sxm-2"),  # a named topology wins
    ],
)
def test_simulation_target_reads_the_option_as_pytest_will(args, target):
    assert simulation_target(args) == target


def test_working_nvml_means_a_hardware_run(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    mode = choose_mode([], read_topology=lambda: SimpleNamespace(n_gpus=2), detect_driver=_never)
    assert mode == Mode(gpus=2, node_gpus=2)


def test_the_last_line_counts_the_gpus_cuda_visible_devices_names(monkeypatch):
    """NVML lists all 8 GPUs; a run under CUDA_VISIBLE_DEVICES=4,5,6,7 validated 4, and its last line says so
    (a script reading "8 GPU(s)" would take the whole node as validated). A value the suite refuses: pytest
    names it, the last line claims no count."""
    node = load_recorded("h200-sxm-8", suite_paths().topologies)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    mode = choose_mode([], read_topology=lambda: node, detect_driver=_never)
    assert mode == Mode(gpus=4, node_gpus=8, narrowed_by="CUDA_VISIBLE_DEVICES=4,5,6,7")
    assert last_line(0, mode) == ("wirecheck validate: every selected check passed on 4 of this node's 8 GPUs "
                                  "(CUDA_VISIBLE_DEVICES=4,5,6,7): the others were not validated; exit 0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert last_line(0, choose_mode([], read_topology=lambda: node, detect_driver=_never)).endswith(
        "every selected check passed on this node's 8 GPU(s); exit 0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "9")
    mode = choose_mode([], read_topology=lambda: node, detect_driver=_never)
    assert mode == Mode(node_gpus=8) and last_line(4, mode).endswith("exit 4")


def test_simulation_on_purpose_does_not_ask_nvml():
    assert choose_mode(["--simulate=h200-sxm-2"], read_topology=_never, detect_driver=_never) == Mode(simulate="h200-sxm-2")


def _no_pci():
    return ()


def test_no_gpu_at_all_falls_back_to_simulation():
    mode = choose_mode([], read_topology=_nvml_fails, detect_driver=lambda: NO_DRIVER, read_pci=_no_pci)
    assert mode.simulate == "h200-nvl-8" and mode.refusal is None
    assert "no NVIDIA GPU on the PCI bus, no NVIDIA driver" in mode.notice and "SIMULATION" in mode.notice
    assert NVML_ERROR in mode.notice


def test_a_profile_without_a_readable_gpu_refuses_instead_of_simulating():
    """`wirecheck validate --profile h200-sxm-8` on a machine without a driver simulated and exited 10 (which no
    drain hook drains on) while `pytest --profile h200-sxm-8` failed: a named node whose GPUs cannot be read
    exits 11 from both faces, naming what is missing. A dry run of the profile is asked for with --simulate."""
    mode = choose_mode(["--profile", "h200-sxm-8", "-k", "nvswitch"], read_topology=_nvml_fails,
                       detect_driver=lambda: NO_DRIVER, read_pci=_no_pci)
    assert mode.simulate is None and mode.notice is None
    assert "--profile h200-sxm-8 names the GPU node this is to be" in mode.refusal
    assert ("missing: the NVIDIA kernel module (/proc/driver/nvidia absent), its control device (/dev/nvidiactl "
            "absent), NVML's library (libnvidia-ml.so.1 not loadable)") in mode.refusal, mode.refusal
    assert "wirecheck validate --simulate --profile h200-sxm-8" in mode.refusal
    asked = choose_mode(["--profile", "h200-sxm-8", "--simulate"], read_topology=_never, detect_driver=_never,
                        read_pci=_never)
    assert asked.simulate == "profile:h200-sxm-8"


def test_gpus_on_the_pci_bus_without_a_driver_refuse():
    """No driver trace at all (a kernel update whose module was never built, a container without GPU access),
    but the bus holds NVIDIA GPUs: a GPU node that cannot be read, never a dry run."""
    mode = choose_mode([], read_topology=_nvml_fails, detect_driver=lambda: NO_DRIVER,
                       read_pci=lambda: ("0000:17:00.0", "0000:3d:00.0"))
    assert mode.simulate is None
    assert "the PCI bus shows 2 NVIDIA GPUs (0000:17:00.0, 0000:3d:00.0)" in mode.refusal
    assert NVML_ERROR in mode.refusal and "missing: the NVIDIA kernel module" in mode.refusal


def test_a_profile_dry_run_names_the_profiles_own_topology():
    """`--profile h200-sxm-8 --simulate` announced "wired as recorded in h100-sxm-8-nics.txt": another node's file.
    Every profile's recorded topology is its own: named for it, with its GPU count, fabric and NV# per pair."""
    from pytest_wirecheck.node import _simulated_topology
    from wirecheck.core.paths import suite_paths
    from wirecheck.node.profile_topology import from_profile
    from wirecheck.thresholds.file import load_thresholds

    thresholds = load_thresholds(suite_paths().thresholds)
    topology = _simulated_topology("profile:h200-sxm-8", thresholds)
    assert topology.source == ("the node profile h200-sxm-8 (wired as recorded in "
                               f"{suite_paths().topologies / 'h200-sxm-8.synthetic.txt'})"), topology.source
    assert len(topology.gpus) == 8
    assert _simulated_topology("h100-sxm-8-nics", thresholds).source.endswith("h100-sxm-8-nics.txt")  # a file: as is
    for name in thresholds.profile_names:
        profile = thresholds.profile(name)
        if profile.topology is None:
            continue
        assert profile.topology.startswith(name), f"profiles.{name}.topology is {profile.topology}: another node's"
        recorded, described = _simulated_topology(f"profile:{name}", thresholds), from_profile(profile)
        assert (recorded.n_gpus, recorded.fabric, recorded.nvlinks) == \
            (described.n_gpus, described.fabric, described.nvlinks), name


@pytest.mark.parametrize("evidence", [BROKEN_DRIVER, driver.DriverEvidence(True, True, False)])
def test_a_driver_with_failing_nvml_refuses_to_run(evidence):
    """Before, any NVML failure fell back to simulation and exited 0: a broken GPU node went green."""
    mode = choose_mode([], read_topology=_nvml_fails, detect_driver=lambda: evidence, read_pci=_no_pci)
    assert mode.simulate is None
    assert NVML_ERROR in mode.refusal  # names the NVML error
    assert evidence.describe() in mode.refusal  # and why this is taken for a GPU machine
    assert "wirecheck validate --simulate" in mode.refusal  # and how to ask for a dry run


# --- exit codes and the last line -------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome, simulated, code",
    [
        (Outcome(0, 0, False), False, 0),
        (Outcome(0, 0, False), True, SIMULATED),  # never 0 for a dry run
        (Outcome(1, 0, False), True, 1),
        (Outcome(4, 0, False), False, 4),
        (Outcome(2, 1, False), False, CTRL_C),
        (Outcome(0, 1, False), False, CTRL_C),  # asked to stop: not accepted even if it got to the end
        (Outcome(-15, 0, True), False, TERMINATED),
        (Outcome(-9, 0, False), False, 137),
    ],
)
def test_exit_code(outcome, simulated, code):
    assert exit_code(outcome, simulated) == code


@pytest.mark.parametrize("code", [SIMULATED, 1, 4, CTRL_C])
def test_every_simulated_last_line_says_simulation(code):
    line = last_line(code, Mode(simulate="h200-sxm-2"))
    assert line.startswith("wirecheck validate: SIMULATION of h200-sxm-2 — no GPU was validated;")
    assert line.endswith(f"exit {code}")


def test_hardware_last_line_names_the_gpus():
    assert last_line(0, Mode(gpus=8)) == "wirecheck validate: every selected check passed on this node's 8 GPU(s); exit 0"


def test_busy_has_a_code_and_a_last_line_of_its_own():
    """A prolog must tell a busy node from a usage error (4) and a failed one (1)."""
    from wirecheck.workers.node_lock import Holder

    assert NODE_BUSY == 75
    assert NODE_BUSY not in (0, 1, 2, 3, 4, 5, SIMULATED, NO_GPU_READABLE) and NODE_BUSY < 128
    asked = []
    holder = Holder(pid=4321, command="wirecheck validate", since="2026-12-01T10:00:00+00:00", host="n1", user="root")
    state, line = busy_lines(["-k", "x", "--node-lock", "/run/x.lock"], holder_of=lambda path: asked.append(path) or holder)
    assert asked == ["/run/x.lock"]
    assert line == ("wirecheck validate: node busy: pid 4321 (wirecheck validate), user root, "
                    "since 2026-12-01T10:00:00+00:00; exit 75")
    # the state line before it holds the same as data, for node-state (core.problems)
    assert problems.read_state(state) == {"problem": problems.BUSY, "holder": {
        "pid": 4321, "command": "wirecheck validate", "since": "2026-12-01T10:00:00+00:00", "host": "n1", "user": "root"}}
    gone_state, gone = busy_lines(["--node-lock=/run/y.lock"], holder_of=lambda path: None)
    assert gone == "wirecheck validate: node busy: another wirecheck run held the GPUs (it has let go since); exit 75"
    assert problems.read_state(gone_state) == {"problem": problems.BUSY, "holder": None}
    assert "usage error" not in line + gone


def test_a_busy_run_ends_on_the_busy_line(monkeypatch, capsys, tmp_path):
    from wirecheck.workers.node_lock import NodeLock

    monkeypatch.setattr(nvml, "read_topology", lambda: SimpleNamespace(n_gpus=2))
    monkeypatch.setattr(cli_validate, "run_foreground", lambda cmd, name, **_: Outcome(NODE_BUSY, 0, False))
    lock = tmp_path / "node.lock"
    with NodeLock(lock).acquire(0, command=["pytest", "(acceptance)"]):
        code = main(["validate", f"--node-lock={lock}"])
    out = capsys.readouterr().out
    assert code == NODE_BUSY
    assert re.fullmatch(r"wirecheck validate: node busy: pid \d+ \(pytest \(acceptance\)\), user \S+, since \S+; exit 75",
                        out.splitlines()[-1]), out


def _run_validate(monkeypatch, capsys, evidence, outcome=None, args=(), pci_gpus=()):
    """validate in-process with NVML failing, the driver evidence and PCI bus given and pytest replaced."""
    from wirecheck.node import pci

    started = []
    monkeypatch.setattr(nvml, "read_topology", _nvml_fails)
    monkeypatch.setattr(driver, "detect", lambda: evidence)
    monkeypatch.setattr(pci, "nvidia_gpus", lambda: pci_gpus)

    def fake_run_foreground(cmd, name, **_):
        started.append(cmd)
        return outcome

    monkeypatch.setattr(cli_validate, "run_foreground", fake_run_foreground)
    code = main(["validate", "-k", "inventory", *args])
    out, err = capsys.readouterr()
    return code, out, err, started


def test_the_command_and_its_pytest_read_the_bytecode_cache_where_the_node_keeps_none(monkeypatch, capsys, tmp_path):
    """Where the node's Python keeps no bytecode and wirecheck's cache is built (bytecode.ready), the command reads
    its own imports from it and the pytest process it starts gets it (PYTHONPYCACHEPREFIX), as the workers do:
    neither compiles pytest, its plugins and wirecheck from source at every start. Elsewhere the environment is
    the caller's, and a cache that stopped being ready is not handed on."""
    from wirecheck.core.paths import AUTOLOAD_ENV
    from wirecheck.node import pci
    from wirecheck.workers import bytecode

    monkeypatch.setattr(sys, "pycache_prefix", None)  # what the command sets, given back after the test
    monkeypatch.setattr(nvml, "read_topology", _nvml_fails)
    monkeypatch.setattr(driver, "detect", lambda: NO_DRIVER)
    monkeypatch.setattr(pci, "nvidia_gpus", lambda: ())
    envs = []

    def fake_run_foreground(cmd, name, env=None, **_):
        envs.append(env)
        return Outcome(0, 0, False)

    monkeypatch.setattr(cli_validate, "run_foreground", fake_run_foreground)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: tmp_path)
    assert main(["validate", "-k", "inventory"]) == SIMULATED
    assert envs[-1][bytecode.PREFIX_ENV] == str(tmp_path) and envs[-1][AUTOLOAD_ENV] == "1"
    assert sys.pycache_prefix == str(tmp_path)  # the command's own imports, from its start on

    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(bytecode, "ready", lambda env, package=bytecode.PROBE_PACKAGE: None)
    monkeypatch.setenv(bytecode.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(bytecode.PREFIX_ENV, str(tmp_path))  # handed on by a command above, no longer ready
    assert main(["validate", "-k", "inventory"]) == SIMULATED
    assert bytecode.PREFIX_ENV not in envs[-1] and sys.pycache_prefix is None
    capsys.readouterr()


@pytest.mark.parametrize("evidence, args, pci_gpus", [
    (BROKEN_DRIVER, (), ()), (NO_DRIVER, ("--profile", "h200-sxm-8"), ()), (NO_DRIVER, (), ("0000:17:00.0",))])
def test_refusal_runs_nothing_and_exits_11(monkeypatch, capsys, evidence, args, pci_gpus):
    code, out, err, started = _run_validate(monkeypatch, capsys, evidence, args=args, pci_gpus=pci_gpus)
    assert code == NO_GPU_READABLE and started == []
    assert NVML_ERROR in err and "--simulate" in err
    assert out.splitlines()[-1].endswith(f"exit {NO_GPU_READABLE}")
    # node-state reads NVML's error from the state line before it (data), never from the words
    said = problems.read_state(out)
    assert said["problem"] == problems.NVML_UNREADABLE and NVML_ERROR in said["error"], out
    assert node_decision.decide(code, None, out + err).line.startswith(f"wirecheck: NVML failed: {NVML_ERROR}"[:60])


def test_fallback_simulation_exits_10_and_says_so_last(monkeypatch, capsys):
    code, out, err, started = _run_validate(monkeypatch, capsys, NO_DRIVER, Outcome(0, 0, False))
    assert code == SIMULATED
    assert started[0][-1] == "--simulate=h200-nvl-8" and ["-k", "inventory"] == started[0][-3:-1]
    assert out.splitlines()[-1] == "wirecheck validate: SIMULATION of h200-nvl-8 — no GPU was validated; no failures, exit 10"


# --- help ---------------------------------------------------------------------------------------


def test_help_is_validates_own(capsys):
    """Before, `wirecheck validate --help` printed pytest's help."""
    with pytest.raises(SystemExit) as info:
        main(["validate", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert out.startswith("usage: wirecheck validate")
    assert "file_or_dir" not in out  # pytest's usage
    for needed in ("SIMULATION", "--pytest-help", "goes to pytest", "Ctrl-C", "exit codes:"):
        assert needed in out, needed
    for code in EXIT_CODES:
        assert re.search(rf"^\s+{code}  ", out, re.M), f"exit code {code} missing from --help"


def test_readme_documents_every_exit_code():
    readme = (PROJECT / "README.md").read_text()
    section = readme[readme.index("## Exit codes"):]
    section = section[: section.index("\n## ")]
    for code in EXIT_CODES:
        assert re.search(rf"^\| {code} \|", section, re.M), f"exit code {code} missing from the README"


# --- the real command on this machine -----------------------------------------------------------

def _gpu_machine() -> bool:
    from wirecheck.node import pci

    return driver.detect().present or bool(pci.nvidia_gpus())


needs_no_driver = pytest.mark.skipif(
    _gpu_machine(), reason="this machine has an NVIDIA driver or GPU: validate would not simulate here"
)


def _validate_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "wirecheck.cli.main", "validate", "-p", "no:cacheprovider", "--color=no", *args]


@needs_no_driver
def test_cpu_machine_runs_a_simulation_that_exits_10(tmp_path):
    term = Terminal(_validate_cmd("-k", "inventory", "--wirecheck-json", str(tmp_path / "r.jsonl")))
    code = term.finish(timeout=300)
    lines = [line for line in term.output.splitlines() if line.strip()]
    assert code == SIMULATED, term.output
    assert lines[-1].startswith("wirecheck validate: SIMULATION of h200-nvl-8"), lines[-1]
    assert "no NVIDIA driver on this machine" in term.output


# A selection slow enough on CPU to interrupt in the middle (~20 s to run out, first test in a few).
SLOW = ("--simulate=h200-sxm-2", "-k", "collectives", "-v")


def _interrupted_run(tmp_path, interrupt) -> tuple[int, str, Path]:
    records = tmp_path / "records.jsonl"
    term = Terminal(_validate_cmd(*SLOW, "--wirecheck-json", str(records)))
    term.wait_for(" PASSED", timeout=300)  # one test done, the next one running
    interrupt(term)
    return term.finish(timeout=120), term.output, records


def _assert_interrupted_cleanly(code: int, output: str, records: Path) -> None:
    assert code == CTRL_C, output
    assert "Traceback (most recent call last)" not in output, output
    assert "KeyboardInterrupt" in output, output  # pytest's own report of the interrupt ...
    assert re.search(r"^=+ .*\d+ passed.* in [\d.]+s .*=+$", output, re.M), output  # ... and its summary
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines[-1] == ("wirecheck validate: SIMULATION of h200-sxm-2 — no GPU was validated; "
                         "interrupted (Ctrl-C): the run is incomplete, exit 130"), lines[-1]
    assert records.read_text().strip(), "the records of the tests before the interrupt were lost"


def test_ctrl_c_lets_pytest_finish_its_summary(tmp_path):
    """Before, the terminal's Ctrl-C killed pytest before its summary, with a Python traceback."""
    _assert_interrupted_cleanly(*_interrupted_run(tmp_path, Terminal.ctrl_c))


def test_sigint_to_validate_alone_reaches_pytest(tmp_path):
    """`kill -INT` (or `timeout -s INT`) on the wirecheck process: pytest must hear of it too."""
    _assert_interrupted_cleanly(*_interrupted_run(tmp_path, lambda term: term.signal_leader(signal.SIGINT)))


# --- the pytest face: the same refusal, the same code --------------------------------------------


def _nvml_reads_here() -> bool:
    try:
        nvml.read_topology()
    except nvml.NvmlUnavailable:
        return False
    return True


@pytest.mark.skipif(_nvml_reads_here(), reason="NVML reads GPUs here: no refusal to see")
def test_the_pytest_face_exits_11_where_gpus_belong(pytester, monkeypatch, tmp_path):
    """`pytest --profile h200-sxm-8` without a driver failed test_gpus_visible (exit 1) while validate simulated
    (exit 10): now both refuse with 11 before any test, naming what is missing; so does a machine whose PCI bus
    shows NVIDIA GPUs. Where nothing says GPUs belong (no profile, no GPU on the bus, no driver) the run goes on."""
    import wirecheck.checks  # noqa: F401  imported before the in-process runs, which keep what was there
    from e2e import make_project
    from fake_pci import NVIDIA_3D, sysfs
    from wirecheck.node import pci

    root = make_project(pytester)
    monkeypatch.setattr(pci, "SYSFS", sysfs(tmp_path / "sys", {}))
    if driver.detect().present:
        pytest.skip("this machine has an NVIDIA driver: every run here is refused, whatever the bus shows")

    def run(*args):
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", *args, "tests/test_inventory.py")
        return result.ret, "\n".join(result.outlines + result.errlines)

    code, text = run("--profile=h200-sxm-8")
    assert code == NO_GPU_READABLE, text
    assert "wirecheck: This is a GPU machine whose GPUs cannot be read" in text
    assert "--profile h200-sxm-8 names the GPU node this is to be; missing: the NVIDIA kernel module" in text
    assert "for a dry run on purpose: pytest --simulate --profile h200-sxm-8" in text
    assert not (Path(root) / ".wirecheck").exists()  # nothing ran: no record
    monkeypatch.setattr(pci, "SYSFS", sysfs(tmp_path / "gpu-node", {"0000:17:00.0": NVIDIA_3D}))
    code, text = run()
    assert code == NO_GPU_READABLE and "the PCI bus shows 1 NVIDIA GPU (0000:17:00.0)" in text, text
    monkeypatch.setattr(pci, "SYSFS", tmp_path / "sys")
    code, text = run()  # collects (then ends 11 as before: every selected check skipped, nothing validated)
    assert "collected 11 items" in text and "GPU machine whose GPUs cannot be read" not in text, text


def _plugin_on_the_path(tmp_path: Path) -> dict:
    """A pytest plugin that pytest would load by itself (a `pytest11` entry point on the import path), which
    says so on stderr when it is loaded: as a node's Python carries hypothesis's or pytest-cov's."""
    site = tmp_path / "site"
    (site / "nodeplug-0.dist-info").mkdir(parents=True)
    (site / "nodeplug-0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: nodeplug\nVersion: 0\n")
    (site / "nodeplug-0.dist-info" / "entry_points.txt").write_text("[pytest11]\nnodeplug = nodeplug\n")
    (site / "nodeplug.py").write_text("import sys\n\ndef pytest_configure(config):\n"
                                      "    print('NODE PLUGIN LOADED', file=sys.stderr)\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def test_validate_runs_the_suite_with_its_own_pytest_plugins_only(tmp_path):
    env = _plugin_on_the_path(tmp_path)
    collect = ["--simulate=h200-sxm-2", "-k", "test_gpus_visible", "--collect-only", "-q"]
    # pytest alone loads the node's plugin: the test below can tell the difference
    bare = subprocess.run([sys.executable, "-m", "pytest", str(PROJECT / "tests"), *collect], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "NODE PLUGIN LOADED" in bare.stderr, bare.stderr + bare.stdout
    ours = subprocess.run(_validate_cmd(*collect), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert ours.returncode == SIMULATED, ours.stderr + ours.stdout
    assert "NODE PLUGIN LOADED" not in ours.stderr, ours.stderr
    assert "test_gpus_visible" in ours.stdout  # the suite's own plugin did load
    # ... and an operator loads one by name with pytest's -p
    named = subprocess.run(_validate_cmd("-p", "nodeplug", *collect), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert named.returncode == SIMULATED and "NODE PLUGIN LOADED" in named.stderr, named.stderr + named.stdout


def test_an_option_of_a_plugin_not_loaded_is_a_usage_error_that_says_how(tmp_path):
    done = subprocess.run(_validate_cmd("--simulate=h200-sxm-2", "-k", "test_gpus_visible", "--collect-only",
                                        "--nodeplug-option", "5"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 4, done.stderr + done.stdout
    assert "-p MODULE" in lines[-2] and lines[-1].endswith("usage error, exit 4"), done.stdout


def test_the_plugin_hint_only_for_an_option_pytest_does_not_know(capfd):
    """A usage error with a cause of its own (a bad --sweep value) ends on that cause; an option no loaded plugin
    knows (pytest-timeout's --timeout) ends naming it and how to load its plugin, read from pytest's own --help."""
    assert main(["validate", "--simulate=h200-sxm-2", "--sweep", "huge", "--collect-only"]) == 4
    out, err = capfd.readouterr()
    assert "invalid choice: 'huge'" in out + err and "pytest knows no" not in out + err
    assert main(["validate", "--simulate=h200-sxm-2", "--timeout", "5", "--collect-only"]) == 4
    out = capfd.readouterr().out.splitlines()
    assert out[-2].startswith("wirecheck validate: pytest knows no --timeout: ") and "-p pytest_timeout" in out[-2]
    assert out[-1].endswith("usage error, exit 4")


@pytest.mark.parametrize("args", [("-n", "2"), ("-n2",), ("--numprocesses=auto",)])
def test_xdist_is_refused_in_the_words_bare_pytest_uses(capfd, args):
    """validate loads only the suite's plugins, so pytest itself refuses -n as an unknown argument: the last lines
    say why, as the suite's plugin says it under bare pytest."""
    assert main(["validate", "--simulate=h200-sxm-2", *args, "--collect-only"]) == 4
    out = capfd.readouterr().out.splitlines()
    assert out[-2] == f"wirecheck validate: {refused_options.XDIST}" and out[-1].endswith("usage error, exit 4"), out
    assert refused_options.xdist_asked(["-k", "x", "--", "-n"]) is False  # after a bare --: a test id's, not pytest's


def test_the_echoed_pytest_command_can_be_pasted_back(capfd):
    """The line validate prints before pytest's output is the command as a shell takes it: a -k expression stays
    one argument. --trust-recent's window is checked in a simulation too (the prolog's line, rehearsed)."""
    assert main(["validate", "--simulate=h200-sxm-2", "-k", "test_gpus_visible and not nothing", "--collect-only",
                 "-q"]) == SIMULATED
    echoed = next(line for line in capfd.readouterr().err.splitlines() if " -m pytest " in line)
    assert echoed.endswith("-k 'test_gpus_visible and not nothing' --collect-only -q"), echoed
    assert main(["validate", "--simulate=h200-sxm-2", "--trust-recent=banana", "--collect-only"]) == 4
    assert '--trust-recent: "banana" is not a duration' in capfd.readouterr().err
