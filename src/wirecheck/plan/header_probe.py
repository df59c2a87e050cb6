"""A pytest plugin the plan loads into the pytest it collects with (`-p wirecheck.plan.header_probe`):
it keeps the run's header (placements, GPUs, link matrix, level) in the file WIRECHECK_PLAN_HEADER
names, through the suite's own site hook, and what each collected test declared it costs (its `work`
marker, wirecheck.vocab.work) in the file WIRECHECK_PLAN_WORK names. A collection runs no test, so
the suite keeps no record of it; the header and the declarations are all the plan needs from it.
No pytest import: pytest finds the hooks by their names."""

from __future__ import annotations

import json
import os

from wirecheck.vocab import work

HEADER_FILE_ENV = "WIRECHECK_PLAN_HEADER"
WORK_FILE_ENV = "WIRECHECK_PLAN_WORK"


def pytest_wirecheck_header(header: dict) -> None:
    path = os.environ.get(HEADER_FILE_ENV)
    if path:
        with open(path, "x", encoding="utf-8") as out:  # the plan's own new file in its private folder
            json.dump(header, out, default=str)


def pytest_collection_finish(session) -> None:
    """{test function: {"work": [kinds], "opt_in": why}} for every collected test with a work marker
    (the suite's collection has already refused unknown kinds)."""
    path = os.environ.get(WORK_FILE_ENV)
    if not path:
        return
    declared: dict[str, dict] = {}
    for item in session.items:
        marker = item.get_closest_marker(work.MARKER)
        function = getattr(item, "originalname", None) or item.name.partition("[")[0]
        if marker is not None:
            declared[function] = work.declared(marker.args, marker.kwargs, item.nodeid)
    with open(path, "x", encoding="utf-8") as out:
        json.dump(declared, out)
