"""The JSON Schema of thresholds.yaml (`wirecheck limits --schema`, the committed thresholds.schema.json),
made from the loader's own reads rather than a second description that could drift from it.

The shipped file is loaded once with wirecheck.thresholds.yaml_reader recording what each reader asks of
each place (a fixed set of keys, a section keyed by class/op/strategy, a GPU-count table, a count, a
quantity of a kind, a source, one of some words). Places that stand for any name (classes, ops, GPU
counts, GPU models, profile names) are folded into one definition each. The schema then says, for an
editor: which keys exist where (with `"*"` and `inherit` wherever the loader takes them), the unit a
quantity must carry, which values are counts or words from a list. What it cannot say, the loader still
checks when the file loads: a key the shipped file does not write is named (with its example) but not
typed, and inside a section keyed by class, op or strategy no key is required (`"*"` or `inherit` may
supply it).

A small validator for exactly the keywords emitted here is kept beside it (no jsonschema dependency).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from wirecheck.core.quantity import EXAMPLES, KIND_ALIASES, UNITS
from wirecheck.thresholds import yaml_reader
from wirecheck.thresholds.extends import KEY as EXTENDS
from wirecheck.thresholds.yaml_reader import INHERIT, STAR

DRAFT = "http://json-schema.org/draft-07/schema#"
NAME = "<name>"  # a place standing for any class, op, GPU count, GPU model, profile name ...
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
INHERIT_SCHEMA = {"type": ["string", "integer"],
                  "description": "a sibling block this one takes, with its own keys laid over it"}


def quantity_pattern(kind: str) -> str:
    units = UNITS[KIND_ALIASES.get(kind, kind)]
    return rf"^\s*{_NUMBER}\s*(?:{'|'.join(re.escape(u) for u in sorted(units, key=len, reverse=True))})\s*$"


def record_reads(path: str | Path) -> list[tuple]:
    """(YAML path, what was asked, detail) for every read the loader makes of the file at `path`."""
    from wirecheck.thresholds.file import load_thresholds  # the loader imports nothing of this module

    previous, yaml_reader._TRACE = yaml_reader._TRACE, []
    try:
        load_thresholds(path)
        return yaml_reader._TRACE
    finally:
        yaml_reader._TRACE = previous


class _Places:
    """The reads folded onto general places: a tuple of keys, NAME where any name may stand."""

    def __init__(self, reads: list[tuple]):
        asked: dict[tuple, list] = {}
        children: dict[tuple, set] = {}
        for path, what, detail in reads:
            if what == "child":
                children.setdefault(path, set()).add(str(detail))
            else:
                asked.setdefault(path, []).append((what, detail))
        kinds = {p: {w for w, _ in a} for p, a in asked.items()}
        self.open = {p for p, k in kinds.items()
                     if k & {"keyed", "counts"} or (k == {"mapping"} and children.get(p))}
        self.asked: dict[tuple, list] = {}
        self.children: dict[tuple, set] = {}
        self.keyed: set[tuple] = set()  # general places under a section keyed by class/op/strategy
        for path, items in asked.items():
            self.asked.setdefault(self.general(path), []).extend(items)
        for path, keys in children.items():
            g = self.general(path)
            self.children.setdefault(g, set()).update(NAME if path in self.open else k for k in keys)
            if "keyed" in kinds.get(path, ()):
                self.keyed.add(g)

    def general(self, path: tuple) -> tuple:
        out: tuple = ()
        for i, key in enumerate(path):
            out += (NAME if path[:i] in self.open else key,)
        return out

    def what(self, place: tuple) -> dict[str, list]:
        out: dict[str, list] = {}
        for what, detail in self.asked.get(place, ()):
            out.setdefault(what, []).append(detail)
        return out


def build(reads: list[tuple]) -> dict:
    places = _Places(reads)
    definitions: dict[str, dict] = {}

    def ref(place: tuple, under_keyed: bool) -> dict:
        """The schema of `place`: inline, or (a place standing for any name, used under each name)
        a reference to its one definition."""
        if place[-1] != NAME:
            return node(place, under_keyed)
        name = ".".join(k.strip("<>") for k in place) + (" (keyed)" if under_keyed else "")
        if name not in definitions:
            definitions[name] = node(place, under_keyed)
        return {"$ref": f"#/definitions/{name}"}

    def node(place: tuple, under_keyed: bool) -> dict:
        what = places.what(place)
        root = place == ()
        under_keyed = under_keyed or place[:-1] in places.keyed
        block = {} if root else {INHERIT: INHERIT_SCHEMA}
        if "keyed" in what:
            known = sorted({k for detail in what["keyed"] for k in detail})
            child = ref(place + (NAME,), True)
            return {"type": "object", "properties": {**{k: child for k in known + [STAR]}, **block},
                    "additionalProperties": False}
        if "counts" in what:
            return {"type": "object", "minProperties": 1, "properties": block,
                    "propertyNames": {"pattern": r"^(?:[1-9][0-9]*|any|\*" + ("" if root else f"|{INHERIT}") + ")$"},
                    "additionalProperties": ref(place + (NAME,), under_keyed)}
        if "fields" in what:
            required = set.intersection(*(set(r) for r, _ in what["fields"]))
            examples: dict[str, str] = {}
            for r, o in what["fields"]:
                examples.update({**o, **r})
            properties = {}
            for key, example in examples.items():
                sub = place + (key,)
                properties[key] = (ref(sub, under_keyed) if sub in places.asked or sub in places.children
                                   else {"description": f"e.g. {example}"})
            if root:
                properties[EXTENDS] = {"type": "string", "description": "the thresholds file this one is laid over"}
            out: dict[str, Any] = {"type": "object", "properties": {**properties, **block}, "additionalProperties": False}
            if required and not under_keyed:
                ordered = [k for k in examples if k in required]
                out["anyOf" if not root else "required"] = (
                    ordered if root else [{"required": [INHERIT]}, {"required": ordered}])
            return out
        if "mapping" in what:
            if place in places.open:
                return {"type": "object", "properties": block, "additionalProperties": ref(place + (NAME,), under_keyed)}
            return {"type": "object"}
        leaves = []
        for minimum in what.get("count", ()):
            leaves.append({"type": "integer", "minimum": minimum})
        for kind in what.get("quantity", ()):
            definitions.setdefault(kind, {"type": "string", "pattern": quantity_pattern(kind),
                                          "description": f'a {kind} with its unit, e.g. "{EXAMPLES.get(kind, "")}"'})
            leaves.append({"$ref": f"#/definitions/{kind}"})
        if "text" in what or "source" in what:
            leaves.append({"type": "string", "minLength": 1})
        for choices in what.get("choice", ()):
            leaves.append({"enum": list(choices)})
        unique = [x for i, x in enumerate(leaves) if x not in leaves[:i]]
        if not unique:
            return {}
        return unique[0] if len(unique) == 1 else {"anyOf": unique}

    top = node((), False)
    return {"$schema": DRAFT, "title": "wirecheck thresholds.yaml",
            "description": "Made by `wirecheck limits --schema` from the loader's reads of the shipped file; "
                           "the loader checks more when the file loads (docs/thresholds.md#the-schema)",
            **top, "definitions": dict(sorted(definitions.items()))}


def schema_of(path: str | Path) -> dict:
    """The JSON Schema the loader's reads of the thresholds file at `path` make."""
    return build(record_reads(path))


