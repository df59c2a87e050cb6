"""The run's record: JSON lines written the moment each thing exists, and read back (`file`); one
run's writer, shared by the suite, the multi-node job and nccl-tests: header, lines, end (`run`).

May import: core.
"""
