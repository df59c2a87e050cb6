"""The `wirecheck` dispatcher: every command a module of wirecheck/cli/ under one protocol
(wirecheck.cli.protocol), each listed by `wirecheck --help` and the README and answering its own
`--help`; no traceback when the reader of its output goes away."""

from __future__ import annotations

import os
import subprocess
import sys

import re
import types
from pathlib import Path

import pytest

from wirecheck.cli import protocol
from wirecheck.cli.main import main

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_command_is_a_module_of_the_cli_package_under_one_protocol(capsys):
    found = protocol.commands()
    names = [c.NAME for c in found]
    assert all(c.__name__.startswith("wirecheck.cli.") for c in found)
    assert all(callable(c.add_parser) and callable(c.run) and callable(c.main) for c in found), names
    # the README's command table lists the same commands
    listed = set(re.findall(r"^\| `wirecheck ([a-z-]+)", README.read_text(), re.M))
    assert listed == set(names), (sorted(listed), names)
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    top = capsys.readouterr().out
    assert all(f"    {name} " in top for name in names), top


@pytest.mark.parametrize("name", [c.NAME for c in protocol.commands()])
def test_every_command_answers_its_own_help(name, capsys):
    """In-process, as the entry point runs it: exit 0 and the command's usage line (fleet lists its own)."""
    try:
        code = main([name, "--help"])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr().out
    assert code == 0 and f"usage: wirecheck {name}" in out, out


def test_the_no_gpu_message_names_a_help_that_lists_the_recorded_topologies(capsys):
    """The failure without a GPU says `wirecheck topo --help` lists the recorded topologies: it must."""
    from wirecheck.checks.inventory import GPUS_VISIBLE

    assert "`wirecheck topo --help` lists the recorded ones" in GPUS_VISIBLE.said("dry_run")
    with pytest.raises(SystemExit):
        main(["topo", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert all(name in shown for name in ("h200-sxm-2", "h200-nvl-8", "a100-sxm-8", "l40s-8")), shown


def test_a_command_imports_its_own_module_and_no_other_commands():
    """`wirecheck topo ...` builds topo's parser alone: every command's module imported cost each start 0.4 s."""
    names = {c.__name__ for c in protocol.commands()}
    probe = ("import sys; from wirecheck.cli.protocol import build_parser; build_parser('nccl-tests'); "
             "print(' '.join(m for m in sys.modules if m.startswith('wirecheck.cli.')))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split())
    assert "wirecheck.cli.nccl_tests" in loaded
    assert not (loaded & names) - {"wirecheck.cli.nccl_tests"}, sorted(loaded & names)
    # a word that is no command's builds the whole parser, whose error lists them all
    assert {c.NAME for c in protocol.commands(only="foreground")} == set()
    assert protocol.build_parser("foreground")._subparsers._group_actions[0].choices.keys() == {
        c.NAME for c in protocol.commands()}


def test_a_module_with_part_of_the_protocol_is_refused(monkeypatch):
    half = types.ModuleType("wirecheck.cli.selftest_half")
    half.NAME, half.add_parser = "selftest-half", lambda subparsers: None
    real = protocol.importlib.import_module
    monkeypatch.setattr(protocol.pkgutil, "iter_modules",
                        lambda path: [types.SimpleNamespace(name="selftest_half"), types.SimpleNamespace(name="topo")])
    monkeypatch.setattr(protocol.importlib, "import_module",
                        lambda name: half if name.endswith("selftest_half") else real(name))
    with pytest.raises(TypeError, match="NAME = 'selftest-half'.* without run; see wirecheck.cli.protocol"):
        protocol.commands()


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["judgee"])
    assert info.value.code == 2
    assert "invalid choice: 'judgee'" in capsys.readouterr().err


def test_closed_pipe_stops_quietly():
    """`wirecheck topo --json | head -1`: before, a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "wirecheck.cli.main", "topo", "--simulate", "h200-nvl-8", "--json"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr  # 128 + SIGPIPE, as the shell reports a broken pipe
    assert "Traceback" not in done.stderr


def test_version_is_written_once_and_said_by_the_command(capsys):
    """`wirecheck --version` says wirecheck.__version__ and where it runs from; pyproject.toml reads the same
    attribute instead of a number of its own (two numbers drift apart)."""
    import tomllib

    import wirecheck

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    line = capsys.readouterr().out.strip()
    package = Path(wirecheck.__file__).resolve().parent
    assert line.startswith(f"wirecheck {wirecheck.__version__} from {package} (Python "), line
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", wirecheck.__version__)
    project = tomllib.loads((README.parent / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "wirecheck.__version__"}


def test_a_crash_of_a_command_exits_70_never_1(monkeypatch, capsys):
    """A bug of ours (here a TypeError raised by `codes`) ends as a crash, exit 70, which the drain hooks read as
    unknown: Python's own exit status for an uncaught exception is 1, which says a check failed and drains."""
    from wirecheck.cli import codes

    def broken(args, extra):
        raise TypeError("a bug")

    monkeypatch.setattr(codes, "run", broken)
    assert main(["codes"]) == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1] == ("wirecheck codes: crashed (TypeError: a bug): a bug of wirecheck, not a "
                                            "finding about the node; the traceback above is for a bug report; exit 70")
