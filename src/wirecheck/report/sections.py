"""The report's sections, each built from a RunView (or several, for the trend), as blocks of plain data
(wirecheck.report.html): what each section holds, in which order. How the blocks look is the templates'
(report/templates/): nothing here writes markup.

Every section is always present, in a fixed order, so a reader (and the browser test) knows
where to look; a section whose data the run does not have folds to one line saying why instead of
drawing an empty chart (a -k selection, a -m health run, a simulation, a run cut short before it got there).
"""

from __future__ import annotations

from wirecheck.checks.words import words_for
from wirecheck.core.quantity import format_bytes
from wirecheck.burnin.progress import left_out
from wirecheck.report.advice import advice_section
from wirecheck.report import figures
from wirecheck.report.html import (Across, Band, Bold, Break, Cell, Code, Section, Small, details, heading, note, outcome,
                                   pair, para, pre, table)
from wirecheck.report.diagnosis import diagnosis_section
from wirecheck.report.drain import drain_section
from wirecheck.report.gpus import GPU_FIGURES, GPU_HEALTH_CHECKS
from wirecheck.report.history_view import history_series
from wirecheck.report.model import HOST_PATH_CLASS, RunView
from wirecheck.report.trends import FAMILIES, drifts, gather, left_out_line
from wirecheck.core import render
from wirecheck.core.verdict import FAIL, PASS, SKIP, WARN, Verdict

SECTION_IDS = ("verdict", "node", "collectives", "wire", "links", "strategies", "advice", "nccl-path", "copies", "gpus", "burn-in",
               "health", "diagnosis", "drain", "trends")


def _num(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, (dict, list)):
        return ", ".join(f"{k}: {_num(v)}" for k, v in value.items()) if isinstance(value, dict) else str(value)
    return str(value)


def _verdict(v: dict) -> Verdict | None:
    try:
        return Verdict.from_record(v)
    except (TypeError, ValueError):  # a damaged line: its cells say so, the rest of the page stands
        return None


def _measured(v: dict) -> str:
    verdict = _verdict(v)
    return render.measured_text(verdict) if verdict else "-"


def gbps(bps: float | None) -> str:
    """bytes/s as GB/s with three or four significant figures: 326.2, 27.83, 0.452."""
    if bps is None:
        return "-"
    v = bps / 1e9
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 1 else f"{v:.3g}"


# -- the verdict ---------------------------------------------------------------------------


def _counted(counts: dict) -> tuple:
    warned = (", ", Bold(counts[WARN]), " warned") if counts.get(WARN) else ()
    return (Bold(counts[FAIL]), " failed, ", Bold(counts[PASS]), " passed", *warned, ", ", Bold(counts[SKIP]),
            " skipped")


def headline(view: RunView) -> tuple[str, str]:
    """(css class, text) of the banner at the top of the page."""
    counts = view.verdict_counts
    if view.header.get("kind") == "diagnosis":  # probes' findings about another record's failures: no verdict on a node
        found = f"{counts[FAIL]} finding(s) of a fault, {counts[PASS]} not reproduced"
        return "cut", (f"DIAGNOSIS of {view.header.get('diagnosed')} ({found}): not a validation of the node; its "
                       f"run's page: wirecheck report {view.header.get('diagnosed')}")
    if view.simulated:
        failed = f"{counts[FAIL]} of {sum(counts.values())} checks FAILED" if counts[FAIL] else "no failures"
        return "sim", f"SIMULATION ({failed}): nothing on this machine was validated"
    damaged = f"; the record is DAMAGED ({len(view.run.damaged)} line(s) unreadable)" if view.run.damaged else ""
    if counts[FAIL]:
        return "fail", f"FAILED: {counts[FAIL]} of {sum(counts.values())} checks{damaged}"
    if view.status != "complete":
        return "cut", f"INCOMPLETE: the run was {view.status}{damaged}"
    if view.run.damaged:
        return "cut", (f"DAMAGED RECORD: {len(view.run.damaged)} line(s) unreadable, what they held is unknown; "
                       f"the other {sum(counts.values())} checks: {counts[FAIL]} failed")
    warned = f", {counts[WARN]} with a warning" if counts.get(WARN) else ""
    return "pass", f"PASSED: {counts[PASS] + counts.get(WARN, 0)} checks{warned}, {counts[SKIP]} skipped"


# A verdict's columns on the page, each one fact: the line the terminal reads (measured against its bound, by how
# much, the rule) cut into its parts. Where the limit comes from is shown once per limit, behind a disclosure.
VERDICT_COLUMNS = ["check", "where", "what", "measured", "limit", "off by", "rule"]


