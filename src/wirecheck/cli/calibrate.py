"""`wirecheck calibrate RUN.jsonl... -o site.yaml`: floors from the site's clean runs on nodes it trusts.

Writes a thresholds file that `extends:` the thresholds the runs used (or --extends PATH, or the
shipped file) and holds only the calibrated entries, at the keys the checks read them from, each
with `rule: calibrated` and its provenance (nodes, GPUs, dates, runs, readings, median, spread) and
resolution (the loss the floor catches in 95 % of these runs, its false alarms on them, and the loss the
history rule catches on their noise; wirecheck.checks.sensitivity).
`--thresholds site.yaml` and `wirecheck judge --thresholds site.yaml` take it as it is. The rule
is thresholds.yaml's `calibration:` section (wirecheck.checks.calibration). Exit 0 when written;
4 when runs or figures are refused (each named, with the fix) or an option is wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
from pathlib import Path

import yaml

from wirecheck.cli.protocol import entry
from wirecheck.checks.calibration import Calibrated, CalibrationError, calibrate
from wirecheck.core import exit_codes
from wirecheck.core.paths import SHIPPED_THRESHOLDS, suite_paths
from wirecheck.core.resolution import COARSE, percent, prediction_factor
from wirecheck.records.figures import display
from wirecheck.records.file import RecordFileError, read_run
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

NAME = "calibrate"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help="floors from the site's clean runs, written as a thresholds file",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+", metavar="RUN.jsonl", help="record files of clean runs on trusted nodes (3 at least)")
    p.add_argument("-o", "--output", required=True, metavar="SITE.yaml", help="the thresholds file to write")
    p.add_argument("--extends", metavar="PATH", default=None,
                   help="the thresholds file it lays its floors over (default: the one the runs used, where it is "
                        f"still here unchanged; else the shipped thresholds.yaml, `extends: {SHIPPED_THRESHOLDS}`)")
    p.add_argument("--thresholds", metavar="FILE", default=None,
                   help="the file whose calibration: rule applies (default: the base file)")
    p.add_argument("--leave-out", action="append", default=[], metavar="FIGURE",
                   help="a figure (gemm_bf16, h2d, all_reduce...) or key path to leave out: the base file's entry stays")
    return p


def _quantity(c: Calibrated, value: float, up: bool = False) -> str:
    """`value` (base units) in the unit `c` is written in."""
    unit, scale = display(c.kind, c.unit)
    digits = 0 if c.kind == "throughput" else 1
    # a floor rounded down, a ceiling up: rounding never makes a limit stricter than the rule made it
    step = math.ceil if up else math.floor
    number = step(value * scale * 10 ** digits) / 10 ** digits
    return f"{number:.{digits}f} {unit}"


def _percent(fraction: float) -> str:
    """A fraction as the thresholds file writes a percentage, to 0.01 %, never more than 100 %."""
    return f"{min(fraction, 1.0) * 100:.2f} %"


def _catches(r) -> str:
    if r.cries_wolf:
        return f"no resolution: it fails {percent(r.false_alarm)} of these clean runs"
    if r.coarse:
        return f"catches only {percent(r.step)}, coarser than {COARSE * 100:g} %"
    return f"catches {percent(r.step)} (false alarms {percent(r.false_alarm)})"


def resolution_line(c: Calibrated) -> str | None:
    """What the floor and the history rule catch in 95 % of runs on these runs' noise, for the terminal."""
    if c.resolution is None:
        return None
    line = f"the floor {_catches(c.resolution)}"
    if c.history is not None:
        line += f"; the history rule {_catches(c.history)}"
    names = {"measured": "the base file's table floor", "derived": "a floor derived from the GPU's peaks",
             "peers": "the peer rule (8 GPUs like these)", "fleet": "the fleet rule (50 nodes like these)"}
    line += "".join(f"; {names[rule]} {_catches(r)}" for rule, r in c.others.items() if rule in names)
    return f"{line} ({c.resolution.how})"


def _base(runs, given: str | None, output: Path) -> tuple[str, Path, str]:
    """(the extends: value, the file it names, why that one)."""
    shipped = suite_paths().thresholds.resolve()
    if given:
        path = Path(given).absolute()
        return os.path.relpath(path, output.absolute().parent), path, "--extends"
    used = {(r.run.get("thresholds"), r.run.get("thresholds_sha256")) for r in runs}
    if len(used) == 1:
        (path, digest), = used
        if path and Path(path).is_file() and hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest:
            path = Path(path).resolve()
            if path == shipped:
                return SHIPPED_THRESHOLDS, shipped, "the runs' own thresholds, the shipped file"
            return os.path.relpath(path, output.absolute().parent), path, "the runs' own thresholds"
        why = f"the runs' thresholds {path} is no longer here as they read it"
    else:
        why = "the runs used different thresholds files"
    return SHIPPED_THRESHOLDS, shipped, f"{why}: the shipped thresholds.yaml (say --extends PATH for another)"


