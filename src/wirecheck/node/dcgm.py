"""NVIDIA DCGM's diagnostics (`dcgmi diag -r LEVEL -j`): run where dcgmi is installed, and read into one
result per test and GPU that wirecheck.checks.dcgm judges as a verdict of the record.

The JSON is dcgmi's (NVIDIA/DCGM dcgmi/Diag.cpp HelperJsonBuildOutput; schema testing/python3/
dcgm_diag_schema.json): `DCGM Diagnostic.test_categories[].tests[]` with `name`, `results[]` per entity
(`entity_group`, `entity_id`, `status` Pass/Skip/Warn/Fail/Not Run, `warnings[]` with `error_id` (a
DCGM_FR_* code of dcgmlib/dcgm_errors.h), `error_category`, `error_severity`, `warning`, and `info[]`, where
plugins put their measured values, e.g. the pcie plugin's "GPU to Host bandwidth:  55.12 GB/s"), and a
`test_summary`; `entity_groups[].entities[]` give each GPU's `serial_num` and `device_id`; `metadata`
the DCGM and driver versions; `DCGM Diagnostic.runtime_error` when the run itself broke.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.core import jsondata

LEVELS = {"r1": 1, "r2": 2, "r3": 3, "r4": 4}
# How long each level may run before it is stopped: DCGM's documented durations (dcgmi diag reference: level 1
# seconds, 2 about 2 min, 3 about 15 min; NVSentinel's preflight docs: level 4 1-2 h) with room for a large
# node; DCGM's users report `-r 2` hanging forever on B200 (NVIDIA/DCGM on GitHub), so a bound there must be.
TIMEOUT_S = {1: 300, 2: 900, 3: 3600, 4: 3 * 3600}
STATUSES = ("Pass", "Skip", "Warn", "Fail", "Not Run")
# DCGM_FR_* ids of an uncorrectable memory fault (dcgmlib/dcgm_errors.h, DCGM 4.6.0): the drain rules
# replace the GPU for these, as for the suite's own ECC and row-remap failures.
HARD_MEMORY_ERRORS = {4: "DCGM_FR_VOLATILE_DBE_DETECTED", 8: "DCGM_FR_RETIRED_PAGES_DBE_LIMIT", 57: "DCGM_FR_CUDA_DBE",
                      80: "DCGM_FR_ROW_REMAP_FAILURE", 83: "DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS",
                      84: "DCGM_FR_UNCORRECTABLE_ROW_REMAP", 103: "DCGM_FR_DBE_VIOLATION",
                      106: "DCGM_FR_DBE_THRESHOLD_VIOLATION", 132: "DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT"}
# A measured value in an info line: "GPU to Host bandwidth:\t\t55.12 GB/s" (nvvs/plugin_src/pcie/PcieMain.cpp).
_MEASURED = re.compile(r"^\s*(?P<name>[A-Za-z][^:]{0,80}?):\s*(?P<value>-?\d+(?:\.\d+)?)\s*(?P<unit>GB/s|MB/s|GiB/s|us|ms|s|W|C|%)\b")


class DcgmError(ValueError):
    """A dcgmi output that is not DCGM's diagnostics JSON: the message names the file and what is wrong."""


@dataclass
class Result:
    """One test on one GPU (or the test's summary where it has no per-GPU result)."""

    category: str
    test: str
    gpu: int | None  # DCGM's entity id of a GPU (NVML's index on a node without MIG); None: the whole test
    entity_group: str | None
    status: str
    warnings: list[dict] = field(default_factory=list)  # {error_id, error_category, error_severity, warning}
    info: list[str] = field(default_factory=list)
    measured: dict = field(default_factory=dict)  # {name: {"value": x, "unit": u}} from the info lines


@dataclass
class DiagRun:
    version: str | None
    driver: str | None
    entities: dict[int, dict]  # GPU entity id -> {"serial": ..., "device_id": ...}
    results: list[Result]
    runtime_error: str | None = None


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def measured_values(info: list[str]) -> dict:
    out = {}
    for line in info:
        m = _MEASURED.match(str(line))
        if m:
            out[" ".join(m.group("name").split())] = {"value": float(m.group("value")), "unit": m.group("unit")}
    return out


