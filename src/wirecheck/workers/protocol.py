"""The parent's side of the pipe protocol that `worker.py` describes: what it sends to the ranks and
what it makes of their messages.

Messages are read as typed replies (`StorePort`, `Returned`, `Raised`) so that the code waiting for
them never looks inside a tuple; a message that is not the awaited one (a late reply to an earlier
call) reads as None.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(frozen=True)
class StorePort:
    """Rank 0's store is up at this port (during the start)."""

    port: int


@dataclass(frozen=True)
class Returned:
    """The rank is ready (its info) or its call returned (the value)."""

    value: Any


@dataclass(frozen=True)
class Raised:
    """The rank's setup or call raised; `facts` as `worker.exception_facts` made them."""

    summary: str
    traceback: str
    facts: dict


def check_function_name(fn: str, where: str) -> None:
    """A worker function is named 'package.module:function'; refused here, before any rank is asked."""
    module, sep, attr = fn.partition(":")
    if not (module and sep and attr):
        raise ValueError(f"{where}: worker function {fn!r} must be 'package.module:function'")


def encode_call(seq: int, fn: str, kwargs: dict[str, Any], where: str) -> bytes:
    """The call as bytes. Pickled once, here: a bad argument fails before any rank got the call."""
    try:
        return pickle.dumps(("call", seq, fn, dict(kwargs)), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise ValueError(f"{where}: the arguments cannot be sent to the workers: {exc}") from exc


def send_call(conns: list[Connection], payload: bytes) -> tuple[int, Exception] | None:
    """Send an encoded call to every rank in rank order; the first rank it could not reach, and why."""
    for rank, conn in enumerate(conns):
        try:
            conn.send_bytes(payload)
        except (OSError, EOFError) as exc:
            return rank, exc
    return None


def relay_port(conns: list[Connection], port: int) -> None:
    """Tell ranks 1.. where rank 0's store is (a dead rank shows up while waiting for replies)."""
    for conn in conns[1:]:
        try:
            conn.send(("rendezvous", port))
        except (OSError, EOFError):
            pass


def ask_to_exit(conns: list[Connection]) -> None:
    """Ask every rank to leave its serving loop; a rank already gone is no error."""
    for conn in conns:
        try:
            conn.send(("exit",))
        except (OSError, EOFError):
            pass


def decode(rank: int, msg: tuple, seq: int | None) -> StorePort | Returned | Raised | None:
    """What rank `rank`'s message means while awaiting call `seq` (None: awaiting 'ready', the start)."""
    kind = msg[0]
    if seq is None:  # starting
        if kind == "rendezvous" and rank == 0:
            return StorePort(int(msg[1]))
        if kind == "ready":
            return Returned(msg[1])
        if kind == "init_error":
            return Raised(msg[1], msg[2], msg[3])
        return None
    if kind not in ("ok", "error") or msg[1] != seq:
        return None  # not this call's reply
    if kind == "ok":
        return Returned(msg[2])
    return Raised(msg[2], msg[3], msg[4])
