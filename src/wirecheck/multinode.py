"""`python -m wirecheck.multinode` (and `torchrun ... -m wirecheck.multinode`): the documented name
of the multi-node entry point. The code is wirecheck.fleet.multinode."""

from wirecheck.fleet.multinode import main

if __name__ == "__main__":
    raise SystemExit(main())
