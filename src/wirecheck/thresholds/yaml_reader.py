"""Reading thresholds.yaml: line-aware mappings and a cursor whose typed accessors fail with
the file, the YAML path, the line and the fix.

Kept apart from wirecheck.thresholds.file, which says what the sections mean; this module only
knows how to read a value of a given kind at a given place and complain well when it is wrong.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wirecheck.core.quantity import Quantity, QuantityError, parse_quantity

SOURCE_HINT = '"<where the number came from: a measurement (machine, date), the article, or guess: ...>"'


class ThresholdsError(ValueError):
    """The thresholds file is wrong. The message names the file, the YAML path and the fix."""


# Mappings that remember line numbers; duplicate keys refused.


class _Map(dict):
    """A YAML mapping plus the line (1-based) of each key, for error messages, and (in a file laid
    over another by `extends:`) the file each key was written in where it is not the parent's."""

    key_lines: dict
    key_files: dict = {}


# A thresholds file nests 8 levels and holds under 2000 values. One far deeper would overflow the
# constructor's recursion (a traceback), and aliases of aliases can stand for billions of values
# (the "billion laughs"): both are refused before anything is built, with the line (a root run reads this file).
MAX_DEPTH = 32
MAX_VALUES = 100_000
# The shipped file is about 60 KB. Parsing costs about a second and 80 MB per megabyte (a 50 MB file took
# 58 s and 3.9 GB before it was refused), so a file past this bound is refused before it is read whole.
MAX_BYTES = 4 * 1024 * 1024
# The largest count the file may hold (a vocabulary of a quarter million, iterations by the thousand fit).
COUNT_MAX = 10_000_000


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _shape_problem(root: yaml.Node) -> tuple[str, yaml.Node] | None:
    """Why the composed document is no thresholds file (too deep, too many values with aliases
    counted as often as they are used, an alias inside its own anchor), and where; None if fine.
    Walked without recursion, each node once (aliases are the same node object)."""
    shape: dict[int, tuple[int, int]] = {}  # id(node) -> (height, values with aliases expanded)
    on_path: set[int] = set()
    aliased = False  # a node met a second time is an alias (*name): only then may the message blame aliases
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            below = [shape[id(c)] for c in _children(node)]
            shape[key] = (1 + max((h for h, _ in below), default=0), 1 + sum(n for _, n in below))
            if shape[key][1] > MAX_VALUES:
                if aliased:
                    return f"its aliases (*name) stand for more than {MAX_VALUES} values: write the values out", node
                return (f"more than {MAX_VALUES} values (the shipped thresholds.yaml holds about 2000): "
                        "not a thresholds file"), node
            continue
        if key in on_path:
            return "an alias (*name) inside its own anchor (&name)", node
        if key in shape:  # an alias of a node measured already
            aliased = True
            if depth - 1 + shape[key][0] > MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} levels deep (through an alias)", node
            continue
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} levels deep", node
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))
    return None


# libyaml's parser when present (several times faster: the self-tests load many files);
# both keep the marks that give line numbers. A safe loader: tags (!!python/object...) are refused.
class _ShapeError(yaml.constructor.ConstructorError):
    pass


