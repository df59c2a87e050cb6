"""What `wirecheck advise --profile NAME` predicts from: a node type of thresholds.yaml's `profiles:` (the names
every command's --profile takes), never a measured node of this site.

Its GPUs and topology are the profile's. Its all_reduce busbw per placement class and GPU count: profiles.yaml's
measured figures of that profile where it has them (the article's 8x H200 NVL and 8x H200 SXM, the 2x H200 SXM
runs), each with its source; any other class, the profile's physics: the wire the placement rides
(wirecheck.node.wire: the NVLinks into it x their speed, the host path's PCIe, as `wirecheck limits` and the
thresholds loader read it) x the share of its wire all_reduce reached on a measured node
(`defaults.wire_efficiency`). Its compute: the GPU model's dense peak x the MFU one H200 reached alone
(`defaults.compute`). The description says which figures are measured and which are physics.
"""

from __future__ import annotations

import re
from pathlib import Path

from wirecheck.advise.curves import Curve
from wirecheck.advise.figures import (NOT_JOB_CLASSES, PROFILES_FILE, Compute, FiguresError, NodeFigures, load_profiles,
                                      measured_profiles, wire_of, with_optimizer)
from wirecheck.core import gpu_arch
from wirecheck.core.quantity import QuantityError, parse_quantity
from wirecheck.node import hardware as node_hardware
from wirecheck.node.placement import CLASS_FORCED_PCIE, enumerate_placements
from wirecheck.node.profile_topology import from_profile as topology_from_profile
from wirecheck.node.wire import wire_peak

SWEEP = tuple(8 * 4 ** i for i in range(14))  # 8 B .. 512 MiB, as a collective sweep's sizes


def latency_curve(op: str, klass: str, n_gpus: int, busbw: float, latency_s: float, source: str) -> Curve:
    """A profile's curve from its large-message busbw and a per-call latency: a call of s bytes takes
    latency + s x factor / busbw, so busbw(s) = busbw x f s / (latency x busbw + f s), falling at small sizes
    (a per-block gather pays its latency). latency 0: the flat curve of the large-message figure."""
    from wirecheck.advise.schedule import ALGBW_FACTOR

    f = ALGBW_FACTOR[op](max(n_gpus, 2))
    points = tuple((s, busbw * f * s / (latency_s * busbw + f * s)) for s in SWEEP) if latency_s > 0 else ((1, busbw),)
    return Curve(op, klass, n_gpus, points, source)


def _seconds(text, where: str) -> float:
    """`latency: {class: "7.7 us"}`: absent is 0 (no latency known)."""
    if text is None:
        return 0.0
    m = re.fullmatch(r"\s*([0-9.]+)\s*(us|µs|ms)\s*", str(text))
    if not m:
        raise FiguresError(f"{where}: {text!r}: write microseconds, e.g. \"7.7 us\"")
    return float(m.group(1)) * (1e-6 if m.group(2) in ("us", "µs") else 1e-3)


