"""A slow, hot or wrong GPU, localized with the GPU load (wirecheck.gpu.load, on the command's worker pool):
the same phase on the GPU alone, then with every GPU of the node loaded at once.

Slow only with its neighbours loaded points at the chassis (the slot's cooling or power delivery); slow
alone points at the GPU. "Slow" is the GPU's figure below its model's floor, or below the other GPUs'
median (measured with every GPU loaded) by more than the share `gpu_health.peers` allows. Wrong results
are repeated alone: wrong again alone is the GPU.
"""

from __future__ import annotations

import statistics

from wirecheck.checks.gpu_health import (gemm_matches_reference, memory_pattern, sustained_clocks, sustained_power,
                                         sustained_temperature, sustained_throughput)
from wirecheck.core.levels import QUICK
from wirecheck.diagnose.context import Context
from wirecheck.diagnose.findings import FOUND, NOT_LOCALIZED, NOT_REPRODUCED, Finding
from wirecheck.diagnose.suspects import Suspect
from wirecheck.gpu import inputs
from wirecheck.gpu.load import FIGURES, MEMORY, SUSTAINED, GpuLoad, GpuRun

# The checks judged under the sustained load, with the inputs they take from it: run again as they are,
# on the GPU alone and with every GPU loaded.
SUSTAINED_CHECKS = {
    "sustained_throughput": (inputs.sustained, sustained_throughput),
    "sustained_clocks": (inputs.clocks, sustained_clocks),
    "sustained_power": (inputs.power, sustained_power),
    "sustained_temperature": (inputs.temperature, sustained_temperature),
}


def _figure(s: Suspect) -> tuple[str, str, float, str]:
    """(the thresholds' figure name, its result key path, the scale to its unit, the unit) for the failed check;
    clocks, power and heat are judged under the GEMM load, so its figure stands for them."""
    inputs_ = s.verdict.get("inputs") if isinstance(s.verdict.get("inputs"), dict) else {}
    if s.check == "hbm_bandwidth":
        kind = inputs_.get("kind") or "copy"
        return f"hbm_{kind}", f"hbm.{kind}", 1e-9, "GB/s"
    dtype = inputs_.get("dtype") or "bf16" if s.check == "gemm_throughput" else "bf16"
    return f"gemm_{dtype}", f"gemm_{dtype}.throughput", 1e-12, "TFLOP/s"


def _pick(result: dict | None, path: str) -> float | None:
    node = result
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    value = node.get("per_s") if isinstance(node, dict) else None
    return value if isinstance(value, (int, float)) else None


def all_gpus(ctx: Context, s: Suspect) -> tuple[int, ...]:
    """Every GPU of the node (the load with its neighbours), or the suspect's where no topology says."""
    return tuple(sorted(ctx.topology.indices)) if ctx.topology else s.gpus


