"""Measurements that run inside the workers, and the parent-side code that combines their
per-rank results: the collectives' kernels and worker functions (`collective_worker`, with
`collective_timing`), their parent side (`collectives`: combine, the table), the size sweep and its
curve (`sweep`, `curve`), and copy bandwidth without NCCL (`copy_bandwidth`). The ops themselves are
data in wirecheck.vocab.ops.

May import: core, vocab, records, node, workers. The modules only workers import (`collective_worker`,
`collective_timing`) import torch at the top; the others import no torch, so the pytest process and
the configuration layer can read them.
"""
