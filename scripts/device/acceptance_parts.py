"""Where each one-GPU acceptance run's time went, from its records: one line per record.

    python3 scripts/device/acceptance_parts.py RECORD.jsonl ...

Per record: the run's own seconds (the end line's wall_s), the GPU figures' phase (the pool's start and the
figures), the sustained load's phase and its median window, the aside the load ran in its shadow (the one-GPU
training's preparation: its seconds, the window it hid behind, the device's gap after that window, its error),
the memory pass, the host copies, and the one-GPU training (its set-up, warm-up and timed phases, each warm-up
step, the timed steps' count and tokens/s). Reads the records only; no torch, no GPU.
"""

from __future__ import annotations

import json
import statistics
import sys


def parts(path: str) -> str:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    end = next((r for r in rows if r.get("type") == "end"), {})
    durations = end.get("test_durations_s") or {}
    kinds = {r.get("kind"): r for r in rows if r.get("type") == "measurement"}
    out = [f"{path}: run {end.get('wall_s')} s"]
    figures = kinds.get("gpu_figures", {}).get("details", {})
    out.append(f"figures {figures.get('wall_s', 0):.2f} s")
    sustained = kinds.get("gpu_sustained", {}).get("details", {})
    result = sustained.get("result") or {}
    windows = [w["flops_per_s"] for w in result.get("windows", []) if w.get("flops_per_s")
               and w["seconds"] >= 0.5 * result.get("window_s", 1)]
    median = statistics.median(windows) / 1e12 if windows else 0.0
    out.append(f"sustained {sustained.get('wall_s', 0):.2f} s ({median:.1f} TFLOP/s, {len(windows)} windows)")
    aside = result.get("aside")
    if aside:
        prepared = aside.get("result") or {}
        where = ""
        if aside.get("windows"):  # the windows it overlapped: their TFLOP/s against the load's median
            first, last = aside["windows"]
            during = [w["flops_per_s"] / 1e12 for w in result["windows"][first:last + 1] if w.get("flops_per_s")]
            where = (f" beside windows {first}-{last} ({min(during):.1f}-{max(during):.1f} TFLOP/s)" if during else
                     f" beside windows {first}-{last}")
        elif "window" in aside:  # the first version: behind one window, and the device's gap after it
            where = f" behind window {aside['window']}, gap {(aside.get('gap_s') or 0) * 1e3:.1f} ms"
        out.append(f"aside {aside['seconds']:.2f} s (set-up {prepared.get('setup_s', 0):.2f}){where}"
                   + (f", error {aside['error']}" if aside.get("error") else ""))
    else:
        out.append("no aside")
    memory = kinds.get("gpu_memory", {}).get("details", {})
    out.append(f"memory {memory.get('wall_s', 0):.2f} s")
    copies = sum(s for t, s in durations.items() if "test_copy_bandwidth" in t)
    out.append(f"copies {copies:.2f} s")
    training = kinds.get("single_gpu_training", {}).get("details", {})
    rank = (training.get("ranks") or [{}])[0]
    phases = rank.get("phase_s") or {}
    steps = ", ".join(f"{s:.3f}" for s in rank.get("warmup_step_s") or [])
    test_s = next((s for t, s in durations.items() if "test_single_gpu_training" in t), 0.0)
    out.append(f"training {test_s:.2f} s (set-up {phases.get('setup', 0):.2f}, warm-up {phases.get('warmup', 0):.2f} "
               f"[{steps}], timed {phases.get('timed', 0):.2f} over {rank.get('timed_steps')} steps, "
               f"{rank.get('tokens_per_s', 0):.0f} tokens/s, in the {training.get('workers')} worker)")
    return "; ".join(out)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 4
    for path in argv:
        print(parts(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
