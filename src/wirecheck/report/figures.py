"""The report's figures, drawn with matplotlib (Agg, no display) and embedded as PNG data URIs.

Each function takes plain data (wirecheck.report.model tables) and returns an `Image`: the
PNG, its size, an alt text saying what it shows, and a caption. `matplotlib.figure.Figure`
is used directly, never pyplot, so no global figure state leaks between calls (a fleet page
draws hundreds). Colours follow the placement class, so one class reads the same everywhere.
"""

from __future__ import annotations

import base64
import io
import statistics
import warnings
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # before anything else of matplotlib: no display here, ever
# Labels come from records (host and placement names, other nodes' files): text, never mathtext,
# whose parser stops a page on a name with two `$` in it.
matplotlib.rcParams["text.parse_math"] = False

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from wirecheck.core.quantity import format_bytes  # noqa: E402

DPI = 100
CLASS_COLOURS = {
    "nvswitch": "#1f77b4",
    "nvl_pair": "#2ca02c",
    "nvl_quad": "#17becf",
    "nvl_group": "#9467bd",
    "cross_quad": "#ff7f0e",
    "pcie": "#8c564b",
    "forced_pcie": "#d62728",
    "pair": "#7f7f7f",
}
STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
OUTCOME_COLOURS = {"pass": "#2ca02c", "fail": "#d62728", "skip": "#999999", "warn": "#ff9900"}


@dataclass(frozen=True)
class Image:
    id: str  # unique in the page: the HTML element id and what the browser test looks for
    png: bytes
    width: int  # CSS pixels
    height: int
    alt: str
    caption: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def _figure(width_in: float, height_in: float) -> Figure:
    return Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")


def render(fig: Figure, fid: str, alt: str, caption: str) -> Image:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # Labels from a record (placement and host names, another node's file) can be long enough to leave the
        # axes no room; matplotlib then draws the figure without its layout, and says so on stderr, where it would
        # only stand among the report's own lines (and stop the page where warnings are errors). The tables
        # beside each figure carry every name in full.
        warnings.filterwarnings("ignore", message="constrained_layout not applied", category=UserWarning)
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    w, h = fig.get_size_inches()
    return Image(fid, buf.getvalue(), int(w * DPI), int(h * DPI), alt, caption)


def colour(klass: str) -> str:
    return CLASS_COLOURS.get(klass, "#333333")


def _size_ticks(ax) -> None:
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v) if v > 0 else ""))


def _gbps(ax) -> None:
    ax.set_ylabel("GB/s (1e9 B/s)")
    ax.grid(True, which="both", alpha=0.3)