def _cells(v: dict) -> list:
    """A verdict's cells, every one written by wirecheck.core.render (a damaged line: its words as recorded)."""
    verdict = _verdict(v)
    if verdict is None:
        return [v.get("check"), v.get("where") or "node", v.get("message"), "-", "-", "-", "-"]
    return [verdict.check, verdict.where or "node", verdict.what, render.measured_text(verdict),
            render.bound_text(verdict), render.margin(verdict) or "-", verdict.rule or "-"]


def _said(v: dict) -> Across:
    """Under a failed or warned verdict, across the table: what was found (its problems, its note), what it means
    and what to do (the check's words, as the terminal's failure block gives them), its code and test."""
    verdict = _verdict(v)
    details_ = v.get("details") if isinstance(v.get("details"), dict) else None
    words = words_for(v.get("check"), details_)
    parts: list = []
    problems = (details_ or {}).get("problems") or []
    remarks = [x for x in (verdict.hint, verdict.note) if x] if verdict else []
    if problems:
        parts += [Bold("found"), " " + "; ".join(map(str, problems)), Break()]
    if remarks:
        parts += [Bold("note"), " " + "; ".join(remarks), Break()]
    parts += [Bold("means"), f" {words.means}", Break(), Bold("to do"), f" {words.todo}"]
    tail = " ".join(x for x in (verdict.code if verdict and verdict.code else "", v.get("test") or "") if x)
    if tail:
        parts += [" ", Small(tail)]
    return Across(tuple(parts))


def _judged_table(verdicts: list[dict], css: str):
    """Failures or warnings: one row of facts per verdict, and beneath it across the table what it means and what
    to do. A few lines each, as narrow as the page."""
    rows, classes = [], []
    for v in verdicts:
        rows += [_cells(v), _said(v)]
        classes += [css, f"{css} said"]
    return table(VERDICT_COLUMNS, rows, classes, numeric=(3,), css="verdicts", wide=(2,))


def _provenance(verdicts: list[dict]):
    """Where each limit the verdicts were judged against is written and where its number comes from, once per
    limit: behind a disclosure, never in every row."""
    found = render.provenances(x for x in (_verdict(v) for v in verdicts) if x is not None)
    if not found:
        return None
    return details(f"Where each limit comes from ({len(found)} limits)",
                   table(["limit", "source"], [[written, source] for written, source in found]))


def verdict_section(view: RunView) -> Section:
    s = Section("verdict", "Verdict")
    counts = view.verdict_counts
    s.add(para(*_counted(counts), f" ({len(view.verdicts)} verdicts in {view.run.path})."))
    if view.simulated:  # the page's banner says SIMULATION already (headline): once is loud enough
        s.add(para("Recorded topology ", Code(view.header.get("simulation_source")), " replayed with CPU processes and "
                   "gloo standing in for GPUs and NCCL: the figures below say nothing about a node."))
    if view.status == "cut short":
        s.add(note("This record has no end line: the run was cut short (killed, out of disk, a crash). "
                   "Whatever it did not reach was never judged."))
    elif view.status != "complete":
        s.add(note(f"The run was {view.status}: not every check ran."))
    if view.run.damaged:
        s.add(note(f"{view.run.damage()}. Every other line was read: the verdicts below stand, but a lost line may "
                   "have held a failed one; judge the node again (or restore the record from a copy)."))
    fails = view.failures
    if fails:
        s.add(heading("Failures"), _judged_table(fails, "fail"))
    else:
        s.add(note("No check failed."))
    warns = [v for v in view.verdicts if v.get("outcome") == WARN]
    if warns:
        # nothing failed, but the check has something to say: shown open, apart from the passes
        s.add(heading("Warnings"), _judged_table(warns, "warn"))
    judged = [v for v in view.verdicts if v.get("outcome") != SKIP]
    shown = _provenance(judged)
    if shown is not None:
        s.add(shown)
    skips = [v for v in view.verdicts if v.get("outcome") == SKIP]
    if skips:
        s.add(details(f"{len(skips)} skipped, with the reason", table(
            ["check", "where", "reason"], [[v.get("check"), v.get("where") or "node", _reason(v)] for v in skips])))
    passes = [v for v in view.verdicts if v.get("outcome") == PASS]
    if passes:
        s.add(details(f"{len(passes)} passed", table(VERDICT_COLUMNS, [_cells(v) for v in passes],
                                                     numeric=(3,))))
    return s


def _line(v: dict) -> str:
    """A verdict's one line, written from its structure as this wirecheck writes it (a record's own words, from
    an older wirecheck, may cite its limit's source and repeat what it means and what to do: the columns and
    the disclosure say those once); a skip's line is its reason."""
    verdict = _verdict({**v, "message": ""})
    if verdict is None:
        return v.get("message") or "-"
    if verdict.outcome == SKIP:
        return f"{render.subject(verdict)}: {_reason(v)}"
    return verdict.message


