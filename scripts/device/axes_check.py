"""On a GPU node: every collective at every dtype and reduction, through the suite's own worker and NCCL.

    python scripts/device/axes_check.py [--ranks N] [--backend nccl|gloo] [--out FILE.json]

Each op of the vocabulary (wirecheck.vocab.ops) at each of its dtypes and reductions (nccl-tests' -d
and -o: fp32, bf16, fp16; sum, max, min, avg) runs `collective_worker.measure` on N ranks (default:
every GPU the node has, at most 8) at two sizes, one small and one at `graph_up_to` (64 MiB), so each
is timed as eager calls and as CUDA-graph replays and checked element by element on both paths. Then
a wrong element is put on a checked rank (selftests.faulty_workers.measure_corrupt) for a bf16 max
all_reduce and an fp16 avg reduce: it must be caught, one element, where it was put.

A 1-GPU node runs one-rank communicators: NCCL launches every dtype and reduction (avg included,
which some gloo builds refuse), the fills and expected values are computed on the GPU in each
dtype, both timing paths are captured and checked, and a wrong element is caught. What one rank
cannot show: a reduction across ranks (one rank's all_reduce is a copy), busbw against a floor
(the factor is 0 for all_reduce, all_gather, reduce_scatter and all_to_all on one rank), and
reduce's unchecked non-root ranks.

Prints one `RESULT <axes> PASS|FAIL ...` line per combination and per fault; exit status 1 if any
failed, 2 if no worker group could start. `--backend gloo` runs the same on CPU processes (a dry run
of this script, not a GPU check). The environment is passed through to the workers untouched.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEASURE = "wirecheck.measure.collective_worker:measure"
CORRUPT = "selftests.faulty_workers:measure_corrupt"
FAULTS = (("all_reduce", "bf16", "max"), ("reduce", "fp16", "avg"))
FLIP_INDEX = 5


def _gpu_count() -> int:
    from wirecheck.node import nvml

    return len(nvml.read_topology().gpus)


def _kwargs(a, sizes: list[int], graph_up_to: int | None) -> dict:
    kwargs = {"op": a.op, "sizes": sizes, "warmup_iters": 2, "iters": 5, "graph_up_to": graph_up_to,
              "graph_replays": 2}
    if not a.first:
        kwargs.update(dtype=a.dtype, reduction=a.reduction)
    return kwargs


def _judge(a, n: int, ranks: list[dict], graphs: bool) -> tuple[bool, str, list]:
    """(passed, what to print, the size results) of one combination."""
    from wirecheck.measure import collectives

    if ranks[0].get("refused"):
        return False, f"refused: {ranks[0]['refused']}", []
    results = collectives.combine(a.op, n, ranks)
    problems = [r.wrong_summary() or f"{r.bytes} B not checked" for r in results if not r.ok]
    if graphs:  # the small size and graph_up_to: both timed from a graph, or the note says why not
        problems += [f"{r.bytes} B: no graph time ({r.graph_note})" for r in results if r.graph_time_s is None]
    paths = ", ".join(f"{r.bytes} B {r.path} {r.time_s * 1e6:.1f} us" for r in results)
    return not problems, "; ".join(problems) or f"every element right on the ranks holding the result ({paths})", results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=None, help="ranks (GPUs) to run on (default: every GPU, at most 8)")
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument("--out", type=Path, help="every result as JSON")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT)]  # selftests.faulty_workers, in the workers too (they take the parent's sys.path)

    from wirecheck.measure import collectives
    from wirecheck.vocab import ops as vocab
    from wirecheck.workers.launcher import WorkerError, WorkerGroup

    gpu = args.backend == "nccl"
    n = args.ranks or (min(8, _gpu_count()) if gpu else 2)
    sizes, graph_up_to = ([4096, 64 << 20], 64 << 20) if gpu else ([4096, 65536], None)
    print(f"axes_check: {n} {args.backend} rank(s), sizes {sizes}, graphs up to {graph_up_to}", flush=True)
    out, failed = [], False
    t0 = time.monotonic()
    try:
        group = WorkerGroup("axes-check", n, args.backend, gpus=tuple(range(n)) if gpu else None)
    except WorkerError as exc:
        print(f"axes_check: no worker group: {exc}", flush=True)
        return 2
    with group:
        info = group.info[0] if group.info else {}
        print(f"axes_check: workers up in {time.monotonic() - t0:.1f} s (torch {info.get('torch')}, "
              f"{info.get('device_name')}, NCCL {info.get('nccl_version')})", flush=True)
        for op in vocab.OPS:
            for a in vocab.all_axes(op):
                started = time.monotonic()
                try:
                    ranks = group.run(MEASURE, _kwargs(a, sizes, graph_up_to), timeout_s=120, what=a.id)
                    ok, text, results = _judge(a, n, ranks, graphs=gpu)
                except WorkerError as exc:
                    ok, text, results = False, str(exc).splitlines()[0], []
                failed |= not ok
                print(f"RESULT {a.id} {'PASS' if ok else 'FAIL'} {time.monotonic() - started:.2f}s {text}", flush=True)
                out.append({"axes": a.id, "ok": ok, "text": text, "results": [r.as_dict() for r in results]})
        for op, dtype, reduction in FAULTS:
            a = vocab.axes(op, dtype, reduction)
            ranks = group.run(CORRUPT, {**_kwargs(a, [4096], None), "flip_index": FLIP_INDEX}, timeout_s=120,
                              what=f"{a.id} with a wrong element")
            (r,) = collectives.combine(op, n, ranks)
            bad = {rank: w for rank, w in r.wrong_by_rank.items() if w}
            ok = len(bad) == 1 and list(bad.values()) == [1] and list(r.first_bad_by_rank.values()) == [FLIP_INDEX]
            failed |= not ok
            print(f"RESULT fault:{a.id} {'PASS' if ok else 'FAIL'} caught: {r.wrong_summary()}", flush=True)
            out.append({"axes": f"fault:{a.id}", "ok": ok, "text": r.wrong_summary(), "results": [r.as_dict()]})
    print(f"axes_check: {sum(x['ok'] for x in out)} of {len(out)} passed in {time.monotonic() - t0:.1f} s", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"backend": args.backend, "ranks": n, "sizes": sizes, "results": out}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
