"""A pytest plugin the plan loads into the pytest it collects with (`-p wirecheck.plan.header_probe`):
it keeps the run's header (placements, GPUs, link matrix, level) in the file WIRECHECK_PLAN_HEADER
names, through the suite's own site hook. A collection runs no test, so the suite keeps no record of
it; the header is all the plan needs from it. No pytest import: pytest finds the hook by its name."""

from __future__ import annotations

import json
import os

HEADER_FILE_ENV = "WIRECHECK_PLAN_HEADER"


def pytest_wirecheck_header(header: dict) -> None:
    path = os.environ.get(HEADER_FILE_ENV)
    if path:
        with open(path, "x", encoding="utf-8") as out:  # the plan's own new file in its private folder
            json.dump(header, out, default=str)
