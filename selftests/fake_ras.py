"""A stand-in for NCCL's RAS listener, for the self-tests: it speaks the client protocol of
NVIDIA/nccl src/ras/client_support.cc (`CLIENT PROTOCOL` -> `SERVER PROTOCOL 2`, `TIMEOUT n` -> `OK`,
`SET FORMAT json|text` -> `OK` from NCCL 2.28.7 and `ERROR: Unknown command ...` before, `STATUS` /
`VERBOSE STATUS` -> the report then close, `DIAGNOSTICS` -> the readiness report from NCCL 2.31) and
answers with a recorded or source-written sample (selftests/data/ras/).
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

DATA = Path(__file__).parent / "data" / "ras"


def sample(name: str) -> str:
    """A sample's body: what follows its `---` line (the lines above cite where its format comes from)."""
    return (DATA / name).read_text().split("\n---\n", 1)[1]


class FakeRas:
    """Listens on 127.0.0.1 (a port of the kernel's choosing) until closed; records the commands it got.

    `json`: the JSON answer (None: a NCCL before 2.28.7, which refuses SET FORMAT); `text`: the text answer;
    `diagnostics`: the DIAGNOSTICS answer (None: a NCCL before 2.31)."""

    def __init__(self, text: str | None = None, json: str | None = None, diagnostics: str | None = None,
                 hello: str = "SERVER PROTOCOL 2"):
        self.text, self.json, self.diagnostics, self.hello = text, json, diagnostics, hello
        self.commands: list[str] = []
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(4)
        self.port = self.server.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self._talk(conn)

    def _talk(self, conn: socket.socket) -> None:
        fmt, buffer = "text", b""
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                raw, _, buffer = buffer.partition(b"\n")
                cmd = raw.decode().strip()
                self.commands.append(cmd)
                low = cmd.lower()
                if low.startswith("client protocol "):
                    conn.sendall((self.hello + "\n").encode())
                elif low.startswith("timeout "):
                    conn.sendall(b"OK\n")
                elif low.startswith("set format ") and self.json is not None:
                    fmt = low.split()[-1]
                    conn.sendall(b"OK\n")
                elif low in ("status", "verbose status"):
                    conn.sendall((self.json if fmt == "json" else self.text or "").encode())
                    return  # RAS closes the connection after the report
                elif low == "diagnostics" and self.diagnostics is not None:
                    conn.sendall(self.diagnostics.encode())
                    return
                else:
                    conn.sendall(f"ERROR: Unknown command {cmd}\n".encode())

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> "FakeRas":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def free_port() -> int:
    """A port nothing listens on (the kernel's, closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
