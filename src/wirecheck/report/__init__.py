"""`wirecheck report`: a run as one self-contained HTML page, its trend, and Prometheus figures.

A small package of functions a fleet page can call:
- `model`: record files -> RunView (the tables each section needs); `load_runs`, `load_history`;
- `gpus`: the GPU health checks per GPU (figures, how each was judged, the sustained load, the
  memory test, XIDs), which the fleet's GPU comparison reads too;
- `figures`: matplotlib figures (Agg) as embedded PNGs, from plain data;
- `html`: the blocks a section holds (plain data) and the page, drawn by the Jinja2 templates of
  `templates/` (no JavaScript, nothing fetched);
- `sections`: one section per concern, built from a RunView, as blocks;
- `trends`: key figures over runs and their noise band;
- `history_view`: each GPU's and placement's figures over its own history, from this run's history and
  drift verdicts (the bound each was held to, where a fall began);
- `prometheus`: the text exposition format, written atomically;
- `command`: the page from record files (`build_html`, the trend's runs); the command line is
  wirecheck.cli.report.
matplotlib is imported only by `figures` (and what uses it), so `model` and `prometheus`
load fast where no page is drawn.

May import: core, vocab, records, training (the memory model, the dial), checks (the checks' declarations: which
show in the GPU section, and their figures), burnin (the names of a round's columns). Never torch.
"""

