"""The vocabulary every other package shares: quantities and units (`quantity`), training
precisions (`precision`), verdicts (`verdict`) and the one renderer of their words (`render`), typed
worker failures (`failures`), exit codes (`exit_codes`), the run levels (`levels`), where the suite's own
files are (`paths`), files written and read safely where another user could interfere (`safefs`), a fault
of the harness, never the node's (`harness`), JSON read within limits (`jsondata`), what a GPU
architecture gives per clock (`gpu_arch`: the peaks behind derived limits), and pure rules:
below-its-peers (`peer_stats`), the node-pair schedule (`pair_schedule`), what a rule catches and how
often it cries wolf (`resolution`) and the drift tests over a series of runs (`trend`).

May import: nothing of wirecheck outside core. No torch, no pytest, no NVML.
"""
