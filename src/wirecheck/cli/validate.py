"""`wirecheck validate`: run the validation suite on this node and exit with its verdict.

A dry run must never pass for a node. So the suite falls back to simulation only on a machine that
cannot hold a GPU: no NVIDIA GPU on its PCI bus, no NVIDIA driver, no --profile (wirecheck.node.driver);
where one of them says GPUs belong here but NVML cannot read them, nothing runs and the exit code says so. A simulated run ends on a line that says
SIMULATION and exits 10 rather than 0, so no script can take it for an accepted node.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable, Sequence

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes as codes
from wirecheck.core import problems, refused_options
from wirecheck.core.harness import WRAPPER_FD_ENV
from wirecheck.node import driver, nvml, pci, visible
from wirecheck.cli.foreground import Outcome, run_foreground
from wirecheck.core.levels import BURN_IN, DEFAULT_LEVEL, LEVELS, PURPOSE, check_level
from wirecheck.core.paths import suite_paths, suite_plugin_args, suite_pytest_env
from wirecheck.node.topo_text import DEFAULT_SIMULATION
from wirecheck.workers.node_lock import NodeLock, current_holder

NAME = "validate"
PROG = f"wirecheck {NAME}"

# The exit codes' words, one table: the help, the README and the last line all say the same
# (the codes themselves: wirecheck.core.exit_codes).
EXIT_CODES: dict[int, tuple[str, str]] = {  # code -> (outcome for the last line, meaning for the help)
    codes.OK: ("every selected check passed on this node's GPUs", "accepted: every selected check passed on this node's GPUs"),
    codes.FAILED: ("checks FAILED", "at least one check failed"),
    codes.INTERRUPTED: ("pytest stopped the run (errors during collection?)",
                     "pytest stopped the run: errors during collection, or a stop the suite requested (not Ctrl-C)"),
    codes.INTERNAL_ERROR: ("internal error", "internal error in pytest or the wirecheck plugin, or a broken install"),
    codes.USAGE_ERROR: ("usage error", "usage error: a bad option or argument, a -k/-m selection that matches no test, or a "
                                 "bad thresholds or topology file; the message names it and the fix"),
    codes.NO_TESTS: ("no test was collected: nothing was validated", "no test was collected (a test path without tests): nothing was validated"),
    codes.SIMULATED: ("no failures", "SIMULATION without failures: the suite ran on a recorded topology, "
                               "CPU processes standing in for GPUs; nothing about this machine was validated"),
    codes.NVML_BROKEN: ("NVML read no GPU on a machine meant to have GPUs: nothing ran",
                      "the machine is meant to have GPUs (its PCI bus shows NVIDIA GPUs, an NVIDIA driver is "
                      "installed, or --profile names a GPU node) but NVML fails or sees no GPU: nothing ran; the "
                      "message names what is missing (fix the driver, or ask for a dry run with --simulate)"),
    codes.HARNESS_FAULT: ("HARNESS FAULT, not a verdict on this node: wirecheck could not write its record, a log or a cache",
                          "a fault of the harness, not of the node: wirecheck could not write its record, a worker's log "
                          "or a cache (no space, a read-only filesystem, the folder removed mid-run, an I/O error); the "
                          "last line names the path, the cause and the fix; what was measured before is kept (the "
                          "record, else the screen); a scheduler's hook reads it as unknown and never drains"),
    codes.HARNESS_CRASH: ("the wirecheck plugin crashed, not a verdict on this node",
                          "a crash of the wirecheck plugin itself, or only bugs of ours inside tests (a NameError, a "
                          "TypeError in the suite's code: the tracebacks printed for a report), not of the node; a "
                          "scheduler's hook reads it as unknown and never drains"),
    codes.NODE_BUSY: ("node busy: another wirecheck run held the GPUs: nothing ran",
                      "node busy: another wirecheck run held this node's GPUs for longer than --wait-for-node: "
                      "nothing ran; try again later (the last line names the holder)"),
    codes.CTRL_C: ("interrupted (Ctrl-C): the run is incomplete",
             "interrupted by Ctrl-C: pytest printed its summary and the records so far are kept; not accepted"),
    codes.TERMINATED: ("stopped by SIGTERM: the run is incomplete",
                       "stopped by SIGTERM (passed on to pytest; Slurm's time limit): pytest printed its summary and "
                       "the record ends naming the signal; not accepted"),
    codes.HANGUP: ("stopped by SIGHUP: the run is incomplete",
                   "stopped by SIGHUP (the terminal or ssh session closed): as SIGTERM; not accepted"),
}
KILLED_BY_SIGNAL = "128+N: pytest was killed by signal N (137: SIGKILL, e.g. the kernel's out-of-memory killer); not accepted"


def _exit_code_lines() -> list[str]:
    def entry(code: str, meaning: str) -> str:
        return textwrap.fill(meaning, width=96, initial_indent=f"{code:>7}  ", subsequent_indent=" " * 9)

    lines = [entry(str(code), meaning) for code, (_, meaning) in EXIT_CODES.items()]
    lines.append(entry("128+N", KILLED_BY_SIGNAL.split(": ", 1)[1]))
    lines.append(textwrap.fill(
        f"A simulated run exits {codes.SIMULATED} when nothing failed, otherwise with the code above (1 failed, "
        "4 usage error, ...); its last line always says SIMULATION.", width=96, initial_indent="  ", subsequent_indent="  "))
    return lines


DESCRIPTION = f"""\
Run the validation suite (pytest on the suite's tests/) on this node's GPUs and exit with its
verdict. The last line printed says what the exit code means.

Simulation: with --simulate[=FILE|NAME] (with --profile NAME and no FILE: the node that profile
describes), or unasked on a machine that cannot hold a GPU (no NVIDIA GPU on the PCI bus, no NVIDIA
driver: no /proc/driver/nvidia, no /dev/nvidiactl, libnvidia-ml.so.1 not loadable; and no --profile),
the suite runs on a recorded topology (default {DEFAULT_SIMULATION}) with CPU processes and gloo
standing in for GPUs and NCCL. Nothing about this machine is validated: the last line says SIMULATION
and the exit code is {codes.SIMULATED}, never 0. Where the PCI bus shows NVIDIA GPUs, a driver is
installed or --profile names a GPU node, but NVML fails or sees no GPU, validate runs nothing, names the
NVML error and what is missing, and exits {codes.NVML_BROKEN} (as bare pytest does).

Levels (--level): quick before each job (seconds: inventory, links, NCCL's path, one large
all_reduce per placement class, a few seconds of each GPU check; no training), acceptance after
provisioning and nightly (every check; the default), burn-in for new hardware (needs --duration,
e.g. --duration 4h). `wirecheck plan --level L` predicts how long a level takes.

Every other argument goes to pytest: -k, -x, -v, --profile, --placement, --thresholds,
--duration, --wirecheck-json, --junitxml, --benchmark-*, test ids. `{PROG} --pytest-help` lists them.

Ctrl-C: pytest stops the test in progress, prints its summary and keeps the records; exit
{codes.CTRL_C}. A second Ctrl-C stops pytest at once (its summary may be lost), a third kills it."""

EPILOG = "exit codes:\n" + "\n".join(_exit_code_lines())


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME,
        help="run the validation suite on this node (or in simulation without a driver); other arguments go to pytest",
        description=DESCRIPTION,
        epilog=EPILOG,
        usage=f"{PROG} [-h] [--pytest-help] [--level {{{','.join(LEVELS)}}}] [--trust-recent[=WINDOW]] [--simulate[=FILE|NAME]] "
              "[pytest arguments ...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
        allow_abbrev=False,  # a pytest option must never be taken for an abbreviation of ours
    )
    own = parser.add_argument_group("options of validate (everything else goes to pytest)")
    own.add_argument("-h", "--help", action="help", help="show this help (validate's, not pytest's) and exit")
    own.add_argument("--pytest-help", action="store_true",
                     help="show pytest's help, with the wirecheck options (--simulate, --profile, ...), and exit")
    own.add_argument("--level", default=None, metavar="LEVEL",
                     help="which tests run: " + "; ".join(f"{name}: {PURPOSE[name]}" for name in LEVELS)
                     + f" (default: {DEFAULT_LEVEL}; {BURN_IN} needs --duration)")
    own.add_argument("--trust-recent", nargs="?", const="", default=None, metavar="WINDOW",
                     help="run nothing when this node's latest run passed this level or better within WINDOW "
                     "(default: prolog.trust_window of the thresholds file, 6 h) and NVML and the kernel log show "
                     "nothing changed since (XIDs, ECC, row remaps, driver, GPUs, NVLinks, processes, thresholds, "
                     "version): exit 0 naming the pass; otherwise say why and run the level (the Slurm prolog's)")
    parser.set_defaults(passes_extra_args=True)
    return parser


def _option_value(pytest_args: Sequence[str], option: str) -> str | None:
    """The value of `option` among pytest's arguments (`--opt=V` or `--opt V`), "" when it is given
    without one; None when it is not given."""
    args = list(pytest_args)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg.startswith(f"{option}="):
            return arg.split("=", 1)[1]
        if arg == option:
            # nargs="?": the next word is its value unless it is an option.
            following = args[i + 1] if i + 1 < len(args) else None
            return following if following and not following.startswith("-") else ""
    return None


def default_simulation(pytest_args: Sequence[str]) -> str:
    """What a dry run simulates when no topology is named: the node `--profile NAME` describes
    (`profile:NAME`), else the recorded DEFAULT_SIMULATION."""
    profile = _option_value(pytest_args, "--profile")
    return f"profile:{profile}" if profile else DEFAULT_SIMULATION


def simulation_target(pytest_args: Sequence[str]) -> str | None:
    """The --simulate value among pytest's arguments, as pytest will read it; None without it."""
    value = _option_value(pytest_args, "--simulate")
    if value is None:
        return None
    return value or default_simulation(pytest_args)


@dataclass(frozen=True)
class Mode:
    """What this machine allows: a hardware run, a simulation, or no run at all."""

    simulate: str | None = None  # the topology to simulate, or None for the node's GPUs
    gpus: int | None = None  # GPUs the run may use (hardware): those CUDA_VISIBLE_DEVICES names, else all NVML saw
    node_gpus: int | None = None  # GPUs NVML saw
    narrowed_by: str | None = None  # "CUDA_VISIBLE_DEVICES=..." where it names fewer GPUs than the node has
    refusal: str | None = None  # why nothing may run (driver present, NVML failing)
    nvml_error: str | None = None  # NVML's own error, with the refusal
    notice: str | None = None  # said before the run (why it is a simulation)


def choose_mode(
    pytest_args: Sequence[str],
    read_topology: Callable | None = None,
    detect_driver: Callable[[], driver.DriverEvidence] | None = None,
    read_pci: Callable[[], tuple[str, ...]] | None = None,
) -> Mode:
    """Hardware if NVML reads the GPUs; simulation if asked, or unasked where no GPU can be (no NVIDIA GPU on the
    PCI bus, no driver, no --profile); else a refusal naming what is missing.

    read_topology, detect_driver and read_pci default to nvml.read_topology, driver.detect and pci.nvidia_gpus.
    """
    asked = simulation_target(pytest_args)
    if asked is not None:
        return Mode(simulate=asked)  # a dry run on purpose: NVML is not even asked
    try:
        topology = (read_topology or nvml.read_topology)()
    except nvml.NvmlUnavailable as exc:
        evidence = (detect_driver or driver.detect)()
        on_bus = (read_pci or pci.nvidia_gpus)()
        profile = _option_value(pytest_args, "--profile")
        reasons = driver.gpus_expected(profile, evidence, on_bus)
        if reasons:
            error = nvml.without_simulate_hint(exc)
            return Mode(nvml_error=error, refusal=driver.unreadable(
                error, reasons, evidence, f"{PROG} --simulate" + (f" --profile {profile}" if profile else "")))
        return Mode(simulate=DEFAULT_SIMULATION, notice=(
            f"no GPU on this machine: no NVIDIA GPU on the PCI bus, no NVIDIA driver ({evidence.describe()}; NVML: "
            f"{exc}), no --profile.\n"
            f"Running the suite in SIMULATION on the recorded topology {DEFAULT_SIMULATION}: CPU processes and gloo "
            "stand in for GPUs and NCCL, nothing about this machine is validated."
        ))
    return _hardware(topology)


def _hardware(topology) -> Mode:
    """The GPUs the run validates: NVML lists every GPU of the node, CUDA_VISIBLE_DEVICES narrows the suite's
    (wirecheck.node.visible). A value the suite refuses is left to pytest, which names it."""
    try:
        gpus = visible.from_environment(topology).n_gpus
    except visible.VisibleDevicesError:
        return Mode(node_gpus=topology.n_gpus)
    narrowed = f"{visible.ENV}={os.environ[visible.ENV]}" if gpus != topology.n_gpus else None
    return Mode(gpus=gpus, node_gpus=topology.n_gpus, narrowed_by=narrowed)


def exit_code(outcome: Outcome, simulated: bool) -> int:
    if outcome.terminated:
        return codes.TERMINATED
    if outcome.hangup:
        return codes.HANGUP
    if outcome.interrupts:
        return codes.CTRL_C  # even if pytest got to the end: the person asked it to stop
    if outcome.returncode < 0:
        return 128 - outcome.returncode
    if outcome.returncode == codes.OK and simulated:
        return codes.SIMULATED
    return outcome.returncode


def node_lock_path(pytest_args: Sequence[str]):
    """The node lock the run took: --node-lock's value among pytest's arguments, else the node's own."""
    args = list(pytest_args)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg.startswith("--node-lock="):
            return arg.split("=", 1)[1]
        if arg == "--node-lock" and i + 1 < len(args):
            return args[i + 1]
    return NodeLock(None).path


def busy_lines(pytest_args: Sequence[str], holder_of: Callable = current_holder) -> list[str]:
    """The state line and the last line of a run that stopped busy, naming who holds the node now (pytest
    said who held it when it gave up; a line it cannot hand back)."""
    holder = holder_of(node_lock_path(pytest_args))
    who = holder.describe() if holder else "another wirecheck run held the GPUs (it has let go since)"
    held = dataclasses.asdict(holder) if holder else None
    return [problems.state_line(problems.BUSY, holder=held), f"{PROG}: node busy: {who}; exit {codes.NODE_BUSY}"]


def last_line(code: int, mode: Mode, fault: str | None = None) -> str:
    """validate's own last line; `fault`: pytest's line for a fault of the harness (the path and the cause)."""
    if code in (codes.HARNESS_FAULT, codes.HARNESS_CRASH) and fault:
        what = fault
    elif code in EXIT_CODES:
        what = EXIT_CODES[code][0]
    elif code > 128:
        what = f"pytest was killed by signal {code - 128}: the run is incomplete"
    else:
        what = "pytest's own exit code"
    if mode.simulate is not None:
        return f"{PROG}: SIMULATION of {mode.simulate} — no GPU was validated; {what}, exit {code}"
    if code == codes.OK and mode.gpus:
        what = f"every selected check passed on this node's {mode.gpus} GPU(s)"
        if mode.narrowed_by:
            what = (f"every selected check passed on {mode.gpus} of this node's {mode.node_gpus} GPUs "
                    f"({mode.narrowed_by}): the others were not validated")
    return f"{PROG}: {what}; exit {code}"


HELP_TIMEOUT_S = 60  # pytest --help, read after a usage error: pytest's start, never a run


def plugin_hint(unknown: Sequence[str]) -> str:
    return (f"{PROG}: pytest knows no {', '.join(unknown)}: the suite runs with its own pytest plugins only (wirecheck's "
            "and pytest-benchmark); an option of another plugin needs it loaded with -p MODULE (e.g. -p pytest_timeout "
            "--timeout 600)")


def unknown_options(base: Sequence[str], pytest_args: Sequence[str]) -> list[str]:
    """The long options among pytest_args that pytest, with the plugins the run loads (the suite's and each -p
    MODULE), does not know: read from its --help, so only after a usage error (half a second of pytest's start)."""
    given, plugins = [], []
    for i, arg in enumerate(pytest_args):
        if arg == "--":
            break
        if arg.startswith("--"):
            given.append(arg.split("=", 1)[0])
        elif arg == "-p" and i + 1 < len(pytest_args):
            plugins += ["-p", pytest_args[i + 1]]
        elif arg.startswith("-p") and len(arg) > 2:
            plugins.append(arg)
    if not given:
        return []
    try:
        shown = subprocess.run([*base, *plugins, "--help"], capture_output=True, text=True, env=pytest_env(),
                               timeout=HELP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if shown.returncode != 0:
        return []  # a -p MODULE that does not load: pytest said so itself
    known = set(re.findall(r"(?<![\w-])--[A-Za-z0-9][\w-]*", shown.stdout))
    return [option for option in dict.fromkeys(given) if option not in known]


def _say(message: str) -> None:
    for line in message.splitlines():
        print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def _pytest_command(pytest_args: Sequence[str]) -> list[str]:
    suite = suite_paths()
    # The suite's own pytest plugins and no other (core/paths.py says why); `-p MODULE` among the arguments adds one.
    cmd = [sys.executable, "-m", "pytest", str(suite.tests), "--rootdir", str(suite.root), *suite_plugin_args()]
    if not suite.checkout:
        # An installed suite lives in site-packages: keep pytest's cache out of it.
        cmd += ["-p", "no:cacheprovider"]
    return cmd + list(pytest_args)


def pytest_env() -> dict[str, str]:
    """The environment pytest runs the suite in, with wirecheck's bytecode cache where the node's Python keeps no
    bytecode of its own (wirecheck.workers.bytecode): pytest's start and collection then read pytest, its plugins
    and the suite compiled, not compile them from source."""
    from wirecheck.workers import bytecode

    return bytecode.worker_env(suite_pytest_env())


def run(args: argparse.Namespace, pytest_args: list[str]) -> int:
    try:
        return _run(args, pytest_args)
    except KeyboardInterrupt:
        # Only before pytest started (the NVML probe): during the run the signal is pytest's.
        print(f"{PROG}: interrupted before pytest started: nothing ran; exit {codes.CTRL_C}", flush=True)
        return codes.CTRL_C


def _run(args: argparse.Namespace, pytest_args: list[str]) -> int:
    passed_on = list(pytest_args)  # the operator's own pytest arguments, before validate adds --level
    try:
        base = _pytest_command([])
    except RuntimeError as exc:  # the plugin package is missing: a broken install
        _say(str(exc))
        return codes.INTERNAL_ERROR
    if args.pytest_help:
        return run_foreground(base + ["--help"], PROG, env=pytest_env()).returncode

    if args.level is not None:
        try:
            pytest_args = ["--level", check_level(args.level)] + list(pytest_args)
        except ValueError as exc:
            _say(str(exc))
            print(f"{PROG}: {EXIT_CODES[codes.USAGE_ERROR][0]}; exit {codes.USAGE_ERROR}", flush=True)
            return codes.USAGE_ERROR
    if args.trust_recent is not None:  # before the topology is read: the trusted path reads NVML once
        trusted = _trust_recent(args, pytest_args)
        if trusted is not None:
            return trusted
    mode = choose_mode(pytest_args)
    if mode.refusal:
        _say(mode.refusal)
        print(problems.state_line(problems.NVML_UNREADABLE, error=mode.nvml_error), flush=True)
        print(last_line(codes.NVML_BROKEN, mode), flush=True)
        return codes.NVML_BROKEN
    cmd = base + list(pytest_args)
    if mode.notice:
        _say(mode.notice)
        cmd.append(f"--simulate={mode.simulate}")
    _say(shlex.join(cmd))  # as a shell takes it back: `-k "a and b"` stays one argument
    with FaultLine() as fault:
        code = exit_code(run_foreground(cmd, PROG, pass_fds=fault.pass_fds, env=pytest_env()),
                         simulated=mode.simulate is not None)
    if code > 128:  # pytest may have stopped mid-line (its progress dots): the last line starts on its own
        print(flush=True)
    if code == codes.NODE_BUSY:
        lines = busy_lines(pytest_args)
    else:
        lines = [fault.state] if fault.state and code in (codes.HARNESS_FAULT, codes.HARNESS_CRASH) else []
        unknown = unknown_options(base, passed_on) if code == codes.USAGE_ERROR else []
        if code == codes.USAGE_ERROR and refused_options.xdist_asked(passed_on):  # xdist is not loaded here
            lines.append(f"{PROG}: {refused_options.XDIST}")
        elif unknown:  # pytest's "unrecognized arguments" scrolled above; its other usage errors name their own cause
            lines.append(plugin_hint(unknown))
        lines.append(last_line(code, mode, fault.line))
    print("\n".join(lines), flush=True)
    return code


def _trust_recent(args: argparse.Namespace, pytest_args: list[str]) -> int | None:
    """--trust-recent: OK when the latest pass stands (the lines say which and what was compared), USAGE_ERROR
    for a window or thresholds file that cannot be read, None to run the level (the lines say why)."""
    from wirecheck.cli import trusted

    if simulation_target(pytest_args) is not None:
        from wirecheck.records import trust

        try:  # the value is checked all the same: the prolog's line, rehearsed in simulation, must hold on the node
            trust.trust_window(None, "", args.trust_recent or None)
        except ValueError as exc:
            _say(str(exc))
            print(f"{PROG}: {EXIT_CODES[codes.USAGE_ERROR][0]}; exit {codes.USAGE_ERROR}", flush=True)
            return codes.USAGE_ERROR
        _say("--trust-recent: a simulation is never trusted (nothing of a node was validated): running it")
        return None
    try:
        decision, where, seconds = trusted.attempt(pytest_args, args.level, args.trust_recent, _option_value)
    except ValueError as exc:  # ThresholdsError, TrustWindowError: the message names the key or option
        _say(str(exc))
        print(f"{PROG}: {EXIT_CODES[codes.USAGE_ERROR][0]}; exit {codes.USAGE_ERROR}", flush=True)
        return codes.USAGE_ERROR
    if not decision.trusted:
        _say("\n".join(trusted.refused_lines(decision)))
        return None
    lines = trusted.trusted_lines(decision, where, seconds)
    _say("\n".join(lines[:-1]))
    print(f"{PROG}: {lines[-1]}; exit {codes.OK}", flush=True)
    return codes.OK


class FaultLine:
    """A pipe pytest's plugin writes a fault of the harness into (core.harness.WRAPPER_FD_ENV), as JSON: its
    line, so that validate's last line names the path and the cause as pytest's did, and its kind and facts,
    which validate's state line (core.problems) hands to `node-state`."""

    def __init__(self):
        self.line: str | None = None
        self.state: str | None = None  # the state line (core.problems.state_line)
        self.pass_fds: tuple[int, ...] = ()
        self._read = self._write = None

    def __enter__(self) -> "FaultLine":
        try:
            self._read, self._write = os.pipe()
        except OSError:
            return self  # no pipe: the line above names the fault
        os.set_blocking(self._read, False)
        os.environ[WRAPPER_FD_ENV] = str(self._write)
        self.pass_fds = (self._write,)
        return self

    def __exit__(self, *exc) -> None:
        os.environ.pop(WRAPPER_FD_ENV, None)
        if self._read is None:
            return
        os.close(self._write)
        try:
            text = os.read(self._read, 8192).decode("utf-8", "replace")
        except (BlockingIOError, OSError):
            text = ""
        os.close(self._read)
        try:
            told = json.loads(text.strip().splitlines()[0]) if text.strip() else None
        except ValueError:
            told = None
        if not isinstance(told, dict) or not isinstance(told.get("line"), str):
            return
        self.line = told["line"]
        kind = told.get("problem")
        if kind in (problems.HARNESS_FAULT, problems.HARNESS_CRASH):
            self.state = problems.state_line(kind, fault=told.get("fault"), crash=told.get("crash"))



main = entry(NAME)
