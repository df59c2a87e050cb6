"""The burn-in level (`--level burn-in --duration 4h`): every GPU under the GEMM load while collectives
cycle over every placement, round after round, the memory test between rounds, NVML, XIDs, ECC and
link counters read throughout; the record flushed round by round; stopped at the first hard fault.

Parent side (no torch): `plan` (the GPUs, the rounds, the collective cycle), `rig` (the worker group,
NVML, the XID watch, the stop file), `loop` (the rounds, what stops them, the record), `faults` (the
hard faults, found by the acceptance checks), `figures` (a round's figures), `judging` (the verdicts'
inputs over every round), `progress` (the progress line as text). Worker side: `worker` (a round on
one GPU: the load on a stream of its own beside the collectives, in one process).

May import: core, vocab, records, node, workers, measure, thresholds, gpu, checks.
"""
