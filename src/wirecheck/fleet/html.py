"""The fleet page: one self-contained HTML file (figures inlined as PNG) drawn from a FleetResult.

- every node's key figures relative to its peers' median, one column per node (a slow node's
  column sits low, the rule's line is drawn for each figure kind);
- each figure for which a node was named, node by node, with the median and the rule's line;
- every GPU's health figures relative to the median of the fleet's other GPUs of its model, one
  panel per figure, the GPUs of a node in its column, the named ones red and listed;
- the pair schedule as a node-by-node matrix of pair bandwidth.
matplotlib is imported here only (`--html`); the rest of the fleet report does not need it.
"""

from __future__ import annotations

import base64
import html
import io
import statistics

from wirecheck.fleet.judging import FleetResult, gpus_below_fleet, named_by_fleet_rule, named_by_pairs, slow_links
from wirecheck.report.html import CSP
from wirecheck.core.verdict import FAIL, SKIP

MAX_FIGURE_PLOTS = 12
RED, GREY, BLUE = "#c62828", "#9e9e9e", "#1565c0"


def _figure():
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("--html needs matplotlib: pip install matplotlib (or install wirecheck[report])") from None
    # Node names come from the records' file names: text, never mathtext (two `$` would stop the page).
    matplotlib.rcParams["text.parse_math"] = False
    return Figure


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def relative_values(result: FleetResult) -> dict[str, list[tuple[str, float, bool]]]:
    """{node: [(figure label, value / peers' median, named)]} for every judged figure."""
    out: dict[str, list] = {}
    for n in result.nodes:
        for v in n.outliers:
            if v.outcome == SKIP or not v.limit or not v.limit.get("median"):
                continue
            out.setdefault(n.node, []).append((v.what, v.measured / v.limit["median"], v.outcome == FAIL))
    return out


def _overview(result: FleetResult):
    rel = relative_values(result)
    if not rel:
        return None
    Figure = _figure()
    nodes = [n.node for n in result.nodes if n.node in rel]
    fig = Figure(figsize=(max(4.0, 0.5 * len(nodes) + 2), 3.2))
    ax = fig.subplots()
    for x, node in enumerate(nodes):
        for _, ratio, named in rel[node]:
            ax.plot(x, ratio, "o", color=RED if named else BLUE, alpha=0.9 if named else 0.35, ms=7 if named else 5)
    rules = result_rules(result)
    for name, (below, style) in rules.items():
        ax.axhline(1 - below, color=GREY, ls=style, lw=1, label=f"{name}: {below * 100:g} % below the median")
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(range(len(nodes)), nodes, rotation=60 if len(nodes) > 8 else 0, fontsize=8)
    ax.set_ylabel("value / peers' median")
    ax.set_title("every key figure of every node, relative to its peers")
    ax.legend(fontsize=7, loc="upper right")
    return fig


def result_rules(result: FleetResult) -> dict[str, tuple[float, str]]:
    rules = {}
    for n in result.nodes:
        for v in n.outliers:
            if v.limit and "max_below_median" in v.limit:
                kind = "throughput" if "tokens/s" in (v.unit or "") else "busbw"
                rules[kind] = (v.limit["max_below_median"], "--" if kind == "busbw" else ":")
    return rules


def _named_figures(result: FleetResult) -> list:
    named = sorted({v.what for n in result.nodes for v in n.outliers if v.outcome == FAIL})[:MAX_FIGURE_PLOTS]
    Figure = _figure()
    figs = []
    for what in named:
        points = [(n.node, v) for n in result.nodes for v in n.outliers if v.what == what and v.measured is not None]
        fig = Figure(figsize=(max(4.0, 0.45 * len(points) + 2), 2.8))
        ax = fig.subplots()
        values = [v.measured for _, v in points]
        ax.bar(range(len(points)), values, color=[RED if v.outcome == FAIL else BLUE for _, v in points])
        median = statistics.median(values)
        ax.axhline(median, color="black", lw=0.8, label=f"fleet median {median:.3g}")
        below = next((v.limit["max_below_median"] for _, v in points if v.limit), None)
        if below is not None:
            ax.axhline(median * (1 - below), color=GREY, ls="--", lw=1, label=f"{below * 100:g} % below")
        ax.set_xticks(range(len(points)), [n for n, _ in points], rotation=60 if len(points) > 8 else 0, fontsize=8)
        ax.set_ylabel(points[0][1].unit or "")
        ax.set_title(what.replace(" against the fleet", ""), fontsize=9)
        ax.legend(fontsize=7)
        figs.append(fig)
    return figs


