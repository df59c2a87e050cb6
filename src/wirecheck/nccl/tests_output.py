"""Reading NVIDIA nccl-tests' text output (all_reduce_perf and friends) into plain data.

Robust to the versions and options seen in the wild, because the column layout is read from the
output's own header line rather than assumed:
- 2.19 style: `size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong`;
- older: no `root` column, an `error` magnitude (`2e-07`) instead of `#wrong`;
- `-C 1` (`cputime`), `-I 1` (per-iteration columns after each group), `-S 1` (a timestamp after the
  row), `-c 0` (`N/A` for the error column), NCCL INFO/WARN lines interleaved with the rows, several
  runs concatenated in one text (as a shell loop writes them), 0-byte rows at tiny sizes.
Only stdout is parsed; nothing here runs a binary (see wirecheck.nccl.tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Lines that begin a run's preamble. A run starts at the first of them after the previous run's rows.
_RUN_MARKERS = ("# nccl-tests version", "# Collective test starting", "# nThread")
_FAILURE = re.compile(r"Test (NCCL|CUDA)? ?failure|Test timeout|Test failure")
_SETTINGS = re.compile(r"(nThread|nGpus|minBytes|maxBytes|warmup iters|agg iters|iters|validation|graph|unalign)"
                       r":? (\d+)")
_STEP = re.compile(r"step: (\S+)")


@dataclass(frozen=True)
class Timing:
    """One column group of a row: out-of-place or in-place."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: float | None  # '#wrong' (a count) or the old 'error' (a magnitude); None: not checked (N/A)
    extra: dict[str, float | None] = field(default_factory=dict)  # -I columns: i_min, i_max, ...


@dataclass(frozen=True)
class Row:
    size: int  # bytes, as nccl-tests prints it: the whole (gathered / pre-scatter) buffer
    count: int  # elements
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Timing | None
    in_place: Timing | None

    def timing(self, column: str) -> Timing | None:
        if column not in ("out_of_place", "in_place"):
            raise ValueError(f"column {column!r}: out_of_place or in_place")
        return getattr(self, column)


@dataclass
class Run:
    """One binary's run: its preamble, table and footer."""

    test: str | None = None  # "all_reduce_perf"
    version: str | None = None  # nccl-tests version, e.g. "2.19.6"
    nccl_library: str | None = None  # NCCL_VERSION_CODE of the library it ran with, e.g. "22809"
    settings: dict[str, str] = field(default_factory=dict)  # nThread, nGpus, minBytes, ..., step
    devices: list[str] = field(default_factory=list)  # the "Rank  0 Group ..." lines
    columns: list[str] = field(default_factory=list)  # the header's column names
    wrong_column: str | None = None  # "#wrong" or "error"
    rows: list[Row] = field(default_factory=list)
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    avg_busbw_gbps: float | None = None
    failures: list[str] = field(default_factory=list)  # "Test NCCL failure ..." lines
    concluded: bool = False

    @property
    def ok(self) -> bool:
        """Completed, no failure line, no out-of-bounds values."""
        return self.concluded_or_footer and not self.failures and self.out_of_bounds in (0, None) \
            and self.out_of_bounds_ok is not False

    @property
    def concluded_or_footer(self) -> bool:
        return self.concluded or self.avg_busbw_gbps is not None

    def by_size(self) -> dict[int, Row]:
        """Rows keyed by size; a repeated size (-N cycles) keeps the last."""
        return {row.size: row for row in self.rows}