def _reason(v: dict) -> str:
    """A skip's reason, as the check said it (its hint); a record written before the field: its message."""
    verdict = _verdict(v)
    return (verdict.hint if verdict is not None and verdict.hint else None) or v.get("message") or "-"


# -- the node -------------------------------------------------------------------------------


def node_section(view: RunView) -> Section:
    h, end = view.header, view.run.end or {}
    s = Section("node", "Node")
    v = h.get("versions") or {}
    rows = [
        ["host", h.get("host")],
        ["started / finished", f"{h.get('started')} / {end.get('finished', 'no end record')}"],
        ["status", f"{view.status}" + (f", exit status {end.get('exit_status')}, {end.get('wall_s')} s" if end else "")],
        ["simulation", f"SIMULATION of {h.get('simulation_source')}" if view.simulated else "no: the live node"],
        ["profile", h.get("profile") or "none (inventory checks skip)"],
        ["fabric", h.get("fabric")],
        ["NVLink groups", " ".join("{" + ",".join(map(str, g)) + "}" for g in h.get("groups") or [])],
        ["driver / CUDA", f"{v.get('driver', '-')} / {v.get('cuda_driver', '-')}"],
        ["NCCL / torch", f"{v.get('nccl') or '-'} / {v.get('torch') or '-'}"],
        ["DeepSpeed / Accelerate", f"{v.get('deepspeed') or '-'} / {v.get('accelerate') or '-'}"],
        ["environment switches", ", ".join(f"{k}={x}" for k, x in sorted((h.get("env") or {}).items())) or "none"],
        ["thresholds", h.get("thresholds")],
        ["tests", _num(end.get("tests")) if end else "-"],
    ]
    if h.get("unavailable"):
        rows.append(["no GPU topology", h["unavailable"]])
    s.add(table(["", ""], rows))
    gpus = h.get("gpus") or []
    if gpus and isinstance(gpus[0], dict):
        s.add(table(["GPU", "model", "PCI bus", "memory", "NVLinks up"],
                    [[g.get("index"), g.get("name") or "(not recorded)", g.get("bus_id") or "-",
                      format_bytes(g["memory_bytes"]) if g.get("memory_bytes") else "-", g.get("nvlinks_active")]
                     for g in gpus], numeric=(0, 4)))
    return s


# -- collectives --------------------------------------------------------------------------


def _sweep_table(view: RunView, sweeps):
    """nccl-tests' columns, one block of rows per placement; the floor beside the size it applies at."""
    rows, classes = [], []
    for sw in sweeps:
        floor = view.floors.get((sw.placement, sw.op))
        rows.append(Band(f"{sw.placement} ({sw.n_gpus} GPUs)"))
        classes.append("")
        for p in sw.points:
            judged = floor is not None and floor.size == p.bytes
            shown = (Cell(f"\u2265\u00a0{_num(floor.min)}" + (f" \u2264\u00a0{_num(floor.max)}" if floor.max else ""),
                          floor.outcome) if judged else "")
            rows.append([p.bytes, p.bytes // 4, f"{p.time_s * 1e6:.2f}", gbps(p.algbw), gbps(p.busbw),
                         "-" if p.wrong is None else p.wrong, p.path or "", shown])
            classes.append(FAIL if judged and floor.outcome == FAIL else "")
        if sw.error:
            rows.append(["stopped", "", "", "", "", "", "", sw.error.splitlines()[0]])
            classes.append(FAIL)
    return table(["size (B)", "count", "time (us)", "algbw", "busbw", "#wrong", "timed", "limit"],
                 rows, classes, numeric=(0, 1, 2, 3, 4, 5))


def collectives_section(view: RunView) -> Section:
    s = Section("collectives", "Collectives: bus bandwidth against size")
    if not view.sweeps:
        return s.fold("No collective measurements in this record (a -k selection without test_collectives, "
                          "or a run cut short before them).")
    s.add(note("nccl-tests conventions: count in float32 elements; slowest rank's mean time per call; algbw and busbw "
               "in GB/s (1e9 B/s), busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter "
               "and all_to_all, 1 for broadcast; timed: eager calls or a CUDA-graph replay; limit: the floor (and "
               "ceiling) judged at the floor size, GB/s."))
    for op in view.ops:
        sweeps = [sw for (pid, o), sw in view.sweeps.items() if o == op]
        floors = {sw.placement: view.floors[(sw.placement, op)] for sw in sweeps if (sw.placement, op) in view.floors}
        fig = s.add_figure(figures.busbw_vs_size(op, sweeps, floors, view.simulated))
        s.add(heading(op), pair(fig, _sweep_table(view, sweeps)))
    return s


