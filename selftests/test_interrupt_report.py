"""Ctrl-C during a run ends with pytest's summary, not a crash in its report of the interrupt.

Python 3.11 can record an interrupted frame without a line number (tb_lineno None, seen in
selectors.select while the launcher waited on its workers), and pytest's KeyboardInterrupt report
then raised TypeError. The plugin unlinks such entries before pytest formats the traceback."""

from __future__ import annotations

import sys
import types

import pytest
from _pytest._code import ExceptionInfo

from pytest_wirecheck.plugin import pytest_keyboard_interrupt
from pytest_wirecheck.reporting import drop_lineless_entries


def _interrupt_with_a_lineless_frame() -> ExceptionInfo:
    def waiting():
        raise KeyboardInterrupt

    try:
        waiting()
    except KeyboardInterrupt as exc:
        # The innermost entry as Python 3.11 left it: an instruction offset that maps to no line.
        exc.__traceback__.tb_next.tb_next = types.TracebackType(None, sys._getframe(), 10**6, -1)
        assert exc.__traceback__.tb_next.tb_next.tb_lineno is None
        return ExceptionInfo.from_exception(exc)


def test_the_interrupt_report_survives_a_frame_without_a_line_number():
    excinfo = _interrupt_with_a_lineless_frame()
    with pytest.raises(TypeError):  # what pytest's own report did without the plugin
        excinfo.getrepr(funcargs=True)
    excinfo = _interrupt_with_a_lineless_frame()
    pytest_keyboard_interrupt(excinfo)
    text = str(excinfo.getrepr(funcargs=True))
    assert "KeyboardInterrupt" in text and "waiting" in text  # the frames with lines are all kept


def test_entries_with_lines_are_left_alone():
    excinfo = _interrupt_with_a_lineless_frame()
    tb = excinfo.tb
    drop_lineless_entries(tb)
    kept = []
    while tb is not None:
        kept.append(tb.tb_lineno)
        tb = tb.tb_next
    assert None not in kept and len(kept) == 2  # this test's frame and `waiting`
