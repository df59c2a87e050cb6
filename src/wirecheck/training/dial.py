"""The strategy dial as text (printed with -v by tests/test_strategies.py::test_staircase): each
strategy on one placement with the figures that explain it: spread of the timed steps, scaling
against one GPU alone (training/scaling.py), MFU, the communication the step could not hide,
peak memory, model state against the memory model, the first loss, and the host's Python speed
(host-bound strategies follow it: training/host.py). No torch.

`runs`: strategy name -> a strategy run (rank0, ranks, tokens_per_s, worst(key), mfu(limits,
precision), exposed_comm_s, model_state_bytes); `baseline`: the one-GPU run (SingleGpuRun) or
None when none was made before the dial.
"""

from __future__ import annotations

from wirecheck.core.quantity import format_bytes
from wirecheck.training.memory_model import predict
from wirecheck.training.scaling import scaling_efficiency

NO_BASELINE = ("scaling (tokens/s per GPU / one GPU alone): n/a, test_single_gpu_training did not run first "
               "(select it too: -k 'single_gpu or ...')")


def _python_loop(run) -> str:
    """The slowest rank's pure-Python loop time before the steps (records before 2026-12-01 lack it)."""
    loops = [(r.get("host") or {}).get("python_loop_s") for r in run.ranks]
    loops = [t for t in loops if t is not None]
    return f"{max(loops) * 1e3:.1f} ms" if loops else "n/a"


def baseline_line(baseline, limits, precision: str) -> str:
    """The one-GPU figure the scaling column divides by, or why there is none."""
    if baseline is None:
        return NO_BASELINE
    mfu = baseline.mfu(limits, precision)
    return (f"scaling = tokens/s per GPU / one GPU alone on {baseline.placement.id}: {baseline.tokens_per_s:,.0f} "
            f"tokens/s" + (f", MFU {mfu:.1%}" if mfu is not None else ""))


def dial_table(runs: dict, n_gpus: int, limits, precision: str, baseline=None) -> str:
    """The dial of one placement of `n_gpus` GPUs; `limits`: the thresholds' TrainingLimits (MFU's peak)."""
    rows = [baseline_line(baseline, limits, precision),
            f"{'strategy':8} {'tokens/s (min-max)':>25} {'+-CI':>6} {'steps':>9} {'scaling':>7} {'MFU':>6} "
            f"{'exposed ms':>11} {'peak':>10} {'state meas / pred':>22} {'loss 1':>8} {'py loop':>8}"]
    for s, run in runs.items():
        r0 = run.rank0
        pred = predict(s, r0["n_params"], n_gpus, accounting="implementation", precision=precision).total
        peak, mfu, exposed = run.worst("peak_allocated_bytes"), run.mfu(limits, precision), run.exposed_comm_s
        spread = f"{run.tokens_per_s:,.0f} ({r0.get('tokens_per_s_min', 0):,.0f}-{r0.get('tokens_per_s_max', 0):,.0f})"
        ci = r0.get("step_time_ci_halfwidth")
        exposed_text = "n/a" if exposed is None else f"{exposed * 1e3:.1f} ({exposed / r0['step_time_median_s']:.0%})"
        scaling = scaling_efficiency(run.tokens_per_s, n_gpus, baseline.tokens_per_s if baseline else None)
        rows.append(f"{s:8} {spread:>25} {(f'{ci:.1%}' if ci is not None else 'n/a'):>6} "
                    f"{str(r0.get('timed_steps', len(r0['step_times_s']))) + ' ' + str(r0.get('stop_reason', ''))[:8]:>9} "
                    f"{(f'{scaling:.0%}' if scaling is not None else 'n/a'):>7} "
                    f"{(f'{mfu:.1%}' if mfu is not None else 'n/a'):>6} {exposed_text:>11} "
                    f"{format_bytes(peak) if peak else 'n/a':>10} "
                    f"{format_bytes(run.model_state_bytes) + ' / ' + format_bytes(pred):>22} {r0['losses'][0]:8.4f} "
                    f"{_python_loop(run):>8}")
    return "\n".join(rows)
