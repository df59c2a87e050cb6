"""tests/test_history.py as a nightly run meets it, on a fake NVML node (no --simulate): the GPU's
figure read back from this run's record and held against the same GPU (by UUID) in --history DIR:
night one said and skipped, a night 10 % slower than its three before failed by name."""

from __future__ import annotations

import json

from e2e import make_project, records, run_suite

FAKE_NODE = '''
import sys

import fake_pynvml

sys.modules["pynvml"] = fake_pynvml.build(fake_pynvml.nvswitch(1, links=0))
'''

# Stands in for the GPU health module: one HBM copy figure per run, judged and recorded as the real test does.
PROBE = '''
from wirecheck import checks


def test_hbm_copy(node, record):
    gpu = node.topology.gpus[0]
    verdict = record(checks.gpu_health.hbm_bandwidth(
        node.thresholds, gpu=0, bus_id=gpu.bus_id, gpu_model=gpu.name, kind="copy", bytes_per_s={value},
        peers={{}}, simulated=False))
    assert verdict.ok, verdict.message
'''


def _night(pytester, root, history, out, value):
    (root / "tests" / "test_gpu_health.py").write_text(PROBE.format(value=value))
    return run_suite(pytester, "tests/test_gpu_health.py", "tests/test_history.py", "-rs", "-rf",
                     f"--history={history}", f"--node-lock={root / 'node.lock'}", f"--wirecheck-json={out}")


def test_night_one_is_said_and_a_10_percent_drop_fails_by_uuid(pytester):
    root = make_project(pytester, tests_conftest=FAKE_NODE)
    history = root / "history"
    history.mkdir()
    first = _night(pytester, root, history, history / "night-1.jsonl", 3000e9)
    text = first.stdout.str()
    assert first.parseoutcomes().get("skipped") == 1 and "failed" not in first.parseoutcomes(), text
    said = next(r for r in records(history / "night-1.jsonl") if r.get("check") == "history")
    assert said["outcome"] == "skip", said
    assert "first run of uuid GPU-00000000-0000-0000-0000-000000000000: nothing to compare yet" in said["message"]
    # two more good nights (the first's record with its start moved a day on), then one 10 % slower
    lines = (history / "night-1.jsonl").read_text().splitlines()
    for day in (2, 3):
        run = json.loads(lines[0])
        run["started"] = run["started"].replace(run["started"][8:10], f"{int(run['started'][8:10]) + day - 1:02d}", 1)
        (history / f"night-{day}.jsonl").write_text("\n".join([json.dumps(run), *lines[1:]]) + "\n")
    slow = _night(pytester, root, history, root / "tonight.jsonl", 2700e9)
    text = slow.stdout.str()
    failed = [line.split()[1] for line in slow.outlines if line.startswith("FAILED ")]
    assert failed == ["tests/test_history.py::test_figures_against_history"], text
    assert "(uuid GPU-00000000-0000-0000-0000-000000000000): measured 2,700.0 GB/s < floor 2,985.0 GB/s" in text, text
    verdict = next(r for r in records(root / "tonight.jsonl") if r.get("check") == "history")
    assert verdict["outcome"] == "fail" and verdict["rule"] == "history" and len(verdict["inputs"]["history"]) == 3


def test_a_history_folder_that_is_not_there_is_a_usage_error(pytester):
    root = make_project(pytester, tests_conftest=FAKE_NODE)
    result = run_suite(pytester, "tests/test_history.py", f"--history={root / 'nowhere'}")
    assert result.ret == 4, result.stdout.str()
    assert f"--history {root / 'nowhere'}: not a folder" in result.stderr.str() + result.stdout.str()