def parse(doc: Any, where: str = "the DCGM output") -> DiagRun:
    """dcgmi's JSON as a DiagRun; DcgmError naming `where` and the key when it is not DCGM's diagnostics."""
    if isinstance(doc, dict) and isinstance(doc.get("DCGM GPU Diagnostic"), dict):
        raise DcgmError(f"{where}: DCGM 3's layout (\"DCGM GPU Diagnostic\"): wirecheck reads DCGM 4's `dcgmi diag -j` "
                        "(\"DCGM Diagnostic\", per-entity results); run the diagnostics with DCGM 4 or later")
    if not isinstance(doc, dict) or not isinstance(doc.get("DCGM Diagnostic"), dict):
        raise DcgmError(f"{where}: no \"DCGM Diagnostic\" object: not `dcgmi diag -j` output")
    diag = doc["DCGM Diagnostic"]
    entities: dict[int, dict] = {}
    for group in _as_list(doc.get("entity_groups")):
        if isinstance(group, dict) and group.get("entity_group") == "GPU":
            for e in _as_list(group.get("entities")):
                if isinstance(e, dict) and isinstance(e.get("entity_id"), int):
                    entities[e["entity_id"]] = {"serial": e.get("serial_num"), "device_id": e.get("device_id")}
    results = []
    for c, category in enumerate(_as_list(diag.get("test_categories"))):
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise DcgmError(f"{where}: test_categories[{c}] has no `tests` list")
        for t, test in enumerate(category["tests"]):
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise DcgmError(f"{where}: test_categories[{c}].tests[{t}] has no `name`")
            per_entity = [r for r in _as_list(test.get("results")) if isinstance(r, dict)]
            rows = per_entity or ([test["test_summary"]] if isinstance(test.get("test_summary"), dict) else [])
            for r in rows:
                status = r.get("status")
                if not isinstance(status, str):
                    raise DcgmError(f"{where}: test {test['name']!r}: a result without a `status`")
                info = [str(i) for i in _as_list(r.get("info"))]
                gpu = r.get("entity_id") if r.get("entity_group") == "GPU" else None
                results.append(Result(str(category.get("category") or ""), test["name"], gpu, r.get("entity_group"),
                                      status, [w for w in _as_list(r.get("warnings")) if isinstance(w, dict)], info,
                                      measured_values(info)))
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    runtime_error = diag.get("runtime_error")
    if not results and not runtime_error:
        raise DcgmError(f"{where}: no test results and no runtime_error: nothing DCGM ran")
    return DiagRun(metadata.get("version"), metadata.get("Driver Version Detected"), entities, results,
                   str(runtime_error) if runtime_error else None)


def load(path: str | Path) -> tuple[dict, DiagRun]:
    """A saved `dcgmi diag -j` output: (its JSON, its DiagRun); DcgmError naming the file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise DcgmError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file, or one damaged on a disk or in a copy
        raise DcgmError(f"{path}: not UTF-8 text (byte {exc.start}): not `dcgmi diag -r LEVEL -j` output") from None
    doc = _json_in(text, str(path))
    return doc, parse(doc, str(path))


def _json_in(text: str, where: str) -> dict:
    """The JSON object in dcgmi's output (lines of its own may come before it, as DCGM's own tests trim)."""
    try:
        return jsondata.object_in(text)
    except ValueError as exc:
        hint = ": give `dcgmi diag -r LEVEL -j` output" if str(exc) == "no JSON object" else ""
        raise DcgmError(f"{where}: {exc}{hint}") from None


def level(text: str) -> int:
    """--dcgm's value: r1..r4 (or 1..4); ValueError naming the choices."""
    value = str(text).strip().lower()
    if value in LEVELS:
        return LEVELS[value]
    if value.isdigit() and int(value) in LEVELS.values():
        return int(value)
    raise ValueError(f"--dcgm {text}: give a DCGM diagnostics level, one of {', '.join(LEVELS)} "
                     "(r1 seconds, r2 about 2 min, r3 about 15 min, r4 1-2 h)")


def find_dcgmi() -> str | None:
    return shutil.which("dcgmi")