def _number(text: str) -> float | None:
    if text in ("N/A", "-", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


class _Layout:
    """Where each field sits in a row, from the header line's names."""

    def __init__(self, names: list[str]):
        times = [i for i, n in enumerate(names) if n in ("time", "cputime")]
        self.prefix = names[: times[0]]
        if len(times) >= 2:
            self.group = names[times[0]: times[1]]
        else:
            self.group = names[times[0]:]
        self.groups = len(times)

    def row(self, tokens: list[str]) -> Row | None:
        if len(tokens) < len(self.prefix) + len(self.group):
            return None
        head = dict(zip(self.prefix, tokens))
        size, count = _int(head.get("size", "")), _int(head.get("count", ""))
        if size is None or count is None:
            return None
        rest = tokens[len(self.prefix):]
        groups = [self._timing(rest[k * len(self.group): (k + 1) * len(self.group)])
                  for k in range(self.groups) if len(rest) >= (k + 1) * len(self.group)]
        if self.groups == 2 and len(groups) == 1:
            # Only one group printed: nccl-tests leaves the out-of-place body blank (trace replay).
            out_of_place, in_place = None, groups[0]
        else:
            out_of_place = groups[0] if groups else None
            in_place = groups[1] if len(groups) > 1 else None
        root = head.get("root")
        return Row(size=size, count=count, dtype=head.get("type", "?"), redop=head.get("redop"),
                   root=_int(root) if root is not None else None, out_of_place=out_of_place, in_place=in_place)

    def _timing(self, tokens: list[str]) -> Timing:
        values = {name: _number(tok) for name, tok in zip(self.group, tokens)}
        time_us = values.pop("time", None) if "time" in values else values.pop("cputime", None)
        wrong = values.pop("#wrong", None) if "#wrong" in values else values.pop("error", None)
        return Timing(time_us=time_us, algbw_gbps=values.pop("algbw", None), busbw_gbps=values.pop("busbw", None),
                      wrong=wrong, extra=values)


def _header_names(line: str) -> list[str] | None:
    """The column names of a '#  size  count  type ... time algbw busbw #wrong ...' line, else None."""
    names = line.lstrip("#").split()
    if "size" in names and "count" in names and "busbw" in names and ("time" in names or "cputime" in names):
        # '#wrong' may be glued to the '#' of a wide line; names never start with '(' (that is the units line).
        return names
    return None


def parse(text: str) -> list[Run]:
    """Every run in `text`, in order. Lines that belong to no run (shell output, NCCL logs) are ignored."""
    runs: list[Run] = []
    run: Run | None = None
    layout: _Layout | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(_RUN_MARKERS) and (run is None or run.rows or run.concluded or layout is not None):
            run, layout = Run(), None
            runs.append(run)
        if run is None:
            if _FAILURE.search(stripped):
                run = Run()
                runs.append(run)
            else:
                continue
        if _FAILURE.search(stripped):
            run.failures.append(stripped)
            continue
        if stripped.startswith("#"):
            layout = _preamble_or_footer(run, stripped) or layout
            continue
        if layout is not None:
            row = layout.row(stripped.split())
            if row is not None:
                run.rows.append(row)
    return runs


def _preamble_or_footer(run: Run, line: str) -> _Layout | None:
    body = line.lstrip("#").strip()
    names = _header_names(line)
    if names is not None:
        run.columns = names
        run.wrong_column = "#wrong" if "#wrong" in names else ("error" if "error" in names else None)
        return _Layout(names)
    if body.startswith("nccl-tests version"):
        parts = body.split()
        run.version = parts[2] if len(parts) > 2 else None
        for part in parts[3:]:
            if part.startswith("nccl-library="):
                run.nccl_library = part.split("=", 1)[1]
    elif body.startswith("Collective test starting:"):
        run.test = body.split(":", 1)[1].strip()
    elif body.startswith("Collective test concluded"):
        run.concluded = True
        run.test = run.test or body.split(":", 1)[-1].strip()
    elif body.startswith("nThread"):
        run.settings.update({k: v for k, v in _SETTINGS.findall(body)})
        step = _STEP.search(body)
        if step:
            run.settings["step"] = step.group(1)
    elif body.startswith("Rank") and " device " in body:
        run.devices.append(body)
    elif body.startswith("Out of bounds values"):
        value = body.split(":", 1)[1].split()
        run.out_of_bounds = _int(value[0]) if value else None
        run.out_of_bounds_ok = (value[1] == "OK") if len(value) > 1 else None
    elif body.startswith("Avg bus bandwidth"):
        value = body.split(":", 1)[1].split()
        run.avg_busbw_gbps = _number(value[0]) if value else None
    return None
