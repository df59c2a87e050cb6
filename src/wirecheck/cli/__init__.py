"""The `wirecheck` command: the command table (`main`), one module per command (`validate`,
`topo`, `memory`, `plan`, `calibrate`, `report`, `fleet`; `passthrough` for commands whose module parses its own
arguments) and running pytest as a foreground child (`foreground`).

May import: everything. Nothing imports cli.
"""
