"""Beyond one node: fleet acceptance (`wirecheck fleet report`), the network inventory
(`wirecheck fleet inventory`), multi-node collectives and the pair schedule (`wirecheck fleet
multinode`, which runs torchrun on `wirecheck.fleet.multinode`; by hand, `torchrun ... -m
wirecheck.multinode`); a figure most nodes failed against their own past at once, said as one change
(`changes`). Their options are the commands' modules in wirecheck.cli.fleet; the work is here.

May import: core, vocab, records, node, workers, measure, thresholds, checks, report. Only cli imports it.
"""