def _plain_log_y(ax) -> None:
    """Log y labelled 20, 50, 100, 200 ... instead of 2x10^1."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:e}"[0] in "25" else ""))
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="#666666", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


# -- collectives ------------------------------------------------------------------------


# Up to this many placements share one panel, each its own line; more (an 8-GPU NVL node has 38) are
# drawn one panel per placement class, and a class of more than LINES_PER_CLASS placements as its
# band (the lowest and highest busbw at each size), its median and its worst placement.
MAX_LINES = 6
LINES_PER_CLASS = 4


def _floor_bar(ax, f, c) -> None:
    """A short bar across the floor size: solid the floor, dashed the ceiling."""
    if f is None:
        return
    for bound, style in ((f.min, "-"), (f.max, "--")):
        if bound is not None:
            ax.hlines(bound, f.size / 1.6, f.size * 1.6, colors=c, linestyles=style, lw=2.5)


def _busbw_axes(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_y(ax)
    _size_ticks(ax)
    _gbps(ax)


def _worst(sweeps: list, floors: dict):
    """The placement furthest below its class: a failed floor first, else the lowest busbw at the
    largest size every placement measured."""
    failed = [s for s in sweeps if floors.get(s.placement) is not None and floors[s.placement].outcome == "fail"]
    if failed:
        return failed[0]
    common = set.intersection(*({p.bytes for p in s.points} for s in sweeps))
    size = max(common) if common else None
    return min(sweeps, key=lambda s: (s.at(size).busbw if size is not None else s.points[-1].busbw))


def _class_panel(ax, klass: str, sweeps: list, floors: dict) -> None:
    c = colour(klass)
    if len(sweeps) <= LINES_PER_CLASS:
        for k, s in enumerate(sweeps):
            ax.plot([p.bytes for p in s.points], [p.busbw / 1e9 for p in s.points], STYLES[k % len(STYLES)],
                    marker=MARKERS[k % len(MARKERS)], color=c, label=s.placement, ms=3)
            _floor_bar(ax, floors.get(s.placement), c)
    else:
        sizes = sorted({p.bytes for s in sweeps for p in s.points})
        at = {size: sorted(p.busbw / 1e9 for s in sweeps for p in s.points if p.bytes == size) for size in sizes}
        ax.fill_between(sizes, [at[x][0] for x in sizes], [at[x][-1] for x in sizes], color=c, alpha=0.25,
                        label=f"{len(sweeps)} placements: lowest to highest")
        ax.plot(sizes, [statistics.median(at[x]) for x in sizes], "-", color=c, lw=1.2, label="their median")
        worst = _worst(sweeps, floors)
        f = floors.get(worst.placement)
        bad = f is not None and f.outcome == "fail"
        ax.plot([p.bytes for p in worst.points], [p.busbw / 1e9 for p in worst.points], "--", marker="v", ms=3,
                color=OUTCOME_COLOURS["fail"] if bad else "#222222",
                label=f"worst: {worst.placement}" + (" (below its floor)" if bad else ""))
        _floor_bar(ax, f, c)
    _busbw_axes(ax)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(f"{klass} ({len(sweeps)} placement{'s' if len(sweeps) > 1 else ''})", fontsize=9)
    ax.legend(fontsize=6, loc="lower right")


def busbw_vs_size(op: str, sweeps: list, floors: dict, simulated: bool) -> Image:
    """Bus bandwidth against message size (log x), one line per placement, its floor drawn; with more
    than MAX_LINES placements, one panel per placement class (small multiples)."""
    drawn = [s for s in sweeps if s.points]
    title = f"{op} bus bandwidth" + (" (SIMULATION: gloo on CPU)" if simulated else "")
    caption = (f"{op}: busbw against size (log-log). A short solid bar marks the floor (a dashed one the ceiling) the run "
               "judged against, at the floor size, in the placement's colour.")
    if len(drawn) > MAX_LINES:
        classes: dict[str, list] = {}
        for s in drawn:
            classes.setdefault(s.klass, []).append(s)
        cols = min(3, len(classes))
        rows = (len(classes) + cols - 1) // cols
        fig = _figure(4.4 * cols, 3.1 * rows + 0.4)
        axes = fig.subplots(rows, cols, squeeze=False)
        for k, (klass, members) in enumerate(classes.items()):
            _class_panel(axes[k // cols][k % cols], klass, members, floors)
        for k in range(len(classes), rows * cols):
            axes[k // cols][k % cols].set_visible(False)
        fig.suptitle(title, fontsize=10)
        fig.supxlabel("message size (total buffer, nccl-tests convention)", fontsize=8)
        return render(fig, f"fig-busbw-{op}", f"{op} bus bandwidth in GB/s against message size, one panel per placement "
                      f"class ({', '.join(classes)}) of {len(drawn)} placements; floors drawn as bars at the floor size",
                      caption + f" {len(drawn)} placements: one panel per class; a class of more than {LINES_PER_CLASS} "
                      "is drawn as its band (lowest to highest busbw at each size), its median and its worst placement "
                      "(one below its floor first); every placement's figures are in the table beside it.")
    fig = _figure(6.6, 4.0)
    ax = fig.add_subplot()
    per_class: dict[str, int] = {}
    for s in drawn:
        k = per_class.get(s.klass, 0)
        per_class[s.klass] = k + 1
        c = colour(s.klass)
        ax.plot([p.bytes for p in s.points], [p.busbw / 1e9 for p in s.points], STYLES[k % len(STYLES)],
                marker=MARKERS[k % len(MARKERS)], color=c, label=s.placement, ms=4)
        _floor_bar(ax, floors.get(s.placement), c)
    _busbw_axes(ax)
    ax.set_xlabel("message size (total buffer, nccl-tests convention)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    return render(fig, f"fig-busbw-{op}", f"{op} bus bandwidth in GB/s against message size for "
                  f"{', '.join(s.placement for s in sweeps)}; floors drawn as bars at the floor size", caption)


def wire(rows: list[tuple[str, float, float]], nvlink: str, host: str, size: int, simulated: bool) -> Image:
    """NVLink against the host path on the same GPUs, per collective: grouped bars with the ratio."""
    fig = _figure(7.5, 3.8)
    ax = fig.add_subplot()
    xs = range(len(rows))
    fast = [r[1] / 1e9 for r in rows]
    slow = [r[2] / 1e9 for r in rows]
    ax.bar([x - 0.2 for x in xs], fast, 0.4, color=colour("nvswitch"), label=f"{nvlink} (NVLink)")
    ax.bar([x + 0.2 for x in xs], slow, 0.4, color=colour("forced_pcie"), label=f"{host} (host path)")
    for x, f, s in zip(xs, fast, slow):
        if s > 0:
            ax.annotate(f"{f / s:.1f}x", (x, max(f, s)), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(xs), [r[0] for r in rows])
    _gbps(ax)
    ax.set_ylim(0, max(fast + slow + [0.0]) * 1.3 or 1)  # room above the bars for the legend
    ax.set_title(f"NVLink vs host path at {format_bytes(size)}" + (" (SIMULATION: both are gloo on CPU)" if simulated else ""))
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    return render(fig, f"fig-wire-{host}", f"bus bandwidth per collective on {nvlink} and on {host} at {format_bytes(size)}, "
                  "with the NVLink/host-path ratio above each pair of bars",
                  "The wire: the same GPUs with NCCL's NVLink path and with it turned off (NCCL_P2P_DISABLE=1).")


# -- the link matrix ------------------------------------------------------------------------


def _nv(cell: str) -> float:
    return float(cell[2:]) if cell.startswith("NV") and cell[2:].isdigit() else 0.0


def _short(v: float) -> str:
    return "" if not v else f"{v:.0f}" if v >= 10 else f"{v:.2g}"


def link_matrix(gpus: list[int], matrix: list[list[str]], measured: dict | None, copies: dict | None) -> Image:
    """NV# heat map with the topo -m cell in each square; beside it the measured per-pair figures."""
    panels = [("NVLinks per pair (topo -m)", {(i, j): _nv(matrix[i][j]) for i in range(len(gpus)) for j in range(len(gpus))},
               lambda i, j, v: matrix[i][j], "Blues")]
    if measured:
        panels.append(("all_reduce busbw per pair, GB/s", measured, lambda i, j, v: _short(v), "Greens"))
    if copies:
        panels.append(("peer copy row->column, GB/s", copies, lambda i, j, v: _short(v), "Purples"))
    n = len(gpus)
    side = max(2.6, 0.45 * n + 1.2)
    fig = _figure(side * len(panels) + 0.4, side)
    for k, (title, values, label, cmap) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        grid = [[values.get((i, j), 0.0) or 0.0 for j in range(n)] for i in range(n)]
        top = max((v for row in grid for v in row), default=0.0) or 1.0
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=top)
        for i in range(n):
            for j in range(n):
                text = label(i, j, grid[i][j])
                ax.text(j, i, text, ha="center", va="center", fontsize=8 if n <= 8 else 6,
                        color="white" if grid[i][j] > 0.6 * top else "black")
        ax.set_xticks(range(n), [f"GPU{g}" for g in gpus], fontsize=7, rotation=90 if n > 4 else 0)
        ax.set_yticks(range(n), [f"GPU{g}" for g in gpus], fontsize=7)
        ax.set_title(title, fontsize=9)
    return render(fig, "fig-link-matrix", "heat map of NVLink counts between every pair of GPUs"
                  + ("; measured all_reduce busbw per pair" if measured else "")
                  + ("; measured peer copy bandwidth per direction" if copies else ""),
                  "The link matrix: NV# (links between two GPUs) as `nvidia-smi topo -m` shows it, and the figures "
                  "measured per pair where the run has them.")