def wire_section(view: RunView) -> Section:
    s = Section("wire", "The wire: NVLink against the host path")
    hosts = [pid for pid in view.placements if view.klass(pid) == HOST_PATH_CLASS]
    drawn = False
    for host in hosts:
        twin = view.nvlink_twin(host)
        rows = []
        for op in view.ops:
            a, b = view.sweeps.get((twin, op)) if twin else None, view.sweeps.get((host, op))
            if not a or not b:
                continue
            common = sorted({p.bytes for p in a.points} & {p.bytes for p in b.points})
            if common:
                size = common[-1]
                rows.append((op, a.at(size).busbw, b.at(size).busbw, size))
        if not rows:
            continue
        drawn = True
        size = rows[0][3]
        img = figures.wire([(op, f, h) for op, f, h, _ in rows], twin, host, size, view.simulated)
        checks = [v for v in view.verdicts if v.get("check") == "wire_check" and v.get("where") == host]
        s.add(heading(f"{twin} vs {host}"), s.add_figure(img), table(
            ["op", "NVLink busbw (GB/s)", "host path busbw (GB/s)", "ratio"],
            [[op, gbps(f), gbps(h), f"{f / h:.1f}x" if h else "-"] for op, f, h, _ in rows], numeric=(1, 2, 3)))
        for v in checks:
            s.add(para(outcome(v.get("outcome")), f" {_line(v)}"))
    if not drawn:
        return s.fold("No host-path placement with an NVLink twin was measured in this run (the topology has no "
                      "NVLink pair, or a -k selection left test_collectives out).")
    return s


def _pair_figures(view: RunView) -> tuple[dict, dict]:
    gpus = [g.get("index") if isinstance(g, dict) else i for i, g in enumerate(view.header.get("gpus") or [])]
    pos = {g: i for i, g in enumerate(gpus)}
    measured, copies = {}, {}
    for (pid, op), sw in view.sweeps.items():
        members = view.gpus_of(pid)
        if op == "all_reduce" and len(members) == 2 and view.klass(pid) != HOST_PATH_CLASS and sw.largest:
            a, b = (pos.get(g) for g in members)
            if a is not None and b is not None:
                value = sw.largest.busbw / 1e9
                # A per-pair placement (pair-i.j) wins over a 2-GPU class placement on the same GPUs.
                if view.klass(pid) == "pair" or (a, b) not in measured:
                    measured[(a, b)] = measured[(b, a)] = value
    for p in (view.copies or {}).get("peer") or []:
        a, b = pos.get(p["src"]), pos.get(p["dst"])
        if a is not None and b is not None:
            copies[(a, b)] = p["bytes_per_s"] / 1e9
    return measured, copies


def links_section(view: RunView) -> Section:
    s = Section("links", "The link matrix")
    matrix = view.header.get("matrix") or []
    gpus = [g.get("index") if isinstance(g, dict) else i for i, g in enumerate(view.header.get("gpus") or [])]
    if not matrix or len(matrix) != len(gpus):
        return s.fold("The record carries no link matrix (no GPU topology was read).")
    measured, copies = _pair_figures(view)
    s.add(s.add_figure(figures.link_matrix(gpus, matrix, measured, copies)))
    if view.simulated and measured:
        s.add(note("Simulation: the per-pair figures are gloo on CPU, not links."))
    spread = [v for v in view.verdicts if v.get("check") in ("pair_spread", "group_scaling", "peer_access")]
    if spread:
        s.add(table(["check", "where", "outcome", "verdict"],
                    [[v.get("check"), v.get("where"), outcome(v.get("outcome")), _line(v)] for v in spread]))
    return s


# -- training ----------------------------------------------------------------------------