class _KeyError(yaml.constructor.ConstructorError):
    """A key the file may not have (a duplicate, a key that is no plain word): valid YAML, refused here."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    def construct_document(self, node):
        problem = _shape_problem(node)
        if problem:
            raise _ShapeError(None, None, problem[0], problem[1].start_mark)
        return super().construct_document(node)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)
    out = _Map()
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            seen = key in out
        except TypeError:
            raise _KeyError(None, None, "a key must be a plain word or number; write it as one",
                            key_node.start_mark) from None
        if seen:
            # PyYAML would keep the last one silently: a second `2:` would replace a floor unseen.
            raise _KeyError(None, None, f"duplicate key {key!r} (first at line {out.key_lines[key]}); remove one of them",
                            key_node.start_mark)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


# A block's keys shared with its siblings: `"*"` (in a section keyed by class, op or strategy) stands for
# every name not written and lies under those written; `inherit: OTHER` takes the sibling OTHER and lays
# the block's own keys over it. Both are resolved as the value is read (_At.child, _At.keyed).
STAR = "*"
INHERIT = "inherit"

# What the readers ask of each place in the file, while wirecheck.thresholds.schema records it (None:
# not recording): the JSON Schema is made from the loader's own reads, not from a second description.
_TRACE: list | None = None


def _trace(path: tuple[str, ...], what: str, detail: Any) -> None:
    if _TRACE is not None:
        _TRACE.append((path, what, detail))


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _suggest(word: Any, known: tuple[str, ...] | list[str]) -> str:
    # Compared without case, so that H200-SXM-8 finds h200-sxm-8 (the case of a name says nothing of its
    # closeness: difflib finds 'b200-8' closer to 'H200-SXM-8' than 'h200-sxm-8'); the name is given as written.
    by_lower = {str(k).lower(): str(k) for k in known}
    close = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


@dataclass(frozen=True)
class _At:
    """A value in the file and where it sits: every error is raised from here."""

    file: str
    path: tuple[str, ...]
    value: Any
    line: int | None = None

    @property
    def yaml_path(self) -> str:
        return ".".join(self.path) if self.path else "(top level)"

    @property
    def cite(self) -> str:
        """File and key, as verdict messages cite a limit: `thresholds.yaml: collectives.floors...`."""
        return f"{Path(self.file).name}: {self.yaml_path}"

    def error(self, problem: str, fix: str | None = None) -> ThresholdsError:
        message = f"{self.file}: {self.yaml_path}: {problem}"
        if fix:
            message += f"; {fix}"
        if self.line:
            message += f" (line {self.line})"
        return ThresholdsError(message)

    def child(self, key: Any) -> _At:
        """The value under `key`; a block saying `inherit: SIBLING` comes back as that sibling with
        its own keys laid over it (so every section can inherit, whoever reads it)."""
        return self._member(key, star=False)

    def _member(self, key: Any, star: bool, chain: tuple = ()) -> _At:
        lines = getattr(self.value, "key_lines", {})
        files = getattr(self.value, "key_files", {})
        value = self.value[key]
        where = files.get(key, self.file)
        if isinstance(value, dict) and INHERIT in value:
            value = self._inherited(key, value, star, chain + (key,))
        elif star and STAR in self.value and key != STAR:
            value = overlay(self.value[STAR], value, files.get(STAR, self.file), where)
        _trace(self.path, "child", key)
        return _At(where, self.path + (str(key),), value, lines.get(key, self.line))

    def _inherited(self, key: Any, value: dict, star: bool, chain: tuple) -> Any:
        """`value` (the block under `key`, which says `inherit: OTHER`) laid over its sibling OTHER,
        itself resolved first (it may inherit too; a circle is refused)."""
        own = _At(self.file, self.path + (str(key),), value, getattr(self.value, "key_lines", {}).get(key, self.line))
        target_at = _At(own.file, own.path + (INHERIT,), value[INHERIT],
                        getattr(value, "key_lines", {}).get(INHERIT, own.line))
        target = target_at.value
        siblings = [str(k) for k in self.value if k != key and k != STAR]
        if isinstance(target, int) and not isinstance(target, bool):
            target = target if target in self.value else str(target)
        if not isinstance(target, (str, int)) or isinstance(target, bool) or target == key or target not in self.value:
            if target == key:
                raise target_at.error(f"{key} inherits from itself", f"name a sibling block: {', '.join(siblings)}")
            raise target_at.error(f"names no sibling block {str(target)!r}{_suggest(target, siblings)}",
                                  f"inherit names a block beside {key} under {self.yaml_path}: "
                                  f"{', '.join(siblings) or '(there is none)'}")
        if target in chain:
            circle = " -> ".join(str(k) for k in chain + (target,))
            raise target_at.error(f"the blocks inherit from each other in a circle ({circle})",
                                  "write one of them out in full")
        base = self._member(target, star, chain)
        if not isinstance(base.value, dict):
            raise target_at.error(f"{target} is {_describe(base.value)}, not a block to inherit from",
                                  "inherit from a sibling mapping")
        mine = _Map({k: v for k, v in value.items() if k != INHERIT})
        mine.key_lines = {k: v for k, v in getattr(value, "key_lines", {}).items() if k != INHERIT}
        mine.key_files = {k: v for k, v in getattr(value, "key_files", {}).items() if k != INHERIT}
        files = getattr(self.value, "key_files", {})
        return overlay(base.value, mine, files.get(target, self.file), files.get(key, self.file))

    def star(self, key: Any) -> _At:
        """The `"*"` block standing for `key`, a name the section knows but the file does not write."""
        lines = getattr(self.value, "key_lines", {})
        files = getattr(self.value, "key_files", {})
        value = self.value[STAR]
        if isinstance(value, dict) and INHERIT in value:
            value = self._inherited(STAR, value, False, (STAR,))
        _trace(self.path, "child", key)
        return _At(files.get(STAR, self.file), self.path + (str(key),), value, lines.get(STAR, self.line))

    def mapping(self, what: str, allow_empty: bool = True) -> _Map:
        _trace(self.path, "mapping", allow_empty)
        if not isinstance(self.value, dict):
            name = self.path[-1] if self.path else None
            fix = f"write {what} as indented `key: value` lines"
            if name:
                fix += f" under {name}:" + (f" (or {name}: {{}} for none)" if allow_empty else "")
            raise self.error(f"expected a mapping of {what}, got {_describe(self.value)}", fix)
        if not allow_empty and not self.value:
            raise self.error(f"is empty; it needs at least one entry of {what}")
        return self.value

    def fields(self, what: str, required: dict[str, str], optional: dict[str, str] | None = None) -> dict[str, _At]:
        """The children of a fixed-key mapping. `required`/`optional`: key -> example value."""
        optional = optional or {}
        _trace(self.path, "fields", (dict(required), dict(optional)))
        self.mapping(what)
        known = tuple(required) + tuple(optional)
        for key in self.value:
            if key not in known:
                raise self.child(key).error(
                    f"unknown key {str(key)!r} in {what}{_suggest(key, known)}",
                    f"expected one of: {', '.join(known)}",
                )
        for key, example in required.items():
            if key not in self.value:
                raise self.error(f"missing required key {key!r} in {what}", f"add {key}: {example}")
        return {key: self.child(key) for key in self.value}

    def count(self, minimum: int = 0) -> int:
        _trace(self.path, "count", minimum)
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                raise self.error(f'"{value}" is a quoted count', f"write it as a plain whole number: {value.strip()}")
            raise self.error(
                f"expected a count (a plain whole number), got {_describe(value)}",
                "counts (iterations, steps, GPUs, links, layers, PCIe gen/width) are plain integers without unit, e.g. 20",
            )
        if value < 0:
            raise self.error(f"{value} is negative", f"write a count of at least {minimum}")
        if value < minimum:
            raise self.error(f"{value} is too small", f"write a count of at least {minimum}")
        if value > COUNT_MAX:  # a run of 10**20 iterations would wait out every call's ceiling: read as hangs
            raise self.error(f"{value} is above {COUNT_MAX:,}: no count of the thresholds is that large",
                             "write the count meant (iterations and steps run to tens or thousands)")
        return value

    def text(self) -> str:
        _trace(self.path, "text", None)
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.error(f"expected a non-empty string, got {_describe(self.value)}", 'write it as text, e.g. "..."')
        return self.value.strip()

    def choice(self, choices: tuple[str, ...]) -> str:
        _trace(self.path, "choice", tuple(choices))
        if self.value not in choices:
            raise self.error(
                f"{_describe(self.value)} is not allowed{_suggest(self.value, choices)}",
                f"write one of: {', '.join(choices)}",
            )
        return self.value

    def source(self) -> str:
        _trace(self.path, "source", None)
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.error(f"expected where the number came from, got {_describe(self.value)}", f"write source: {SOURCE_HINT}")
        return self.value.strip()

    def quantity(self, kind: str, positive: bool = False) -> Quantity:
        """The value as a quantity of `kind` (typed: it says its kind wherever it goes)."""
        _trace(self.path, "quantity", kind)
        try:
            value = parse_quantity(self.value, kind, where=f"{self.file}: {self.yaml_path}")
        except QuantityError as exc:
            raise ThresholdsError(str(exc) + (f" (line {self.line})" if self.line else "")) from None
        if positive and value <= 0:
            raise self.error(f'"{self.value}" must be above zero', f"write a positive {kind}")
        return Quantity(value, kind)

    def keyed(self, known: tuple[str, ...], what: str, fix: str) -> dict[str, _At]:
        """Children of an open mapping whose keys must come from `known` (classes, ops, strategies).
        A `"*"` key stands for every known key the mapping does not name, and lies under each one it
        names (their own keys laid over it): `"*": {any: ...}` once instead of the same block per op."""
        self.mapping(f"{what} entries")
        _trace(self.path, "keyed", tuple(known))
        for key in self.value:
            if key not in known and key != STAR:
                raise self.child(key).error(
                    f"unknown {what} {str(key)!r}{_suggest(key, known)}",
                    f'{fix}: {", ".join(known)} (or "*" for every {what} not named)',
                )
        out: dict[str, _At] = {}
        for key in self.value:
            if key == STAR:  # where "*" is written: the names it stands for, in the section's order
                out.update({k: self.star(k) for k in known if k not in self.value})
            else:
                out[key] = self._member(key, star=True)
        return out


def _likely_cause(problem: str, text: str, mark) -> str:
    """What usually makes libyaml say `problem` at `mark`, as ' (...)' for the message; '' when nothing
    common fits (an error is never given causes that cannot apply to it)."""
    at = ""
    if mark is not None and 0 <= mark.index < len(text):
        at = text[mark.index]
    if "cannot start any token" in problem:
        return " (a tab in the indentation: indent with spaces)" if at == "\t" else " (quote a value that starts with this character)"
    if "mapping values are not allowed" in problem:
        return " (a key without its ':' on a line above, or a value holding ': ' that needs quotes)"
    if "quoted scalar" in problem:
        return " (an unclosed quote)"
    if "flow sequence" in problem or "flow mapping" in problem:
        return " (an unclosed bracket or brace, or a missing ',')"
    if "block mapping" in problem or "block collection" in problem or "block end" in problem:
        return " (a line indented differently from the keys beside it)"
    return ""


def _read_text(path: Path) -> str:
    """The file's text, at most MAX_BYTES of it: a larger file (or a device that never ends) is refused
    before it is read whole or parsed."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ThresholdsError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB (the shipped thresholds.yaml is "
                              "about 60 KB): not a thresholds file; pass the right file")
    return data.decode("utf-8")


