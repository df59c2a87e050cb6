"""A table of named rows: refuses a duplicate name, read-only once built."""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping, TypeVar

Row = TypeVar("Row")


def by_name(rows: Iterable[Row], what: str) -> Mapping[str, Row]:
    """{row.name: row} in row order; a second row of a name already in the table raises, naming both."""
    out: dict[str, Row] = {}
    for row in rows:
        name = row.name  # type: ignore[attr-defined]
        if name in out:
            raise ValueError(f"{what} {name!r} is defined twice: {out[name]!r} and {row!r}; names are unique")
        out[name] = row
    return MappingProxyType(out)


def lookup(table: Mapping[str, Row], name: str, what: str) -> Row:
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(table)}") from None
