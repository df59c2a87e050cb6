"""The run's record: JSON lines written the moment each thing exists, and read back (`file`).

May import: core.
"""
