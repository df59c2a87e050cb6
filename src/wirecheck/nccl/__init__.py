"""NCCL's own account: nccl-tests run beside the suite (`tests`), its output parsed
(`tests_output`), the two curves side by side (`crosscheck`), and the path NCCL chose, from its
INFO log (`log`) and the worker that makes it talk (`path`).

May import: core, vocab, records, node, workers, measure, thresholds.
"""