def _formula(rule, ceiling: bool) -> str:
    """The calibration rule's formula as the entry's source states it."""
    if ceiling:
        return "ceiling = max(highest x (1 + min_margin), median x (1 + mad_k x spread))"
    if rule.false_alarms:
        return (f"floor = lowest x (1 - max(min_margin {rule.min_margin * 100:g} %, the one-sided "
                f"{rule.false_alarms * 100:g} % prediction bound x the readings' noise))")
    return "floor = min(lowest x (1 - min_margin), median x (1 - mad_k x spread))"


def _entry(c: Calibrated, rule_path: str, calibration, few_hosts: str | None = None) -> dict:
    shown = lambda v: _quantity(c, v)  # noqa: E731
    gpus = list(c.gpus)
    provenance = {
        "nodes": list(c.nodes),
        "gpus": gpus,
        "dates": list(c.dates),
        "runs": c.runs,
        "n": c.n,
        "median": shown(c.median),
        "lowest": shown(c.lowest),
        "spread": f"{c.spread * 100:.2f} %",
        # what the rule made the limit from, so that it can be made again by hand
        "noise": f"{c.noise * 100:.3f} % ({c.noise_name})",
        "margin": f"{c.margin * 100:.3f} %",
    }
    if few_hosts:
        provenance["nodes_note"] = f"WARNING: {few_hosts}"
    if not c.identified:
        provenance["gpus_note"] = "records written before they kept GPU serials and UUIDs: named by host and bus id"
    if c.resolution is not None:
        provenance["resolution"] = {"step": _percent(c.resolution.step),
                                    "false_alarms": _percent(c.resolution.false_alarm),
                                    **({"history": _percent(c.history.step)} if c.history else {}),
                                    **{rule: _percent(r.step) for rule, r in c.others.items()}}
    if c.bound == "max":
        provenance["highest"] = provenance.pop("lowest")
        edge = f"highest {shown(c.lowest)}"
    else:
        edge = f"lowest {shown(c.lowest)}"
    rule = _formula(calibration, c.bound == "max")
    source = (f"calibrated: {c.n} readings in {c.runs} clean runs on {', '.join(c.nodes)} ({', '.join(c.dates)}): "
              f"median {shown(c.median)}, {edge}, noise {c.noise * 100:.3f} % ({c.noise_name}), margin "
              f"{c.margin * 100:.3f} %; {rule} ({rule_path})")
    bound = _quantity(c, c.floor, up=c.bound == "max")
    entry = {c.bound: bound, "rule": "calibrated", "source": source, "provenance": provenance}
    if c.key[0] == "collectives" or c.key[:2] == ("training", "throughput_floors"):
        # Measured on this GPU model: it judges that model only (a class's floor from H200 SXM runs is no floor for
        # an H200 NVL's NV6 pair; the loader refuses a floor above the wire of any node it would judge).
        if len(c.gpu_models) == 1 and c.gpu_models[0] != "?":
            entry["hardware"] = {"gpu_model": c.gpu_models[0]}
    return entry


def looser(c: Calibrated) -> str | None:
    """Said where the floor written is under the base file's own floor at its key: it lets through what that
    floor failed, and nobody should find it only by reading the numbers."""
    if c.base_floor is None or c.bound != "min" or c.floor >= c.base_floor:
        return None
    return (f"{c.yaml_path}: the floor written, {_quantity(c, c.floor)}, is LOWER (looser) than the base file's "
            f"{_quantity(c, c.base_floor)} by {(1 - c.floor / c.base_floor) * 100:.1f} %: a GPU between the two passes "
            "it now; make sure the runs are of nodes you trust, or --leave-out this figure to keep the base floor")


def _how(c: Calibrated, rule) -> str:
    """How the limit was made from what the line shows: the noise the rule used and the margin it gave."""
    if c.bound == "max":
        return (f"ceiling {_quantity(c, c.floor, up=True)} (highest {_quantity(c, c.lowest)}, median "
                f"{_quantity(c, c.median)}, spread {c.spread * 100:.2f} % ({c.noise_name}))")
    if not rule.false_alarms:
        return (f"floor {_quantity(c, c.floor)} (lowest {_quantity(c, c.lowest)}, median {_quantity(c, c.median)}, "
                f"spread {c.spread * 100:.2f} % ({c.noise_name}); {_formula(rule, False)})")
    factor = prediction_factor(c.n, rule.false_alarms)
    return (f"floor {_quantity(c, c.floor)} = lowest {_quantity(c, c.lowest)} x (1 - {c.margin * 100:.2f} %), the margin "
            f"max(min_margin {rule.min_margin * 100:g} %, {factor:.2f} x noise {c.noise * 100:.3f} %) ({factor:.2f}: the "
            f"one-sided {rule.false_alarms * 100:g} % prediction bound of {c.n} readings; noise: the larger of their "
            f"standard deviation / mean and scaled MAD / median, here the {c.noise_name}; scaled MAD / median "
            f"{c.spread * 100:.2f} %); median {_quantity(c, c.median)}")


