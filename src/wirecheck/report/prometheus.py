"""A run's key figures in Prometheus' text exposition format, for node_exporter's textfile collector.

Named as Prometheus recommends: a `wirecheck_` prefix, base units in the name (bytes, seconds,
`_per_second` for rates, `_ratio` for fractions), placement / op / strategy / GPU as labels,
HELP and TYPE before each family, every value a gauge (a run's reading, not a running count:
so no `_total` suffix either, not even on a count of events). Per-GPU families carry the labels
gpu, bus_id and model (NVML's name), so a fleet's dashboards can group GPUs of one model.
No timestamps: the textfile collector refuses samples that carry one; the run's own time is a
metric (`wirecheck_run_timestamp_seconds`). The file is written to a temporary file in the
same directory and renamed over the target, so the collector never reads half a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from wirecheck.report.model import RunView
from wirecheck.core import failure_codes
from wirecheck.core.verdict import OUTCOMES


def _escape_label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(v: float) -> str:
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return str(int(f)) if f.is_integer() and abs(f) < 2**53 else repr(f)


@dataclass
class Family:
    name: str
    help: str
    samples: list[tuple[dict, float]] = field(default_factory=list)

    def add(self, value: float | None, **labels: object) -> None:
        if value is not None:
            self.samples.append(({k: v for k, v in labels.items() if v is not None}, float(value)))

    def text(self) -> str:
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} gauge"]
        for labels, value in self.samples:
            body = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{self.name}{{{body}}} {_value(value)}" if body else f"{self.name} {_value(value)}")
        return "\n".join(lines)


def families(view: RunView) -> list[Family]:
    run = Family("wirecheck_run_info", "The run this file describes (value always 1): host, kind (validation, "
                 "diagnosis, dcgm, ...), profile, fabric, status")
    h = view.header
    run.add(1, host=h.get("host"), kind=h.get("kind") or "validation", profile=h.get("profile") or "",
            fabric=h.get("fabric") or "", status=view.status,
            nccl=(h.get("versions") or {}).get("nccl") or "", torch=(h.get("versions") or {}).get("torch") or "")
    simulated = Family("wirecheck_run_simulated", "1 if the run was a simulation on CPU (nothing was validated), else 0")
    simulated.add(1 if view.simulated else 0)
    stamp = Family("wirecheck_run_timestamp_seconds", "When the run started, Unix time in seconds")
    stamp.add(view.started.timestamp() if view.started else None)
    complete = Family("wirecheck_run_complete", "1 if the run reached its end record with status complete, else 0")
    complete.add(1 if view.status == "complete" else 0)
    damaged = Family("wirecheck_record_damaged_lines", "Lines of the record that could not be read (not UTF-8 text): "
                     "what they held is lost (0: every line read)")
    damaged.add(len(view.run.damaged))
    duration = Family("wirecheck_run_duration_seconds", "Wall time of the run in seconds (absent when cut short)")
    duration.add((view.run.end or {}).get("wall_s"))
    verdicts = Family("wirecheck_verdicts", f"Number of verdicts of the run by outcome ({', '.join(OUTCOMES)})")
    for outcome_, n in view.verdict_counts.items():
        verdicts.add(n, outcome=outcome_)
    failed_checks = Family("wirecheck_check_failures",
                           "Failed verdicts of the run per check and its stable failure code (docs/failure-codes.md)")
    warned_checks = Family("wirecheck_check_warnings",
                           "Warned verdicts of the run per check and its stable failure code (docs/failure-codes.md)")
    for family, outcome_ in ((failed_checks, "fail"), (warned_checks, "warn")):
        per_check: dict[tuple, int] = {}
        for v in view.verdicts:
            if v.get("outcome") == outcome_:
                key = (v.get("check") or "?", failure_codes.code(v.get("check"), outcome_) or "")
                per_check[key] = per_check.get(key, 0) + 1
        for (name, code), n in sorted(per_check.items()):
            family.add(n, check=name, code=code)

    busbw = Family("wirecheck_busbw_bytes_per_second",
                   "Collective bus bandwidth (nccl-tests convention) per placement, op and message size, bytes per second")
    algbw = Family("wirecheck_algbw_bytes_per_second", "Collective algorithm bandwidth (bytes / time), bytes per second")
    for (placement, op), sweep in sorted(view.sweeps.items()):
        for p in sweep.points:
            labels = dict(placement=placement, placement_class=sweep.klass, op=op, size_bytes=p.bytes)
            busbw.add(p.busbw, **labels)
            algbw.add(p.algbw, **labels)

    tokens = Family("wirecheck_training_tokens_per_second", "Training throughput over all ranks per placement and strategy")
    state = Family("wirecheck_training_model_state_bytes", "Model state (params + grads + optimizer) held by the largest rank")
    predicted = Family("wirecheck_training_model_state_predicted_bytes", "Model state per GPU predicted by the memory model")
    peak = Family("wirecheck_training_peak_allocated_bytes", "Peak allocated GPU memory of the largest rank")
    mfu = Family("wirecheck_training_mfu_ratio", "Model FLOPs utilisation of the slowest rank (0..1)")
    for (placement, strategy), p in sorted(view.strategies.items()):
        labels = dict(placement=placement, placement_class=p.klass, strategy=strategy)
        tokens.add(p.tokens_per_s, **labels)
        state.add(p.model_state_bytes, **labels)
        predicted.add(p.predicted_bytes, **labels)
        peak.add(p.peak_bytes, **labels)
        mfu.add(p.mfu, **labels)

    copies = Family("wirecheck_copy_bytes_per_second",
                    "Copy bandwidth without NCCL: host->device (h2d), device->host (d2h) per GPU, peer per direction")
    pcie_gen = Family("wirecheck_pcie_link_generation_under_load", "PCIe generation of the GPU's link during host copies")
    pcie_width = Family("wirecheck_pcie_link_width_under_load", "PCIe width (lanes) of the GPU's link during host copies")
    for h in (view.copies or {}).get("host") or []:
        copies.add(h.get("h2d_bytes_per_s"), direction="h2d", gpu=h["gpu"])
        copies.add(h.get("d2h_bytes_per_s"), direction="d2h", gpu=h["gpu"])
        link = (h.get("pcie") or {}).get("link") or {}
        pcie_gen.add(link.get("gen"), gpu=h["gpu"])
        pcie_width.add(link.get("width"), gpu=h["gpu"])
    for p in (view.copies or {}).get("peer") or []:
        copies.add(p.get("bytes_per_s"), direction="peer", gpu=p["src"], peer=p["dst"])

    nccl = Family("wirecheck_nccl_p2p_connections", "NCCL connections per placement and transport (P2P, SHM, NET) from its log")
    for placement, d in sorted(view.nccl_paths.items()):
        per_transport: dict[str, int] = {}
        for c in d.get("connections") or []:
            per_transport[c["transport"]] = per_transport.get(c["transport"], 0) + len(c.get("channels") or [])
        for transport, n in sorted(per_transport.items()):
            nccl.add(n, placement=placement, transport=transport)

    growth = Family("wirecheck_link_error_growth", "Growth of an NVLink/PCIe error count over the run, per GPU (label counter: which one)")
    for v in view.counters:
        for d in (v.get("inputs") or {}).get("deltas") or []:
            growth.add(d.get("grew_by"), gpu=str(v.get("where", "")).removeprefix("GPU"), counter=d.get("counter"))

    scaling = Family("wirecheck_training_scaling_ratio",
                     "Tokens/s per GPU of a strategy over one GPU alone training the same model (1 = perfect scaling)")
    for (placement, strategy), p in sorted(view.strategies.items()):
        scaling.add(p.scaling, placement=placement, placement_class=p.klass, strategy=strategy)
    single = Family("wirecheck_training_single_gpu_tokens_per_second",
                    "Training throughput of one GPU alone (the strategies' model, no process group)")
    single_mfu = Family("wirecheck_training_single_gpu_mfu_ratio", "Model FLOPs utilisation of one GPU alone (0..1)")
    for placement, one in sorted(view.single_gpu.items()):
        single.add(one.tokens_per_s, placement=placement)
        single_mfu.add(one.mfu, placement=placement)

    out = [run, simulated, stamp, complete, damaged, duration, verdicts, failed_checks, warned_checks, busbw, algbw, tokens,
           state, predicted, peak, mfu, scaling, single, single_mfu, copies, pcie_gen, pcie_width, nccl, growth,
           *gpu_families(view)]
    return [f for f in out if f.samples]


def gpu_families(view: RunView) -> list[Family]:
    """The GPU health checks' figures per GPU (base units: bytes/s, FLOP/s, watts, degrees Celsius)."""
    hbm_copy = Family("wirecheck_gpu_hbm_copy_bytes_per_second",
                      "HBM device-to-device copy bandwidth of the GPU, read+write counted, bytes per second")
    hbm_read = Family("wirecheck_gpu_hbm_read_bytes_per_second", "HBM read bandwidth of the GPU, bytes per second")
    gemm = Family("wirecheck_gpu_gemm_flops_per_second",
                  "Dense square GEMM throughput of the GPU per precision (bf16, fp8), FLOP per second")
    sustained = Family("wirecheck_gpu_sustained_flops_per_second",
                       "Median window's bf16 GEMM throughput while every GPU of the node was loaded at once, FLOP per second")
    temperature = Family("wirecheck_gpu_max_temperature_celsius", "Hottest NVML sample of the GPU during the sustained load")
    power = Family("wirecheck_gpu_peak_power_watts", "Highest NVML power sample of the GPU during the sustained load")
    mismatches = Family("wirecheck_gpu_memory_test_mismatches",
                        "8-byte words the memory pattern test read back wrong on the GPU (0 is healthy)")
    xids = Family("wirecheck_gpu_xid_events", "XID events NVML reported for the GPU during the run (0 is healthy)")
    watched = {e.get("gpu") for p in view.gpus.values() for e in p.events} | {
        g for v in view.verdicts if v.get("check") == "no_xid" for g in (v.get("inputs") or {}).get("watched") or []}
    for g, p in view.gpus.items():
        labels = dict(gpu=g, bus_id=p.bus_id or "", model=p.model or "")
        hbm_copy.add(p.figures.get("hbm_copy"), **labels)
        hbm_read.add(p.figures.get("hbm_read"), **labels)
        for precision in ("bf16", "fp8"):
            gemm.add(p.figures.get(f"gemm_{precision}"), precision=precision, **labels)
        sustained.add(p.figures.get("sustained_bf16"), **labels)
        temperature.add(p.max_temperature, **labels)
        power.add(p.peak_power, **labels)
        mismatches.add(p.memory_mismatches, **labels)
        if g in watched:  # a GPU nobody watched has no count, not a zero
            xids.add(p.xid_events, **labels)
    return [hbm_copy, hbm_read, gemm, sustained, temperature, power, mismatches, xids]


def exposition(view: RunView) -> str:
    assert set(view.verdict_counts) == set(OUTCOMES)
    return "\n".join(f.text() for f in families(view)) + "\n"
