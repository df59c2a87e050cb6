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


# Decoders made once: json.loads with a keyword builds a decoder per call, and a fleet report decodes
# hundreds of thousands of lines. The guarded one calls _int for every integer (a Python call each);
# the plain one parses integers in C and serves text that cannot hold an integer too long (no_long_digits).
_GUARDED = json.JSONDecoder(parse_int=_int)
_PLAIN = json.JSONDecoder()
# Every digit as 0: a run of MAX_INT_DIGITS + 1 zeros in the translated bytes is a run of that many digits.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"0" * 9)
_LONG_RUN = b"0" * (MAX_INT_DIGITS + 1)


def no_long_digits(data: bytes) -> bool:
    """Whether `data` holds no run of more than MAX_INT_DIGITS digits, so that no integer in it can be
    too large: then its lines may be read with `loads(line, guarded=False)`. One pass in C over the
    bytes (a translate and a search), where the guard on each integer is a Python call per number."""
    return _LONG_RUN not in data.translate(_DIGITS_AS_ZERO)


def loads(text: str, guarded: bool = True) -> Any:
    """json.loads with the limits above: json.JSONDecodeError for text that is not JSON (as
    json.loads), ValueError for JSON nested too deep or holding too large an integer.
    `guarded=False` leaves out the integer test: only for text no_long_digits passed."""
    deep = ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")
    try:
        obj = (_GUARDED if guarded else _PLAIN).decode(text)
    except RecursionError:  # json's scanner stops a 100000-deep array with this, cleanly
        raise deep from None
    # Each level of nesting opens a bracket: text with no more than MAX_DEPTH of them (nearly every
    # record line) cannot nest deeper, and needs no walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(obj):
        raise deep
    return obj


def object_in(text: str) -> Any:
    """The JSON object in a tool's output, which may print lines of its own before and after it (dcgmi,
    nvbandwidth): ValueError saying why not, a line counted in `text` as the file has it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object")
    try:
        return json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg}, line {text.count(chr(10), 0, start) + exc.lineno})") from None
    except RecursionError:
        raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep") from None