def _gpus(result: FleetResult):
    """One panel per GPU figure: each GPU's value over the median of the fleet's other GPUs of its
    model, the GPUs of a node in its column; named ones red; the rule's line dashed."""
    judged = [(n.node, v) for n in result.nodes for v in n.gpus if v.outcome != SKIP and v.limit and v.limit.get("median")]
    if not judged:
        return None
    whats = list(dict.fromkeys(v.what.split(" against the fleet")[0] for _, v in judged))
    nodes = [n.node for n in result.nodes if any(node == n.node for node, _ in judged)]
    Figure = _figure()
    cols = min(3, len(whats))
    rows = (len(whats) + cols - 1) // cols
    fig = Figure(figsize=(max(3.6, 0.45 * len(nodes) + 1.8) * cols, 2.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, what in enumerate(whats):
        ax = axes[k // cols][k % cols]
        ratios = [v.measured / v.limit["median"] for _, v in judged if v.what.startswith(what + " against")]
        for x, node in enumerate(nodes):
            for who, v in judged:
                if who == node and v.what.startswith(what + " against"):
                    named = v.outcome == FAIL
                    ax.plot(x, v.measured / v.limit["median"], "o", color=RED if named else BLUE,
                            alpha=0.9 if named else 0.4, ms=7 if named else 4)
                    if named:
                        ax.annotate(v.where.rsplit("/", 1)[-1], (x, v.measured / v.limit["median"]), fontsize=7,
                                    xytext=(4, -3), textcoords="offset points", color=RED)
        below = next(v.limit["max_below_median"] for _, v in judged if v.what.startswith(what + " against"))
        ax.axhline(1, color="black", lw=0.8)
        ax.axhline(1 - below, color=GREY, ls="--", lw=1)
        ax.set_xlim(-0.5, len(nodes) - 0.5)
        ax.set_ylim(min(ratios + [1 - below]) - 0.05, max(ratios + [1.0]) + 0.05)
        ax.set_xticks(range(len(nodes)), nodes, rotation=60 if len(nodes) > 8 else 0, fontsize=7)
        ax.set_title(what, fontsize=9)
        ax.set_ylabel("value / fleet median", fontsize=8)
    for k in range(len(whats), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    return fig


def _pair_matrix(net) -> object | None:
    pairs = [m for m in net.measurements if m.get("kind") == "pair" and m.get("value") is not None]
    if not pairs:
        return None
    nodes = net.nodes
    index = {n: k for k, n in enumerate(nodes)}
    import math

    grid = [[math.nan] * len(nodes) for _ in nodes]
    for m in pairs:
        a, b = m["details"]["a"], m["details"]["b"]
        grid[index[a]][index[b]] = grid[index[b]][index[a]] = m["value"]
    Figure = _figure()
    size = max(3.0, 0.45 * len(nodes) + 1.5)
    fig = Figure(figsize=(size + 1, size))
    ax = fig.subplots()
    im = ax.imshow(grid, cmap="viridis")
    ax.set_xticks(range(len(nodes)), nodes, rotation=90, fontsize=7)
    ax.set_yticks(range(len(nodes)), nodes, fontsize=7)
    slow = {v.where for v in net.verdicts if v.check == "pair_node" and v.outcome == FAIL}
    for k, n in enumerate(nodes):
        if n in slow:
            ax.get_yticklabels()[k].set_color(RED)
            ax.get_xticklabels()[k].set_color(RED)
    fig.colorbar(im, ax=ax, label="pair all_reduce busbw (GB/s)")
    ax.set_title("node pairs (ring, then shifted by 2)", fontsize=9)
    return fig


def _table(result: FleetResult) -> str:
    rows = []
    for n in result.nodes:
        below = [v for v in n.outliers if v.outcome == FAIL]
        gpus = {v.where for v in n.gpus if v.outcome == FAIL}
        cls = "ok" if n.ok else "bad"
        rows.append(
            f"<tr class='{cls}'><td>{html.escape(n.node)}</td><td>{html.escape(n.record_status)}</td>"
            f"<td>{n.count(FAIL)}/{n.count('pass')}/{n.count(SKIP)}</td><td>{len(below)}</td><td>{len(gpus)}</td>"
            f"<td>{html.escape(n.pairs_status)}</td>"
            f"<td>{'PASS' if n.ok else 'FAIL'}</td></tr>")
    head = ("<tr><th>node</th><th>record</th><th>checks fail/pass/skip</th><th>below peers</th><th>GPUs below fleet</th>"
            "<th>pairs</th><th>status</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _names(names, empty: str = "none") -> str:
    """Node names come from the records' file names and contents, as anything else there: escaped."""
    return html.escape(", ".join(names)) or empty


def _headline(result: FleetResult) -> str:
    verdict = "PASSED" if result.ok else "FAILED"
    if result.simulated:
        return f"SIMULATION ({'no failures' if result.ok else 'FAILED'}): no node validated"
    return verdict


def render_page(result: FleetResult) -> str:
    failures = result.failures
    parts = [
        # The node report's policy: no script runs and nothing is fetched, whatever a record carried.
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv=\"Content-Security-Policy\" "
        f"content=\"{CSP}\"><title>wirecheck fleet</title><style>",
        "body{font-family:sans-serif;margin:2em;max-width:1100px} table{border-collapse:collapse}",
        "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px} tr.bad td{background:#fde0dc}",
        "tr.ok td{background:#e8f5e9} .banner{padding:8px;background:#fff3cd} li{font-size:13px;margin:4px 0}",
        # A simulated fleet is headlined as loudly as a failed one (the node report's banner).
        ".banner.sim{font-size:2.2em;font-weight:800;padding:0.3em 0.5em;color:#7a5200;border:4px dashed #e0a800}",
        "</style></head><body>",
        f"<h1>wirecheck fleet: {_headline(result)}</h1>",
        f"<p>{html.escape(result.directory)}: {len(result.nodes)} node(s), {len(result.network)} multi-node run(s); "
        f"thresholds {html.escape(result.thresholds)}; exit status {result.exit_code}</p>",
    ]
    if result.simulated:
        parts.append("<div class='banner sim'>SIMULATION: the records are simulated runs; no node was validated</div>")
    # As the text report says it: without a multi-node record the pairs were not measured, not found fine.
    unmeasured = "not measured" if not result.network else "none"
    parts.append(f"<p>Below their peers (fleet rule): <b>{_names(named_by_fleet_rule(result))}</b>. "
                 f"Slow with every partner (pair schedule): <b>{_names(named_by_pairs(result), unmeasured)}</b>. "
                 f"Slow links: <b>{_names(slow_links(result), unmeasured)}</b>. "
                 f"GPUs below the fleet's GPUs of their model: <b>{_names(gpus_below_fleet(result), unmeasured)}</b>.</p>")
    parts.append(_table(result))
    if failures:
        parts.append("<h2>Failures</h2><ul>" + "".join(
            f"<li><b>{html.escape(who)}</b> [{html.escape(v.check)}] {html.escape(v.message)}</li>" for who, v in failures)
            + "</ul>")
    overview = _overview(result)
    if overview is not None:
        parts.append("<h2>Key figures against the fleet</h2>" + _png(overview))
    for fig in _named_figures(result):
        parts.append(_png(fig))
    gpus = _gpus(result)
    if gpus is not None:
        parts.append("<h2>GPUs against the fleet's GPUs of their model</h2>" + _png(gpus))
        named = [v for n in result.nodes for v in n.gpus if v.outcome == FAIL]
        if named:
            parts.append("<ul>" + "".join(f"<li><b>{html.escape(v.where)}</b> {html.escape(v.message)}</li>"
                                          for v in named) + "</ul>")
    for net in result.network:
        parts.append(f"<h2>Multi-node run {html.escape(net.path)}</h2><ul>" + "".join(
            f"<li>{html.escape(str(v.outcome).upper())} [{html.escape(v.check)}] {html.escape(v.message)}</li>"
            for v in net.verdicts if (v.where or "").startswith("network-") or v.check == "measurement_completed")
            + "</ul>")
        matrix = _pair_matrix(net)
        if matrix is not None:
            parts.append(_png(matrix))
    parts.append("</body></html>")
    return "\n".join(parts)
