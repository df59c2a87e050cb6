"""Worker processes: one per GPU of a placement, started, called and stopped by the pytest
process or a command (`launcher`), the process itself (`worker`), how its ranks meet
(`rendezvous`), how long a call may take (`deadlines`), one GPU run per node (`node_lock`) and the
workers' compiled-bytecode cache (`bytecode`).

May import: core. The worker process imports torch; the parent side (launcher) never does.
"""
