"""On a GPU node: where a machine's first training warm-up goes. The one-GPU training's three warm-up steps took
2.2-3.2 s in the first acceptance run on each freshly started 1x H200 node and 0.6-0.8 s in every later run there
(phase_s.warmup in fixtures/reference/h200-1/*/acceptance*.jsonl), which alone keeps that node's acceptance above
its 75-s aim. Is it the page cache (torch's and the NVIDIA libraries' files read from disk when their kernels first
load), the CUDA JIT cache (kernels compiled from PTX and kept under CUDA_CACHE_PATH), or neither?

    python scripts/device/warmup_probe.py [--repeats 2] [--steps 5]   (--cpu: a rehearsal on a CPU machine)

Run it first thing on a fresh machine: its first case is that machine's first training. Each case is a new
process (the interpreter this script runs under) that imports torch, builds the one-GPU model on GPU 0 with the
thresholds' hardware settings and trains --steps steps, each synchronised and timed alone:

    first       the machine as it is
    warm        nothing done (its files and JIT cache as the cases before left them)
    evicted     the libraries' files dropped from the page cache first (posix_fadvise DONTNEED: clean pages no
                live process maps; no root, nothing else on the machine changed)
    jit-cold    an empty CUDA_CACHE_PATH of its own (the page cache as it is)
    prefetched  dropped as `evicted`, then read through once (its seconds: the disk's part), before the process starts

Prints per case one `RESULT` line: the share of the libraries' pages resident before it, `import torch`, CUDA's
start, `import torch._dynamo` (which AdamW's construction pulls in, with torch.distributed's FSDP and DTensor), the
model's set-up and each step's seconds, and which library files came into the page cache (MiB, the most first)
during CUDA's start and the set-up, and during the first step. If `evicted` is as slow as `first` and `prefetched` as quick as
`warm`, the page cache is the cause and reading the libraries ahead while the GPU load runs would remove it.
The environment is passed through untouched.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import json
import mmap
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t_import = time.perf_counter() - t0
sys.path.insert(0, sys.argv[1])
from wirecheck.thresholds.file import load_thresholds
from wirecheck.training.baseline import PlainLoop
from wirecheck.training.data import local_batch
from wirecheck.training.scaling import single_gpu_kwargs
from wirecheck.vocab.shape import GPTShape
cpu = sys.argv[4] == "cpu"
sys.path.insert(0, sys.argv[5])
from warmup_probe import paged_in, resident_by_file
libs = json.loads(sys.argv[6])
before_cuda = resident_by_file(libs)
kw = single_gpu_kwargs(load_thresholds(sys.argv[2]).training_settings(cpu))
steps = int(sys.argv[3])
device = torch.device("cpu" if cpu else "cuda:0")
sync = (lambda: None) if cpu else torch.cuda.synchronize
t0 = time.perf_counter()
if not cpu:
    torch.cuda.set_device(device)
torch.zeros(1, device=device)
sync()
t_cuda = time.perf_counter() - t0
t0 = time.perf_counter()
import torch._dynamo  # what AdamW's construction imports (torch._compile), apart from the set-up it would join
t_dynamo = time.perf_counter() - t0
t0 = time.perf_counter()
s = GPTShape.of(kw["shape"])
loop = PlainLoop(device, s, kw["seed"], kw["precision"], kw["optimizer"], 1e-3)
batches = [local_batch(kw["seed"], i, 0, kw["micro_batch"], s.seq_len, s.vocab_size, device) for i in range(steps)]
sync()
t_setup = time.perf_counter() - t0
before_step = resident_by_file(libs)
step_s = []
for i, (x, y) in enumerate(batches):
    t0 = time.perf_counter()
    loop.step(x, y)
    sync()
    step_s.append(time.perf_counter() - t0)
    if i == 0:
        after_step = resident_by_file(libs)
print("CHILD " + json.dumps({"import_s": t_import, "cuda_s": t_cuda, "dynamo_s": t_dynamo, "setup_s": t_setup,
                            "step_s": step_s, "paged_in_setup": paged_in(before_cuda, before_step),
                            "paged_in_step1": paged_in(before_step, after_step)}))
"""


def library_files(python: str) -> list[str]:
    """torch's shared libraries and those of the nvidia-* wheels beside it, as `python` would load them."""
    out = subprocess.run([python, "-c", "import importlib.util, os; "
                          "print(os.path.dirname(os.path.dirname(importlib.util.find_spec('torch').origin)))"],
                         capture_output=True, text=True, check=True)
    site = out.stdout.strip()
    found = glob.glob(f"{site}/torch/lib/*.so*") + glob.glob(f"{site}/nvidia/*/lib/*.so*")
    return sorted(p for p in found if os.path.isfile(p))


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
PAGE = mmap.PAGESIZE


