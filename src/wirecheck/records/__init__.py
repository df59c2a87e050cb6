"""The run's record: JSON lines written the moment each thing exists, and read back (`file`); one
run's writer, shared by the suite, the multi-node job and nccl-tests: header, lines, end (`run`); the
one line a scheduler keeps about a node that failed, from a record (`reason`); the end line a stop
signal writes where pytest does not (`stop_signals`: the multi-node job's ranks); a run's stable figures
with the key that judges each and the GPU or placement it belongs to, and a folder's history of them
(`figures`: what `wirecheck calibrate` and the history check read).

May import: core.
"""
