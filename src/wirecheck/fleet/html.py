"""The fleet page: one self-contained HTML file (figures inlined as PNG) drawn from a FleetResult.

It leads with the verdict, the failures and a summary (nodes per state, the nodes furthest below the
fleet, each figure's spread); then:
- every key figure of every node relative to its peers' median, one column per figure (a slow node's
  point sits low, the rule's line is drawn for each figure kind, the named ones red);
- each figure for which a node was named, a panel each in one picture: one bar per node for a small
  fleet, the fleet's histogram with the named nodes marked for a large one, the median and the rule's line;
- every GPU's health figures relative to the median of the fleet's other GPUs of its model, one
  panel per figure, the named ones red and listed;
- the pair schedule as a node-by-node matrix of pair bandwidth (up to MAX_MATRIX nodes);
- every node's row, in a collapsed section (the failed nodes first).
Each figure is a few vectorised draws whatever the fleet's size: 10,000 nodes draw as fast as 10.
Labels and numbers come from the verdicts' structure (details, measured, limit), never their wording.
matplotlib is imported here only (`--html`); the rest of the fleet report does not need it.
"""

from __future__ import annotations

import base64
import html
import io
import statistics

from wirecheck.fleet import summary
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


MAX_BARS = 60  # a fleet up to this size is drawn node by node; a larger one as a distribution
MAX_MATRIX = 200  # the pair matrix: more nodes than this is no picture (the verdicts name the slow ones)
MAX_LISTED = 500  # failures listed on the page; the rest are in --json
MAX_NAMED_OPEN = 10  # names the rules gave, shown open below the failures; more: behind their disclosure


def _ratio(v) -> float | None:
    median = (v.limit or {}).get("median")
    return v.measured / median if v.outcome != SKIP and median and isinstance(v.measured, (int, float)) else None


def relative_values(result: FleetResult) -> dict[str, list[tuple[str, float, bool]]]:
    """{figure label: [(node, value / peers' median, named)]} for every judged node figure."""
    out: dict[str, list] = {}
    for n in result.nodes:
        for v in n.outliers:
            ratio = _ratio(v)
            if ratio is not None:
                out.setdefault(v.details.get("figure") or v.what, []).append((n.node, ratio, v.outcome == FAIL))
    return out


def _spread(ax, columns: list[list[tuple[str, float, bool]]], rules: dict) -> None:
    """One column per figure: every node's ratio as a dot (jittered so thousands are a cloud), the named
    red and, up to 20 of them, labelled."""
    import random

    jitter = random.Random(0)
    xs, ys, rx, ry, labels = [], [], [], [], []
    for x, points in enumerate(columns):
        width = 0.3 if len(points) > 1 else 0.0
        for who, ratio, named in points:
            dx = x + jitter.uniform(-width, width)
            (rx if named else xs).append(dx)
            (ry if named else ys).append(ratio)
            if named:
                labels.append((dx, ratio, who))
    ax.scatter(xs, ys, s=6 if len(xs) > 2000 else 14, color=BLUE, alpha=0.25 if len(xs) > 2000 else 0.45, lw=0)
    ax.scatter(rx, ry, s=24, color=RED, alpha=0.9, lw=0)
    if len(labels) <= 20:  # more would be a smudge: the page's tables name them
        for dx, ratio, who in labels:
            ax.annotate(who, (dx, ratio), fontsize=6, xytext=(4, -3), textcoords="offset points", color=RED)
    for name, (below, style) in rules.items():
        ax.axhline(1 - below, color=GREY, ls=style, lw=1, label=f"{name}: {below * 100:g} % below the median")
    ax.axhline(1, color="black", lw=0.8)