def resident_by_file(paths: list[str]) -> dict[str, tuple[int, int]]:
    """{path: (pages in the page cache, pages)}: mincore on a read-only mapping of each (a file it cannot map is
    left out)."""
    out = {}
    for path in paths:
        size = os.path.getsize(path)
        if not size:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                continue
            pages = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) == 0:
                held = bytes(vec)
                out[path] = (pages - held.count(0), pages)  # bit 0 set: resident (the other bits are reserved)
            _libc.munmap(addr, size)
        finally:
            os.close(fd)
    return out


def resident(paths: list[str]) -> tuple[int, int]:
    """(pages in the page cache, pages) over the files."""
    counts = resident_by_file(paths).values()
    return sum(h for h, _ in counts), sum(t for _, t in counts)


def paged_in(before: dict, after: dict, top: int = 6) -> dict[str, float]:
    """The files that came into the page cache between two resident_by_file readings: name -> MiB, the most
    first (at most `top`, none under 1 MiB): which library a phase read from the disk."""
    grown = {os.path.basename(p): (after[p][0] - before.get(p, (0, 0))[0]) * PAGE / 2**20 for p in after}
    return {name: round(mib, 1) for name, mib in sorted(grown.items(), key=lambda kv: -kv[1])[:top] if mib >= 1}


def advise(paths: list[str], advice: int) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, advice)
        finally:
            os.close(fd)


def prefetch(paths: list[str]) -> float:
    """Reads the files through once (posix_fadvise WILLNEED alone did not fill the page cache on a 2-core
    CPU machine without a GPU); the seconds it took."""
    t0 = time.monotonic()
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass
    return time.monotonic() - t0


def case(name: str, python: str, paths: list[str], steps: int, device: str, env: dict | None = None,
         extra: dict | None = None):
    held, total = resident(paths)
    t0 = time.monotonic()
    done = subprocess.run([python, "-c", CHILD, str(ROOT / "src"), str(ROOT / "thresholds.yaml"), str(steps), device,
                           str(Path(__file__).resolve().parent), json.dumps(paths)],
                          capture_output=True, text=True, env=env or os.environ.copy(), timeout=600)
    wall = time.monotonic() - t0
    line = next((x for x in done.stdout.splitlines() if x.startswith("CHILD ")), None)
    if line is None:
        print(f"RESULT {name} FAILED rc={done.returncode}: {done.stderr[-2000:]}", flush=True)
        return
    got = json.loads(line[len("CHILD "):])
    print(f"RESULT {name} resident_before={held / max(total, 1):.3f} ({held * PAGE / 2**30:.2f} of "
          f"{total * PAGE / 2**30:.2f} GiB) import={got['import_s']:.2f} cuda={got['cuda_s']:.2f} "
          f"dynamo={got['dynamo_s']:.2f} "
          f"setup={got['setup_s']:.2f} steps=[{', '.join(f'{s:.3f}' for s in got['step_s'])}] wall={wall:.1f}"
          f" paged_in_setup={json.dumps(got['paged_in_setup'])} paged_in_step1={json.dumps(got['paged_in_step1'])}"
          + "".join(f" {k}={v}" for k, v in (extra or {}).items()), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--cpu", action="store_true", help="a rehearsal on a CPU machine: the simulated settings")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    python = sys.executable
    if importlib.util.find_spec("torch") is None:
        print("no torch in this interpreter", file=sys.stderr)
        return 2
    paths = library_files(python)
    print(f"{len(paths)} library files, {sum(os.path.getsize(p) for p in paths) / 2**30:.2f} GiB", flush=True)
    case("first", python, paths, args.steps, device)
    for _ in range(args.repeats):
        case("warm", python, paths, args.steps, device)
        advise(paths, os.POSIX_FADV_DONTNEED)
        case("evicted", python, paths, args.steps, device)
        with tempfile.TemporaryDirectory(prefix="cuda-cache-") as empty:
            case("jit-cold", python, paths, args.steps, device, env={**os.environ, "CUDA_CACHE_PATH": empty})
        advise(paths, os.POSIX_FADV_DONTNEED)
        took = prefetch(paths)
        case("prefetched", python, paths, args.steps, device, extra={"prefetch_s": f"{took:.1f}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
