"""Does a busy neighbour slow a rank's Python? The host-speed probe, pinned and unpinned.

Prints the CPU topology the kernel reports, then times training/host.py's python_loop_s:
alone on CPU 0; with a spinning process on each other CPU in turn (a sibling hyperthread shows
as a slowdown); and unpinned beside N spinners (what two ranks whose CUDA syncs spin see).
"""
from __future__ import annotations

import glob
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))
from wirecheck.training.host import python_loop_s  # noqa: E402


def spin(cpu, stop):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        for _ in range(10000):
            pass


def read(path):
    try:
        return open(path).read().strip()
    except OSError:
        return "?"


def loop_ms(n=5):
    return [round(python_loop_s(3) * 1e3, 2) for _ in range(n)]


def main():
    cpus = sorted(os.sched_getaffinity(0))
    print("cpus", cpus)
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology"
        print(f"cpu{c} core {read(base + '/core_id')} pkg {read(base + '/physical_package_id')} "
              f"siblings {read(base + '/thread_siblings_list')} "
              f"MHz {read(f'/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq')}")
    print("numa", [(os.path.basename(p), read(p + "/cpulist")) for p in sorted(glob.glob("/sys/devices/system/node/node*"))])
    os.sched_setaffinity(0, {cpus[0]})
    print("alone on cpu0 (ms):", loop_ms())
    stop = mp.Event()
    for other in cpus[1:]:
        p = mp.Process(target=spin, args=(other, stop)); p.start(); time.sleep(0.2)
        print(f"cpu0 with a spinner on cpu{other}:", statistics.median(loop_ms(3)))
        stop.set(); p.join(); stop.clear()
    os.sched_setaffinity(0, set(cpus))
    for n in (1, 2, len(cpus) // 2, len(cpus) - 1):
        procs = [mp.Process(target=spin, args=(None, stop)) for _ in range(n)]
        [p.start() for p in procs]; time.sleep(0.3)
        ms = loop_ms(20)
        print(f"unpinned beside {n} unpinned spinners: min {min(ms)} med {statistics.median(ms)} max {max(ms)}: {ms}")
        stop.set(); [p.join() for p in procs]; stop.clear()


if __name__ == "__main__":
    main()