def version(dcgmi: str) -> str | None:
    """`dcgmi --version`'s version ("4.6.0"), or None when it does not say."""
    try:
        out = subprocess.run([dcgmi, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version:?\s*([\d.]+)", out)
    return m.group(1) if m else None


@dataclass
class Ran:
    """One dcgmi run: its command, exit status, seconds, output, and its DiagRun (None with `error`)."""

    argv: list[str]
    returncode: int | None
    seconds: float
    output: str
    run: DiagRun | None
    error: str | None = None


def run(dcgmi: str, diag_level: int, timeout_s: float | None = None) -> Ran:
    """`dcgmi diag -r LEVEL -j`, bounded by TIMEOUT_S[level] (or `timeout_s`). dcgmi exits non-zero when a
    test fails; its JSON is read whatever the status."""
    argv = [dcgmi, "diag", "-r", str(diag_level), "-j"]
    limit = timeout_s or TIMEOUT_S[diag_level]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return Ran(argv, None, time.monotonic() - started, out, None,
                   f"dcgmi diag -r {diag_level} did not finish within {limit:g} s (stopped)")
    except OSError as exc:
        return Ran(argv, None, time.monotonic() - started, "", None, f"cannot run {dcgmi}: {exc.strerror or exc}")
    seconds = time.monotonic() - started
    try:
        parsed = parse(_json_in(proc.stdout, "dcgmi's output"), "dcgmi's output")
    except DcgmError as exc:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Ran(argv, proc.returncode, seconds, proc.stdout, None, f"{exc} (exit {proc.returncode}: {' | '.join(tail)})")
    return Ran(argv, proc.returncode, seconds, proc.stdout, parsed)


def _node_gpus(gpus: list[dict] | None):
    """The node's GPU a DCGM GPU (serial, index) is: by serial; by index only where either side names no serial (a
    GPU whose serial the node's list lacks is one the record did not run on, never the GPU of its index)."""
    by_serial = {str(g.get("serial")): g for g in gpus or [] if g.get("serial")}
    by_index = {g.get("index"): g for g in gpus or []}

    def of(serial, index: int | None) -> dict:
        if serial and by_serial:
            return by_serial.get(str(serial), {})
        return by_index.get(index, {}) if index is not None else {}
    return of


def check_inputs(diag: DiagRun, gpus: list[dict] | None = None) -> list[dict]:
    """wirecheck.checks.dcgm.dcgm_diag's inputs for each result. `gpus`: the node's GPUs ({index, serial,
    bus_id}: a record header's or NVML's), to name each DCGM GPU by its serial (else its index) with its bus id."""
    out = []
    node_gpu = _node_gpus(gpus)
    for r in diag.results:
        serial = diag.entities.get(r.gpu, {}).get("serial") if r.gpu is not None else None
        ours = node_gpu(serial, r.gpu)
        out.append({"test": r.test, "category": r.category, "gpu": r.gpu, "status": r.status,
                    "warnings": r.warnings, "info": r.info, "measured": r.measured,
                    "serial": serial or ours.get("serial"), "bus_id": ours.get("bus_id"), "dcgm_version": diag.version})
    return out


def foreign_serials(diag: DiagRun, gpus: list[dict] | None) -> list[str]:
    """DCGM's GPU serials, where both sides name serials and none of them is one of the node's `gpus`: DCGM ran on
    another node (matching by index would put its verdicts on the wrong GPUs). Some in common is the same node: a
    record of a run on some of its GPUs (CUDA_VISIBLE_DEVICES) names only those, and dcgmi diagnoses every GPU."""
    ours = {str(g.get("serial")) for g in gpus or [] if g.get("serial")}
    theirs = [str(e.get("serial")) for _, e in sorted(diag.entities.items()) if e.get("serial")]
    return theirs if ours and theirs and not ours.intersection(theirs) else []


def header_gpus(diag: DiagRun, gpus: list[dict] | None = None) -> list[dict]:
    """The GPUs a record of DCGM's run names: DCGM's entities, with the node's bus id and UUID where known."""
    out = []
    node_gpu = _node_gpus(gpus)
    for index, e in sorted(diag.entities.items()):
        ours = node_gpu(e.get("serial"), index)
        out.append({"index": index, "name": ours.get("name"), "bus_id": ours.get("bus_id"), "uuid": ours.get("uuid"),
                    "serial": e.get("serial") or ours.get("serial"), "device_id": e.get("device_id")})
    return out