def strategies_section(view: RunView) -> Section:
    s = Section("strategies", "The strategy dial")
    if not view.strategies:
        return s.fold("No training measurements in this record (a -k selection without test_strategies, "
                          "or a run cut short before them).")
    points = list(view.strategies.values())
    s.add(s.add_figure(figures.strategy_dial(points)))
    rows = []
    for p in points:
        diff = (f"{(p.model_state_bytes - p.predicted_bytes) / p.predicted_bytes * 100:+.1f} %"
                if p.model_state_bytes and p.predicted_bytes else "-")
        rows.append([p.placement, p.strategy, p.n_gpus, format_bytes(p.model_state_bytes) if p.model_state_bytes else "-",
                     format_bytes(p.predicted_bytes) if p.predicted_bytes else "-", diff,
                     format_bytes(p.peak_bytes) if p.peak_bytes else "-",
                     f"{p.tokens_per_s:,.0f}" if p.tokens_per_s else "-",
                     f"{p.scaling * 100:.0f} %" if p.scaling is not None else "-",
                     f"{p.mfu * 100:.1f} %" if p.mfu else f"{p.achieved_flops_per_gpu / 1e12:.0f} TFLOP/s" if p.achieved_flops_per_gpu else "-",
                     f"{p.exposed_comm_s:.3f}" if p.exposed_comm_s is not None else "-",
                     (p.error or "").splitlines()[0] if p.error else ""])
    s.add(table(["placement", "strategy", "GPUs", "model state measured", "memory model", "off", "peak allocated",
                 "tokens/s", "scaling (per GPU / one GPU)", "MFU (or TFLOP/s per GPU)", "exposed comm (s)", "error"], rows,
                [FAIL if r[-1] else "" for r in rows], numeric=(2, 3, 4, 5, 6, 7, 8, 9, 10)))
    for one in view.single_gpu.values():
        s.add(para(f"One GPU alone ({one.placement}): "
                   + (f"failed: {one.error.splitlines()[0]}" if one.error else
                      f"{one.tokens_per_s:,.0f} tokens/s" + (f", MFU {one.mfu * 100:.1f} %" if one.mfu else "")
                      + (f", peak allocated {format_bytes(one.peak_bytes)}" if one.peak_bytes else ""))
                   + ". Scaling = a strategy's tokens/s per GPU over this figure (the same model and micro-batch per "
                     "GPU): 100 % is perfect data-parallel scaling."))
    if not view.single_gpu:
        s.add(note("Scaling: no one-GPU run in this record (test_single_gpu_training did not run first)."))
    precision = next((p.precision for p in points if p.precision), None)
    s.add(note(f"Memory model: wirecheck.training.memory_model.predict(..., accounting='implementation', precision={precision!r})."))
    dial = [v for v in view.verdicts if v.get("check") in ("staircase", "slow_wire", "dial_flattens", "single_gpu_training")]
    if dial:
        s.add(table(["check", "where", "outcome", "verdict"],
                    [[v.get("check"), v.get("where"), outcome(v.get("outcome")), _line(v)] for v in dial]))
    return s


# -- NCCL's path ---------------------------------------------------------------------------


def nccl_section(view: RunView) -> Section:
    s = Section("nccl-path", "NCCL's path (from NCCL's own log)")
    verdicts = {v.get("where"): v for v in view.verdicts if v.get("check") == "nccl_path"}
    if not view.nccl_paths:
        reason = next((_reason(v) for v in verdicts.values() if v.get("outcome") == SKIP), None)
        return s.fold(reason or "No NCCL path probe in this record (tests/test_nccl_path.py did not run).")
    for pid, d in view.nccl_paths.items():
        v = verdicts.get(pid) or {}
        gpus = d.get("gpus") or list(view.gpus_of(pid))
        s.add(heading(pid, " ", outcome(v.get("outcome"))) if v else heading(pid))
        if v:
            s.add(para(_line(v)))
        if d.get("error"):
            s.add(pre(d["error"]))
            continue
        paths = d.get("path_types") or {}
        rows = []
        for c in d.get("connections") or []:
            name = (f"GPU{gpus[c['src']]} -> GPU{gpus[c['dst']]}" if c["src"] < len(gpus) and c["dst"] < len(gpus)
                    else f"rank {c['src']} -> {c['dst']}")
            rows.append([name, f"{c['transport']}/{c['detail']}".rstrip("/"), paths.get(f"{c['src']}-{c['dst']}", "-"),
                         len(c.get("channels") or []), c.get("line")])
        s.add(table(["pair", "transport", "NCCL path type", "channels", "NCCL's line"], rows, numeric=(3,)))
        coll = d.get("collectives") or []
        if coll:
            s.add(table(["collective", "bytes", "algorithm", "protocol", "channels"],
                        [[c.get("op") or "-", c.get("bytes"), c.get("algo"), c.get("proto"), c.get("channels", "-")]
                         for c in coll], numeric=(1, 4)))
        graphs = d.get("graphs") or []
        counts = d.get("channel_counts") or {}
        facts = [f"NCCL {d.get('nccl_version') or '?'}",
                 ", ".join(f"{k} {x}" for k, x in counts.items()) + " channels" if counts else "",
                 "; ".join(f"pattern {g['pattern']}: {g['n_channels']} channels, type {g['type_intra']}/{g['type_inter']}, "
                           f"bw {g['bw_intra']:g}/{g['bw_inter']:g}" for g in graphs)]
        s.add(para(" | ".join(f for f in facts if f), css="small"))
        if d.get("log_files"):
            s.add(para(f"logs: {', '.join(map(str, d['log_files']))}", css="small"))
    return s


