"""`wirecheck report`: a run as one self-contained HTML page, its trend, and Prometheus figures.

The command module of the `wirecheck` command table (NAME, add_parser, run); the arguments and
the work are wirecheck.report.command's, which imports matplotlib only when it draws.
"""

from wirecheck.report.command import NAME, add_parser, run  # noqa: F401
