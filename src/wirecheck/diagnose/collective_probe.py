"""A collective that failed on k GPUs, localized: the collective repeated on the whole placement, then on
every pair inside it, each on its sub-group of the command's worker pool (wirecheck.workers.pool: one start
serves every probe; on GPUs NCCL logs each sub-group's set-up, the path a pair took), NVML's link counters
of the pair's GPUs read before and after each pair's load.

Who is named, in this order: a link whose CRC / replay / recovery counter grew under pair load beyond
what thresholds.yaml `health:` allows (the GPU and the link); a GPU common to every slow pair (below the
pair floor, or below the median of the pairs with its NV# by more than `collectives.pair_spread` allows);
the one slow pair (the link between them). For wrong data: the GPU whose output is wrong on every pair
with it, or the one pair that is wrong (its link).
"""

from __future__ import annotations

import statistics
import time

from wirecheck.checks.collectives import busbw as busbw_check, pair_spread
from wirecheck.core.quantity import format_bw, format_bytes
from wirecheck.core import render
from wirecheck.diagnose.context import MEASURE, Context, ProbeSet, gpus_set, pair_set, read_counters
from wirecheck.diagnose.findings import FOUND, NOT_LOCALIZED, NOT_REPRODUCED, Finding
from wirecheck.diagnose.plan import pairs_of
from wirecheck.diagnose.suspects import WRONG_COLLECTIVE, Suspect
from wirecheck.measure import collectives
from wirecheck.nccl import log as nccl_log, path as nccl_path
from wirecheck.measure.sweep import measure_kwargs
from wirecheck.node import health
from wirecheck.node.placement import CLASS_PAIR
from wirecheck.workers.deadlines import Deadline
from wirecheck.workers.launcher import WorkerError

GB = 1e9


def _pair_id(a: int, b: int) -> str:
    return pair_set(a, b).id


def probe_sets(s: Suspect) -> list[ProbeSet]:
    """The GPU sets the probe of `s` runs on (the worker pool makes a sub-group of each at its start): the
    suspect's placement, and every pair inside it."""
    if len(s.gpus) < 2:
        return []
    return [gpus_set(s.gpus), *(pair_set(a, b) for a, b in pairs_of(s.gpus))]


def _pair_name(a: int, b: int) -> str:
    return f"GPU{a}-GPU{b}"


def nccl_transport(texts: list[str | None]) -> str | None:
    """The path NCCL took between a pair, from its two ranks' log lines (nccl.log): the transports it
    connected with and NCCL's path type between the GPUs, e.g. "P2P/CUMEM/read, path NVL"; None without a log."""
    texts = [t for t in texts if t]
    if not texts:
        return None
    summary = nccl_log.summarize(texts)
    transports = sorted({f"{c['transport']}/{c['detail']}" for c in summary["connections"]})
    types = sorted(set(summary["path_types"].values()))
    if not transports and not types:
        return "NCCL logged no connection for this pair"
    return ", ".join(transports + [f"path {t}" for t in types])


def _grown(ctx: Context, before: dict, after: dict, gpus: tuple[int, ...], seconds: float) -> list[dict]:
    """The counters of `gpus` that grew beyond what the thresholds allow over `seconds`."""
    out = []
    for g in gpus:
        if g not in before or g not in after:
            continue
        found, _ = health.counter_deltas(before[g], after[g])
        for d in found:
            allowed = health.allowed_growth(d["kind"], seconds, ctx.thresholds.health)
            if d["grew_by"] > allowed:
                out.append({"gpu": g, **d, "allowed": allowed})
    return out


def _own_health(before: dict, after: dict, gpus: tuple[int, ...]) -> list[str]:
    """The GPUs' own figures over the probes: uncorrected ECC and remapped rows, where NVML reads them."""
    lines = []
    for g in gpus:
        b, a = before.get(g), after.get(g)
        if b is None or a is None:
            continue
        parts = []
        if isinstance(a.volatile_uncorrected_ecc, int):
            grew = a.volatile_uncorrected_ecc - (b.volatile_uncorrected_ecc if isinstance(b.volatile_uncorrected_ecc, int) else 0)
            parts.append(f"uncorrected ECC {a.volatile_uncorrected_ecc} (+{grew})")
        rows = a.remapped_rows
        if hasattr(rows, "failure"):
            parts.append(f"remapped rows {rows.correctable}+{rows.uncorrectable}"
                         f"{', remap failed' if rows.failure else ''}{', remap pending' if rows.pending else ''}")
        if parts:
            lines.append(f"GPU{g}: " + ", ".join(parts))
    return lines