# -- copies and health ---------------------------------------------------------------------


def copies_section(view: RunView) -> Section:
    s = Section("copies", "Copy bandwidth without NCCL")
    verdicts = [v for v in view.verdicts if v.get("check") in ("host_copy", "peer_copy", "pcie_link_under_load")]
    c = view.copies
    if not c or not (c.get("host") or c.get("peer")):
        reason = (c or {}).get("error") or next((_reason(v) for v in verdicts if v.get("outcome") == SKIP), None)
        return s.fold(reason or "No copy-bandwidth measurement in this record (tests/test_copy_bandwidth.py did not run).")
    floors = {}
    for v in verdicts:
        lim = (v.get("limit") or {}).get("min")
        inputs = v.get("inputs") or {}
        if v.get("check") == "host_copy" and lim:
            floors[(v.get("where"), inputs.get("direction"))] = lim
        elif v.get("check") == "peer_copy" and lim:
            floors[(str(v.get("where", "")).removeprefix("pair-"), "peer")] = lim
    s.add(s.add_figure(figures.copy_bandwidth(c.get("host") or [], c.get("peer") or [], floors)))
    rows = []
    for h in c.get("host") or []:
        link = ((h.get("pcie") or {}).get("link") or {})
        rows.append([f"GPU{h['gpu']}", gbps(h["h2d_bytes_per_s"]), gbps(h["d2h_bytes_per_s"]),
                     f"Gen{link.get('gen')} x{link.get('width')} (max Gen{link.get('gen_max')} x{link.get('width_max')})"
                     if link else "-"])
    s.add(table(["GPU", "host->device (GB/s)", "device->host (GB/s)", "PCIe link under load"], rows, numeric=(1, 2)))
    if c.get("peer"):
        s.add(table(["copy", "GB/s", "peer access"], [[f"GPU{p['src']} -> GPU{p['dst']}", gbps(p["bytes_per_s"]),
                                                        "yes" if p.get("peer_access") else "NO"] for p in c["peer"]],
                    numeric=(1,)))
    s.add(note(f"{format_bytes(c.get('size') or 0)} per copy, {c.get('iters')} timed copies after {c.get('warmup_iters')} "
               "warm-up, CUDA events, one link at a time."))
    if verdicts:
        s.add(table(["check", "where", "outcome", "verdict"],
                    [[v.get("check"), v.get("where"), outcome(v.get("outcome")), _line(v)] for v in verdicts],
                    [v.get("outcome") for v in verdicts]))
    return s


def _figure_cell(point, key: str) -> Cell | str:
    label, unit, scale = GPU_FIGURES[key]
    if key not in point.figures:
        return "-"
    worst = point.outcome(key)  # its floor and peers, its history, its drift
    text = f"{point.figures[key] * scale:.4g}"
    return Cell(text, worst) if worst else text


def _memory_rows(view: RunView) -> list[list]:
    rows = []
    for p in view.gpus.values():
        m = p.memory
        if not m:
            continue
        if "patterns" not in m:
            rows.append([f"GPU{p.gpu}", "-", "-", "-", "-", "-", m.get("error") or "not measured"])
            continue
        bad = [x for x in m["patterns"] if x.get("mismatched_words")]
        rows.append([f"GPU{p.gpu}", format_bytes(m["bytes_covered"]),
                     f"{100 * m['bytes_covered'] / m['free_bytes']:.1f} %" if m.get("free_bytes") else "-",
                     f"{len({x['pattern'] for x in m['patterns']})} x {m.get('passes')}", p.memory_mismatches,
                     bad[0].get("first_bad_offset") if bad else "-", f"{m.get('wall_s', 0):.1f}"])
    return rows


