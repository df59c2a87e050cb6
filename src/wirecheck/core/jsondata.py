"""JSON from elsewhere (other nodes' records, topology snapshots) read as data, with limits.

Python's json parses what it is given into Python values and executes nothing, but two inputs
still end in a traceback instead of a message naming the file: an array nested 100000 deep (a
RecursionError from the scanner) and an integer of more than 4300 digits (ValueError from int()).
And values nested deeper than any wirecheck file, or integers larger than any float, only make
later code fail further away. `loads` refuses both at the door, as ValueError with what is wrong;
the caller adds the file and the line (records may come from other nodes and other users).
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # wirecheck's files nest under 10 levels
MAX_INT_DIGITS = 309  # 1.8e308, the largest float: no count or measurement is larger


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"a number of {digits} digits, larger than any value wirecheck writes")
    return int(text)


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `obj` nests more than `limit` levels (an item deeper than `limit`, the top at 0),
    walked level by level without recursion. Only containers are kept for the next level: a fleet
    report reads every line of thousands of records through here, most of them lists of numbers."""
    level, depth = [obj], 0
    while level:
        deeper: list = []
        for item in level:
            values = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
            if not values:
                continue
            if depth >= limit:  # a non-empty container at the limit: its items lie deeper
                return True
            deeper += [v for v in values if isinstance(v, (dict, list))]
        level, depth = deeper, depth + 1
    return False


def loads(text: str) -> Any:
    """json.loads with the limits above: json.JSONDecodeError for text that is not JSON (as
    json.loads), ValueError for JSON nested too deep or holding too large an integer."""
    deep = ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")
    try:
        obj = json.loads(text, parse_int=_int)
    except RecursionError:  # json's scanner stops a 100000-deep array with this, cleanly
        raise deep from None
    # Each level of nesting opens a bracket: text with no more than MAX_DEPTH of them (nearly every
    # record line) cannot nest deeper, and needs no walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(obj):
        raise deep
    return obj