def _overview(result: FleetResult):
    rel = relative_values(result)
    if not rel:
        return None
    Figure = _figure()
    labels = list(rel)
    fig = Figure(figsize=(max(5.0, 0.38 * len(labels) + 2.5), 4.6), layout="constrained")
    ax = fig.subplots()
    _spread(ax, [rel[k] for k in labels], result_rules(result))
    ax.set_xticks(range(len(labels)), labels, rotation=70 if len(labels) > 4 else 0, fontsize=7, ha="right")
    ax.set_ylabel("value / peers' median")
    nodes = len({who for points in rel.values() for who, _, _ in points})
    ax.set_title(f"every key figure of {nodes} node(s), relative to its peers (named: red)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def result_rules(result: FleetResult) -> dict[str, tuple[float, str]]:
    rules = {}
    for n in result.nodes:
        for v in n.outliers:
            kind = v.details.get("kind")
            if kind and v.limit and "max_below_median" in v.limit:
                rules[kind] = (v.limit["max_below_median"], "--" if kind == "busbw" else ":")
        if len(rules) == 2:
            break
    return rules


def _named_figures(result: FleetResult) -> list:
    """One figure, a panel per figure a node was named in (up to MAX_FIGURE_PLOTS): one bar per node
    up to MAX_BARS nodes, the fleet's histogram with each named node a red tick beyond."""
    named = sorted({v.details.get("figure") or v.what for n in result.nodes for v in n.outliers
                    if v.outcome == FAIL})[:MAX_FIGURE_PLOTS]
    if not named:
        return []
    wanted = set(named)
    points: dict[str, list] = {k: [] for k in named}
    for n in result.nodes:
        for v in n.outliers:
            label = v.details.get("figure") or v.what
            if label in wanted and isinstance(v.measured, (int, float)):
                points[label].append((n.node, v))
    Figure = _figure()
    nodes = max(len(pts) for pts in points.values())
    bars = nodes <= MAX_BARS
    cols = 1 if bars and nodes > 20 else min(3, len(named))
    rows = (len(named) + cols - 1) // cols
    width = max(4.0, 0.45 * nodes + 2) if bars and cols == 1 else 4.6
    fig = Figure(figsize=(width * cols, 2.9 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, label in enumerate(named):
        ax = axes[k // cols][k % cols]
        pts = points[label]
        values = [v.measured for _, v in pts]
        median = statistics.median(values)
        below = next((v.limit["max_below_median"] for _, v in pts if v.limit and "max_below_median" in v.limit), None)
        if bars:
            ax.bar(range(len(pts)), values, color=[RED if v.outcome == FAIL else BLUE for _, v in pts])
            ax.axhline(median, color="black", lw=0.8, label=f"fleet median {median:.3g}")
            if below is not None:
                ax.axhline(median * (1 - below), color=GREY, ls="--", lw=1, label=f"{below * 100:g} % below")
            ax.set_xticks(range(len(pts)), [who for who, _ in pts], rotation=60 if len(pts) > 8 else 0, fontsize=7)
            ax.set_ylabel(pts[0][1].unit or "", fontsize=8)
        else:  # thousands of nodes: the fleet's histogram, each named node a red tick under it
            ax.hist(values, bins=60, color=BLUE, alpha=0.7)
            ax.axvline(median, color="black", lw=0.8, label=f"fleet median {median:.3g}")
            if below is not None:
                ax.axvline(median * (1 - below), color=GREY, ls="--", lw=1, label=f"{below * 100:g} % below")
            slow = sorted((v.measured, who) for who, v in pts if v.outcome == FAIL)
            ax.plot([x for x, _ in slow], [0] * len(slow), "|", color=RED, ms=14, mew=1.5, label=f"{len(slow)} named")
            if slow:  # the slowest by name; the rest are in the page's tables
                ax.annotate(slow[0][1] + (f" and {len(slow) - 1} more" if len(slow) > 1 else ""), (slow[0][0], 0),
                            fontsize=6, xytext=(2, 12), textcoords="offset points", color=RED)
            ax.set_xlabel(pts[0][1].unit or "", fontsize=8)
            ax.set_ylabel("nodes", fontsize=8)
        ax.set_title(label, fontsize=8)
        ax.legend(fontsize=6)
    for k in range(len(named), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    return [fig]


def _gpus(result: FleetResult):
    """One panel per GPU figure: each GPU's value over the median of the fleet's other GPUs of its
    model, the GPUs of a node in its column (a dot per GPU along the fleet for a large one); named
    ones red and labelled; the rule's line dashed."""
    panels: dict[str, list] = {}
    nodes: dict[str, int] = {}
    for n in result.nodes:
        for v in n.gpus:
            ratio = _ratio(v)
            if ratio is None:
                continue
            x = nodes.setdefault(n.node, len(nodes))
            panels.setdefault(v.details.get("figure") or v.what, []).append((x, ratio, v))
    if not panels:
        return None
    Figure = _figure()
    whats = list(panels)
    cols = min(3, len(whats))
    rows = (len(whats) + cols - 1) // cols
    labelled = len(nodes) <= MAX_BARS
    width = max(3.6, 0.45 * len(nodes) + 1.8) if labelled else 5.0
    fig = Figure(figsize=(width * cols, 2.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, what in enumerate(whats):
        ax = axes[k // cols][k % cols]
        pts = panels[what]
        ok = [(x, r) for x, r, v in pts if v.outcome != FAIL]
        bad = [(x, r, v) for x, r, v in pts if v.outcome == FAIL]
        ax.scatter([x for x, _ in ok], [r for _, r in ok], s=12 if labelled else 4, color=BLUE,
                   alpha=0.4 if labelled else 0.25, lw=0)
        ax.scatter([x for x, _, _ in bad], [r for _, r, _ in bad], s=30, color=RED, alpha=0.9, lw=0)
        for x, r, v in sorted(bad, key=lambda t: t[1])[:12]:
            ax.annotate(f"GPU{v.inputs.get('gpu')}" if labelled else v.where, (x, r), fontsize=7, xytext=(4, -3),
                        textcoords="offset points", color=RED)
        below = next(v.limit["max_below_median"] for _, _, v in pts)
        ratios = [r for _, r, _ in pts]
        ax.axhline(1, color="black", lw=0.8)
        ax.axhline(1 - below, color=GREY, ls="--", lw=1)
        ax.set_xlim(-0.5, len(nodes) - 0.5)
        ax.set_ylim(min(ratios + [1 - below]) - 0.05, max(ratios + [1.0]) + 0.05)
        if labelled:
            ax.set_xticks(range(len(nodes)), list(nodes), rotation=60 if len(nodes) > 8 else 0, fontsize=7)
        else:
            ax.set_xlabel(f"{len(nodes)} nodes, in name order", fontsize=8)
        ax.set_title(what, fontsize=9)
        ax.set_ylabel("value / fleet median", fontsize=8)
    for k in range(len(whats), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    return fig


def _pair_matrix(net) -> object | None:
    pairs = [m for m in net.measurements if m.get("kind") == "pair" and m.get("value") is not None]
    if not pairs or len(net.nodes) > MAX_MATRIX:
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
    """Every node's row, the failed ones first (a page has no script: a collapsed section is the filter)."""
    rows = []
    for n in sorted(result.nodes, key=lambda n: n.ok):
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
    failed = sum(not n.ok for n in result.nodes)
    return (f"<details{' open' if len(result.nodes) <= MAX_BARS else ''}><summary>every node ({len(result.nodes)}, "
            f"the {failed} failed first)</summary><table>{head}{''.join(rows)}</table></details>")


def _summary(result: FleetResult) -> str:
    """Nodes per state, the furthest below the fleet, each figure's spread."""
    states = "".join(f"<tr class='{'ok' if state == 'PASS' else 'bad'}'><td>{html.escape(state)}</td><td>{count}</td></tr>"
                     for state, count in summary.state_counts(result).items())
    parts = [f"<h2>Summary</h2><table><tr><th>state</th><th>nodes</th></tr>{states}</table>"]
    worst = summary.worst_nodes(result, 10)
    if worst:
        parts.append("<h3>Furthest below the fleet's median</h3><table><tr><th>node</th><th>below</th><th>figure</th>"
                     "<th>named</th></tr>" + "".join(
                         f"<tr class='{'bad' if w.named else 'ok'}'><td>{html.escape(w.node)}</td>"
                         f"<td>{w.below * 100:.1f} %</td><td>{html.escape(w.figure)}</td>"
                         f"<td>{'yes' if w.named else 'no'}</td></tr>" for w in worst) + "</table>")
    dists = summary.distributions(result)
    if dists:
        rows = "".join(
            f"<tr class='{'bad' if d.named else 'ok'}'><td>{html.escape(d.figure)}</td><td>{d.n}</td>"
            f"<td>{summary.number(d.median)} {html.escape(d.unit)}</td><td>{summary.number(d.quantile(0.05))}"
            f"&ndash;{summary.number(d.quantile(0.95))}</td><td>{summary.number(d.values[0])}</td>"
            f"<td>{len(d.named)}</td></tr>" for d in sorted(dists, key=lambda d: -len(d.named)))
        parts.append("<details open><summary>each figure over the fleet</summary><table><tr><th>figure</th><th>n</th>"
                     "<th>median</th><th>5th&ndash;95th percentile</th><th>lowest</th><th>named</th></tr>"
                     f"{rows}</table></details>")
    return "".join(parts)


def _names(names, empty: str = "none") -> str:
    """Node names come from the records' file names and contents, as anything else there: escaped."""
    return html.escape(summary.shortened(names, 100)) or empty


def _named(result: FleetResult) -> str:
    """The nodes, links and GPUs each fleet rule named: counts in the summary line, the names behind it (open
    while they are few)."""
    # As the text report says it: without a multi-node record the pairs were not measured, not found fine.
    unmeasured = "not measured" if not result.network else "none"
    rules = [("below their peers (fleet rule)", named_by_fleet_rule(result), "none"),
             ("slow with every partner (pair schedule)", named_by_pairs(result), unmeasured),
             ("slow links", slow_links(result), unmeasured),
             ("GPUs below the fleet's GPUs of their model", gpus_below_fleet(result), unmeasured)]
    counts = "; ".join(f"{what}: {len(names) if names else empty}" for what, names, empty in rules)
    listed = "".join(f"<li>{html.escape(what[0].upper() + what[1:])}: <b>{_names(names, empty)}</b></li>"
                     for what, names, empty in rules)
    few = sum(len(names) for _, names, _ in rules) <= MAX_NAMED_OPEN
    return (f"<details{' open' if few else ''}><summary>named by each rule: {html.escape(counts)}</summary>"
            f"<ul>{listed}</ul></details>")


def _headline(result: FleetResult) -> str:
    verdict = "PASSED" if result.ok else "FAILED"
    if result.simulated:
        return f"SIMULATION ({'no failures' if result.ok else 'FAILED'}): no node validated"
    return verdict


def render_page(result: FleetResult, diagnosis: str | None = None) -> str:
    """The page; `diagnosis`: a fleet diagnosis record's section (fleet.diagnosis_view), after the failures."""
    failures = result.failures
    parts = [
        # The node report's policy: no script runs and nothing is fetched, whatever a record carried.
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv=\"Content-Security-Policy\" "
        f"content=\"{CSP}\"><title>wirecheck fleet</title><style>",
        "body{font-family:sans-serif;margin:2em;max-width:1100px} table{border-collapse:collapse}",
        "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px} tr.bad td{background:#fde0dc}",
        "tr.ok td{background:#e8f5e9} .banner{padding:8px;background:#fff3cd} li{font-size:13px;margin:4px 0}",
        "li.bad>b{color:#b3261e} li.ok>b{color:#1b5e20}",  # a fleet diagnosis' findings
        # A simulated fleet is headlined as loudly as a failed one (the node report's banner).
        ".banner.sim{font-size:2.2em;font-weight:800;padding:0.3em 0.5em;color:#7a5200;border:4px dashed #e0a800}",
        "</style></head><body>",
        f"<h1>wirecheck fleet: {_headline(result)}</h1>",
        f"<p>{html.escape(result.directory)}: {len(result.nodes)} node(s), {len(result.network)} multi-node run(s); "
        f"thresholds {html.escape(result.thresholds)}; exit status {result.exit_code}</p>",
    ]
    if result.simulated:
        parts.append("<div class='banner sim'>SIMULATION: the records are simulated runs; no node was validated</div>")
    # The failures lead; the names each rule gave follow, behind a disclosure once they are many.
    if result.changes:
        parts.append(f"<h2>Changes across the fleet ({len(result.changes)})</h2><ul>" + "".join(
            f"<li>{html.escape(c.describe())}; nodes: {html.escape(', '.join(c.nodes[:50]))}"
            f"{f' and {len(c.nodes) - 50} more' if len(c.nodes) > 50 else ''}</li>" for c in result.changes)
            + "</ul>")
    if failures:
        more = len(failures) - MAX_LISTED
        parts.append(f"<h2>Failures ({len(failures)})</h2><ul>" + "".join(
            f"<li><b>{html.escape(who)}</b> [{html.escape(v.check)}] {html.escape(v.message)}</li>"
            for who, v in failures[:MAX_LISTED])
            + (f"<li>... and {more} more: every one in the --json file</li>" if more > 0 else "") + "</ul>")
    parts.append(_named(result))
    if diagnosis:
        parts.append(diagnosis)
    parts.append(_summary(result))
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
                                          for v in named[:MAX_LISTED]) + "</ul>")
    for net in result.network:
        parts.append(f"<h2>Multi-node run {html.escape(net.path)}</h2><ul>" + "".join(
            f"<li>{html.escape(str(v.outcome).upper())} [{html.escape(v.check)}] {html.escape(v.message)}</li>"
            for v in net.verdicts if (v.where or "").startswith("network-") or v.check == "measurement_completed")
            + "</ul>")
        matrix = _pair_matrix(net)
        if matrix is not None:
            parts.append(_png(matrix))
    parts.append("<h2>Every node</h2>" + _table(result))
    parts.append("</body></html>")
    return "\n".join(parts)