def gpus_section(view: RunView) -> Section:
    s = Section("gpus", "Each GPU under load")
    verdicts = [v for v in view.verdicts if v.get("check") in GPU_HEALTH_CHECKS]
    if not view.gpus:
        reason = next((_reason(v) for v in verdicts if v.get("outcome") == SKIP), None)
        return s.fold(reason or "No GPU health measurements in this record (tests/test_gpu_health.py did not run: "
                                    "select it with -m health).")
    points = list(view.gpus.values())
    s.add(note("One worker per GPU, every GPU at once (power and heat are shared): HBM copy (read+write counted) and "
               "read in GB/s, dense square GEMM in TFLOP/s, the sustained GEMM load's median window; each against its "
               "GPU model's floor and the median of the node's other GPUs of the same model (the peer rule)."
               + (" SIMULATION: CPU ranks stand in for GPUs; the figures are the CPU's." if view.simulated else "")))
    s.add(s.add_figure(figures.gpu_bars(points, GPU_FIGURES)))
    rows, classes = [], []
    for p in points:
        failed = (any(p.outcome(k) == FAIL for k in GPU_FIGURES) or bool(p.memory_mismatches)
                  or bool(p.xid_events))
        rows.append([f"GPU{p.gpu}", p.bus_id or "-", p.model or "-", *[_figure_cell(p, k) for k in GPU_FIGURES],
                     _num(p.max_temperature), _num(p.peak_power), _num(p.memory_mismatches), p.xid_events])
        classes.append(FAIL if failed else "")
    s.add(table(["GPU", "bus id", "model", *[f"{label} ({unit})" for label, unit, _ in GPU_FIGURES.values()],
                 "hottest (°C)", "peak power (W)", "memory test: wrong words", "XIDs"], rows, classes,
                numeric=tuple(range(3, 3 + len(GPU_FIGURES) + 4))))
    if any(p.windows or p.samples for p in points):
        s.add(heading("The sustained load over time"), s.add_figure(figures.gpu_sustained(points)))
    memory = _memory_rows(view)
    if memory:
        s.add(heading("Memory test coverage"), table(
            ["GPU", "covered", "of free memory", "patterns x passes", "wrong words", "first bad offset", "wall s"],
            memory, [FAIL if r[4] else "" for r in memory], numeric=(1, 2, 4, 5, 6)))
    events = [e for p in points for e in p.events]
    if events:
        s.add(heading("XID and ECC events during the run"), table(
            ["GPU", "kind", "code", "bus id"], [[f"GPU{e.get('gpu')}", e.get("kind"), e.get("code"), e.get("bus_id")]
                                                for e in events], [FAIL] * len(events)))
    if verdicts:
        shown = [v for v in verdicts if v.get("outcome") != PASS]
        body = table(["check", "where", "outcome", "verdict"],
                     [[v.get("check"), v.get("where") or "node", outcome(v.get("outcome")), _line(v)]
                      for v in verdicts], [v.get("outcome") for v in verdicts])
        s.add(details(f"{len(verdicts)} GPU health verdicts ({len(shown)} not passed)", body, open_=bool(shown)))
    return s


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def burn_in_section(view: RunView) -> Section:
    s = Section("burn-in", "Burn-in")
    b = view.burn_in
    if b is None:
        return s.fold("Not a burn-in: `wirecheck validate --level burn-in --duration 4h` holds every GPU under load "
                          "while collectives cycle, for hours, and this section draws it.")
    end = b.end or {}
    fault = b.fault
    duration = end.get("duration_s")
    s.add(para(Bold(b.status), f": {len(b.rounds)} round(s)"
               + (f" in {_clock(end['seconds'])} of --duration {_clock(duration)}" if duration else "")
               + (f", rounds of {end.get('round_s'):g} s with the memory test ({end.get('memory_passes')} pass(es)) after "
                  "each" if end.get("round_s") else "") + "."))
    if fault:
        s.add(para(f"Stopped in round {fault.get('round')} by a {fault.get('kind')}"
                   + (f" on {fault.get('where')}" if fault.get("where") else "") + f": {fault.get('message')}", css="fail"))
    cycle = end.get("cycle") or []
    if cycle:
        placements = sorted({c["placement"] for c in cycle})
        s.add(note(f"Collectives beside the load: {len(cycle)} steps over {', '.join(placements)} at "
                   f"{format_bytes(cycle[0]['bytes'])}, each placement in turn."
                   + (f" Left out: {left_out(end['left_out'])}." if end.get("left_out") else "")))
    s.add(s.add_figure(figures.burn_in(b)))
    rows = []
    for r in b.rounds:
        gpus = r.get("gpus") or {}
        cells = [f"{name} {_num((g.get('flops_per_s') or 0) / 1e12, 4)} TF {_num((g.get('temperature') or {}).get('max_c'))} °C "
                 f"{_num(g.get('power_w'), 4)} W" for name, g in gpus.items()]
        busbw = [f"{k} {gbps(c['median'])}" for k, c in (r.get("collectives") or {}).items()]
        flag = (r.get("fault") or {}).get("kind") or ("interrupted" if r.get("interrupted") else "")
        rows.append([r.get("round"), _clock(r["started"] - b.t0), "; ".join(cells), "; ".join(busbw) or "-", flag])
    s.add(details(f"{len(rows)} round(s)", table(["round", "at", "per GPU (median window, hottest, mean power)",
                                                  "median busbw (GB/s)", "stopped by"], rows,
                                                 [FAIL if row[4] else "" for row in rows])))
    if b.verdicts:
        failed = [v for v in b.verdicts if v.get("outcome") == FAIL]
        s.add(details(f"{len(b.verdicts)} burn-in verdicts ({len(failed)} failed)", table(
            ["check", "where", "outcome", "verdict"],
            [[v.get("check"), v.get("where") or "node", outcome(v.get("outcome")), _line(v)] for v in b.verdicts],
            [v.get("outcome") for v in b.verdicts]), open_=bool(failed)))
    return s


