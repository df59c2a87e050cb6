"""The fleet commands' fixed settings, which their options' help names: a module of its own, importing
nothing, so that `wirecheck` builds every fleet command's options without importing the fleet's modules
(`wirecheck fleet inventory` must not pay for the report's)."""

# Reading and judging a record is most of a fleet report's time, and each record is on its own: with a
# digest, a large directory is read by one process per CPU. Below this many records one process is
# quicker than starting the others.
PARALLEL_FROM = 64

# A fleet this small is printed node by node; a larger one leads with its failures and a summary,
# and lists only its failed nodes (every node: --full, --json, the page's collapsed table).
FULL_TABLE_UP_TO = 50
MAX_LINES = 50  # failures, warnings: the rest are in --json

DEFAULT_PORT = 29400  # the c10d rendezvous' port on the job's first node
# Joining waits this long for every node: long enough for a slow node's Python to start, short
# enough that a node that never comes is reported this side of lunch (torchrun's default is 600 s).
DEFAULT_JOIN_TIMEOUT_S = 300