# -- training ---------------------------------------------------------------------------------


def strategy_dial(points: list) -> Image:
    """Model state measured vs the memory model, peak memory, tokens/s and MFU, per strategy and wire."""
    strategies = list(dict.fromkeys(p.strategy for p in points))
    placements = list(dict.fromkeys(p.placement for p in points))
    fig = _figure(10, 6.4)
    axes = fig.subplots(2, 2)
    width = 0.8 / max(1, len(placements))
    by = {(p.placement, p.strategy): p for p in points}
    def _bytes_unit(get) -> tuple[str, float]:
        top = max((get(p) or 0 for p in points), default=0)
        return ("GiB", 2.0**30) if top >= 2**30 else ("MiB", 2.0**20)

    state_unit, state_div = _bytes_unit(lambda p: p.model_state_bytes)
    peak_unit, peak_div = _bytes_unit(lambda p: p.peak_bytes)
    panels = (
        (axes[0][0], f"model state per GPU ({state_unit}): bars measured, ticks the memory model",
         lambda p: p.model_state_bytes, lambda v: v / state_div, True),
        (axes[0][1], f"peak allocated per GPU ({peak_unit})", lambda p: p.peak_bytes, lambda v: v / peak_div, False),
        (axes[1][0], "tokens/s (whole job, timed on the slowest rank)", lambda p: p.tokens_per_s, lambda v: v, False),
        (axes[1][1], "MFU (model FLOPs utilisation)", lambda p: p.mfu, lambda v: v * 100, False)
        if any(p.mfu is not None for p in points) else
        (axes[1][1], "achieved TFLOP/s per GPU (6 N x tokens/s; no peak to make an MFU)",
         lambda p: p.achieved_flops_per_gpu, lambda v: v / 1e12, False),
    )
    for ax, title, get, scale, predicted in panels:
        drawn = False
        for k, pid in enumerate(placements):
            xs, ys, preds = [], [], []
            for i, s in enumerate(strategies):
                p = by.get((pid, s))
                if p is None or get(p) is None:
                    continue
                xs.append(i - 0.4 + width * (k + 0.5))
                ys.append(scale(get(p)))
                preds.append(scale(p.predicted_bytes) if predicted and p.predicted_bytes else None)
            if not xs:
                continue
            drawn = True
            klass = by[(pid, next(s for s in strategies if (pid, s) in by))].klass
            ax.bar(xs, ys, width * 0.9, color=colour(klass), alpha=0.85 - 0.15 * (k % 3), label=pid)
            if predicted:
                pts = [(x, y) for x, y in zip(xs, preds) if y is not None]
                if pts:
                    ax.plot([x for x, _ in pts], [y for _, y in pts], "_", color="black", ms=14, mew=2,
                            label="memory model" if k == 0 else None)
        ax.set_title(title + (" %" if title.startswith("MFU") and drawn else ""), fontsize=9)
        if drawn:
            ax.set_xticks(range(len(strategies)), strategies)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        else:
            reason = ("not in these records (simulation: no device memory)" if "peak allocated" in title else
                      "MFU: not in these records (the runner does not report it)" if "FLOP" in title else "not measured")
            _note(ax, reason)
    return render(fig, "fig-strategy-dial", "four panels per strategy and placement: model state measured against the "
                  "memory model, peak allocated memory, tokens per second and MFU",
                  "The strategy dial: DDP, ZeRO-1/2/3 and FSDP on each placement (wire). The staircase "
                  "DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3 ~ FSDP shows in the first panel.")


