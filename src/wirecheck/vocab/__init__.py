"""The suite's vocabulary as pure data, read by every layer and owned by none: the collectives with
dtype and reduction as axes and the nccl-tests binary of each (`ops`), the data-parallel strategies'
names and titles (`strategies`), the placement classes (`placements`), the kinds of work a test
declares for the time model (`work`) and the kinds of record line (`records`).

A table here is a tuple of rows turned into a mapping by `table.by_name`, which refuses a duplicate
name, so a second row of the same name is an error at import, never a silent replacement.

May import: core. No torch, no pytest, no NVML: the thresholds loader, judge, report, plan and the
pytest process read these tables; the code that runs them (worker kernels, trainers, topology rules)
lives in the packages above and looks its row up here by name.
"""