class _Probe:
    def __init__(self, ctx: Context, s: Suspect):
        self.ctx, self.s = ctx, s
        self.settings = ctx.thresholds.collective_settings(ctx.simulated)
        self.size = self.settings.floor_size
        self.deadline = Deadline(self.settings.timeout_s, "collectives.settings timeout_s")

    def run(self) -> Finding:
        s, ctx = self.s, self.ctx
        if len(s.gpus) < 2:
            return Finding(s, NOT_LOCALIZED, evidence=[f"{s.where}: not a placement of two or more GPUs; no pair to split"])
        try:
            repeat = self._repeat()
            pairs = [self._pair(a, b) for a, b in pairs_of(s.gpus)]
            if s.kind != WRONG_COLLECTIVE:
                pairs = self._again(pairs)
        except WorkerError as exc:
            ctx.pool.close()  # the next probe starts a new pool
            return Finding(s, NOT_LOCALIZED, evidence=[f"the probe's worker group failed: {str(exc).splitlines()[0]}"])
        if s.kind == WRONG_COLLECTIVE:
            return self._wrong(repeat, pairs)
        return self._slow(repeat, pairs)

    # -- measuring --------------------------------------------------------------------------------

    def _measure(self, where: ProbeSet, op: str, what: str) -> list:
        """`op` at the floor size on `where`'s sub-group of the pool, every element checked (eager calls)."""
        return self.ctx.pool.shared(where).run(f"{self.ctx.collective_workers}:{MEASURE}",
                                               measure_kwargs(op, self.size, self.settings, graphs=False),
                                               self.deadline, what=what)

    def _repeat(self):
        s = self.s
        ranks = self._measure(gpus_set(s.gpus), s.op, f"{s.op} at {format_bytes(self.size)} (repeat)")
        (result,) = collectives.combine(s.op, len(s.gpus), ranks)
        return result

    def _pair(self, a: int, b: int) -> dict:
        op = self.s.op if self.s.kind == WRONG_COLLECTIVE else "all_reduce"  # the pair floors are all_reduce's
        before, unreadable = read_counters()
        t0 = time.monotonic()
        out = self._measure(pair_set(a, b), op, f"{op} at {format_bytes(self.size)} on {_pair_name(a, b)}")
        seconds = time.monotonic() - t0
        after, _ = read_counters()
        (result,) = collectives.combine(op, 2, out)
        return {"gpus": (a, b), "result": result, "nccl": self._nccl(a, b), "seconds": seconds,
                "grown": _grown(self.ctx, before, after, (a, b), seconds),
                "before": before, "after": after, "unreadable": unreadable,
                "wrong": {g: result.wrong_by_rank.get(i) for i, g in enumerate((a, b))}}

    def _nccl(self, a: int, b: int) -> str | None:
        """The path NCCL took between the pair: its sub-group's lines of NCCL's log (INIT, GRAPH, ENV: written
        when the pool made the communicator, so the timed calls log nothing); gloo has no such log."""
        if self.ctx.simulated:
            return None
        ranks = nccl_path.read_pool_log(self.ctx.pool, pair_set(a, b))
        return nccl_transport([r.get("text") for r in ranks])

    def _again(self, pairs: list[dict]) -> list[dict]:
        """Each pair that stands out measured once more, the faster of the two kept (bandwidth flutters; one
        more pair load costs a second, a wrongly named link a node), the counters of both loads counted."""
        slow = self._slow_pairs(pairs)
        out = []
        for p in pairs:
            if p["gpus"] in slow:
                q = self._pair(*p["gpus"])
                best = q if q["result"].busbw > p["result"].busbw else p
                p = {**best, "grown": p["grown"] + q["grown"], "before": p["before"], "measured": 2}
            out.append(p)
        return out

    # -- judging ----------------------------------------------------------------------------------

    def _pair_lines(self, pairs: list[dict]) -> list[str]:
        return [f"{_pair_name(*p['gpus'])} ({self.ctx.path(*p['gpus'])}"
                + (f"; NCCL: {p['nccl']}" if p.get("nccl") else "") + f"): {p['result'].op} busbw "
                f"{format_bw(p['result'].busbw)}" + (f", wrong elements {p['result'].wrong}" if p['result'].wrong else "")
                for p in pairs]

    def _figures(self, repeat, pairs: list[dict]) -> dict:
        return {"repeat": {"op": repeat.op, "bytes": repeat.bytes, "busbw_GBps": repeat.busbw / GB,
                           "wrong_by_rank": {str(k): v for k, v in repeat.wrong_by_rank.items()}},
                "pairs": {_pair_id(*p["gpus"]): {"busbw_GBps": p["result"].busbw / GB, "path": self.ctx.path(*p["gpus"]), "nccl": p.get("nccl"),
                                                  "wrong": {f"GPU{g}": w for g, w in p["wrong"].items()},
                                                  "counters_grown": p["grown"]} for p in pairs}}

    def _reproduced(self, repeat, pairs: list[dict]) -> bool | None:
        """Whether the repeat fails as the record did: busbw below the verdict's floor, or a quad below
        `group_scaling`'s share over its pairs; None where the failed check says nothing the repeat can
        be held against."""
        v, s = self.s.verdict, self.s
        low = (v.get("limit") or {}).get("min") if isinstance(v.get("limit"), dict) else None
        if s.check == "busbw" and isinstance(low, (int, float)):
            return repeat.busbw / GB < low
        if s.check == "group_scaling" and pairs:
            rule = self.ctx.thresholds.group_scaling
            return repeat.busbw / statistics.median(p["result"].busbw for p in pairs) < rule.quad_over_pair_min
        return None

    def _slow_pairs(self, pairs: list[dict]) -> dict[tuple[int, int], str]:
        ctx = self.ctx
        slow = {}
        by_nv: dict = {}
        for p in pairs:
            by_nv.setdefault(ctx.nv(*p["gpus"]), {})[_pair_id(*p["gpus"])] = p["result"].busbw
        for p in pairs:
            pid, nv = _pair_id(*p["gpus"]), ctx.nv(*p["gpus"])
            floor = busbw_check(ctx.thresholds, op="all_reduce", placement=pid, placement_class=CLASS_PAIR, n_gpus=2,
                                simulated=ctx.simulated, busbw_bytes_per_s=p["result"].busbw, size_bytes=p["result"].bytes,
                                link_ceiling_bytes_per_s=None)
            failed = [render.gist(floor)] if not floor.ok else []
            below = self._below_median(pid, by_nv[nv])
            if below:
                failed.append(below)
            if failed:
                slow[p["gpus"]] = "; ".join(failed)
        return slow

    def _below_median(self, pid: str, pairs_busbw: dict) -> str | None:
        """Why the pair is below the median of the pairs with its NV#, or None. On GPUs the rule is
        `collectives.pair_spread`'s (the check itself); CPU ranks of a simulation run pairs up to 5x apart on
        a loaded machine, so there the fleet's simulated pair rule (`fleet.simulated.pairs`) applies."""
        ctx = self.ctx
        if not ctx.simulated:
            v = pair_spread(ctx.thresholds, placement=pid, nv=ctx.nv(*self._gpus(pid)) or 0,
                            pairs_busbw_bytes_per_s=pairs_busbw)
            return None if v.ok else render.gist(v)
        if len(pairs_busbw) < 3:
            return None
        rule = ctx.thresholds.fleet(True).pairs
        median = statistics.median(pairs_busbw.values())
        below = 1 - pairs_busbw[pid] / median
        if below <= rule.max_below_median:
            return None
        return (f"{below * 100:.0f} % below the median pair {format_bw(median)}, more than the "
                f"{rule.max_below_median * 100:g} % simulation allows (source: {rule.source})")

    @staticmethod
    def _gpus(pid: str) -> tuple[int, int]:
        a, b = pid.removeprefix(f"{CLASS_PAIR}-").split(".")
        return int(a), int(b)

    def _counter_finding(self, pairs: list[dict], evidence: list[str], figures: dict) -> Finding | None:
        totals: dict[tuple[int, str], dict] = {}
        for p in pairs:
            for d in p["grown"]:
                t = totals.setdefault((d["gpu"], d["counter"]), {"grew_by": 0, "pairs": []})
                t["grew_by"] += d["grew_by"]
                t["pairs"].append(_pair_name(*p["gpus"]))
        if not totals:
            return None
        (gpu, counter), worst = max(totals.items(), key=lambda kv: kv[1]["grew_by"])
        others = [f"GPU{g} {c} +{t['grew_by']}" for (g, c), t in totals.items() if (g, c) != (gpu, counter)]
        evidence.append(f"GPU{gpu} {counter} grew by {worst['grew_by']} under the load of {', '.join(worst['pairs'])}"
                        + (f"; also {', '.join(others)}" if others else ""))
        part = f"GPU{gpu} {counter.rsplit(' ', 1)[0]}"
        culprit = f"GPU{gpu}{self._serial(gpu)} {counter} +{worst['grew_by']} under pair load"
        return Finding(self.s, FOUND, part, culprit, evidence, figures)

    def _serial(self, gpu: int) -> str:
        bus = self.ctx.bus_id(gpu)
        return f" ({bus})" if bus and not self.ctx.simulated else ""

    def _slow(self, repeat, pairs: list[dict]) -> Finding:
        s = self.s
        figures = self._figures(repeat, pairs)
        reproduced = self._reproduced(repeat, pairs)
        evidence = [f"repeat: {repeat.op} on {s.where} busbw {format_bw(repeat.busbw)}"
                    + {True: " (fails again)", False: " (passes now)", None: ""}[reproduced]]
        evidence += self._pair_lines(pairs)
        evidence += _own_health(pairs[0]["before"], pairs[-1]["after"], s.gpus) if pairs else []
        unreadable = next((p["unreadable"] for p in pairs if p["unreadable"]), None)
        if unreadable:
            evidence.append(f"link counters not read: {unreadable}")
        found = self._counter_finding(pairs, evidence, figures)
        if found is not None:
            return found
        slow = self._slow_pairs(pairs)
        for gpus, why in slow.items():
            evidence.append(f"{_pair_name(*gpus)} is slow: {why}")
        common = set.intersection(*(set(g) for g in slow)) if slow else set()
        busbw = {p["gpus"]: p["result"].busbw for p in pairs}
        median = statistics.median(busbw.values())
        if len(slow) >= 2 and len(common) == 1:
            (gpu,) = common
            shown = ", ".join(f"{_pair_name(*g)} {format_bw(busbw[g])}" for g in slow)
            return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._serial(gpu)} slow on every pair with it "
                           f"({shown}; median pair {format_bw(median)})", evidence, figures)
        if len(slow) == 1:
            ((a, b),) = slow
            return Finding(s, FOUND, _pair_name(a, b), f"{_pair_name(a, b)} {self.ctx.path(a, b)} all_reduce busbw "
                           f"{format_bw(busbw[(a, b)])} vs median pair {format_bw(median)} under pair load", evidence, figures)
        if slow:
            evidence.append("slow pairs share no one GPU: more than one part, or the placement's switch")
            return Finding(s, NOT_LOCALIZED, evidence=evidence, figures=figures)
        if reproduced is False:
            return Finding(s, NOT_REPRODUCED, evidence=evidence, figures=figures)
        evidence.append("every pair passes on its own: the failure needs all of the placement's GPUs at once"
                        if reproduced else "the failed check cannot be held against the repeat; no pair stands out")
        return Finding(s, NOT_LOCALIZED, evidence=evidence, figures=figures)

    def _wrong(self, repeat, pairs: list[dict]) -> Finding:
        s = self.s
        figures = self._figures(repeat, pairs)
        wrong_gpus = [s.gpus[r] for r, w in sorted(repeat.wrong_by_rank.items()) if w]
        evidence = [f"repeat: {s.op} on {s.where}: " + (repeat.wrong_summary() or "every element right")]
        if wrong_gpus:
            evidence.append("wrong output on " + ", ".join(f"GPU{g} (rank {s.gpus.index(g)})" for g in wrong_gpus))
        evidence += self._pair_lines(pairs)
        bad_pairs = {p["gpus"]: [g for g, w in p["wrong"].items() if w] for p in pairs if any(p["wrong"].values())}
        for gpu in s.gpus:
            with_it = [p["gpus"] for p in pairs if gpu in p["gpus"]]
            if len(with_it) >= 2 and all(gpu in bad_pairs.get(g, ()) for g in with_it):
                return Finding(s, FOUND, f"GPU{gpu}", f"GPU{gpu}{self._serial(gpu)} {s.op} output wrong on every pair "
                               f"with it ({len(with_it)} pairs)", evidence, figures)
        if len(bad_pairs) == 1:
            ((a, b), sides), = bad_pairs.items()
            return Finding(s, FOUND, _pair_name(a, b), f"{_pair_name(a, b)} {self.ctx.path(a, b)} {s.op} wrong "
                           f"on {', '.join(f'GPU{g}' for g in sides)}'s side on this pair only", evidence, figures)
        if not wrong_gpus and not bad_pairs:
            return Finding(s, NOT_REPRODUCED, evidence=evidence, figures=figures)
        return Finding(s, NOT_LOCALIZED, evidence=evidence, figures=figures)


def diagnose(ctx: Context, s: Suspect) -> Finding:
    return _Probe(ctx, s).run()
