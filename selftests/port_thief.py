"""A process that keeps taking ephemeral ports, as NCCL, other jobs and the OS do on a busy node.

Run as `python port_thief.py HOLD RATE`: binds port 0 (the kernel picks a free ephemeral port) and
listens, about RATE times a second, keeping the newest HOLD sockets and closing the oldest. Prints
"ready" once it holds HOLD ports; runs until killed. Any port that is free at one moment may be
taken the next: exactly the window the old "pick a free port, bind it later" rendezvous lost.
"""

from __future__ import annotations

import collections
import socket
import sys
import time


def main() -> None:
    hold, rate = int(sys.argv[1]), float(sys.argv[2])
    held: collections.deque[socket.socket] = collections.deque()
    announced = False
    interval = 1.0 / rate
    next_at = time.monotonic()
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
        except OSError:
            s.close()  # the range is momentarily full: let go of some and go on
            for _ in range(min(len(held), 10)):
                held.popleft().close()
            continue
        held.append(s)
        if len(held) > hold:
            held.popleft().close()
        elif len(held) == hold and not announced:
            print("ready", flush=True)
            announced = True
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_at = time.monotonic()


if __name__ == "__main__":
    main()
