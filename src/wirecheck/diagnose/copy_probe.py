"""A slow host copy or a PCIe link below its capability, localized: the GPU's host copies alone, then
together with every GPU behind the same PCIe switch (PIX or PXB between them in the topology), each
GPU's link read from NVML while its copies run (measure.copy_bandwidth.host_each).

Slow alone, on a link trained down, is the GPU's link (slot, riser); slow alone at full width is the GPU or
its link; fine alone but below the floor together is the switch's shared uplink. Host copies need GPUs: in
simulation nothing runs, and the finding says so.
"""

from __future__ import annotations

from wirecheck.core import render
from wirecheck.checks.copy_bandwidth import host_copy, pcie_link_under_load
from wirecheck.core.quantity import format_bw
from wirecheck.diagnose.context import Context
from wirecheck.diagnose.findings import FOUND, NOT_LOCALIZED, NOT_REPRODUCED, Finding
from wirecheck.diagnose.suspects import Suspect
from wirecheck.workers.launcher import WorkerError, WorkerGroup

HOST_EACH = "wirecheck.measure.copy_bandwidth:host_each"
SAME_SWITCH = ("PIX", "PXB")


def _pcie(result: dict) -> dict | None:
    reading = result.get("pcie") or {}
    return {**(reading.get("link") or {}), "under_load": reading.get("under_load"), "error": reading.get("error")}


class _Probe:
    def __init__(self, ctx: Context, s: Suspect):
        self.ctx, self.s = ctx, s
        self.settings = ctx.thresholds.copy_bandwidth.settings
        self.direction = (s.verdict.get("inputs") or {}).get("direction") or "h2d"

    def _copies(self, gpus: tuple[int, ...]) -> dict[int, dict]:
        # Host copies with nothing else on the GPUs, as the suite's copy bandwidth measures them: the command's
        # pool is closed first (its next probe starts it again).
        if self.ctx.pool is not None:
            self.ctx.pool.close()
        with WorkerGroup(label=f"host-copies-{'.'.join(map(str, gpus))}", world_size=len(gpus), backend="nccl",
                         gpus=gpus, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, log_dir=self.ctx.log_dir) as group:
            out = group.run(HOST_EACH, {"gpus": list(gpus), "size": self.settings.size,
                                        "warmup_iters": self.settings.warmup_iters, "iters": self.settings.iters},
                            timeout_s=self.settings.timeout_s, what="host copies")
        return {r["gpu"]: r for r in out}

    def _judge(self, gpu: int, result: dict):
        fabric = self.ctx.topology.fabric if self.ctx.topology else "pcie"
        return host_copy(self.ctx.thresholds, gpu=gpu, direction=self.direction, fabric=fabric,
                         bytes_per_s=result[f"{self.direction}_bytes_per_s"], pcie=_pcie(result), simulated=False)

    def run(self) -> Finding:
        s, ctx = self.s, self.ctx
        if ctx.simulated:
            return Finding(s, NOT_LOCALIZED, evidence=["simulation: host copies need GPUs; run diagnose --run on the node"])
        if not s.gpus:
            return Finding(s, NOT_LOCALIZED, evidence=[f"{s.where}: no GPU named"])
        gpu = s.gpus[0]
        mates = tuple(sorted({gpu} | {h for h in (ctx.topology.indices if ctx.topology else ())
                                      if h != gpu and ctx.path(gpu, h) in SAME_SWITCH}))
        try:
            alone = self._copies((gpu,))[gpu]
            together = self._copies(mates) if len(mates) > 1 else None
        except WorkerError as exc:
            return Finding(s, NOT_LOCALIZED, evidence=[f"the copies' worker group failed: {str(exc).splitlines()[0]}"])
        key = f"{self.direction}_bytes_per_s"
        alone_v, link_v = self._judge(gpu, alone), pcie_link_under_load(ctx.thresholds, gpu=gpu, pcie=_pcie(alone),
                                                                         simulated=False)
        evidence = [f"GPU{gpu} alone: {self.direction} {format_bw(alone[key])}; {alone_v.message.splitlines()[0]}",
                    link_v.message.splitlines()[0]]
        figures = {"alone": {f"GPU{gpu}": alone[key] / 1e9}, "unit": "GB/s", "switch": [f"GPU{g}" for g in mates]}
        if together:
            figures["together"] = {f"GPU{g}": r[key] / 1e9 for g, r in together.items()}
            evidence.append("behind the same switch, together: " + ", ".join(
                f"GPU{g} {format_bw(r[key])}" for g, r in sorted(together.items())))
        else:
            evidence.append(f"no other GPU behind GPU{gpu}'s PCIe switch: alone only")
        if not link_v.ok and not link_v.skipped:
            return Finding(s, FOUND, f"GPU{gpu} PCIe link", f"GPU{gpu}{self._bus(gpu)} {render.gist(link_v)}",
                           evidence, figures)
        if not alone_v.ok:
            return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {self.direction} copy "
                           f"{format_bw(alone[key])} alone, below the floor at full link width", evidence, figures)
        if together and not self._judge(gpu, together[gpu]).ok:
            names = "+".join(f"GPU{g}" for g in mates)
            return Finding(s, FOUND, f"the PCIe switch of {names}", f"{names} share one PCIe uplink: GPU{gpu} "
                           f"{format_bw(together[gpu][key])} together vs {format_bw(alone[key])} alone", evidence, figures)
        return Finding(s, NOT_REPRODUCED, evidence=evidence, figures=figures)

    def _bus(self, gpu: int) -> str:
        bus = self.ctx.bus_id(gpu)
        return f" ({bus})" if bus else ""


def diagnose(ctx: Context, s: Suspect) -> Finding:
    return _Probe(ctx, s).run()