def health_section(view: RunView) -> Section:
    s = Section("health", "Health counters over the run")
    if not view.counters:
        return s.fold("No error-counter readings in this record (a simulation has no NVML; a -k selection may "
                          "leave test_link_health out; it runs last, so a run cut short never reaches it).")
    judged = [r for r in view.counters if (r.get("inputs") or {}).get("deltas")]
    if judged:
        s.add(s.add_figure(figures.counter_growth(judged)))
    s.add(table(["GPU", "outcome", "grew", "verdict"],
                [[v.get("where"), outcome(v.get("outcome")), _measured(v) if v.get("measured") else "none",
                  _line(v)] for v in view.counters], [v.get("outcome") for v in view.counters]))
    return s


# -- the trend -------------------------------------------------------------------------------


def _own_history(s: Section, view: RunView) -> None:
    """Each GPU's and placement's figures over its own runs, as this run's history and drift verdicts hold them."""
    series = [x for x in history_series(view.verdicts, view.header.get("started")) if x.past]
    if not series:
        return
    s.add(heading("Each GPU and placement against its own history"))
    judged = [x for x in series if x.judged]
    if judged:
        s.add(s.add_figure(figures.history_trends(judged)))
    rows, classes = [], []
    for x in series:
        h, d = x.history or {}, x.drift or {}
        res = h.get("resolution")
        rows.append([x.where, x.figure, x.subject, f"{x.value:.4g} {x.unit}",
                     f"{h['bound']:.4g}" if h.get("bound") is not None else "-", outcome(h.get("outcome")),
                     res.short() if res else "-", outcome(d.get("outcome")),
                     d.get("began") or "-", (d.get("message") if d.get("outcome") in (WARN, FAIL) else h.get("message")) or ""])
        classes.append(FAIL if x.outcome == FAIL else "")
    s.add(table(["where", "figure", "GPU or placement", "this run", "history bound", "history", "catches (95 %)",
                 "drift", "fall began", "message"], rows, classes, numeric=(3, 4)))


def trends_section(view: RunView, history: list[RunView], skipped: list) -> Section:
    s = Section("trends", "Over time")
    _own_history(s, view)
    views = sorted({id(v): v for v in [view, *history]}.values(), key=lambda v: v.started.timestamp() if v.started else 0)
    if len(views) < 2:
        s.add(note("One run only: give more record files, or --history DIR (a directory of record files), "
                   "to draw each key figure over time with its noise band."))
    else:
        table_ = gather(views)
        for family, (title, unit, log_y) in FAMILIES.items():
            panels = [(panel, series) for panel, series in table_.get(family, {}).items()
                      if any(len(points) >= 2 for points in series.values())]
            if panels:
                s.add(heading(title),
                      s.add_figure(figures.trend(f"fig-trend-{family}", f"{title} over {len(views)} runs", unit, panels, log_y)))
        flagged = drifts(table_, view.started)
        if flagged:
            s.add(heading("This run against its history"), table(
                ["figure", "series", "this run", "median", "band (median +- 3 MAD)", "runs", ""],
                [[f"{d.family}: {d.panel}", d.series, _num(d.latest), _num(d.median), f"{_num(d.low)} .. {_num(d.high)}",
                  d.n, "OUTSIDE" if d.outside else ""] for d in flagged], [FAIL if d.outside else "" for d in flagged],
                numeric=(2, 3, 5)))
        elif len(views) < 3:
            s.add(note("The noise band needs 3 runs or more."))
    s.add(details(f"{len(views)} run(s) in the trend", table(
        ["record", "started", "status", "simulated", "failed"],
        [[v.run.path, v.header.get("started"), v.status, "yes" if v.simulated else "no", v.verdict_counts[FAIL]]
         for v in views])))
    if skipped:
        s.add(note(left_out_line(skipped)))
        s.add(details(f"{len(skipped)} file(s) of the history left out", table(
            ["file", "why"], [[str(p), why] for p, why in skipped])))
    return s


def build(view: RunView, history: list[RunView], skipped: list) -> list[Section]:
    sections = [verdict_section(view), node_section(view), collectives_section(view), wire_section(view),
                links_section(view), strategies_section(view), advice_section(view), nccl_section(view), copies_section(view),
                gpus_section(view), burn_in_section(view), health_section(view), diagnosis_section(view),
                drain_section(view), trends_section(view, history, skipped)]
    assert tuple(s.id for s in sections) == SECTION_IDS
    return sections
