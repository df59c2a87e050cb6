"""The training probe: which strategy settings reach the throughput targets on this node.

Runs each strategy of the strategies table (wirecheck.vocab.strategies) as the suite would,
on NVLink and on the host path (NCCL_P2P_DISABLE=1, the forced_pcie wire), then variants where
the choice is open, each in a fresh worker group exactly as the suite's measurements do, and
prints per run: tokens/s (median, min-max, the median's 95 % interval), step time, peak memory,
MFU, exposed communication, where the time went (phases) and a short profile of the GPU
timeline (busy/idle, compute, NCCL, NCCL not hidden by compute, top kernels). Then the ratios
to DDP against the targets (ZeRO-1/2 >= 0.95x, FSDP >= 0.85x, ZeRO-3 >= 0.5x DDP on NVLink).

Runs are ordered by value and stop being started when the wall-clock budget is spent (the
skipped ones are listed). Everything goes to stdout and to --out: probe.jsonl (one line per run
with every rank's record) and probe-summary.txt (the tables).

    scripts/device/training_probe.sh                 # on the 2x H200 machine (installs .whl/ first)
    python scripts/device/training_probe.py --simulate --budget 240   # CPU/gloo dry run, toy model
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from wirecheck.workers import bytecode
from wirecheck.workers.launcher import WorkerError, WorkerGroup
from wirecheck.node.placement import FORCED_PCIE_ENV
from wirecheck.thresholds.file import load_thresholds
from wirecheck.training import figures
from wirecheck.vocab.strategies import NAMES, REFERENCE, resolve_settings
from wirecheck.training.strategy_run import RUN_STRATEGY_WORKER as WORKER
NVLINK, HOST = "nvlink", "host"
TARGETS = {"zero1": 0.95, "zero2": 0.95, "zero3": 0.5, "fsdp": 0.85}  # x DDP tokens/s on NVLink: the strategy targets
PROFILE_STEPS = 3
FILL = -1  # Run.spinners: as many as there are CPUs beyond one per rank
EXPECTED_RUN_S = 25  # a run's wall time on 2x H200 (process start, setup, steps): the budget guard's estimate


@dataclass
class Run:
    strategy: str
    wire: str
    overrides: dict = field(default_factory=dict)
    profile: bool = False
    local: bool = False  # time the unwrapped model afterwards (wire-independent: NVLink defaults only)
    loop: dict = field(default_factory=dict)  # run_strategy arguments beyond the table (gc_freq)
    env: dict = field(default_factory=dict)  # extra worker environment (WIRECHECK_CPU_BIND)
    repeat: int = 0  # tells repeated runs of one variant apart
    spinners: int = 0  # busy-looping processes beside the workers (FILL: every CPU but one per rank)

    @property
    def name(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in {**self.overrides, **self.loop, **self.env}.items())
        spin = "all" if self.spinners == FILL else self.spinners
        extra = ",".join(filter(None, [extra, f"spinners={spin}" if self.spinners else ""]))
        again = f"#{self.repeat}" if self.repeat else ""
        return f"{self.strategy}[{extra or 'table'}]@{self.wire}{again}"


def plan_noise() -> list[Run]:
    """The stability question (5 % run to run): the host-bound strategies run after run, as the suite runs
    them (manual GC, thresholds' gc_freq) and with Python's automatic GC (gc_freq 0). Each record
    carries the host figures (steal, GC). The 2026-12-01 run of this plan also tried each rank bound
    to its own half of the CPUs (torchrun's exclusive NUMA binding): no steadier, ZeRO-2 7 % slower."""
    auto_gc = {"gc_freq": 0}
    runs = [Run("ddp", NVLINK, local=True), Run("zero1", NVLINK), Run("zero1", NVLINK, {"overlap_comm": True}, profile=True)]
    for repeat in (0, 2, 3):
        runs += [Run(s, NVLINK, repeat=repeat) for s in ("zero2", "fsdp", "zero3")]
        runs += [Run(s, NVLINK, loop=auto_gc, repeat=repeat) for s in ("zero2", "fsdp", "zero3")]
    return runs


def plan_host() -> list[Run]:
    """Is a strategy host-bound, and does a larger micro-batch hide it? Meant for one GPU (--gpus 1):
    every strategy's hooks, copies and launches run as on two, with no second GPU to wait for,
    so step time over the unwrapped model's (local) is what the strategy costs the host. At
    micro-batch 4 (the suite's) and 8, then 16 for the host-heaviest; set-up profiled at 4."""
    runs = [Run(s, NVLINK, profile=True, local=True, loop={"setup_profile": 15}) for s in NAMES]
    runs += [Run(s, NVLINK, profile=True, local=True, loop={"micro_batch": 8}) for s in NAMES]
    runs += [Run(s, NVLINK, profile=True, local=True, loop={"micro_batch": 16}) for s in ("ddp", "zero3", "fsdp")]
    return runs


def plan_zero3() -> list[Run]:
    """ZeRO-3, the one strategy still outside 5 % run to run at micro-batch 8 (2026-12-01): the table
    three times against the choices that change its host work, twice each, each record with the
    host's Python speed."""
    runs = [Run("zero3", NVLINK, repeat=i) for i in (0, 2, 3)]
    for overrides in ({"memory_efficient_linear": False}, {"stage3_prefetch_bucket_size": 200_000_000},
                      {"stage3_max_reuse_distance": 0}):
        runs += [Run("zero3", NVLINK, overrides, repeat=i) for i in (0, 2)]
    return runs


def plan_contention() -> list[Run]:
    """How much a slower host moves each strategy, at micro-batch 8 and 16. On the H200 VMs measured a
    busy vCPU can halve another's Python speed although the guest reports one thread per core
    (scripts/device/cpu_contention.py: 6.5 -> 12-13 ms for the host-speed loop), so a strategy whose
    step waits on its hooks moves with whatever else the host runs. Each run quiet, then with a
    spinning process on every CPU but one per rank: which vCPUs share a core is hidden, so only
    filling them all slows every rank for sure (half of them, on 2026-12-01, did not: the ranks'
    host-speed loop read the same busy as quiet)."""
    return [Run(s, NVLINK, loop={"micro_batch": mb}, spinners=n)
            for mb in (8, 16) for s in ("ddp", "zero3", "fsdp") for n in (0, FILL)]

def plan_setup() -> list[Run]:
    """Where set-up time goes: each strategy once, its wrapping under cProfile, nothing else."""
    return [Run(s, NVLINK, loop={"setup_profile": 15}) for s in NAMES]


def plan() -> list[Run]:
    """Most valuable first: the table on NVLink, the table on the host path for the strategies
    whose exposed communication matters most, the open choices, then the rest."""
    runs = [Run(s, NVLINK, profile=True, local=True) for s in NAMES]
    runs += [Run(s, HOST, profile=True) for s in ("ddp", "zero3", "fsdp")]
    runs += [
        Run("zero3", NVLINK, {"leaf_modules": []}),                      # per-Linear hooks, as untuned
        Run("zero3", NVLINK, {"memory_efficient_linear": False}),        # torch's F.linear, not DeepSpeed's
        Run("fsdp", NVLINK, {"reshard_after_forward": False}),           # no re-gather in backward
        Run("fsdp", NVLINK, {"forward_prefetch": 1, "backward_prefetch": 1}),  # explicit prefetch
        Run("zero3", NVLINK, {"stage3_prefetch_bucket_size": 50_000_000}),     # DeepSpeed's default prefetch
    ]
    runs += [Run(s, HOST, profile=True) for s in ("zero2", "zero1")]
    runs += [
        Run("fsdp", NVLINK, {"reshard_after_forward": False, "forward_prefetch": 1, "backward_prefetch": 1}),
        Run("ddp", NVLINK, {"optimizer": "foreach"}),                    # torch's default on CUDA
        Run("zero2", NVLINK, {"overlap_comm": False}),                   # DeepSpeed's default for stage 2
        Run("zero1", NVLINK, {"overlap_comm": True}),
        Run("zero3", NVLINK, {"reduce_bucket_size": 50_000_000}),        # reduce per block, not per 10 blocks
        Run("fsdp", NVLINK, {"optimizer": "foreach"}),
        Run("zero3", NVLINK, {"stage3_prefetch_bucket_size": 200_000_000}),
        Run("fsdp", NVLINK, {"reduce_dtype": "bf16"}),
    ]
    return runs


# ---- running ------------------------------------------------------------------------------


def run_one(run: Run, settings, backend: str, world_size: int, gpus, closers: list) -> dict:
    env = {**(FORCED_PCIE_ENV if run.wire == HOST else {}), **run.env}
    kwargs = {
        **settings.run_kwargs(run.strategy),
        "settings": run.overrides,
        "local_baseline": run.local,
        "profile_steps": PROFILE_STEPS if run.profile else 0,
        **run.loop,
    }
    start = time.monotonic()
    out = {"run": run.name, "strategy": run.strategy, "wire": run.wire, "overrides": run.overrides, "loop": run.loop,
           "env": env}
    group = None
    count = out["spinners"] = max(0, (os.cpu_count() or 1) - world_size) if run.spinners == FILL else run.spinners
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        group = WorkerGroup(f"probe-{run.strategy}-{run.wire}", world_size, backend, gpus=gpus, env=env,
                            join_process_group=False)
        out["started_s"] = time.monotonic() - start
        out["ranks"] = group.run(WORKER, kwargs, timeout_s=settings.timeout_s, what=run.name)
    except WorkerError as exc:
        out["error"] = str(exc)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
        if group is not None:
            # the workers take seconds to exit: let them while the next group starts
            t = threading.Thread(target=group.close, daemon=True)
            t.start()
            closers.append(t)
    out["wall_s"] = time.monotonic() - start
    return out


# ---- reading ------------------------------------------------------------------------------


def _ms(s):
    return "-" if s is None else f"{s * 1e3:7.1f}"


def facts(result: dict, peak, local_by_strategy: dict) -> dict | None:
    """The figures of one run, from its ranks' records (every rank holds the same step times)."""
    ranks = result.get("ranks")
    if not ranks:
        return None
    r0 = ranks[0]
    f = {
        "tokens_per_s": min(r["tokens_per_s"] for r in ranks),
        "tokens_min": r0["tokens_per_s_min"],
        "tokens_max": r0["tokens_per_s_max"],
        "ci_halfwidth": r0["step_time_ci_halfwidth"],
        "steps": r0["timed_steps"],
        "stop": r0["stop_reason"],
        "step_s": r0["step_time_median_s"],
        "peak_gib": max((r["peak_allocated_bytes"] or 0) for r in ranks) / 2**30,
        "state_gib": max(sum(r["model_state_bytes"].values()) for r in ranks) / 2**30,
        "buffers_gib": max(r.get("comm_buffer_bytes", 0) for r in ranks) / 2**30,
        "mfu": figures.mfu(r0["achieved_flops_per_gpu"], peak.flops) if peak else None,
        "phases": r0["phase_s"],
        "settings": r0["settings"],
        "profile": r0.get("profile"),
        "host": [r.get("host") or {} for r in ranks],
        "micro_batch": r0["micro_batch"],
        "world_size": r0["world_size"],
        "setup_profile": r0.get("setup_profile") or {},
    }
    local = r0.get("local_step_time_median_s") or local_by_strategy.get(result["strategy"])
    f["local_s"] = local
    f["exposed_s"] = None if local is None else f["step_s"] - local
    return f


def describe(result: dict, f: dict | None) -> list[str]:
    if f is None:
        return [f"{result['run']}: FAILED after {result['wall_s']:.0f} s", "  " + (result.get("error") or "")[-1500:]]
    mfu = "-" if f["mfu"] is None else f"{f['mfu']:.1%}"
    gaps = ", ".join(f"{g:.2f}" for g in (f["profile"] or {}).get("largest_gaps_ms", [])[:3])
    lines = [
        f"{result['run']}: {f['tokens_per_s']:,.0f} tokens/s (min {f['tokens_min']:,.0f}, max {f['tokens_max']:,.0f}; "
        f"median +-{(f['ci_halfwidth'] or 0) * 100:.1f} % at 95 %, {f['steps']} steps, {f['stop']}) "
        f"step {_ms(f['step_s']).strip()} ms, local {_ms(f['local_s']).strip()} ms, exposed {_ms(f['exposed_s']).strip()} ms; "
        f"MFU {mfu}; peak {f['peak_gib']:.1f} GiB, state {f['state_gib']:.2f} GiB"
        f" (+ buckets {f['buffers_gib']:.2f}); wall {result['wall_s']:.0f} s "
        + " ".join(f"{k} {v:.1f}" for k, v in f["phases"].items()),
        f"  settings: {f['settings']}",
        "  host: " + "; ".join(
            f"rank {i} gc {h.get('gc_collections')}x {_ms(h.get('gc_s')).strip()} ms, python loop "
            f"{_ms(h.get('python_loop_s')).strip()} ms" for i, h in enumerate(f["host"]))
        + f"; steal {((f['host'][0].get('steal_fraction') or 0) * 100):.2f} %",
    ]
    p = f["profile"]
    if p and p.get("events"):
        lines.append(
            f"  profile ({p['timeline']}, per step, GPU busy {p['busy_ms'] / p['window_ms']:.0%}): window {p['window_ms']:.1f} ms = busy {p['busy_ms']:.1f} + idle "
            f"{p['idle_ms']:.1f} ({p['idle_gaps']:.0f} gaps > 20 us, largest {gaps}); "
            f"compute {p['compute_ms']:.1f} (copies {p['copy_ms']:.1f}), NCCL {p['comm_ms']:.1f}, NCCL not under compute {p['comm_only_ms']:.1f}"
        )
        for t in p["top"][:6]:
            lines.append(f"    {t['ms']:8.2f} ms {t['calls']:6.1f}x {t['kind']:7} {t['name']}")
    for view, rows in (f["setup_profile"] or {}).items():
        lines.append(f"  set-up by {view} time: cumulative s (own s, calls) function")
        for row in rows:
            lines.append(f"    {row['cumulative_s']:7.2f} ({row['own_s']:6.2f}, {row['calls']:>6}) {row['function']}")
    return lines


def _micro_batch(result: dict, f: dict | None):
    return f["micro_batch"] if f else result.get("loop", {}).get("micro_batch")


def targets_table(results: list[tuple[dict, dict | None]]) -> list[str]:
    """Each NVLink run over DDP's table-settings run at the same micro-batch."""
    bases = {f["micro_batch"]: f for r, f in results
             if f and r["strategy"] == REFERENCE and r["wire"] == NVLINK and not r["overrides"] and not r.get("spinners")}
    if not bases:
        return ["targets: no DDP reference run on NVLink"]
    lines = ["targets on NVLink (DDP table settings: " + ", ".join(
        f"{b['tokens_per_s']:,.0f} tokens/s at micro-batch {mb} on {b['world_size']} GPUs" for mb, b in bases.items()) + "):"]
    for r, f in results:
        if r["wire"] != NVLINK or r.get("spinners") or r["strategy"] == REFERENCE and not r["overrides"]:
            continue
        base = bases.get(_micro_batch(r, f))
        if f is None or base is None:
            lines.append(f"  {r['run']:70} {'failed' if f is None else 'no DDP run at its micro-batch'}")
            continue
        ratio = f["tokens_per_s"] / base["tokens_per_s"]
        target = TARGETS.get(r["strategy"])
        verdict = "" if target is None else ("MET" if ratio >= target else "missed") + f" (>= {target}x)"
        lines.append(f"  {r['run']:70} {ratio:5.2f}x DDP  {verdict}")
    slow = {r["strategy"]: f for r, f in results if f and r["wire"] == HOST and not r["overrides"]}
    fast = {r["strategy"]: f for r, f in results if f and r["wire"] == NVLINK and not r["overrides"]}
    if slow:
        lines.append("NVLink over host path, table settings (slow-wire slowdown; exposed ms NVLink -> host):")
        for s in NAMES:
            if s in slow and s in fast:
                lines.append(f"  {s:6} {fast[s]['tokens_per_s'] / slow[s]['tokens_per_s']:5.2f}x   "
                             f"exposed {_ms(fast[s]['exposed_s']).strip()} -> {_ms(slow[s]['exposed_s']).strip()} ms")
    busy = [(r, f) for r, f in results if f and r.get("spinners")]
    if busy:
        lines.append("a busier host (tokens/s beside spinners over the same run quiet; python loop quiet -> busy):")
        quiet = {(r["strategy"], f["micro_batch"]): f for r, f in results if f and not r.get("spinners")}
        for r, f in busy:
            q = quiet.get((r["strategy"], f["micro_batch"]))
            if q is None:
                continue
            loop = lambda g: max(h.get("python_loop_s") or 0 for h in g["host"]) * 1e3  # noqa: E731
            lines.append(f"  {r['strategy']:6} micro-batch {f['micro_batch']:3}: {f['tokens_per_s'] / q['tokens_per_s']:5.2f}x "
                         f"({q['tokens_per_s']:,.0f} -> {f['tokens_per_s']:,.0f}); python loop {loop(q):.1f} -> {loop(f):.1f} ms")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="probe-out", help="folder for probe.jsonl and probe-summary.txt")
    parser.add_argument("--budget", type=float, default=270.0, help="seconds after which no new run is started")
    parser.add_argument("--simulate", action="store_true", help="CPU/gloo with the simulated (toy) settings")
    parser.add_argument("--plan", choices=("targets", "noise", "host", "setup", "zero3", "contention"), default="targets",
                        help="targets: the table and its open choices; noise: repeats with and without manual GC; "
                             "host: host overhead per strategy at micro-batch 4, 8 and 16 (meant for --gpus 1); "
                             "setup: each strategy's set-up under cProfile; zero3: ZeRO-3's run-to-run spread and its host-work choices; "
                             "contention: DDP, ZeRO-3 and FSDP at micro-batch 8 and 16, quiet and beside busy processes")
    parser.add_argument("--gpus", type=int, default=2, help="ranks (one GPU each; gloo processes with --simulate)")
    parser.add_argument("--only", default="", help="comma-separated run names or strategies to keep")
    parser.add_argument("--thresholds", default=str(Path(__file__).resolve().parents[2] / "thresholds.yaml"))
    args = parser.parse_args(argv)

    thresholds = load_thresholds(args.thresholds)
    settings = thresholds.training_settings(args.simulate)
    limits = thresholds.training_limits(args.simulate)
    backend, gpus = ("gloo", None) if args.simulate else ("nccl", tuple(range(args.gpus)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {"noise": plan_noise, "host": plan_host, "setup": plan_setup, "zero3": plan_zero3, "contention": plan_contention,
            "targets": plan}[args.plan]()
    if args.only:
        keep = set(args.only.split(","))
        runs = [r for r in runs if r.strategy in keep or r.name in keep]
    for r in runs:
        resolve_settings(r.strategy, asdict(settings.model), r.overrides)  # a typo fails here, not on the GPUs

    prepared = bytecode.prepare()  # as the suite does before its first worker (wirecheck/workers/bytecode.py)
    if prepared is not None:
        print(f"probe: {prepared.describe()}", flush=True)
    env_switches = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM"))}
    print(f"probe: {len(runs)} runs planned, budget {args.budget:.0f} s, backend {backend}, env {env_switches}", flush=True)
    t0 = time.monotonic()
    results, closers, skipped, local = [], [], [], {}
    peak = None
    jsonl = (out / "probe.jsonl").open("w")
    for run in runs:
        if time.monotonic() - t0 + EXPECTED_RUN_S * (0.2 if args.simulate else 1) > args.budget:
            skipped.append(run.name)
            continue
        result = run_one(run, settings, backend, args.gpus, gpus, closers)
        jsonl.write(json.dumps(result, default=str) + "\n")
        jsonl.flush()
        if peak is None and result.get("ranks"):
            peak = limits.peak_flops(result["ranks"][0]["device_name"], settings.precision)
            known = "unknown" if peak is None else f"{peak.flops / 1e12:.0f} TFLOP/s ({peak.source})"
            print(f"probe: {result['ranks'][0]['device_name']}, dense peak {known}", flush=True)
        if result.get("ranks") and run.local:
            local[run.strategy] = result["ranks"][0].get("local_step_time_median_s")
        f = facts(result, peak, local)
        results.append((result, f))
        print("\n".join(describe(result, f)), flush=True)
    for t in closers:
        t.join(timeout=15)
    summary = ["", f"probe: {len(results)} runs in {time.monotonic() - t0:.0f} s; skipped for the budget: {skipped or 'none'}"]
    summary += targets_table(results)
    summary += ["", "per run:"] + [line for r, f in results for line in describe(r, f)[:1]]
    text = "\n".join(summary)
    print(text, flush=True)
    (out / "probe-summary.txt").write_text(text + "\n")
    return 0 if all(f for _, f in results) else 1


if __name__ == "__main__":
    sys.exit(main())
