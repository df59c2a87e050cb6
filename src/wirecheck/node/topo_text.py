"""`nvidia-smi topo -m` text -> `Topology`, and loading recorded topologies by name.

Recorded text comes from many drivers and from copies pasted into issues, so the parser
goes by structure, not by line position: the header names the device columns (GPU<n>,
NIC<n>, or on old drivers the NIC device itself, mlx5_<n>) and then the trailer columns
(CPU Affinity, NUMA Affinity, GPU NUMA ID, whichever exist). Rows follow until the first
blank line. Text cannot tell an NVSwitch from a bridge for certain; `Topology.fabric`
classifies from the NV# matrix (see `topology.classify_fabric`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from wirecheck.core import jsondata

from wirecheck.node.topology import PCIE_LEVELS, Gpu, Topology

# The header is underlined with ANSI codes even when piped to a file; copies pasted into
# issues lose the ESC byte ("[4mGPU0") or turn it into U+FFFD.
# The recorded topology a dry run uses when none is named (`--simulate` without a value, and
# `wirecheck validate` on a machine without a driver): the richest one, two bridged quads.
DEFAULT_SIMULATION = "h200-nvl-8"

_ANSI = re.compile(r"(?:\x1b|\ufffd)?\[[0-9;]*m")
# At most 4 digits: no node has 10000 GPUs or a pair 10000 links, and a longer number (recorded text
# is data from elsewhere) is then an unknown code with its line, not a 5000-digit int() (the file may come from another machine).
_GPU_LABEL = re.compile(r"GPU(\d{1,4})")
_NIC_LABEL = re.compile(r"NIC(\d{1,4})")
_NV_CELL = re.compile(r"NV(\d{1,4})")
# Something shaped like a matrix code (letters, maybe digits) but not one we know: reported
# as an unknown code rather than as a short row.
_CODE_LIKE = re.compile(r"[A-Za-z]+\d*")
_TRAILER_NAMES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_TRAILER_START = re.compile("|".join(re.escape(n) for n in _TRAILER_NAMES))
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# Very old drivers printed SOC for what is now SYS.
_CODE_ALIASES = {"SOC": "SYS"}
_EXPECTED_CELL = "a cell code: X (self), NV<n>, " + "/".join(PCIE_LEVELS) + " (or SOC)"


@dataclass(frozen=True)
class _Row:
    lineno: int
    label: str
    cells: tuple[str, ...]
    trailers: dict[str, str | None]


def parse_topo_text(text: str, source: str) -> Topology:
    """Parse the output of `nvidia-smi topo -m` (TAB separated, or spaces in pasted copies).

    Raises ValueError naming `source`, the line number and what was expected.
    """
    lines = _ANSI.sub("", text).splitlines()
    header_idx = _find_header(lines, source)
    devices, trailers = _parse_header(lines[header_idx], header_idx + 1, source)
    gpu_cols = [c for c, d in enumerate(devices) if _GPU_LABEL.fullmatch(d)]

    rows: dict[str, _Row] = {}
    end_lineno = len(lines) + 1
    for idx in range(header_idx + 1, len(lines)):
        line = lines[idx]
        if not line.strip() or line.strip().startswith("Legend"):
            end_lineno = idx + 1
            break
        row = _parse_row(line, idx + 1, devices, trailers, source)
        if row.label in rows:
            raise ValueError(
                f"{source}, line {idx + 1}: second row for {row.label} (first at line "
                f"{rows[row.label].lineno}); expected one row per device column"
            )
        rows[row.label] = row

    for c in gpu_cols:
        if devices[c] not in rows:
            raise ValueError(
                f"{source}, line {end_lineno}: the matrix ends without a row for {devices[c]}; "
                f"expected one row per GPU column of the header (line {header_idx + 1}): "
                + ", ".join(devices[g] for g in gpu_cols)
            )

    gpu_rows = [rows[devices[c]] for c in gpu_cols]
    nvlinks, pcie = _gpu_matrix(gpu_rows, gpu_cols, source)
    gpus = tuple(
        Gpu(
            index=int(_GPU_LABEL.fullmatch(r.label).group(1)),
            cpu_affinity=r.trailers.get("CPU Affinity"),
            numa_affinity=r.trailers.get("NUMA Affinity"),
        )
        for r in gpu_rows
    )
    return Topology(
        gpus=gpus,
        nvlinks=nvlinks,
        pcie_paths=pcie,
        source=source,
        nics=_nic_names(devices, _nic_legend(lines)),
    )


def _find_header(lines: list[str], source: str) -> int:
    # The header is the first line with GPU<n> tokens and no matrix codes (a row has codes);
    # this also finds headers whose leading TAB was lost in a copy.
    for idx, line in enumerate(lines):
        tokens = line.split()
        if any(_GPU_LABEL.fullmatch(t) for t in tokens) and not any(_cell_code(t) for t in tokens):
            return idx
    raise ValueError(
        f"{source}, line 1: no header with GPU columns in {len(lines)} lines; expected the output of "
        "`nvidia-smi topo -m`, whose first line reads '<TAB>GPU0<TAB>GPU1...<TAB>CPU Affinity...'"
    )


def _parse_header(line: str, lineno: int, source: str) -> tuple[list[str], list[str]]:
    """Device column labels and trailer column names."""
    if "\t" in line:
        fields = [f.strip() for f in line.split("\t")]
        if fields and fields[0] == "":
            fields = fields[1:]
        while fields and fields[-1] == "":
            fields.pop()
        first_trailer = next((k for k, f in enumerate(fields) if f in _TRAILER_NAMES), len(fields))
        devices, trailers = fields[:first_trailer], fields[first_trailer:]
    else:
        # Spaces: device labels have no spaces, trailer names do ("CPU Affinity").
        m = _TRAILER_START.search(line)
        cut = m.start() if m else len(line)
        devices = line[:cut].split()
        trailers = [t for t in re.split(r"\s{2,}", line[cut:].strip()) if t]
    bad = [d for d in devices if not re.fullmatch(r"[A-Za-z][\w.:-]*", d)]
    if bad or not devices:
        raise ValueError(
            f"{source}, line {lineno}: header column {bad[0] if bad else '(none)'!r} is not a device label; "
            "expected GPU<n>, NIC<n> or a NIC device name (mlx5_<n>) before the CPU Affinity column"
        )
    dupes = sorted({d for d in devices if devices.count(d) > 1})
    if dupes:
        raise ValueError(f"{source}, line {lineno}: header names {dupes[0]} twice; expected each device once")
    return devices, trailers


def _parse_row(line: str, lineno: int, devices: list[str], trailers: list[str], source: str) -> _Row:
    n = len(devices)
    # Decided per line: hand-edited copies mix TABs and spaces.
    tabbed = "\t" in line
    if tabbed:
        fields = [f.strip() for f in line.split("\t")]
    else:
        fields = line.split()
    label, rest = fields[0], fields[1:]
    if label not in devices:
        raise ValueError(
            f"{source}, line {lineno}: row label {label!r} is not a column of the header; "
            f"expected one of {', '.join(devices)} (or a blank line ending the matrix)"
        )
    if not _GPU_LABEL.fullmatch(label):
        # NIC rows only repeat the NIC columns of GPU rows; copies are often cut inside them.
        return _Row(lineno, label, (), {})

    n_cells = 0
    while n_cells < len(rest) and _cell_code(rest[n_cells]):
        n_cells += 1
    if n_cells < n and n_cells < len(rest) and _CODE_LIKE.fullmatch(rest[n_cells]):
        raise ValueError(
            f"{source}, line {lineno}: unknown cell code {rest[n_cells]!r} in row {label}, column "
            f"{devices[n_cells]}; expected {_EXPECTED_CELL}"
        )
    if n_cells != n:
        raise ValueError(
            f"{source}, line {lineno}: row {label} has {n_cells} matrix cell{'' if n_cells == 1 else 's'}; expected {n}, "
            f"one per header column ({devices[0]}..{devices[-1]})"
        )
    cells = tuple(_cell_code(c) for c in rest[:n])
    return _Row(lineno, label, cells, _trailer_values(rest[n:], trailers, tabbed))


def _trailer_values(values: list[str], names: list[str], tabbed: bool) -> dict[str, str | None]:
    # nvidia-smi writes an empty padding field before GPU NUMA ID: the last column takes the
    # last field, the others go in order. Space-separated copies lose blank cells, so fewer
    # values than names there cannot be placed reliably and are dropped.
    if not tabbed and len(values) < len(names):
        return {}
    out: dict[str, str | None] = {}
    for k, name in enumerate(names):
        if k == len(names) - 1 and len(values) > len(names):
            raw = values[-1]
        else:
            raw = values[k] if k < len(values) else None
        out[name] = raw if raw not in (None, "", "N/A") else None
    return out


def _cell_code(token: str) -> str | None:
    """The normalised code of one matrix cell, or None when the token is not one."""
    token = token.strip()
    if token == "X":
        return "X"
    m = _NV_CELL.fullmatch(token)
    if m and int(m.group(1)) > 0:
        return token
    token = _CODE_ALIASES.get(token, token)
    return token if token in PCIE_LEVELS else None


def _gpu_matrix(
    rows: list[_Row], gpu_cols: list[int], source: str
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[str | None, ...], ...]]:
    n = len(rows)
    nv = [[0] * n for _ in range(n)]
    pcie: list[list[str | None]] = [[None] * n for _ in range(n)]
    for i, row in enumerate(rows):
        for j, col in enumerate(gpu_cols):
            cell = row.cells[col]
            if (cell == "X") != (i == j):
                where = "on the diagonal" if i == j else f"in column {rows[j].label}"
                raise ValueError(
                    f"{source}, line {row.lineno}: row {row.label} has {cell!r} {where}; "
                    "expected X exactly where the row and column are the same GPU"
                )
            if cell.startswith("NV"):
                nv[i][j] = int(cell[2:])
            elif cell != "X":
                pcie[i][j] = cell
    for i in range(n):
        for j in range(i + 1, n):
            a, b = rows[i].cells[gpu_cols[j]], rows[j].cells[gpu_cols[i]]
            if a != b:
                raise ValueError(
                    f"{source}, line {rows[j].lineno}: {rows[j].label}/{rows[i].label} reads {b} but line "
                    f"{rows[i].lineno} has {rows[i].label}/{rows[j].label} = {a}; expected a symmetric matrix"
                )
    return tuple(map(tuple, nv)), tuple(map(tuple, pcie))


def _nic_legend(lines: list[str]) -> dict[str, str]:
    legend: dict[str, str] = {}
    in_block = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            in_block = True
            continue
        if in_block:
            m = _NIC_LEGEND_ENTRY.match(line)
            if m:
                legend[m.group(1)] = m.group(2)
            elif line.strip():
                break
    return legend


def _nic_names(devices: list[str], legend: dict[str, str]) -> tuple[str, ...]:
    # NIC<n> columns are named in the legend (a truncated copy may lack it: keep NIC<n>);
    # old drivers name the device (mlx5_0) in the column itself.
    return tuple(legend.get(d, d) for d in devices if not _GPU_LABEL.fullmatch(d))


# -- recorded topologies ----------------------------------------------------------------

_NAME_SUFFIXES = (".json", ".txt", ".synthetic.txt")


def load_recorded(spec: str, search_dir: Path) -> Topology:
    """A recorded topology: a .txt (`topo -m`) or .json (snapshot) path, or a NAME in search_dir.

    NAME is tried as NAME.json, NAME.txt, NAME.synthetic.txt.
    """
    path = Path(spec)
    # A path (it has a folder, or a file suffix) is never looked up as a name in search_dir.
    looks_like_path = path.suffix in (".txt", ".json") or "/" in spec or spec.startswith(("~", "."))
    if looks_like_path or path.is_file():
        if path.is_dir():
            raise ValueError(f"{spec}: a directory; give a .txt (`nvidia-smi topo -m`) or .json (`wirecheck topo "
                             "--save`) file, or the name of a recorded topology")
        if not path.is_file():
            raise ValueError(f"{spec}: no such file; give an existing .txt or .json path, or the name of a recorded "
                             f"topology ({', '.join(recorded_names(search_dir)) or 'none'})")
        return _load_file(path)
    found = recorded_path(spec, search_dir)
    if found is not None:
        return _load_file(found)
    known = ", ".join(recorded_names(search_dir)) or "none"
    raise ValueError(
        f"recorded topology {spec!r}: not found in {search_dir}; available names: {known} "
        "(or give a path to a .txt from `nvidia-smi topo -m` or a .json from `wirecheck topo --save`)"
    )


def recorded_path(name: str, search_dir: Path) -> Path | None:
    """The file a recorded topology NAME is in search_dir (as `load_recorded` looks it up); None if none."""
    for suffix in _NAME_SUFFIXES:
        candidate = Path(search_dir) / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def recorded_names(search_dir: Path) -> list[str]:
    """Names `load_recorded` accepts in search_dir (x.synthetic.txt is listed as x)."""
    names = set()
    for p in Path(search_dir).glob("*"):
        for suffix in (".synthetic.txt", ".json", ".txt"):
            if p.is_file() and p.name.endswith(suffix):
                names.add(p.name[: -len(suffix)])
                break
    return sorted(names)


def _load_file(path: Path) -> Topology:
    """A recorded topology file, read as data: whatever it holds (it may come from another node or an
    issue), a ValueError naming the file, never a traceback."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            data = jsondata.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path}, line {exc.lineno}: not valid JSON ({exc.msg}); expected a snapshot from `wirecheck topo --save`"
            ) from None
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}; expected a snapshot from `wirecheck topo --save`") from None
        parse = lambda: Topology.from_dict(data, source=str(path))  # noqa: E731
    elif path.suffix != ".txt":
        raise ValueError(f"{path}: unknown recorded topology format; expected a .txt (topo -m) or .json (snapshot) file")
    else:
        parse = lambda: parse_topo_text(text, source=str(path))  # noqa: E731
    try:
        return parse()
    except ValueError as exc:
        raise (exc if str(path) in str(exc) else ValueError(f"{path}: {exc}")) from None
    except Exception as exc:  # noqa: BLE001 (a snapshot changed by hand, or from another version)
        raise ValueError(f"{path}: not a topology wirecheck can read ({type(exc).__name__}: {str(exc)[:300]}); "
                         "expected a .txt from `nvidia-smi topo -m` or a .json from `wirecheck topo --save`") from None
