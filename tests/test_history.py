"""Each GPU (by serial or UUID) and placement against its own last runs: the stable figures this run
measured (HBM copy and read, the sustained GEMM median, fp8, host copies, busbw at the floor size,
training throughput; thresholds.yaml history.figures) against the same GPU's or placement's figures in
the history folder (--history DIR, default the folder of this run's record, .wirecheck/): the median
rule (wirecheck.checks.history) and, over the longer window of history.drift, the drift rule
(wirecheck.checks.drift), which warns on a slow fall and fails at its bound.

Runs last, once the figures are in this run's record; it reads them back from there and judges each
with wirecheck.checks.history, whose inputs are the history's figures themselves (so `wirecheck judge`
judges it again without the folder). Night one, or a GPU swapped in, is said (skipped with why) and
starts the history. Nothing here touches a GPU: the pytest process reads record files only.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pytest_wirecheck.reporting import VerdictWarning, verdicts_key
from wirecheck import checks
from wirecheck.core.verdict import FAIL, SKIP, WARN
from wirecheck.records.file import RecordFileError, read_run

# After every measuring module, before the error counters read at the very end; with -m health too (a GPU's
# figures against its own history are a GPU health check, the one that sees a 1-GPU node degrade).
pytestmark = [pytest.mark.stage("last", order=0), pytest.mark.health, pytest.mark.levels("acceptance")]


@pytest.mark.work()  # reads record files only: pytest's share in the plan
def test_figures_against_history(node, reporter, request):
    """No stable figure of a GPU or placement below its own history's median by more than its noise."""
    if node.simulated:
        pytest.skip("simulation: CPU figures have no history worth keeping")
    rule = node.thresholds.history
    this = reporter.file.path
    folder = Path(request.config.option.history or this.parent)  # --history is checked at start (options.py)
    try:
        figures = [f for f in checks.history.figures_of(read_run(this)) if f.figure in rule.figures]
    except RecordFileError as exc:
        pytest.fail(f"this run's record cannot be read back: {exc}")
    if not figures:
        pytest.skip(f"no figure of {rule.yaml_path}.figures was measured in this run (a -k or -m selection?)")
    past, _ = checks.history.past_figures(folder, exclude=this)
    verdicts = []
    for fig in figures:
        judged = [checks.history.history(node.thresholds, **checks.history.history_inputs(fig, past, rule.runs))]
        if rule.drift is not None:
            judged.append(checks.drift.drift(node.thresholds, **checks.history.history_inputs(fig, past, rule.drift.runs)))
        for verdict in judged:
            reporter.verdict(verdict, request.node.nodeid)
            request.node.stash.setdefault(verdicts_key, []).append(verdict)
            verdicts.append(verdict)
    failed = [v for v in verdicts if v.outcome == FAIL]
    assert not failed, "\n".join(v.message for v in failed)
    if all(v.outcome == SKIP for v in verdicts):
        pytest.skip(f"nothing compared yet: {verdicts[0].message}")
    for v in verdicts:
        if v.outcome == WARN:
            warnings.warn(VerdictWarning(v.message))