# The validator: the keywords build() emits, nothing more (a self-test keeps the two in step).
KEYWORDS = {"$schema", "title", "description", "definitions", "$ref", "type", "properties", "additionalProperties",
            "required", "anyOf", "enum", "pattern", "minLength", "minimum", "minProperties", "propertyNames"}
_TYPES = {"object": dict, "string": str, "integer": int, "array": list}


def plain(value: Any) -> Any:
    """A YAML document as JSON would hold it: keys as strings."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def validate(schema: dict, value: Any) -> list[str]:
    """Where `value` (a JSON-like document) breaks `schema`: "path: problem" lines, [] if it conforms."""
    problems: list[str] = []
    _check(schema, schema, plain(value), "(top level)", problems)
    return problems


def _type_ok(value: Any, names) -> bool:
    names = [names] if isinstance(names, str) else names
    return any(isinstance(value, _TYPES[n]) and not (n == "integer" and isinstance(value, bool)) for n in names)


def _check(root: dict, schema: dict, value: Any, where: str, problems: list[str]) -> None:
    if "$ref" in schema:
        schema = root["definitions"][schema["$ref"].rsplit("/", 1)[-1]]
    if "type" in schema and not _type_ok(value, schema["type"]):
        problems.append(f"{where}: expected {schema.get('description') or schema['type']}, got {type(value).__name__}")
        return
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{where}: empty")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{where}: {value!r} does not match {schema.get('description') or schema['pattern']}")
    if isinstance(value, int) and "minimum" in schema and value < schema["minimum"]:
        problems.append(f"{where}: {value} is below {schema['minimum']}")
    if "anyOf" in schema:
        tries = []
        for option in schema["anyOf"]:
            found: list[str] = []
            _check(root, option, value, where, found)
            tries.append(found)
        if all(tries):
            problems.append(f"{where}: fits none of its forms ({'; or '.join(t[0] for t in tries)})")
    if not isinstance(value, dict):
        return
    if len(value) < schema.get("minProperties", 0):
        problems.append(f"{where}: empty")
    for key in schema.get("required", ()):
        if key not in value:
            problems.append(f"{where}: missing {key}")
    properties = schema.get("properties", {})
    for key, item in value.items():
        at = f"{where}.{key}" if where != "(top level)" else key
        if "propertyNames" in schema and not re.search(schema["propertyNames"]["pattern"], key):
            problems.append(f"{at}: the key {key!r} is not allowed here")
            continue
        if key in properties:
            _check(root, properties[key], item, at, problems)
        elif schema.get("additionalProperties") is False:
            problems.append(f"{at}: unknown key {key!r}")
        elif isinstance(schema.get("additionalProperties"), dict):
            _check(root, schema["additionalProperties"], item, at, problems)
