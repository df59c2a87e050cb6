"""A small JSON Schema validator for the self-tests' schemas of other tools' formats (selftests/data/schemas/:
NVSentinel's health events, gpud's health states, DCGM's diagnostics, nvbandwidth's output): exactly the
keywords they use, so no jsonschema dependency. A keyword it does not know is an error, never ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).parent / "data" / "schemas"
KEYWORDS = {"$comment", "type", "properties", "additionalProperties", "required", "items", "enum", "pattern",
            "minimum", "maxLength"}
_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool}


def load(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def problems(schema: dict, value: Any, where: str = "$") -> list[str]:
    """Where `value` breaks `schema`, one line each; [] when it conforms."""
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise ValueError(f"{where}: schema keyword(s) {sorted(unknown)} unknown to this validator")
    out: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool))
        if not ok:
            return [f"{where}: expected {kind}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{where}: longer than {schema['maxLength']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and "minimum" in schema and value < schema["minimum"]:
        out.append(f"{where}: {value} below {schema['minimum']}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += problems(schema["items"], item, f"{where}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{where}: missing {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                out += problems(props[key], item, f"{where}.{key}")
            elif extra is False:
                out.append(f"{where}: unknown field {key!r}")
            elif isinstance(extra, dict):
                out += problems(extra, item, f"{where}.{key}")
    return out
