"""Measurements that run inside the workers, and the parent-side code that combines their
per-rank results: the collectives table and its worker functions (`collectives`,
`collective_timing`), the size sweep and its curve (`curve`), and copy bandwidth without NCCL
(`copy_bandwidth`).

May import: core, records, node, workers. Modules import torch only inside the functions that
run in a worker, so the pytest process and the configuration layer can read the tables.
"""
