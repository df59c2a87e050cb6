"""Rendezvous that cannot collide on a port (runs inside the worker processes).

The old way raced: the parent picked a free port, and rank 0 bound it seconds later, after importing
torch; any process that took an ephemeral port in between (NCCL, another group, the OS) made the
start fail with EADDRINUSE (1 strategy run in ~8 on 2x H200). Now rank 0 creates the group's
TCPStore on port 0, so the kernel hands it a port nobody holds in the same call that binds it, and
reports the real port to the parent over its pipe; the parent passes it to the other ranks.

Every rank then points the env:// variables at that running store the way torchrun's agent does
(TORCHELASTIC_USE_AGENT_STORE=True: every rank, rank 0 included, connects as a client and nobody
binds MASTER_PORT again). So whoever initialises the process group joins without a race: the worker
itself, or Accelerate/DeepSpeed/torch inside a training function, which read MASTER_ADDR/MASTER_PORT.
"""

from __future__ import annotations

import datetime
import os
from multiprocessing.connection import Connection
from typing import Any

HOST = "127.0.0.1"

# Rank 0's store: the server must live as long as the process (the process group keeps only a
# client), so it is held here and never closed.
_SERVER: Any = None


def host(timeout_s: float) -> Any:
    """Rank 0: a TCPStore server on a port the kernel picks at bind time."""
    import torch.distributed as dist

    return dist.TCPStore(HOST, 0, None, True, timeout=datetime.timedelta(seconds=timeout_s),
                         wait_for_workers=False)


def env_for(port: int) -> dict[str, str]:
    """What env:// initialisation must see to join the store at `port` as a client."""
    return {
        "MASTER_ADDR": HOST,
        "MASTER_PORT": str(port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        # torch < 2.4 prefixes the agent store with the restart count and raises without it.
        "TORCHELASTIC_RESTART_COUNT": "0",
    }


def join(conn: Connection, rank: int, timeout_s: float) -> int | None:
    """Take part in the rendezvous; return the store's port (None: the parent said exit first)."""
    global _SERVER
    if rank == 0:
        _SERVER = host(timeout_s)
        port = int(_SERVER.port)
        conn.send(("rendezvous", port))
    else:
        while True:
            msg = conn.recv()
            if msg[0] == "rendezvous":
                port = int(msg[1])
                break
            if msg[0] == "exit":
                return None
    os.environ.update(env_for(port))
    return port