def _document(entries: list[Calibrated], rule_path: str, calibration, few_hosts: str | None = None) -> dict:
    doc: dict = {}
    for c in entries:
        where = doc
        for k in c.key[:-1]:
            where = where.setdefault(k, {})
        where[c.key[-1]] = _entry(c, rule_path, calibration, few_hosts)
    return doc


def run(args: argparse.Namespace, extra: list[str]) -> int:
    output = Path(args.output)
    try:
        runs = [read_run(p) for p in args.records]
        extends, base_path, why = _base(runs, args.extends, output)
        base = load_thresholds(base_path)
        rule = (load_thresholds(Path(args.thresholds)) if args.thresholds else base).calibration
        result = calibrate(runs, rule, tuple(args.leave_out), base.training_settings(False).workload(),
                           base.history_rule, base)
    except (RecordFileError, ThresholdsError, CalibrationError) as exc:
        lines = str(exc).splitlines()
        print(f"wirecheck calibrate: refused: {lines[0]}" if isinstance(exc, CalibrationError)
              else f"wirecheck calibrate: {lines[0]}", file=sys.stderr)
        for line in lines[1:]:
            print(f"wirecheck calibrate: refused: {line}", file=sys.stderr)
        return exit_codes.USAGE_ERROR
    except FileNotFoundError as exc:
        print(f"wirecheck calibrate: {exc.filename}: no such file", file=sys.stderr)
        return exit_codes.USAGE_ERROR
    if not result.entries:
        print("wirecheck calibrate: refused: the runs hold no figure to calibrate (GPU figures, host copies, busbw, "
              "training throughput): give records of acceptance runs", file=sys.stderr)
        return exit_codes.USAGE_ERROR
    header = [
        f"# Written by wirecheck calibrate from {len(runs)} clean runs: {', '.join(str(r.path) for r in runs)}",
        f"# Laid over {base_path} ({why}); only the calibrated entries are here. The rule: {rule.yaml_path}.",
        "# Retune by running calibrate again over more runs, never by editing a floor by hand without its source.",
    ] + ([f"# WARNING: {result.few_hosts}."] if result.few_hosts else []) + [
        f"# WARNING: {said}." for c in result.entries if (said := looser(c))]
    body = yaml.safe_dump({"extends": extends, **_document(result.entries, rule.yaml_path, rule, result.few_hosts)},
                          sort_keys=False, allow_unicode=True, width=100000)
    text = "\n".join(header) + "\n" + body
    partial = output.with_name(f".{output.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        load_thresholds(partial)  # what it wrote loads, or nothing is written
        os.replace(partial, output)
    except ThresholdsError as exc:
        partial.unlink(missing_ok=True)
        print(f"wirecheck calibrate: the file it made does not load ({exc}); nothing written", file=sys.stderr)
        return exit_codes.INTERNAL_ERROR
    except OSError as exc:
        partial.unlink(missing_ok=True)
        print(f"wirecheck calibrate: -o {output}: cannot write it ({exc.strerror or exc}); pass a writable path",
              file=sys.stderr)
        return exit_codes.USAGE_ERROR
    for c in result.entries:
        print(f"wirecheck calibrate: {c.yaml_path}: {_how(c, rule)}; {c.n} readings in {c.runs} runs")
        line = resolution_line(c)
        if line:
            print(f"wirecheck calibrate:   loss caught in 95 % of runs: {line}")
    for note in result.notes:
        print(f"wirecheck calibrate: {note}")
    for c in result.entries:
        if said := looser(c):
            print(f"wirecheck calibrate: WARNING: {said} (said in the file's header)")
    if result.few_hosts:
        print(f"wirecheck calibrate: WARNING: {result.few_hosts} (said in the file: its header and each entry's "
              "provenance.nodes_note)")
    print(f"wirecheck calibrate: wrote {output} ({len(result.entries)} limits, extends: {extends}); use it with "
          f"--thresholds {output}")
    return exit_codes.OK


main = entry(NAME)