def _reference(entry: dict, where: str):
    ref = entry.get("reference")
    if ref is None:
        return None
    try:
        return float(ref["params"]), float(ref["tokens_per_gpu"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FiguresError(f"{where}: needs params and tokens_per_gpu ({exc!r})") from None


def _measured_curves(name: str, entry: dict, path: Path) -> dict:
    curves = {}
    latency = entry.get("latency") or {}
    for klass, by_n in (entry.get("busbw") or {}).items():
        for n, text in by_n.items():
            where = f"{path}: profiles.{name}.busbw.{klass}.{n}"
            try:
                bw = parse_quantity(text, "bandwidth", where=where)
            except (QuantityError, ValueError) as exc:
                raise FiguresError(f"{where}: {exc}") from None
            alpha = _seconds(latency.get(klass), f"{path}: profiles.{name}.latency.{klass}")
            curves[("all_reduce", klass, int(n))] = latency_curve("all_reduce", klass, int(n), bw, alpha,
                                                                  entry.get("source", ""))
    return curves


def wire_efficiency(path: Path = PROFILES_FILE) -> tuple[dict[str, float], str]:
    """profiles.yaml `defaults.wire_efficiency`: {wire: share of the wire's peak all_reduce reached}, its source."""
    entry = (load_profiles(path).get("defaults") or {}).get("wire_efficiency") or {}
    try:
        shares = {wire: float(entry[wire]) for wire in ("nvlink", "host")}
    except (KeyError, TypeError, ValueError) as exc:
        raise FiguresError(f"{path}: defaults.wire_efficiency needs nvlink and host, each a share of the wire's "
                           f"peak, e.g. 0.672 ({exc!r})") from None
    if not all(0 < v <= 1 for v in shares.values()):
        raise FiguresError(f"{path}: defaults.wire_efficiency: {shares}: each a share above 0 and at most 1")
    return shares, str(entry.get("source", ""))


def _latency_of(klass: str, latencies: dict, path: Path) -> float:
    """The measured per-call latency of the class, else of a listed class on the same wire (NVLink, host path)."""
    text = latencies.get(klass)
    if text is None:
        text = next((v for k, v in latencies.items() if k != "source" and wire_of(k) == wire_of(klass)), None)
    return _seconds(text, f"{path}: defaults.latency.{klass}")


def _physics_curves(topology, placements, hardware, skip: set, path: Path) -> dict:
    """all_reduce's curve per job class and GPU count the measured figures leave out: the wire x its measured share."""
    shares, source = wire_efficiency(path)
    latencies = (load_profiles(path).get("defaults") or {}).get("latency") or {}
    curves, lowest = {}, {}
    for p in placements:
        if p.klass in NOT_JOB_CLASSES or p.klass in skip:
            continue
        wire = wire_peak(topology, p, hardware)
        if wire is None:
            continue  # the profile does not say its links or PCIe: no prediction on this class
        share = shares[wire_of(p.klass)]
        busbw = wire.bytes_per_s * share
        key = ("all_reduce", p.klass, p.n_gpus)
        if key in lowest and lowest[key] <= busbw:
            continue  # the slowest placement of the class and count
        lowest[key] = busbw
        what = (f"physics: {wire.how} = {wire.bytes_per_s / 1e9:.1f} GB/s x {share:.1%} (the share all_reduce "
                f"reached of its wire: {source})")
        curves[key] = latency_curve("all_reduce", p.klass, p.n_gpus, busbw, _latency_of(p.klass, latencies, path), what)
    return curves


def _compute(profile, hardware, entry: dict, peak_flops, precision: str, path: Path) -> Compute | None:
    defaults = (load_profiles(path).get("defaults") or {}).get("compute") or {}
    compute_entry = entry.get("compute") or defaults
    peak = peak_flops(profile.gpu_model, precision)
    how = f"{profile.gpu_model}'s dense {precision} peak ({(peak or 0) / 1e12:.0f} TFLOP/s)"
    if peak is None and precision in gpu_arch.DTYPES:
        peak, how = hardware.math_peak(precision)  # the profile's SMs x clock x flop per clock
        how = f"{profile.gpu_model}'s dense {precision} peak ({how}, its profile)"
    if peak is None:
        return None
    mfu = float(compute_entry["mfu"])
    return with_optimizer(Compute(peak * mfu, f"MFU {mfu:.1%} of {how}; MFU {compute_entry.get('source', '')}", mfu,
                                  precision, reference=_reference(compute_entry, f"{path}: defaults.compute.reference")),
                          profile.gpu_model, path)


def from_profile(name: str, thresholds, peak_flops, precision: str, path: Path = PROFILES_FILE) -> NodeFigures:
    """A profile's figures (not a node's): its topology, its measured busbw where profiles.yaml has it, else its
    physics, and an MFU. `peak_flops(gpu_model, precision)`: the dense peak (thresholds' training limits), or None."""
    try:
        profile = thresholds.profile(name)
    except ValueError as exc:  # ThresholdsError: names the profiles there are
        raise FiguresError(f"--profile {name}: {exc}", usage=True) from None
    entry = measured_profiles(path).get(name) or {}
    hardware = node_hardware.from_profile(profile)
    topology = topology_from_profile(profile, where=str(thresholds.path))
    placements = [p for p in enumerate_placements(topology) if p.klass != CLASS_FORCED_PCIE]
    curves = _measured_curves(name, entry, path)
    physics = _physics_curves(topology, placements, hardware, {k for (_, k, _) in curves}, path)
    curves.update(physics)
    said = []
    if entry:
        said.append(f"the profile {name}'s figures ({entry.get('source', '')})")
    if physics:
        shares, _ = wire_efficiency(path)
        classes = ", ".join(sorted({k for (_, k, _) in physics}))
        said.append(f"the profile {name}'s physics for {classes} (no measured figures of {name} there): busbw = the "
                    f"NVLinks into each placement x their speed, or the host path's PCIe, x the share all_reduce reached "
                    f"of its wire on 2x H200 SXM (NVLink {shares['nvlink']:.1%}, host path {shares['host']:.1%}); "
                    "compute = the dense peak x the MFU one H200 reached")
    figures = NodeFigures("profile", "; ".join(said) + ", not a measured node", profile.gpu_model,
                          int(profile.gpu_memory), profile.gpu_count, placements, curves,
                          _compute(profile, hardware, entry, peak_flops, precision, path))
    figures.physics = tuple(sorted({k for (_, k, _) in physics}))
    return figures
