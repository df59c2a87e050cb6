"""A GPU made slower by a known share, from outside the suite: put this folder on PYTHONPATH and every
Python process of the run (the pytest process, each worker) loads it at start. Nothing of wirecheck is
imported here: an import hook waits until a process imports wirecheck.gpu.gemm or wirecheck.gpu.hbm (only
the workers do, with torch) and then wraps the one function each routes its timed work through:

- WIRECHECK_SLOW_GEMM=0.031: every bf16 product (the GEMM figure and the sustained load) also multiplies
  3.1 % of its rows again into a scratch buffer: the product's time grows by that share, its result stays
  right, and the figure reads 1 / 1.031 = 0.970 of the GPU's (a GPU about 3 % slower);
- WIRECHECK_SLOW_HBM=0.0101: every timed device-to-device copy also copies 1.01 % of its buffer again: the
  copy figure reads 0.990 of the GPU's.

Each process that slows a module says so in the file SLOW_GPU_LOG names (else on its stderr). Clocks,
power and the measured code are untouched: the loss is extra work the figure is not credited for,
the way a GPU that lost speed does less in the same time. Used by scripts/device/resolution_check.sh;
selftests/slow_gpu_worker.py does the same through the suite's own worker fixture instead.
"""

import importlib.abc
import importlib.machinery
import os
import sys

_TARGETS = {"wirecheck.gpu.gemm": "WIRECHECK_SLOW_GEMM", "wirecheck.gpu.hbm": "WIRECHECK_SLOW_HBM"}


def _share(name):
    try:
        return float(os.environ.get(name) or 0)
    except ValueError:
        return 0.0


def _slow_gemm(module, share):
    matmul = module.matmul
    scratch = {}

    def slower(a, b, out):
        matmul(a, b, out)
        rows = max(1, round(share * a.shape[0]))
        key = (rows, b.shape[1], out.dtype, out.device)
        if key not in scratch:
            import torch
            scratch[key] = torch.empty(rows, b.shape[1], dtype=out.dtype, device=out.device)
        import torch
        torch.matmul(a[:rows], b, out=scratch[key])

    module.matmul = slower


def _slow_hbm(module, share):
    copy = module.copy

    def slower(dst, src):
        copy(dst, src)
        words = max(1, round(share * src.numel()))
        dst[:words].copy_(src[:words])

    module.copy = slower


class _Wrap(importlib.abc.Loader):
    def __init__(self, loader, name):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        share = _share(_TARGETS[self.name])
        if share > 0:
            (_slow_gemm if self.name.endswith("gemm") else _slow_hbm)(module, share)
            line = f"slow_gpu: {self.name} slowed by {share * 100:.2f} % in pid {os.getpid()}\n"
            log = os.environ.get("SLOW_GPU_LOG")  # a worker's stderr is kept only when its group fails
            if log:
                with open(log, "a") as f:
                    f.write(line)
            else:
                sys.stderr.write(line)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in _TARGETS or not _share(_TARGETS[name]):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Wrap(spec.loader, name)
        return spec


if any(_share(v) for v in _TARGETS.values()):
    sys.meta_path.insert(0, _Finder())