def _read_yaml(path: Path, data: bytes | None = None) -> Any:
    """The YAML document of `path` (or of `data`, its bytes kept elsewhere: a record's header)."""
    if data is not None and len(data) > MAX_BYTES:
        raise ThresholdsError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB (the shipped thresholds.yaml is "
                              "about 60 KB): not a thresholds file")
    try:
        text = _read_text(path) if data is None else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ThresholdsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the file as UTF-8") from None
    except IsADirectoryError:
        raise ThresholdsError(f"{path}: a directory; give the path of a thresholds file") from None
    except FileNotFoundError:  # every command names the file the same way, whichever option gave it
        raise ThresholdsError(f"{path} does not exist; pass the path of a thresholds file") from None
    except OSError as exc:  # unreadable (permissions), or a path through a file
        raise ThresholdsError(f"{path}: cannot read it ({exc.strerror}); pass a readable thresholds file") from None
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        if isinstance(exc, (_ShapeError, _KeyError)):
            plain = "; a thresholds file is plain data (start from the thresholds.yaml shipped with wirecheck)"
            raise ThresholdsError(f"{path}{where.replace(' at', ':', 1)}: {problem}"
                                  f"{plain if isinstance(exc, _ShapeError) else ''}") from None
        if "could not determine a constructor for the tag" in problem:
            raise ThresholdsError(
                f"{path}: a YAML tag{where} ({problem.rsplit('tag ', 1)[-1]}) is not allowed: the thresholds file is "
                "plain data, read without constructing objects; remove the tag") from None
        raise ThresholdsError(
            f"{path}: not valid YAML{where}: {problem}{_likely_cause(problem, text, exc.problem_mark)}; fix the file there"
        ) from None
    except yaml.YAMLError as exc:
        raise ThresholdsError(f"{path}: not valid YAML: {exc}; fix the file") from None


def overlay(base: Any, top: Any, base_file: str, top_file: str) -> Any:
    """`top` laid over `base` (a thresholds file that `extends:` another): mappings merged key by
    key, anything else (a value, a list) replaced. Each key remembers the file and line it was
    written at, so an error in the merged document names the file that holds the mistake."""
    if not (isinstance(base, dict) and isinstance(top, dict)):
        return top
    out = _Map()
    out.key_lines, out.key_files = {}, {}
    base_lines, top_lines = getattr(base, "key_lines", {}), getattr(top, "key_lines", {})
    base_files, top_files = getattr(base, "key_files", {}), getattr(top, "key_files", {})
    for key, value in base.items():
        out[key] = value
        out.key_lines[key] = base_lines.get(key)
        out.key_files[key] = base_files.get(key, base_file)
    for key, value in top.items():
        here = top_files.get(key, top_file)
        out[key] = overlay(base[key], value, out.key_files[key], here) if key in base else value
        out.key_lines[key] = top_lines.get(key)
        out.key_files[key] = here
    return out
