"""The foreground-job rules of wirecheck.cli.foreground, on a tiny child that counts its SIGINTs:
the terminal's Ctrl-C reaches the child once (the parent does not forward it), a SIGINT sent to
the parent alone is forwarded once, a second Ctrl-C stops the child, SIGTERM is passed on, and
the parent never dies with a traceback."""

from __future__ import annotations

import signal
import sys
import textwrap

import pytest

from terminal import Terminal

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    stubborn = sys.argv[1] == "stubborn"
    # SIGINT blocked and taken with sigtimedwait: each is consumed the moment it arrives, so a
    # duplicate sent a little later is counted, and its si_code says who sent it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    got = 0
    print("child ready", flush=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = signal.sigtimedwait({signal.SIGINT}, 0.5 if got else 0.05)
        if info is None:
            if got and not stubborn:
                break
            continue
        got += 1
        sender = "the terminal" if info.si_code == 0x80 else f"pid {info.si_pid}"
        print(f"child got SIGINT {got} from {sender}", flush=True)
    print(f"child exits after {got} SIGINT", flush=True)
    sys.exit(2)  # what pytest returns when interrupted
    """
)
PARENT = textwrap.dedent(
    """
    import sys
    from wirecheck.cli.foreground import run_foreground
    outcome = run_foreground([sys.executable, sys.argv[1], sys.argv[2]], "parent")
    print(f"outcome returncode={outcome.returncode} interrupts={outcome.interrupts} terminated={outcome.terminated}")
    """
)


@pytest.fixture
def start(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "parent.py").write_text(PARENT)
    terminals = []

    def _start(behaviour: str) -> Terminal:
        term = Terminal([sys.executable, str(tmp_path / "parent.py"), str(tmp_path / "child.py"), behaviour])
        terminals.append(term)
        term.wait_for("child ready", timeout=30)
        return term

    yield _start
    for term in terminals:
        if term.proc.poll() is None:
            term.proc.kill()


def _assert_clean(term: Terminal, code: int = 0) -> None:
    assert "Traceback" not in term.output, term.output
    assert term.finish(timeout=30) == code, term.output


def test_terminal_ctrl_c_reaches_the_child_once(start):
    term = start("polite")
    term.ctrl_c()
    term.wait_for("outcome", timeout=30)
    assert "child got SIGINT 1 from the terminal" in term.output
    # Not forwarded a second time. (A forwarded duplicate that lands while the terminal's SIGINT is
    # still pending merges with it, unseen; one that lands after it was taken is counted here.)
    assert "child exits after 1 SIGINT" in term.output
    assert "outcome returncode=2 interrupts=1 terminated=False" in term.output
    _assert_clean(term)


def test_sigint_to_the_parent_alone_is_forwarded_once(start):
    term = start("polite")
    term.signal_leader(signal.SIGINT)  # e.g. `timeout -s INT`: the child would never hear of it
    term.wait_for("outcome", timeout=30)
    assert f"child got SIGINT 1 from pid {term.proc.pid}" in term.output  # the parent passed it on
    assert "child exits after 1 SIGINT" in term.output
    assert "outcome returncode=2 interrupts=1 terminated=False" in term.output
    _assert_clean(term)


def test_second_ctrl_c_stops_the_child(start):
    term = start("stubborn")  # a child that takes long to wind down after the first Ctrl-C
    term.ctrl_c()
    term.wait_for("child got SIGINT 1", timeout=30)
    term.ctrl_c()
    term.wait_for("outcome", timeout=30)
    assert f"outcome returncode={-signal.SIGTERM} interrupts=2" in term.output
    assert "interrupted again: stopping pytest now" in term.output
    _assert_clean(term)


def test_sigterm_is_passed_on(start):
    term = start("stubborn")
    term.signal_leader(signal.SIGTERM)
    term.wait_for("outcome", timeout=30)
    assert f"outcome returncode={-signal.SIGTERM} interrupts=0 terminated=True" in term.output
    _assert_clean(term)


def test_a_child_started_by_a_parent_that_ignores_sigint_still_takes_it(tmp_path):
    """A command started with SIGINT ignored (a script's background job, a test harness) passed that on to pytest
    through exec: the terminal's Ctrl-C and the one passed on were lost and the run went to its end."""
    import subprocess

    parent = tmp_path / "parent.py"
    parent.write_text(textwrap.dedent(
        """
        import signal, sys
        from wirecheck.cli.foreground import run_foreground
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        child = ("import signal; status = dict(l.split(':', 1) for l in open('/proc/self/status'));"
                 "ignored, blocked = (int(status[k], 16) for k in ('SigIgn', 'SigBlk'));"
                 "print('child', [s.name for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)"
                 " if (ignored | blocked) >> (s - 1) & 1], signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
        run_foreground([sys.executable, "-c", child], "parent")
        """))
    from e2e import pythonpath

    out = subprocess.run([sys.executable, str(parent)], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}).stdout
    assert "child [] True" in out, out
