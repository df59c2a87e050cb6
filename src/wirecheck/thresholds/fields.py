"""Typed models of thresholds.yaml, read generically: a model is a frozen dataclass whose fields say how
each key is read (`Qty`, `Share`, `Count`, `Text`, `Source`, `Word`, `Nested`, `Items`) and what an error
shows as the example. `read(Model, at)` reads one through the line-aware cursor (yaml_reader._At), so every
error names the file that holds the key, its YAML path, its line and the fix, and `"*"`, `inherit` and
`extends:` are resolved as values are read. A field without a default is required; `yaml_path` and `name`
are filled in (the place, the key the model sits under); a model's `check(values, f, at)` classmethod holds
the rules between its fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At


def spec(read: "Reader", example: str | None = None, key: str | None = None, **default) -> Any:
    """A model field read from the file by `read` (its key: `key`, else the field's name); `default=...`
    makes it optional."""
    return dataclasses.field(metadata={"read": read, "example": example or read.example, "key": key}, **default)


@dataclass(frozen=True)
class Reader:
    example: str = ""

    def __call__(self, at: _At) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Qty(Reader):
    """A quantity of `kind` ("290 GB/s"), in base units; `below`: (bound, inclusive, problem, fix) refused above
    it; `at_least`: (bound, problem, fix) refused below it."""
    kind: str = ""
    positive: bool = False
    below: tuple | None = None
    at_least: tuple | None = None

    def __call__(self, at: _At) -> float:
        value = at.quantity(self.kind, positive=self.positive)
        if self.below:
            bound, inclusive, problem, fix = self.below
            if value > bound or (not inclusive and value >= bound):
                raise at.error(problem.format(value=at.value), fix.format(example=self.example))
        if self.at_least:
            bound, problem, fix = self.at_least
            if value < bound:
                raise at.error(problem.format(value=at.value), fix.format(example=self.example))
        return value


def Share(example: str, fix: str = "write at most 100 %, e.g. {example}", positive: bool = True,
          below_one: bool = False, problem: str | None = None) -> Qty:
    """A percentage: at most 100 % (or, `below_one`, below it), above zero where `positive`."""
    problem = problem or ("is 100 % or more" if below_one else "is above 100 %")
    return Qty(example, "percent", positive, (1.0, not below_one, problem, fix))


@dataclass(frozen=True)
class Count(Reader):
    minimum: int = 0

    def __call__(self, at: _At) -> int:
        return at.count(self.minimum)


@dataclass(frozen=True)
class Text(Reader):
    def __call__(self, at: _At) -> str:
        return at.text()


@dataclass(frozen=True)
class Source(Reader):
    example: str = SOURCE_HINT

    def __call__(self, at: _At) -> str:
        return at.source()


@dataclass(frozen=True)
class Word(Reader):
    """One word of `words` (a tuple, or a function giving it when the file is read)."""
    words: Any = ()

    def __call__(self, at: _At) -> str:
        return at.choice(tuple(self.words() if callable(self.words) else self.words))


@dataclass(frozen=True)
class Nested(Reader):
    model: Any = None

    def __call__(self, at: _At) -> Any:
        return read(self.model, at)


@dataclass(frozen=True)
class Items(Reader):
    """A list whose items are read by `item` (each at `key[i]`); `problem`/`fix` when it is no list, or empty
    where `non_empty`."""
    item: Any = None
    problem: str = ""
    fix: str = ""
    non_empty: bool = False

    def __call__(self, at: _At) -> tuple:
        if not isinstance(at.value, list) or (self.non_empty and not at.value):
            fix = self.fix() if callable(self.fix) else self.fix
            raise at.error(self.problem, fix)
        return tuple(self.item(_At(at.file, at.path[:-1] + (f"{at.path[-1]}[{i}]",), x, at.line))
                     for i, x in enumerate(at.value))


@dataclass(frozen=True)
class Call(Reader):
    """A value of a shape of its own: `fn(at)`."""
    fn: Callable[[_At], Any] = None

    def __call__(self, at: _At) -> Any:
        return self.fn(at)


def valued(name: str, field: str, reader: Reader, doc: str = "", attribute: str | None = None) -> type:
    """A model of `{FIELD: ..., source: ...}`: one value and where it came from (`.FIELD`, or `.attribute`,
    `.source`, `.yaml_path`)."""
    return dataclasses.make_dataclass(name, [(attribute or field, float, spec(reader, key=field)),
                                             ("source", str, spec(Source())), ("yaml_path", str)],
                                      namespace={"WHAT": f"{field} and source", "__doc__": doc}, frozen=True)


class Raw(Call):
    """A key read by its model's `check` (whether and how depends on other keys)."""

    def __init__(self, example: str):
        super().__init__(example, lambda at: at)


def _key(f: dataclasses.Field) -> str:
    return f.metadata["key"] or f.name


def read_fields(model) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(model) if "read" in f.metadata]


def layout(model) -> tuple[dict[str, str], dict[str, str]]:
    """(required key -> example, optional key -> example) of a model, in the order its fields are declared."""
    required, optional = {}, {}
    for f in read_fields(model):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        (optional if has_default else required)[_key(f)] = f.metadata["example"]
    return required, optional


def read(model, at: _At, **given: Any) -> Any:
    """`model` read from the mapping at `at`: unknown and missing keys refused (with the model's WHAT and each
    key's example), each field by its reader, then the model's own `check`."""
    required, optional = layout(model)
    f = at.fields(model.WHAT, required, optional)
    values = {fld.name: fld.metadata["read"](f[_key(fld)]) for fld in read_fields(model) if _key(fld) in f}
    names = {fld.name for fld in dataclasses.fields(model)}
    if "yaml_path" in names:
        values["yaml_path"] = at.cite
    if "name" in names and "name" not in values:
        values["name"] = at.path[-1]
    values.update(given)
    check = getattr(model, "check", None)
    if check is not None:
        values = check(values, f, at)
    return model(**values)


def per_mode(model, what: str, example: str = "{...}", simulated: str | None = None) -> Callable[[_At], dict[bool, Any]]:
    """A reader of `{hardware: MODEL, simulated: MODEL}` -> {False: ..., True: ...} (keyed by `simulated`)."""
    def read_modes(at: _At) -> dict[bool, Any]:
        f = at.fields(what, required={"hardware": example, "simulated": simulated or example})
        return {False: read(model, f["hardware"]), True: read(model, f["simulated"])}
    return read_modes
