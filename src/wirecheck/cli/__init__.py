"""The `wirecheck` command: the dispatcher (`main`), the one protocol every subcommand follows and
how they are found (`protocol`), one module per subcommand (`validate`, `topo`, `limits`, `memory`,
`advise`, `plan`, `node-state` in `node_state`, `judge`, `calibrate`, `report`, `diagnose`, `nccl-tests`
in `nccl_tests`; `fleet` a package of its own subcommands: report, inventory, multinode, diagnose), and
running pytest as a foreground child (`foreground`).

May import: everything. Nothing imports cli.
"""
