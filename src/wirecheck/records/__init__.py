"""The run's record: JSON lines written the moment each thing exists, and read back (`file`); one
run's writer, shared by the suite, the multi-node job and nccl-tests: header, lines, end (`run`); the
one line a scheduler keeps about a node that failed, from a record (`reason`); the end line a stop
signal writes where pytest does not (`stop_signals`: the multi-node job's ranks).

May import: core.
"""
