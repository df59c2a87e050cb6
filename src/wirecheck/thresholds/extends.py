"""`extends: PATH` at the top of a thresholds file: the file is PATH's document with its own keys
laid over it (mappings merged key by key, values and lists replaced). PATH is relative to the file
that says it, or `wirecheck` for the thresholds.yaml shipped with this wirecheck. A base may extend
another; a circle is refused. A site file then holds only what it changes (what `wirecheck calibrate`
writes), and picks up every later change of the shipped file.

Errors in the merged document name the file a key was written in (yaml_reader.overlay keeps it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from wirecheck.core.paths import SHIPPED_THRESHOLDS, extends_target
from wirecheck.thresholds.yaml_reader import ThresholdsError, _At, _Map, _read_yaml, overlay

KEY = "extends"


def read_layered(path: Path, content: bytes | None = None,
                 bases: Mapping[str, bytes] | None = None) -> tuple[Any, tuple[Path, ...]]:
    """The document of `path` (or of `content`, its bytes) with its `extends:` chain laid under it,
    and the base files in the order they were found (nearest first). `bases`: absolute path -> bytes
    of base files kept elsewhere (a record's header, nearest first), read instead of the disk: by path,
    else by their place in the chain (the record was made on another machine, where the shipped file
    or the site's files sit elsewhere)."""
    return _layered(Path(path), _read_yaml(Path(path), content), bases or {}, (Path(path).absolute(),))


def _layered(path: Path, data: Any, bases: Mapping[str, bytes], seen: tuple[Path, ...]) -> tuple[Any, tuple[Path, ...]]:
    if not isinstance(data, dict) or KEY not in data:
        return data, ()
    at = _At(str(path), (), data, 1).child(KEY)
    if not isinstance(at.value, str) or not at.value.strip():
        raise at.error("expected the thresholds file this one is laid over",
                       f"write extends: {SHIPPED_THRESHOLDS} (the shipped thresholds.yaml) or extends: PATH "
                       "(relative to this file)")
    try:
        target = extends_target(at.value, path)
    except RuntimeError as exc:  # no shipped file to find (a broken install)
        raise at.error(str(exc)) from None
    if target in seen:
        circle = " -> ".join(str(p) for p in seen + (target,))
        raise at.error(f"the files extend each other in a circle ({circle})", "make one of them stand alone")
    kept = bases.get(str(target))
    if kept is None and len(bases) >= len(seen):  # the same layer, recorded where its path differed
        kept = list(bases.values())[len(seen) - 1]
    if kept is None and not target.is_file():
        raise at.error(f"{at.value!r} names {target}, which does not exist",
                       f"give the path of a thresholds file relative to {path.name}, or {SHIPPED_THRESHOLDS} for "
                       "the shipped thresholds.yaml")
    base, deeper = _layered(target, _read_yaml(target, kept), bases, seen + (target,))
    if base is None:
        raise at.error(f"{target} is empty", "extend a whole thresholds file")
    top = _Map({k: v for k, v in data.items() if k != KEY})
    top.key_lines = {k: v for k, v in data.key_lines.items() if k != KEY}
    return overlay(base, top, str(target), str(path)), (target,) + deeper
