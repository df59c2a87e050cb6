"""The vocabulary every other package shares: quantities and units (`quantity`), training
precisions (`precision`), verdicts (`verdict`), typed worker failures (`failures`), exit codes
(`exit_codes`), the run levels (`levels`), where the suite's own files are (`paths`), files written and read safely where
another user could interfere (`safefs`), JSON read within limits (`jsondata`), what a GPU architecture gives per clock (`gpu_arch`: the
peaks behind derived limits), and two pure rules: below-its-peers
(`peer_stats`) and the node-pair schedule (`pair_schedule`).

May import: nothing of wirecheck outside core. No torch, no pytest, no NVML.
"""
