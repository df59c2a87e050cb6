"""Which tests a drain hook re-runs once after a failure: the tests of the record's failed verdicts (each
verdict line names its pytest node id, `tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]`),
as one `-k` expression for `wirecheck validate`.

`wirecheck validate` always collects the whole suite folder, so a node id given beside it would not narrow
the run; `-k` does. Each test is selected by its module and its full name, parameters included
(`test_collectives.py and test_busbw[nvswitch-2gpu-0.1-all_reduce]`): -k matches a name as a substring, and
the closing bracket keeps `[gpu1]` from matching `[gpu10]`. A name with letters -k cannot hold (a blank, a
comma, `=`) is selected by its function alone: more tests than failed, never fewer.
"""

from __future__ import annotations

import re

from wirecheck.records.file import RunRecord

# pytest's -k identifier (_pytest.mark.expression): word letters and : + - . [ ] \ /
_K_IDENT = re.compile(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+")
_K_WORDS = {"or", "and", "not", "true", "false", "none"}


def failed_tests(run: RunRecord) -> list[str]:
    """The node ids of the record's failed verdicts, in order, each once."""
    tests: list[str] = []
    for v in run.verdicts:
        test = v.get("test")
        if v.get("outcome") == "fail" and isinstance(test, str) and "::" in test and test not in tests:
            tests.append(test)
    return tests


def _term(nodeid: str) -> str:
    path, _, name = nodeid.partition("::")
    name = name.rsplit("::", 1)[-1]  # a test in a class: its own name
    module = path.rsplit("/", 1)[-1]
    if not _K_IDENT.fullmatch(name) or name.lower() in _K_WORDS:
        name = name.split("[", 1)[0]
    terms = [t for t in (module, name) if _K_IDENT.fullmatch(t) and t.lower() not in _K_WORDS]
    return "(" + " and ".join(terms) + ")" if len(terms) > 1 else terms[0] if terms else ""


def selection(tests: list[str]) -> str | None:
    """A -k expression selecting `tests`; None for none."""
    terms = [t for t in dict.fromkeys(_term(test) for test in tests) if t]
    return " or ".join(terms) or None
