"""Asking NCCL's RAS (reliability, availability, serviceability; NCCL >= 2.24, on by default) what the
communicators of the node's NCCL processes are doing: the client side of its text protocol.

Every NCCL process runs a RAS thread; they listen on localhost:28028 (NCCL_RAS_ADDR changes it) and answer
for the whole job. The protocol (NVIDIA/nccl src/ras/client.cc, client_support.cc) is lines of text:
`CLIENT PROTOCOL 2` -> `SERVER PROTOCOL 2`; `TIMEOUT <s>` -> `OK` (how long RAS gathers from its peers);
`SET FORMAT json` -> `OK` from NCCL 2.28.7, `ERROR: Unknown command ...` before (then the text is read);
`VERBOSE STATUS` -> the report, and the connection closes. `DIAGNOSTICS` (NCCL 2.31) -> the readiness
report (`ncclras -D`).

A reading is plain data for a record (wirecheck.workers.ras_report's fields, with `address`, `seconds`,
`raw`); when nothing answers it says why in `absent` (`answered` False): RAS is evidence, never an error,
and its absence is said.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Mapping

from wirecheck.workers import ras_report

DEFAULT_ADDRESS = "localhost:28028"
PROTOCOL = 2
# How long RAS may gather from its peers (its TIMEOUT command; ncclras' default is 5 s): a dead peer costs
# the whole of it, so a failure's evidence waits at most this plus the socket's margin.
GATHER_S = 3
CONNECT_S = 2.0
MARGIN_S = 4.0  # beyond GATHER_S, for RAS to format and send (the ncclras client adds its own 5 s + 1 s)
MAX_ANSWER = 4 * 1024 * 1024  # bytes read at most: a 10,000-rank job's text is well below


def address(env: Mapping[str, str] | None = None) -> tuple[str, int, str]:
    """(host, port, as written) from NCCL_RAS_ADDR (`host:port`, `[v6]:port`), else localhost:28028.
    ValueError for a value that is no address."""
    text = (env if env is not None else os.environ).get("NCCL_RAS_ADDR") or DEFAULT_ADDRESS
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"NCCL_RAS_ADDR={text!r}: give host:port, e.g. {DEFAULT_ADDRESS}")
    return host.strip("[]"), int(port), text.strip()


def disabled(env: Mapping[str, str] | None = None) -> str | None:
    """Why RAS is off in this environment, or None."""
    value = (env if env is not None else os.environ).get("NCCL_RAS_ENABLE")
    if value is not None and value.strip() == "0":
        return "RAS is off in the workers' environment (NCCL_RAS_ENABLE=0)"
    return None


def not_read(why: str, where: str | None = None) -> dict:
    """A reading that says why RAS was not read."""
    return {"answered": False, "absent": why, "address": where, "communicators": [], "findings": []}


class _Conversation:
    """One connection: lines out, lines (or everything to the end) back, under one deadline."""

    def __init__(self, host: str, port: int, deadline: float):
        self.deadline = deadline
        self.sock = socket.create_connection((host, port), timeout=min(CONNECT_S, self._left()))
        self.buffer = b""

    def _left(self) -> float:
        return max(0.05, self.deadline - time.monotonic())

    def send(self, line: str) -> None:
        self.sock.settimeout(self._left())
        self.sock.sendall((line + "\n").encode("ascii"))

    def line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = self._recv()
            if not chunk:
                raise ConnectionError("RAS closed the connection")
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\n")
        return head.decode("utf-8", "replace").strip()

    def rest(self, stop: str | None = None) -> str:
        """Everything until RAS closes the connection (or a line containing `stop` arrives)."""
        data = self.buffer
        while len(data) < MAX_ANSWER:
            if stop is not None and stop.encode() in data:
                break
            chunk = self._recv()
            if not chunk:
                break
            data += chunk
        self.buffer = b""
        return data.decode("utf-8", "replace")

    def _recv(self) -> bytes:
        self.sock.settimeout(self._left())
        return self.sock.recv(65536)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _open(env: Mapping[str, str] | None, wait_s: float) -> tuple[_Conversation | None, str, str | None]:
    """A connection past the handshake and TIMEOUT, or None with why."""
    why = disabled(env)
    try:
        host, port, written = address(env)
    except ValueError as exc:
        return None, "", str(exc)
    if why:
        return None, written, why
    deadline = time.monotonic() + wait_s
    try:
        talk = _Conversation(host, port, deadline)
    except ConnectionRefusedError:
        return None, written, (f"nothing listens on {written}: no NCCL process with RAS on this node (NCCL before "
                               "2.24, RAS off, or every rank already gone)")
    except OSError as exc:
        return None, written, f"cannot connect to {written}: {exc.strerror or exc}"
    try:
        talk.send(f"CLIENT PROTOCOL {PROTOCOL}")
        hello = talk.line()
        if not hello.upper().startswith("SERVER PROTOCOL"):
            talk.close()
            return None, written, f"{written} answered {hello[:80]!r}, not NCCL RAS's handshake"
        talk.send(f"TIMEOUT {max(1, int(min(GATHER_S, wait_s - MARGIN_S)))}")
        talk.line()
    except (OSError, ConnectionError) as exc:
        talk.close()
        return None, written, f"{written} did not complete RAS's handshake ({exc})"
    return talk, written, None


def ask_status(env: Mapping[str, str] | None = None, wait_s: float = GATHER_S + MARGIN_S) -> dict:
    """RAS's verbose status, as JSON where the library answers it (NCCL >= 2.28.7), else as text; parsed into
    fields (ras_report), with `raw` (RAS's own words, cut at RAW_KEPT), `seconds` and `address`."""
    started = time.monotonic()
    talk, written, why = _open(env, wait_s)
    if talk is None:
        return not_read(why or "not asked", written or None)
    note = None
    try:
        talk.send("SET FORMAT json")
        said = talk.line()
        fmt = "json" if said.upper() == "OK" else "text"
        if fmt == "text":
            note = f"JSON refused ({said[:80]}): NCCL before 2.28.7; read as text"
        talk.send("VERBOSE STATUS")
        raw = talk.rest()
    except (OSError, ConnectionError) as exc:
        talk.close()
        return not_read(f"{written} stopped answering ({exc})", written)
    talk.close()
    seconds = round(time.monotonic() - started, 3)
    try:
        reading = ras_report.parse_json(raw) if fmt == "json" else ras_report.parse_text(raw)
    except ValueError as exc:
        return {**not_read(f"{written} answered something RAS would not ({exc})", written), "raw": raw[:ras_report.RAW_KEPT],
                "seconds": seconds}
    return {**reading, "answered": True, "absent": None, "address": written, "seconds": seconds,
            "format_note": note, "raw": raw[:ras_report.RAW_KEPT]}


def ask_diagnostics(env: Mapping[str, str] | None = None, wait_s: float = 10.0) -> dict:
    """RAS's readiness diagnostics (`ncclras -D`, NCCL >= 2.31): {answered, absent, address, lines, differ,
    notes, completed, busy, raw}; an older NCCL says it has no such command (absent)."""
    talk, written, why = _open(env, wait_s)
    if talk is None:
        return {**not_read(why or "not asked", written or None), "differ": [], "notes": []}
    try:
        talk.send("DIAGNOSTICS")
        first = talk.line()  # an older RAS answers one ERROR line and keeps the connection open
        if first.upper().startswith("ERROR"):
            talk.close()
            return {**not_read(f"this NCCL's RAS has no diagnostics ({first[:80]}; NCCL 2.31 adds them)", written),
                    "differ": [], "notes": [], "raw": first}
        raw = first + "\n" + ("" if first.startswith("BUSY") else talk.rest(stop="diagnostics completed"))
    except (OSError, ConnectionError) as exc:
        talk.close()
        return {**not_read(f"{written} stopped answering ({exc})", written), "differ": [], "notes": []}
    talk.close()
    try:
        parsed = ras_report.parse_diagnostics(raw)
    except ValueError as exc:
        return {**not_read(f"{written} answered something RAS diagnostics would not ({exc})", written),
                "differ": [], "notes": [], "raw": raw[:ras_report.RAW_KEPT]}
    return {**parsed, "answered": True, "absent": None, "address": written, "raw": raw[:ras_report.RAW_KEPT]}
