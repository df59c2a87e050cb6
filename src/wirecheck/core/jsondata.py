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
    """Whether `obj` nests more than `limit` levels (walked without recursion)."""
    stack = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def loads(text: str) -> Any:
    """json.loads with the limits above: json.JSONDecodeError for text that is not JSON (as
    json.loads), ValueError for JSON nested too deep or holding too large an integer."""
    deep = ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")
    try:
        obj = json.loads(text, parse_int=_int)
    except RecursionError:  # json's scanner stops a 100000-deep array with this, cleanly
        raise deep from None
    if too_deep(obj):
        raise deep
    return obj
