"""Worker processes: one per GPU of a placement, started, called and stopped by the pytest
process or a command, and the process itself.

Parent side (never imports torch): `launcher` (WorkerGroup: the group's state and the order of
things) over `spawn` (the rank processes and their environment), `protocol` (the messages on their
pipes), `watch` (waiting for replies against the deadline, noticing deaths), `evidence` (exit
descriptions, stderr tails, stack dumps), `failure_report` (the GroupFailure and its message),
`teardown` (exit, kill, logs) and `errors` (the exceptions); `deadlines` (how long a call may take),
`node_lock` (one GPU run per node), `bytecode` (the workers' compiled-bytecode cache) and `parent_death`
(a child that ends with its parent: validate's pytest, pytest's workers).
Worker side (imports torch, inside the rank processes only): `worker` (the process) and
`rendezvous` (how its ranks meet).

May import: core.
"""
