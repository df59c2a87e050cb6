"""NVIDIA nvbandwidth's copy matrices: run where the binary is installed (`-j`), or read from its saved JSON.

The JSON is nvbandwidth's (NVIDIA/nvbandwidth json_output.cpp, v0.8): `{"nvbandwidth": {"version",
"git_version", "CUDA Runtime Version", "Driver Version", "GPU Device list": ["0: NAME (DDDDDDDD:BB:DD): (host)"],
"testcases": [{"name", "status" (Passed, Running, Waived, Not Found, Error), "bandwidth_description",
"bandwidth_matrix": [["55.57", "N/A", ...]] (strings, GB/s = 1e9 B/s), "sum"}], "error", "warning"}}`.
A bidirectional testcase appends its matrices one after the other into the same `bandwidth_matrix` (its
description is the last one's); the copies compared with the suite's are unidirectional.

The suite's copies are copy-engine copies (wirecheck.measure.copy_bandwidth: pinned host<->device per GPU, and
`dst.copy_(src)` issued from the source GPU, which pushes: a CE write), so they are compared with
COMPARED's testcases. nvbandwidth numbers CUDA devices in CUDA's order: it runs with CUDA_DEVICE_ORDER=PCI_BUS_ID
(NVML's order, as the suite's copy worker does) and its device list's bus ids name the GPUs where they are given.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.core import jsondata

# testcase -> what the suite's copy figure is: h2d and d2h per GPU (one row: the CPU), peer src -> dst.
H2D, D2H, PEER = "host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_write_ce"
COMPARED = (H2D, D2H, PEER)
TIMEOUT_S = 600.0  # three testcases on an 8-GPU node take about a minute (nvbandwidth's 512 MiB, 3 samples)
_DEVICE = re.compile(r"^\s*(\d+):\s*(.*?)\s*\(([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\)")


class NvbandwidthError(ValueError):
    """An output that is not nvbandwidth's JSON: the message names where and what is wrong."""


@dataclass
class Testcase:
    name: str
    status: str
    description: str | None
    matrix: list[list[float | None]]  # GB/s; None for N/A
    error: str | None = None


@dataclass
class Reading:
    version: str | None
    cuda_runtime: Any
    driver: str | None
    devices: list[dict]  # {"ordinal", "name", "bus_id"} from "GPU Device list"
    testcases: dict[str, Testcase]
    error: str | None = None
    warning: str | None = None
    source: str | None = None  # the file read, or the command run
    extra: dict = field(default_factory=dict)


def _cell(value: Any) -> float | None:
    """A matrix cell in GB/s; None for a pair the testcase does not copy ("N/A": a GPU with itself, no peer
    access). ValueError for what is no bandwidth: NaN, infinite or negative, or neither a number nor text."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{json.dumps(value)} is neither a number nor text")
    try:
        number = float(value)
    except ValueError:
        return None
    except OverflowError:  # an integer beyond a float
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{value!r} is no bandwidth (GB/s: a finite number, at least 0)")
    return number


def _matrix(rows: list, where: str) -> list[list[float | None]]:
    out = []
    for r, row in enumerate(rows):
        cells = []
        for c, value in enumerate(row):
            try:
                cells.append(_cell(value))
            except ValueError as exc:
                raise NvbandwidthError(f"{where}: bandwidth_matrix[{r}][{c}]: {exc}") from None
        out.append(cells)
    return out


def parse(doc: Any, where: str = "the nvbandwidth output") -> Reading:
    """nvbandwidth's JSON as a Reading; NvbandwidthError naming `where` and the key."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nvbandwidth"), dict):
        raise NvbandwidthError(f"{where}: no \"nvbandwidth\" object: not `nvbandwidth -j` output")
    body = doc["nvbandwidth"]
    devices = []
    for entry in body.get("GPU Device list") or []:
        m = _DEVICE.match(str(entry))
        if m:
            devices.append({"ordinal": int(m.group(1)), "name": m.group(2), "bus_id": m.group(3).upper()})
    cases: dict[str, Testcase] = {}
    for i, raw in enumerate(body.get("testcases") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise NvbandwidthError(f"{where}: testcases[{i}] has no `name`")
        matrix = raw.get("bandwidth_matrix") or []
        if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix):
            raise NvbandwidthError(f"{where}: testcases[{i}] ({raw['name']}): bandwidth_matrix is not a list of rows")
        cases[raw["name"]] = Testcase(raw["name"], str(raw.get("status") or ""), raw.get("bandwidth_description"),
                                      _matrix(matrix, f"{where}: testcases[{i}] ({raw['name']})"), raw.get("error"))
    if not cases and not body.get("error"):
        raise NvbandwidthError(f"{where}: no testcases and no error: nothing nvbandwidth ran")
    return Reading(body.get("version"), body.get("CUDA Runtime Version"), body.get("Driver Version"), devices, cases,
                   body.get("error"), body.get("warning"), where)


def load(path: str | Path) -> Reading:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise NvbandwidthError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file, or one damaged on a disk or in a copy
        raise NvbandwidthError(f"{path}: not UTF-8 text (byte {exc.start}): not `nvbandwidth -j` output") from None
    return parse(_json_in(text, str(path)), str(path))


def _json_in(text: str, where: str) -> Any:
    try:
        return jsondata.object_in(text)
    except ValueError as exc:
        hint = ": give `nvbandwidth -j` output" if str(exc) == "no JSON object" else ""
        raise NvbandwidthError(f"{where}: {exc}{hint}") from None


def find() -> str | None:
    return shutil.which("nvbandwidth")


def run(binary: str, testcases=COMPARED, timeout_s: float = TIMEOUT_S) -> tuple[Reading | None, str | None, float]:
    """`nvbandwidth -j -t ...` in NVML's device order: (its Reading, or None with why, seconds)."""
    argv = [binary, "-j", "-t", *testcases]
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} did not finish within {timeout_s:g} s (stopped)", time.monotonic() - started
    except OSError as exc:
        return None, f"cannot run {binary}: {exc.strerror or exc}", time.monotonic() - started
    seconds = time.monotonic() - started
    try:
        reading = parse(_json_in(proc.stdout, "nvbandwidth's output"), " ".join(argv))
    except NvbandwidthError as exc:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return None, f"{exc} (exit {proc.returncode}: {tail})", seconds
    return reading, None, seconds
