"""The run's record: JSON lines written the moment each thing exists, and read back (`file`); the one
line a scheduler keeps about a node that failed, from a record (`reason`).

May import: core.
"""