class _Probe:
    def __init__(self, ctx: Context, s: Suspect):
        self.ctx, self.s = ctx, s
        self.settings = ctx.thresholds.gpu_health.settings(ctx.simulated)
        self.all_gpus = all_gpus(ctx, s)

    def _run(self, gpus: tuple[int, ...]) -> GpuRun:
        return GpuRun(gpus, self.ctx.simulated, {g: self.ctx.gpu_name(g) for g in gpus},
                      {g: self.ctx.bus_id(g) for g in gpus})

    def _phase(self, gpus: tuple[int, ...], name: str):
        run = self._run(gpus)
        load = GpuLoad(run, self.settings, QUICK, self.ctx.log_dir, pool=self.ctx.pool)
        try:
            return run, load.phase(name, self.ctx.gpu_workers)
        finally:
            load.close()

    def slow(self) -> Finding:
        s, ctx = self.s, self.ctx
        (gpu,) = s.gpus[:1] or (None,)
        if gpu is None:
            return Finding(s, NOT_LOCALIZED, evidence=[f"{s.where}: no GPU named"])
        if s.check in SUSTAINED_CHECKS:
            return self._sustained(gpu)
        if self.all_gpus == (gpu,):
            return self._alone_only(gpu)
        figure, path, scale, unit = _figure(s)
        _, alone = self._phase((gpu,), FIGURES)
        _, loaded = self._phase(self.all_gpus, FIGURES)
        if alone.error or loaded.error:
            return Finding(s, NOT_LOCALIZED, evidence=[f"the GPU load failed: {(alone.error or loaded.error).splitlines()[0]}"])
        a, l = _pick(alone.of(gpu), path), _pick(loaded.of(gpu), path)
        peers = [v for g in self.all_gpus if g != gpu and ctx.gpu_name(g) == ctx.gpu_name(gpu)
                 if (v := _pick(loaded.of(g), path)) is not None]
        if a is None or l is None:
            return Finding(s, NOT_LOCALIZED, evidence=[f"GPU{gpu}: the load gave no {figure} figure"])
        floor = ctx.thresholds.gpu_health.floor(figure, ctx.gpu_name(gpu), ctx.simulated)
        share = ctx.thresholds.gpu_health.peers(ctx.simulated).max_below_median
        median = statistics.median(peers) if peers else None

        def low(value: float) -> str | None:
            if floor is not None and floor.min and value < floor.min:
                return f"below the floor {floor.min * scale:.3g} {unit}"
            if median and value < median * (1 - share):
                return f"{(1 - value / median) * 100:.0f} % below the other GPUs' median {median * scale:.3g} {unit}"
            return None

        shown = lambda v: f"{v * scale:.3g} {unit}"  # noqa: E731
        evidence = [f"GPU{gpu} {figure} alone: {shown(a)}" + (f" ({low(a)})" if low(a) else ""),
                    f"GPU{gpu} {figure} with every GPU loaded: {shown(l)}" + (f" ({low(l)})" if low(l) else ""),
                    f"loaded / alone: {l / a:.2f}"]
        if median:
            evidence.append(f"the other {len(peers)} GPU(s) loaded: median {shown(median)}")
        figures = {"figure": figure, "unit": unit, "alone": a * scale, "loaded": l * scale,
                   "peers_median": median * scale if median else None, "floor": floor.min * scale if floor else None}
        if low(a):
            return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {figure} {shown(a)} alone "
                           f"({low(a)}): the GPU itself", evidence, figures)
        if low(l):
            return Finding(s, FOUND, f"the slot of GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {figure} {shown(l)} only with "
                           f"its neighbours loaded ({shown(a)} alone): the chassis, cooling or power delivery of its slot",
                           evidence, figures)
        return Finding(s, NOT_REPRODUCED, evidence=evidence, figures=figures)

    def _alone_only(self, gpu: int) -> Finding:
        """A node of one GPU: no neighbours to load; the GPU alone against its floor."""
        s, ctx = self.s, self.ctx
        figure, path, scale, unit = _figure(s)
        _, alone = self._phase((gpu,), FIGURES)
        if alone.error:
            return Finding(s, NOT_LOCALIZED, evidence=[f"the GPU load failed: {alone.error.splitlines()[0]}"])
        a = _pick(alone.of(gpu), path)
        floor = ctx.thresholds.gpu_health.floor(figure, ctx.gpu_name(gpu), ctx.simulated)
        if a is None:
            return Finding(s, NOT_LOCALIZED, evidence=[f"GPU{gpu}: the load gave no {figure} figure"])
        evidence = [f"GPU{gpu} {figure} alone: {a * scale:.3g} {unit}"
                    + (f" (floor {floor.min * scale:.3g} {unit}: {floor.yaml_path})" if floor else " (no floor)"),
                    "no other GPU on the node: there are no neighbours to load"]
        figures = {"figure": figure, "unit": unit, "alone": a * scale, "floor": floor.min * scale if floor else None}
        if floor is not None and floor.min and a < floor.min:
            return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {figure} {a * scale:.3g} {unit} alone, "
                           f"below the floor {floor.min * scale:.3g} {unit}: the GPU itself", evidence, figures)
        if floor is None:
            return Finding(s, NOT_LOCALIZED, evidence=evidence + [f"no {figure} floor for {ctx.gpu_name(gpu)!r}"],
                           figures=figures)
        return Finding(s, NOT_REPRODUCED, evidence=evidence, figures=figures)

    def _sustained(self, gpu: int) -> Finding:
        """The failed sustained-load check run again as it is: on the GPU alone, then with every GPU loaded."""
        s, ctx = self.s, self.ctx
        build, judge = SUSTAINED_CHECKS[s.check]
        if ctx.simulated and s.check != "sustained_throughput":  # clocks, power, heat: NVML's samples beside the load
            return Finding(s, NOT_LOCALIZED, evidence=[f"{s.check}: {inputs.SIMULATED_NVML}: nothing to judge it by"])
        verdicts = {}
        for name, gpus in (("alone", (gpu,)), ("with every GPU loaded", self.all_gpus)):
            if name != "alone" and gpus == (gpu,):
                continue  # one GPU on the node: alone is all there is
            run, phase = self._phase(gpus, SUSTAINED)
            verdicts[name] = judge(ctx.thresholds, **build(run, phase, gpu))
        evidence = [f"{name}: {v.outcome}: {v.message.splitlines()[0]}" for name, v in verdicts.items()]
        alone, loaded = verdicts["alone"], verdicts.get("with every GPU loaded")
        if not alone.ok:
            return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {alone.what} fails alone: the GPU itself",
                           evidence)
        if loaded is not None and not loaded.ok:
            return Finding(s, FOUND, f"the slot of GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {loaded.what} fails only with "
                           "its neighbours loaded: the chassis, cooling or power delivery of its slot", evidence)
        if all(v.skipped for v in verdicts.values()):
            return Finding(s, NOT_LOCALIZED, evidence=evidence)
        return Finding(s, NOT_REPRODUCED, evidence=evidence)

    def wrong(self) -> Finding:
        s, ctx = self.s, self.ctx
        (gpu,) = s.gpus[:1] or (None,)
        if gpu is None:
            return Finding(s, NOT_LOCALIZED, evidence=[f"{s.where}: no GPU named"])
        if s.check == "memory_pattern":
            run, phase = self._phase((gpu,), MEMORY)
            verdict = memory_pattern(ctx.thresholds, **inputs.memory(run, phase, gpu))
        else:
            run, phase = self._phase((gpu,), FIGURES)
            verdict = gemm_matches_reference(ctx.thresholds, **inputs.math_check(run, {FIGURES: phase}, gpu))
        evidence = [f"alone: {verdict.message.splitlines()[0]}"]
        if not verdict.ok:
            return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._bus(gpu)} {verdict.what} wrong again alone",
                           evidence, {"alone": verdict.as_record()["measured"]})
        return Finding(s, NOT_REPRODUCED, evidence=evidence)

    def _bus(self, gpu: int) -> str:
        bus = self.ctx.bus_id(gpu)
        return f" ({bus})" if bus and not self.ctx.simulated else ""


def diagnose_slow(ctx: Context, s: Suspect) -> Finding:
    return _Probe(ctx, s).slow()


def diagnose_wrong(ctx: Context, s: Suspect) -> Finding:
    return _Probe(ctx, s).wrong()