# -- copies and counters -------------------------------------------------------------------


def copy_bandwidth(host: list[dict], peer: list[dict], floors: dict) -> Image:
    """Host<->device per GPU and peer copies per direction, bars against their floors (GB/s)."""
    fig = _figure(9, 3.6)
    axes = fig.subplots(1, 2, width_ratios=[1, max(1, len(peer) / max(1, 2 * len(host)))])
    ax = axes[0]
    xs = range(len(host))
    for off, key, label, c in ((-0.2, "h2d", "host->device", "#1f77b4"), (0.2, "d2h", "device->host", "#ff7f0e")):
        ys = [h[f"{key}_bytes_per_s"] / 1e9 for h in host]
        ax.bar([x + off for x in xs], ys, 0.4, color=c, label=label)
        for x, h in zip(xs, host):
            f = floors.get((f"GPU{h['gpu']}", key))
            if f:
                ax.plot([x + off], [f], "_", color="black", ms=16, mew=2)
    ax.set_xticks(list(xs), [f"GPU{h['gpu']}" for h in host])
    _gbps(ax)
    top = max([h[f"{k}_bytes_per_s"] / 1e9 for h in host for k in ("h2d", "d2h")] + [0.0])
    ax.set_ylim(0, top * 1.3 or 1)  # room for the legend above the bars
    ax.set_title("pinned host copies (tick: floor)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax = axes[1]
    if peer:
        ys = [p["bytes_per_s"] / 1e9 for p in peer]
        ax.bar(range(len(peer)), ys, 0.6, color="#9467bd")
        for x, p in enumerate(peer):
            f = floors.get((f"{min(p['src'], p['dst'])}.{max(p['src'], p['dst'])}", "peer"))
            if f:
                ax.plot([x], [f], "_", color="black", ms=16, mew=2)
        ax.set_xticks(range(len(peer)), [f"GPU{p['src']}->GPU{p['dst']}" for p in peer], fontsize=7)
        _gbps(ax)
        ax.set_title("peer copies over NVLink (tick: floor)", fontsize=9)
    else:
        _note(ax, "no NVLink pair measured")
    return render(fig, "fig-copy-bandwidth", "bar charts of host-to-device and device-to-host copy bandwidth per GPU "
                  "and peer copy bandwidth per direction of each NVLink pair, with floors",
                  "Copy bandwidth without NCCL (what nvbandwidth measures), one link at a time.")


def counter_growth(rows: list[dict]) -> Image:
    """Growth of each error counter over the run, per GPU (0 is the healthy value)."""
    gpus = [r["where"] for r in rows]
    counters = list(dict.fromkeys(d["counter"] for r in rows for d in (r.get("inputs") or {}).get("deltas", [])))
    fig = _figure(8, 3.4)
    ax = fig.add_subplot()
    if counters:
        width = 0.8 / max(1, len(gpus))
        for k, r in enumerate(rows):
            grew = {d["counter"]: d["grew_by"] for d in (r.get("inputs") or {}).get("deltas", [])}
            xs = [i - 0.4 + width * (k + 0.5) for i in range(len(counters))]
            ax.bar(xs, [grew.get(c, 0) for c in counters], width * 0.9, label=r["where"],
                   color=OUTCOME_COLOURS.get(r.get("outcome"), "#333333"), alpha=0.5 + 0.5 / (k + 1))
        ax.set_xticks(range(len(counters)), counters, rotation=60, ha="right", fontsize=6)
        ax.set_ylabel("events over the run")
        ax.legend(fontsize=7)
        ax.set_ylim(bottom=0, top=max(1, ax.get_ylim()[1]))
    else:
        _note(ax, "no error counter was readable")
    ax.set_title("error-counter growth during the run (bar colour: verdict)", fontsize=9)
    return render(fig, "fig-counter-growth", "bar chart of how much each NVLink and PCIe error counter grew per GPU",
                  "Health counters, read at session start and after the measurements: only their growth is judged.")


# -- each GPU under load -----------------------------------------------------------------------


def gpu_bars(points: list, figures: dict) -> Image:
    """One panel per GPU health figure: a bar per GPU (colour: the worst of its verdicts: its floor and
    peers, its history, its drift), the floor as a solid black line, the median of its peers as a dashed
    line and the peer rule's limit (the median less max_below_median) as a dotted red one, and the bound
    its own history held it to as a dash-dot purple one, each drawn across the GPU's own bar: the bound
    that failed a figure is on its bar. `figures`: key -> (label, unit, display units per base unit), as
    report.model.GPU_FIGURES."""
    keys = list(figures)
    cols = min(3, len(keys))
    rows = (len(keys) + cols - 1) // cols
    width = max(3.4, 0.5 * len(points) + 1.6)
    fig = _figure(width * cols, 2.9 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    legend_names: set = set()
    for n, key in enumerate(keys):
        ax = axes[n // cols][n % cols]
        label, unit, scale = figures[key]
        shown = [(k, p) for k, p in enumerate(points) if key in p.figures]
        if not shown:
            why = sorted({p.unmeasured[key] for p in points if key in p.unmeasured})
            _note(ax, f"{label}: not measured" + (f"\n({why[0][:60]})" if why else ""))
            ax.set_title(label, fontsize=9)
            continue
        for k, p in shown:
            judged, past = p.judged.get(key), p.own_past.get(key)
            ax.bar(k, p.figures[key] * scale, 0.7, color=OUTCOME_COLOURS.get(p.outcome(key), "#1f77b4"))
            lines = []
            if judged is not None:
                lines += [(judged.floor, "-", "black", "floor"), (judged.peers_median, "--", "#555555", "median of its peers"),
                          (judged.peer_limit, ":", OUTCOME_COLOURS["fail"], "peer rule's limit")]
            if past is not None:
                lines += [(past.bound, "-.", "#9467bd", "its own history's bound")]
                if past.drift in ("warn", "fail"):
                    lines += [(past.drift_bound, (0, (1, 1)), "#ff7f0e", "the drift rule's bound")]
            for value, style, colour_, name in lines:
                if value is not None:
                    ax.hlines(value * scale, k - 0.45, k + 0.45, colors=colour_, linestyles=style, lw=1.8,
                              label=name if name not in legend_names else None)
                    legend_names.add(name)
        ax.set_xticks(range(len(points)), [f"GPU{p.gpu}" for p in points], fontsize=7,
                      rotation=90 if len(points) > 8 else 0)
        ax.set_ylabel(unit, fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        drawn = ([p.figures[key] * scale for _, p in shown]
                 + [j.floor * scale for p in points if (j := p.judged.get(key)) and j.floor is not None]
                 + [h.bound * scale for p in points if (h := p.own_past.get(key)) and h.bound is not None])
        # From 80 % of the lowest value or bound, not from zero: a history bound 0.5 % under its bar must show.
        ax.set_ylim(0.8 * min(drawn), max(drawn) * 1.04 or 1)
    if legend_names:
        fig.legend(fontsize=7, loc="outside lower center", ncol=4)
    for n in range(len(keys), rows * cols):
        axes[n // cols][n % cols].set_visible(False)
    return render(fig, "fig-gpu-bars", "bar charts per GPU of HBM copy and read bandwidth, GEMM bf16 and fp8 and "
                  "sustained TFLOP/s, each with its floor, the median of the node's other GPUs and the peer rule's limit",
                  "Each GPU on its own, every GPU at once. Bar colour: the worst of its verdicts, its floor and peers, "
                  "its history and its drift (green pass, orange warned, red fail, grey skip); solid black line: the "
                  "GPU model's floor; dashed: the median of the node's other GPUs of the same model; dotted red: the "
                  "peer rule's limit (that median less gpu_health.peers.max_below_median); dash-dot purple: the bound "
                  "its own history held it to (the median of its last runs less the margin their noise allows); dotted "
                  "orange: the drift rule's bound where it warned or failed. The axis starts at 80 % of the lowest bar "
                  "or line, not at zero.")


def gpu_sustained(points: list) -> Image:
    """The sustained load over time, one line per GPU: TFLOP/s per window, and NVML's SM clock,
    power (the enforced limit dashed) and temperature (NVML's slowdown threshold dashed)."""
    fig = _figure(10, 6.2)
    axes = fig.subplots(2, 2, sharex=True)
    panels = ((axes[0][0], "TFLOP/s per window", None), (axes[0][1], "SM clock (MHz)", "sm_mhz"),
              (axes[1][0], "power (W)", "power_w"), (axes[1][1], "temperature (°C)", "temperature_c"))
    starts = [p.windows[0]["t0"] for p in points if p.windows] + [s["t"] for p in points for s in p.samples[:1]]
    t_start = min(starts) if starts else 0.0
    for ax, title, key in panels:
        drawn = False
        for k, p in enumerate(points):
            style = dict(ls=STYLES[k // 10 % len(STYLES)], marker=MARKERS[k % len(MARKERS)], ms=3, label=f"GPU{p.gpu}")
            if key is None:
                xs = [(w["t0"] + w["t1"]) / 2 - t_start for w in p.windows if w.get("flops_per_s")]
                ys = [w["flops_per_s"] / 1e12 for w in p.windows if w.get("flops_per_s")]
            else:
                pts = [(s["t"] - t_start, s[key]) for s in p.samples if s.get(key) is not None and s.get("t") is not None]
                xs, ys = [x for x, _ in pts], [y for _, y in pts]
            if not xs:
                continue
            line, = ax.plot(xs, ys, **style)
            drawn = True
            limits = p.nvml_limits or {}
            bound = {"power_w": limits.get("power_limit_w"), "temperature_c": limits.get("slowdown_c")}.get(key)
            if bound is not None:
                ax.axhline(bound, color=line.get_color(), ls="--", lw=0.8, alpha=0.7)
        ax.set_title(title, fontsize=9)
        if drawn:
            ax.grid(True, alpha=0.3)
            if len(points) <= 8:
                ax.legend(fontsize=6)
        else:
            _note(ax, "no NVML samples (a simulation has no NVML)" if key else "no sustained load measured")
    for ax in axes[1]:
        ax.set_xlabel("seconds from the load's start", fontsize=8)
    return render(fig, "fig-gpu-sustained", "four panels over the sustained load, one line per GPU: TFLOP/s per window, "
                  "SM clock, power against the enforced limit and temperature against NVML's slowdown threshold",
                  "The sustained load, every GPU at once. Dashed lines: each GPU's enforced power limit and NVML's "
                  "slowdown temperature. Sagging TFLOP/s with a falling clock and temperature near its line is cooling; "
                  "with power at its limit it is the power cap, normal under GEMM.")


def burn_in(view) -> Image:
    """A burn-in over its whole run (wirecheck.report.burn_in.BurnInView): per GPU every window's TFLOP/s,
    NVML's temperature and power, and each placement's busbw per round; rounds cut by a fault or Ctrl-C
    marked where they ended."""
    fig = _figure(10, 6.2)
    axes = fig.subplots(2, 2)  # not sharex: an empty panel's note must not take the others' ticks away
    span = max((r["ended"] for r in view.rounds), default=view.t0) - view.t0
    minutes, unit = (1.0, "seconds") if span < 300 else (60.0, "minutes") if span < 5 * 3600 else (3600.0, "hours")
    panels = ((axes[0][0], "TFLOP/s per window", lambda g: view.windows(g)),
              (axes[0][1], "temperature (°C)", lambda g: view.samples(g, "temperature_c")),
              (axes[1][0], "power (W)", lambda g: view.samples(g, "power_w")))
    for ax, title, points in panels:
        drawn = False
        for k, gpu in enumerate(view.gpus):
            pts = points(gpu)
            if not pts:
                continue
            ax.plot([x / minutes for x, _ in pts], [y for _, y in pts], ls=STYLES[k // 10 % len(STYLES)], lw=0.8,
                    label=gpu)
            drawn = True
        ax.set_title(title, fontsize=9)
        if drawn:
            ax.grid(True, alpha=0.3)
            if len(view.gpus) <= 8:
                ax.legend(fontsize=6)
        else:
            _note(ax, "no NVML samples (a simulation has no NVML)" if "TFLOP" not in title else "no window measured")
    ax = axes[1][1]
    series = view.busbw()
    for k, (key, pts) in enumerate(sorted(series.items())):
        ax.plot([x / minutes for x, _ in pts], [y for _, y in pts], marker=MARKERS[k % len(MARKERS)], ms=3,
                ls=STYLES[k // len(MARKERS) % len(STYLES)], color=colour(key.split("-", 1)[0]), label=key)
    ax.set_title("busbw per round, beside the load (GB/s)", fontsize=9)
    if series:
        ax.grid(True, alpha=0.3)
        if len(series) <= 12:
            ax.legend(fontsize=6)
    else:
        _note(ax, "no collective in the cycle (one GPU, or none of its placements)")
    stop = next((r for r in view.rounds if r.get("fault") or r.get("interrupted")), None)
    for row in axes:
        for a in row:
            if a.has_data():
                a.set_xlim(0, max(span, 1.0) / minutes)
            if stop is not None and a.has_data():
                a.axvline((stop["ended"] - view.t0) / minutes, color=OUTCOME_COLOURS["fail"], ls="--", lw=1)
    for a in axes[1]:
        a.set_xlabel(f"{unit} from the burn-in's start", fontsize=8)
    return render(fig, "fig-burn-in", "four panels over the whole burn-in: TFLOP/s per window and NVML's temperature "
                  "and power per GPU, and each placement's busbw per round",
                  "The burn-in, every GPU under load for its whole duration while collectives cycle. A dashed red line: "
                  "where a hard fault or Ctrl-C stopped it. TFLOP/s sagging with the temperature rising is cooling; "
                  "one placement's busbw dropping in some rounds is a link that degrades under load.")


# -- history ----------------------------------------------------------------------------------


# The band never narrows below this fraction of the median: a series that repeats itself exactly
# (MAD 0) would otherwise flag any change at all, however small.
MIN_BAND = 0.01


def mad_band(values: list[float], k: float = 3.0) -> tuple[float, float, float] | None:
    """(median, low, high): median +- k x the scaled median absolute deviation (1.4826 x MAD, which
    estimates sigma for normal noise and ignores the outliers it is meant to flag), at least
    +- MIN_BAND x median; None below 3 points."""
    if len(values) < 3:
        return None
    med = statistics.median(values)
    half = max(k * 1.4826 * statistics.median(abs(v - med) for v in values), MIN_BAND * abs(med))
    # Bandwidths, throughputs and counts cannot go below zero, and neither can their band.
    low = max(med - half, 0.0) if min(values) >= 0 else med - half
    return med, low, med + half


def trend(fid: str, title: str, unit: str, panels: list[tuple[str, dict[str, list[tuple]]]], log_y: bool = False) -> Image:
    """One subplot per panel, one line per series over run start times, each with its noise band
    (median +- 3 scaled MAD); points outside their band are circled red. A series named by a
    placement id takes its class's colour. `log_y` applies where a panel spans more than 20x."""
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig = _figure(4.2 * cols, 2.8 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    for n, (name, series) in enumerate(panels):
        ax = axes[n // cols][n % cols]
        values = [v for points in series.values() for _, v in points if v > 0]
        for k, (label, points) in enumerate(series.items()):
            points = sorted(points)
            xs = [t for t, _ in points]
            ys = [v for _, v in points]
            klass = label.split("-", 1)[0]
            line, = ax.plot(xs, ys, STYLES[k % len(STYLES)], marker=MARKERS[k % len(MARKERS)], ms=4, label=label,
                            **({"color": CLASS_COLOURS[klass]} if klass in CLASS_COLOURS else {}))
            band = mad_band(ys)
            if band:
                med, low, high = band
                ax.fill_between([xs[0], xs[-1]], [low] * 2, [high] * 2, color=line.get_color(), alpha=0.15)
                ax.axhline(med, color=line.get_color(), lw=0.8, alpha=0.6)
                out = [(x, y) for x, y in zip(xs, ys) if not low <= y <= high]
                if out:
                    ax.plot([x for x, _ in out], [y for _, y in out], "o", mfc="none", mec="red", ms=10, mew=1.5)
        if log_y and values and max(values) / min(values) > 20:
            ax.set_yscale("log")
            _plain_log_y(ax)
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        ax.set_title(name, fontsize=9)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, alpha=0.3)
        if len(series) <= 8:
            ax.legend(fontsize=6)
    for n in range(len(panels), rows * cols):
        axes[n // cols][n % cols].set_visible(False)
    return render(fig, fid, f"{title} over time, one line per series with a shaded noise band", title)


# -- each GPU and placement against its own history ------------------------------------------------

MAX_HISTORY_PANELS = 12  # the rest are in the table beside it


def history_trends(series: list) -> Image:
    """One panel per GPU's or placement's figure (report.history_view.HistorySeries, failures first): its
    earlier runs and this run (coloured by the worse of its history and drift verdicts), the bound the
    history rule held this run to (dashed red: the median of its last runs less its margin), the drift
    rule's reference (dotted grey) and its bound (dash-dot orange), and a grey line where a fall began."""
    shown = series[:MAX_HISTORY_PANELS]
    cols = min(3, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig = _figure(4.2 * cols, 2.7 * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    legend = {}
    for n, s in enumerate(shown):
        ax = axes[n // cols][n % cols]
        xs = list(range(len(s.past) + 1))
        ys = [v for _, v in s.past] + [s.value]
        ax.plot(xs[:-1], ys[:-1], "-o", color="#1f77b4", ms=3, lw=1, label="earlier runs")
        legend["this run"] = ax.plot([xs[-1]], [ys[-1]], "o", ms=8, color=OUTCOME_COLOURS.get(s.outcome, "#1f77b4"),
                                     label="this run")[0]
        h, d = s.history or {}, s.drift or {}
        if h.get("bound") is not None:
            start = max(0, len(xs) - 1 - 14)
            legend["history bound"] = ax.hlines(h["bound"], start, xs[-1] + 0.3, colors=OUTCOME_COLOURS["fail"],
                                                linestyles="--", lw=1.4, label="history bound")
        if d.get("reference") is not None:
            legend["drift reference"] = ax.axhline(d["reference"], color="#777777", ls=":", lw=1, label="drift reference")
        if d.get("bound") is not None and d.get("outcome") != "skip":
            legend["drift bound"] = ax.axhline(d["bound"], color="#ff7f0e", ls="-.", lw=1, label="drift bound")
        began = next((k for k, (date, _) in enumerate(s.past) if d.get("began") and date[:10] == d["began"]), None)
        if began is not None and d.get("outcome") in ("warn", "fail"):
            legend["fall began"] = ax.axvline(began, color="#555555", lw=1, alpha=0.6, label="fall began")
        labels = [date[5:10] for date, _ in s.past] + ["now"]
        step = max(1, len(labels) // 6)
        ax.set_xticks(xs[::step], labels[::step], fontsize=7)
        ax.set_title(f"{s.where} {s.figure}: {s.outcome}", fontsize=9,
                     color=OUTCOME_COLOURS["fail"] if s.outcome == "fail" else "black")
        ax.set_ylabel(s.unit, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.margins(y=0.3)
    for n in range(len(shown), rows * cols):
        axes[n // cols][n % cols].set_visible(False)
    if legend:
        fig.legend(list(legend.values()), list(legend.keys()), fontsize=7, loc="outside lower center", ncol=5)
    more = f"; {len(series) - len(shown)} more in the table" if len(series) > len(shown) else ""
    return render(fig, "fig-history", f"each GPU's and placement's figures over its own earlier runs, this run marked, "
                  f"with the bound the history rule held it to and the drift rule's reference and bound{more}",
                  "Each GPU (by serial) and placement against its own past: blue its earlier runs, the big dot this run "
                  "(green pass, orange warned, red failed); dashed red the history bound (the median of its last runs "
                  "less the margin its own noise allows); dotted grey the drift rule's reference (the median of its "
                  f"oldest runs) and dash-dot orange its bound; a grey line where a fall began{more}.")
