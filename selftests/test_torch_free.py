"""The commands without GPUs run where torch cannot be imported: loading the shipped thresholds,
`wirecheck judge`, `wirecheck report`, `wirecheck fleet report`, `wirecheck advise`, `wirecheck node-state` (what a drain hook
asks, also where torch broke), `wirecheck plan` and `wirecheck calibrate` on recorded runs, in a Python
whose import system refuses torch, DeepSpeed and Accelerate. Each command exits as it does with
torch installed.
"""

from __future__ import annotations

import json
import subprocess
import sys

from e2e import PROJECT, pythonpath

REFUSED = ("torch", "deepspeed", "accelerate")
HARDWARE_RUN = PROJECT / "fixtures/reference/h200-sxm-2/wirecheck-2026-12-01b/run1.jsonl"  # 2x H200, passes
SIMULATED_RUN = PROJECT / "selftests/data/sim-h200-sxm-2.jsonl"
CLEAN_2X = [PROJECT / f"fixtures/reference/h200-sxm-2/wirecheck-2026-12-01/run{i}.jsonl" for i in (1, 2, 3)]

# Runs in a fresh interpreter: a finder first on sys.meta_path raises ImportError for the refused
# packages, as an environment without them would; then each command, and what got imported.
WITHOUT_TORCH = f"""
import json, sys

REFUSED = {REFUSED!r}


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in REFUSED:
            raise ImportError(f"{{name}} is refused in this self-test: the command must not need it")
        return None


sys.meta_path.insert(0, Refuse())
from wirecheck.cli.main import main
from wirecheck.core.paths import suite_paths
from wirecheck.thresholds.file import load_thresholds

load_thresholds(suite_paths().thresholds)
codes = [main(argv) for argv in json.loads(sys.argv[1])]
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in REFUSED)
print("RESULT " + json.dumps({{"codes": codes, "loaded": loaded}}))
"""


def _run_without_torch(commands: list[list[str]], cwd) -> tuple[dict, str]:
    env = {"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, json.dumps(commands)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    result = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(result.removeprefix("RESULT ")), out


def test_the_refusing_finder_does_refuse(tmp_path):
    """The environment is real: a command that needs torch fails in it."""
    env = {"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}
    code = WITHOUT_TORCH.split("from wirecheck.cli.main")[0] + "import wirecheck.measure.collective_timing\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=60)
    assert proc.returncode == 1 and "torch is refused in this self-test" in proc.stderr, proc.stderr


def test_judge_report_fleet_report_node_state_and_plan_need_no_torch(tmp_path):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    lines = HARDWARE_RUN.read_text().splitlines(keepends=True)
    for node in ("node01", "node02", "node03"):  # each node's own run: its host in the header (one run copied is one)
        header = json.loads(lines[0])
        header["host"] = node
        (fleet / f"{node}.jsonl").write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    commands = [
        ["judge", "-q", str(HARDWARE_RUN)],
        ["judge", "-q", str(SIMULATED_RUN)],
        ["report", str(HARDWARE_RUN), "-o", str(tmp_path / "report.html")],
        ["fleet", "report", "-q", str(fleet), "--expect", "3"],
        ["node-state", "--exit-code", "1", "--record", str(HARDWARE_RUN)],
        ["plan", "--record", str(HARDWARE_RUN)],
        ["advise", "--params", "7B", "--gpus", "2", "--record", str(HARDWARE_RUN)],
        # three runs: the floors whose three-run prediction bound reaches past 10 % are left out (refused otherwise)
        ["calibrate", *map(str, CLEAN_2X), "-o", str(tmp_path / "site.yaml"), "--leave-out", "h2d",
         "--leave-out", "collectives.floors.forced_pcie.all_reduce.2", "--leave-out", "collectives.floors.pair.all_reduce.2"],
        ["judge", "-q", str(CLEAN_2X[0]), "--thresholds", str(tmp_path / "site.yaml")],
    ]
    result, out = _run_without_torch(commands, tmp_path)
    assert result["loaded"] == [], result
    # as with torch: the device run passes, the simulated one says so (10), the page is written,
    # three identical healthy nodes pass, the node is unhealthy (node-state's 1: the limits it was recorded under),
    # the plan prices the run, advise predicts from it, calibrate writes site floors and judge takes them
    assert result["codes"] == [0, 10, 0, 0, 1, 0, 0, 0, 0], out
    assert (tmp_path / "report.html").stat().st_size > 10_000
    assert "wirecheck judge: PASSED" in out and "judged a simulated run" in out, out
    assert "wirecheck fleet report: PASSED: 0 of 3 node(s) failed" in out, out
    assert "run1.jsonl: 148 tests at acceptance: predicted" in out, out


VOCABULARY = WITHOUT_TORCH.split("from wirecheck.cli.main")[0] + """
import importlib, pkgutil
import wirecheck.vocab
for module in pkgutil.iter_modules(wirecheck.vocab.__path__):
    importlib.import_module(f"wirecheck.vocab.{module.name}")
print("RESULT " + json.dumps(sorted(m for m in sys.modules if m.startswith("wirecheck"))))
"""


def test_the_vocabulary_imports_nothing_but_core_and_itself(tmp_path):
    """Every module of wirecheck.vocab loads where torch cannot, and pulls in no package above it: the
    layer judge, report, plan and thresholds read is data, never worker code."""
    env = {"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", VOCABULARY], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT ")).removeprefix("RESULT "))
    assert "wirecheck.vocab.ops" in loaded and "wirecheck.vocab.strategies" in loaded, loaded
    above = [m for m in loaded if m != "wirecheck" and not m.startswith(("wirecheck.core", "wirecheck.vocab"))]
    assert above == [], above
