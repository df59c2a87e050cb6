"""The GPU health checks' helpers on a GPU node (run by gpu_health_check.sh):

  plain OUT.json        a plain torch loop of the operations the GPU health checks time, on every
                        visible GPU one after the other: a 4 GiB device copy (read+write counted),
                        a sum over 4 GiB, bf16 GEMM 8192 and fp8 e4m3 (torch._scaled_mm) where the
                        GPU has it; each timed as one loop between two CUDA events (not the suite's
                        per-call median), sizes from thresholds.yaml gpu_health.hardware
  busy SECONDS          a foreign process: a bf16 GEMM loop on GPU 0 for SECONDS ("busy: started" once it computes)
  compare PLAIN.json RECORD.jsonl
                        per GPU: the suite's figures beside the plain loop's (target: >= 0.97 x), the
                        GPU load's phase wall times, the memory test's coverage and wall time, and the
                        sustained load second by second with the NVML samples beside it
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = 0.97


def _settings():
    sys.path.insert(0, str(ROOT / "src"))
    from wirecheck.thresholds.file import load_thresholds

    return load_thresholds(ROOT / "thresholds.yaml").gpu_health.settings(False)


def _loop(torch, op, warmup: int, iters: int) -> float:
    """Seconds per call of `op`: `iters` calls between two events after `warmup` untimed ones."""
    for _ in range(warmup):
        op()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        op()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def plain(out: str) -> int:
    import torch

    s = _settings()
    results = {}
    for d in range(torch.cuda.device_count()):
        with torch.cuda.device(d):
            words = s.hbm_size // 4
            src = torch.ones(words, dtype=torch.float32, device="cuda")
            dst = torch.empty_like(src)
            copy = 2 * words * 4 / _loop(torch, lambda: dst.copy_(src), s.hbm_warmup_iters, s.hbm_iters)
            del dst
            read = words * 4 / _loop(torch, lambda: src.sum(), s.hbm_warmup_iters, s.hbm_iters)
            del src
            torch.cuda.empty_cache()
            n = s.gemm_n
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty_like(a)
            bf16 = 2 * n**3 / _loop(torch, lambda: torch.matmul(a, b, out=c), s.gemm_warmup_iters, s.gemm_iters)
            fp8 = None
            if torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "_scaled_mm"):
                a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
                one = torch.ones((), dtype=torch.float32, device="cuda")
                fp8 = 2 * n**3 / _loop(torch, lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16),
                                       s.gemm_warmup_iters, s.gemm_iters)
            del a, b, c
            torch.cuda.empty_cache()
        results[d] = {"name": torch.cuda.get_device_name(d), "hbm_copy": copy, "hbm_read": read, "gemm_bf16": bf16,
                      "gemm_fp8": fp8}
        print(f"plain loop GPU{d} ({results[d]['name']}): HBM copy {copy / 1e9:.1f} GB/s (read+write), read "
              f"{read / 1e9:.1f} GB/s; bf16 {n} {bf16 / 1e12:.1f} TFLOP/s; fp8 "
              + (f"{fp8 / 1e12:.1f} TFLOP/s" if fp8 else "not on this GPU"))
    Path(out).write_text(json.dumps({"torch": torch.__version__, "gpus": results}, indent=1))
    return 0


def busy(seconds: str) -> int:
    import torch

    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    end = time.time() + float(seconds)
    a @ a
    torch.cuda.synchronize()
    print("busy: started", flush=True)
    while time.time() < end:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
    return 0


def _records(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _per_s(part, key=None):
    if not part or "error" in part or "unsupported" in part:
        return None
    return (part[key] if key else part["throughput"])["per_s"]


def compare(plain_path: str, record_path: str) -> int:
    plain_gpus = json.loads(Path(plain_path).read_text())["gpus"] if Path(plain_path).is_file() else {}
    recs = _records(record_path)
    by_kind: dict[str, dict[int, dict]] = {}
    for r in recs:
        if r.get("type") == "measurement" and str(r.get("kind", "")).startswith("gpu_"):
            by_kind.setdefault(r["kind"], {})[r["details"].get("gpu")] = r["details"]
    status = 0
    print(f"\n== the suite's figures beside the plain torch loop (target: suite >= {TARGET} x plain)")
    print(f"{'GPU':>4}  {'figure':<14} {'plain loop':>11} {'suite':>11}  {'ratio':>6}")
    for gpu, d in sorted(by_kind.get("gpu_figures", {}).items()):
        r = d.get("result") or {}
        suite = {"hbm_copy": _per_s(r.get("hbm"), "copy"), "hbm_read": _per_s(r.get("hbm"), "read"),
                 "gemm_bf16": _per_s(r.get("gemm_bf16")), "gemm_fp8": _per_s(r.get("gemm_fp8"))}
        # the plain loop ran on CUDA's device index; NVML index = CUDA index where every GPU is visible
        p = plain_gpus.get(str(gpu)) or {}
        for figure, value in suite.items():
            scale, unit = (1e9, "GB/s") if figure.startswith("hbm") else (1e12, "TFLOP/s")
            base = p.get(figure)
            ratio = value / base if value and base else None
            flag = "" if ratio is None or ratio >= TARGET else "  < target"
            if flag:
                status = 1
            shown = [f"{v / scale:.1f}" if v else "-" for v in (base, value)]
            print(f"{gpu:>4}  {figure:<14} {shown[0]:>11} {shown[1]:>11}  "
                  f"{f'{ratio:.3f}' if ratio is not None else '-':>6} {unit}{flag}")
        bf16 = r.get("gemm_bf16") or {}
        if bf16.get("throughput"):
            t = bf16["throughput"]
            print(f"      bf16 per call: median {t['median_s'] * 1e3:.3f} ms, best {t['min_s'] * 1e3:.3f} ms, "
                  f"worst {t['max_s'] * 1e3:.3f} ms over {t['calls']}; math: {bf16['math']}")
    print("\n== the GPU load's phases (every GPU at once; wall time from the parent)")
    for kind in ("gpu_figures", "gpu_sustained", "gpu_memory"):
        walls = {g: d.get("wall_s") for g, d in by_kind.get(kind, {}).items()}
        if walls:
            print(f"  {kind[4:]:<10} {max(w for w in walls.values() if w is not None):6.1f} s")
    print("\n== memory pattern test")
    for gpu, d in sorted(by_kind.get("gpu_memory", {}).items()):
        r = d.get("result") or {}
        if "bytes_covered" not in r:
            print(f"  GPU{gpu}: {r.get('error') or d.get('error')}")
            continue
        wrong = sum(p["mismatched_words"] for p in r["patterns"])
        print(f"  GPU{gpu}: {r['bytes_covered'] / 2**30:.1f} GiB of {r['free_bytes'] / 2**30:.1f} GiB free "
              f"({100 * r['bytes_covered'] / r['free_bytes']:.1f} %), {len(r['patterns'])} pattern passes, "
              f"{wrong} wrong words, {r['wall_s']:.2f} s  ("
              + ", ".join(f"{p['pattern']} {p['seconds']:.2f} s" for p in r["patterns"]) + ")")
    for gpu, d in sorted(by_kind.get("gpu_sustained", {}).items()):
        r, nvml = d.get("result") or {}, d.get("nvml") or {}
        windows = r.get("windows") or []
        print(f"\n== sustained load on GPU{gpu}: {len(windows)} windows; NVML limits {nvml.get('limits')}; "
              f"throttle time during the load (ns) {nvml.get('violations_ns')}; unreadable {nvml.get('unsupported')}")
        print(f"{'t s':>9} {'TFLOP/s':>8} {'SM MHz':>7} {'mem MHz':>7} {'W':>6} {'°C':>4} {'util':>4}  reasons")
        samples = nvml.get("samples") or []
        t_start = windows[0]["t0"] if windows else 0
        for w in windows:
            inside = [s for s in samples if w["t0"] <= s["t"] <= w["t1"]]

            def mean(key, inside=inside):
                values = [s[key] for s in inside if s.get(key) is not None]
                return f"{statistics.mean(values):.0f}" if values else "-"

            def peak(key, inside=inside):
                values = [s[key] for s in inside if s.get(key) is not None]
                return f"{max(values):.1f}" if values else "-"

            mask = 0
            for s in inside:
                mask |= s.get("reasons") or 0
            print(f"{w['t0'] - t_start:4.1f}-{w['t1'] - t_start:4.1f} {w['flops_per_s'] / 1e12:8.1f} {mean('sm_mhz'):>7} "
                  f"{mean('mem_mhz'):>7} {peak('power_w'):>6} {peak('temperature_c'):>4} {mean('utilization_pct'):>4}  "
                  f"0x{mask:x}" + (f"  wrong {w['mismatched_elements']}" if w["mismatched_elements"] else ""))
    verdicts = [r for r in recs if r.get("type") == "verdict"]
    failed = [v for v in verdicts if v["outcome"] == "fail"]
    print(f"\n== verdicts: {sum(v['outcome'] == 'pass' for v in verdicts)} passed, {len(failed)} failed, "
          f"{sum(v['outcome'] == 'skip' for v in verdicts)} skipped")
    for v in failed:
        print(f"  FAIL {v['check']} {v.get('where')}: {v['message'][:400]}")
    return status


def main(argv: list[str]) -> int:
    commands = {"plain": plain, "busy": busy, "compare": compare}
    if not argv or argv[0] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[argv[0]](*argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
