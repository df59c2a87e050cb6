"""A plan as the command prints it: one line per group, the total, what costs most; and as JSON."""

from __future__ import annotations

from wirecheck.core.levels import BURN_IN
from wirecheck.plan.model import K_TEST, Group, Plan

SINGULAR = {"worker group starts": "worker group start", "collective sizes": "collective size",
            "benchmark rounds": "benchmark round", "NCCL path probes": "NCCL path probe",
            "NCCL path reads": "NCCL path read",
            "copy-bandwidth measurements": "copy-bandwidth measurement", "strategy runs": "strategy run",
            "GPU load phases": "GPU load phase", "ops": "op", "dtypes": "dtype", "reductions": "reduction",
            "strategies": "strategy", "GPUs": "GPU",
            "variants": "variant", "placements": "placement"}


def _counted(n: int, plural: str) -> str:
    return f"{n} {SINGULAR.get(plural, plural) if n == 1 else plural}"


def params_text(g: Group) -> str:
    """`6 placements x 5 ops`: what the group's tests are parametrized over."""
    parts = [_counted(len(g.placements), "placements")] if len(g.placements) > 1 else []
    # A collective axis test (ops x their dtypes and reductions): its combinations, not a product. A GEMM's
    # dtypes are no collective axis: they count as they are.
    axes = "ops" in g.params and ("dtypes" in g.params or "reductions" in g.params)
    parts += [_counted(len(values), kind) for kind, values in g.params.items()
              if values != {"none"} and not (axes and kind in ("dtypes", "reductions"))]
    if axes:
        parts[-1] += "' other dtypes and reductions"
    return " x ".join(parts)


def work_text(g: Group) -> str:
    parts = []
    for kind, n in g.work.items():
        if kind == K_TEST:
            continue
        text = _counted(n, kind)
        if kind == "collective sizes" and len(g.sizes) == 1:
            text += f" ({next(iter(g.sizes))} a sweep)"
        parts.append(text)
    if parts:
        return ", ".join(parts)
    if g.skips:
        return g.skips
    if g.uses:
        names = list(g.uses)
        return "reads what " + ", ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "") + " measured"
    return "checks only (NVML, sysfs, the topology)" if g.known else "unknown to the model: pytest's share only"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def describe_node(plan: Plan) -> str:
    header = plan.header
    return f"{header.get('fabric') or 'no fabric'}, {_counted(len(header.get('gpus') or []), 'GPUs')}"


def slowest_priced_lines(plan: Plan) -> list[str]:
    """Which ops' sizes the plan priced at the thresholds' slowest floor, and how to price them as the node would."""
    by_op: dict[tuple[str, float], list[str]] = {}
    for op, klass, n_gpus, busbw in plan.slowest_priced:
        by_op.setdefault((op, busbw), []).append(f"{klass} {n_gpus}gpu")
    if not by_op:
        return []
    ops = "; ".join(f"{op} on {', '.join(where)} at {busbw / 1e9:.1f} GB/s" for (op, busbw), where in by_op.items())
    return [f"  priced at the thresholds' slowest floor (nothing measured, no table floor, no hardware in the topology "
            f"to derive one): {ops}",
            "  for the node's own price: --profile NAME, or --simulate a snapshot (`wirecheck topo --save`) "
            "instead of a `topo -m` text"]


def text(plan: Plan) -> list[str]:
    lines = [f"wirecheck plan: level {plan.level} on {plan.source} ({describe_node(plan)}): {plan.tests} tests in "
             f"{len(plan.groups)} groups",
             f"  {'seconds':>8}  {'group (tests: parameters)':58} work"]
    lines.append(f"  {plan.session_s:8.1f}  {'session: pytest starting and ending':58}")
    for g in plan.groups:
        label = f"{g.name} ({_counted(g.tests, 'tests') if g.tests != 1 else '1 test'}" + (
            f": {params_text(g)})" if params_text(g) else ")")
        lines.append(f"  {g.total_s:8.1f}  {label:58} {work_text(g)}")
    total = plan.total_s
    lines.append(f"  {total:8.1f}  total ({_minutes(total)})")
    kinds = plan.by_kind()
    lines.append("  most of it: " + "; ".join(
        f"{kind} {seconds:.0f} s ({_counted(count, kind) if kind != K_TEST else f'{count} tests'}, "
        f"{seconds / total:.0%})" for kind, (count, seconds) in list(kinds.items())[:4]))
    starts = kinds.get("worker group starts", (0, 0.0))[0]
    if starts and plan.costs.cold:
        lines.append(f"  worker group starts at {plan.costs.group_start_s:.1f} s each, without the bytecode cache")
    elif starts and plan.costs.group_start_cold_s:
        lines.append(f"  worker group starts at {plan.costs.group_start_s:.1f} s each with the bytecode cache "
                     f"({plan.costs.group_start_cold_s:.1f} s without it: --without-bytecode-cache)")
    if plan.unknown:
        lines.append(f"  {sum(g.tests for g in plan.unknown)} tests unknown to the model (priced at pytest's share only): "
                     + ", ".join(g.function for g in plan.unknown))
    lines += slowest_priced_lines(plan)
    rounds, seconds = plan.rounds_if_kept
    if rounds:
        lines += ["  pytest-benchmark's rounds beyond each sweep's own: made only where the run keeps or compares them",
                  f"    (--benchmark-autosave, -save, -json, -compare, -histogram, -csv: the nightly): "
                  f"+{_counted(rounds, 'benchmark rounds')}, +{seconds:.1f} s (--benchmark-kept)"]
    if plan.level == BURN_IN:
        duration = plan.header.get("duration_s")
        lines.append(f"  the burn-in's rounds for its --duration ({duration:g} s), the memory test after each "
                     "(gpu_health.*.burn_in), then its verdicts" if duration else
                     "  the burn-in's rounds last its --duration (none was given)")
    lines.append(f"  unit costs: {plan.costs.path} ({len(plan.costs.records)} recorded runs"
                 + (", worker starts without the bytecode cache)" if plan.costs.cold else ")"))
    return lines


def as_json(plan: Plan) -> dict:
    return {
        "level": plan.level,
        "source": plan.source,
        "fabric": plan.header.get("fabric"),
        "gpus": len(plan.header.get("gpus") or []),
        "tests": plan.tests,
        "session_s": round(plan.session_s, 2),
        "total_s": round(plan.total_s, 1),
        "groups": [{"name": g.name, "module": g.module, "function": g.function, "class": g.klass, "n_gpus": g.n_gpus,
                    "tests": g.tests, "placements": sorted(g.placements),
                    "params": {kind: sorted(values) for kind, values in g.params.items()},
                    "work": {kind: n for kind, n in g.work.items()}, "reads": list(g.uses),
                    "seconds": round(g.total_s, 2), "known": g.known} for g in plan.groups],
        "by_kind": {kind: {"count": count, "seconds": round(seconds, 1)} for kind, (count, seconds) in plan.by_kind().items()},
        "rounds_if_kept": {"count": plan.rounds_if_kept[0], "seconds": round(plan.rounds_if_kept[1], 1)},
        "slowest_floor_priced": [{"op": op, "class": klass, "n_gpus": n, "busbw_GBps": round(bw / 1e9, 2)}
                                 for op, klass, n, bw in plan.slowest_priced],
        "unit_costs": str(plan.costs.path),
        "unit_cost_sources": dict(plan.costs.sources),
    }
