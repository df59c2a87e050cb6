"""Each GPU on its own, every GPU at once: HBM bandwidth, dense GEMM throughput, results that
match a reference bit for bit, a sustained load with NVML sampled beside it, and a memory
pattern test, run by one worker per GPU, concurrently.

Worker side (imported only inside the worker processes; they import torch): `stopwatch`
(CUDA events, or the host clock on CPU), `hbm`, `gemm`, `sustained`, `memory_pattern`, and
`worker` (the three entry points the parent calls: figures, sustained, memory).
Parent side (no torch): `load` (the GpuLoad: one worker group over the run's GPUs, its three
calls, the NVML sampler during the sustained call) and `inputs` (each check's plain inputs
per GPU, and the tables printed with -v).

May import: core, vocab, records, node, workers, measure.
"""
