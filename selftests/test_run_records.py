"""Records that are never mixed or cut: two runs started in the same second write two
records; a run stopped by SIGTERM or SIGHUP ends its record naming the signal, with the exit code the
process returns; a run that ran nothing leaves no file or folder; `judge` judges a run against its
own thresholds and says why its skips differ from pytest's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e import PROJECT, make_project, pythonpath, records, run_suite, thresholds_with
from wirecheck import checks
from wirecheck.cli.judge import main as judge
from wirecheck.records.file import read_run
from wirecheck.records.run import RunWriter, run_header
from wirecheck.thresholds.file import load_thresholds

TWO_RUNS = '''
import sys, time
from wirecheck.records.run import RunWriter
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))  # both processes make their record in the same second
w = RunWriter(None, folder=sys.argv[1])
w.header({"simulated": True})
w.end("complete", 10)
w.close()
'''


def test_every_record_header_says_which_wirecheck_wrote_it(tmp_path):
    """A suite run's header (run_header: with the code digest and the node's versions) and a header of its
    own (diagnose's, nccl-tests') alike: versions.wirecheck is this wirecheck's version."""
    import wirecheck

    suite = RunWriter(tmp_path / "suite.jsonl")
    suite.header(run_header(simulated=True, simulation_source="h200-sxm-2", thresholds=PROJECT / "thresholds.yaml",
                            versions={"torch": "2.11.0"}, placements=[]))
    own = RunWriter(tmp_path / "own.jsonl")
    own.header({"kind": "diagnosis", "simulated": True})
    for writer in (suite, own):
        writer.end("complete", 0)
        writer.close()
    suite_header, own_header = (json.loads((tmp_path / n).read_text().splitlines()[0]) for n in ("suite.jsonl", "own.jsonl"))
    assert own_header["versions"] == {"wirecheck": wirecheck.__version__}
    assert suite_header["versions"]["wirecheck"] == wirecheck.__version__ and suite_header["versions"]["torch"] == "2.11.0"
    assert len(suite_header["versions"]["wirecheck_code"]) == 64


def test_two_runs_started_in_the_same_second_write_two_records(tmp_path):
    start = str(int(time.time()) + 2)
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    procs = [subprocess.Popen([sys.executable, "-c", TWO_RUNS, str(tmp_path), start], env=env) for _ in range(2)]
    assert [p.wait(60) for p in procs] == [0, 0]
    files = sorted(tmp_path.glob("results-*.jsonl"))
    assert len(files) == 2, files
    assert len({f.name.split("-")[1] + f.name.split("-")[2] for f in files}) == 1  # the same second ...
    for f in files:  # ... and each file holds one run, whole
        run = read_run(f)
        assert run.earlier_runs == 0 and run.end["status"] == "complete"


STOP_TESTS = '''
import os
import time

import pytest

from wirecheck.core.verdict import Verdict

pytestmark = pytest.mark.stage("measure", order=9)


def test_before(record):
    verdict = record(Verdict("gpu_count", "GPU count", None, "pass", "as expected"))
    assert verdict.ok, verdict.message


def test_slow():
    open(os.environ["STOP_MARKER"], "w").close()
    time.sleep(60)
    assert False, "the signal never came"


def test_after():
    assert True
'''


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_run_stopped_by_a_signal_ends_its_record_naming_it(pytester, sig):
    """Slurm's time limit sends SIGTERM, a closed session SIGHUP: pytest's summary, an end line that names
    the signal, and exit 128+N in the process and in the record alike."""
    root = make_project(pytester)
    (root / "tests" / "test_zz_stop.py").write_text(STOP_TESTS)
    marker, out = root / "started", root / "run.jsonl"
    env = {**os.environ, "PYTHONPATH": pythonpath(), "STOP_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--simulate=h200-sxm-2",
                             "tests/test_zz_stop.py", f"--wirecheck-json={out}"], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    output = proc.communicate(timeout=60)[0]
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, output
    assert f"stopped by {name}" in output and "1 passed" in output, output  # pytest's summary
    lines = records(out)
    assert [r["type"] for r in lines] == ["run", "verdict", "end"], lines
    end = lines[-1]
    assert end["status"] == "interrupted" and end["signal"] == name and end["exit_status"] == 128 + sig, end
    assert not (root / ".benchmarks").exists()  # no benchmark option: pytest-benchmark's folder is not left


def test_a_run_that_ran_nothing_leaves_no_file_or_folder(pytester):
    root = make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "--placement", "nvl_qaud")
    assert result.ret == 4
    assert "did you mean nvl_quad?" in result.stderr.str()
    assert not (root / ".wirecheck").exists() and not (root / ".benchmarks").exists()
    # errors during collection stop pytest with its own 2 (a KeyboardInterrupt inside pytest, not Ctrl-C's 130)
    (root / "tests" / "test_zz_broken.py").write_text("import no_such_module\n")
    result = run_suite(pytester, "--simulate=h200-nvl-8", "tests/test_zz_broken.py", "tests/test_inventory.py")
    assert result.ret == 2, result.stdout.str()
    assert not (root / ".wirecheck").exists()


# ---- judge: the run's own thresholds, and pytest's skips ----------------------------------------------


def _record_with_own_thresholds(tmp_path, thresholds_path: Path) -> Path:
    """A run judged against a raised floor (its own thresholds): its busbw verdict failed."""
    own = load_thresholds(thresholds_path)
    verdict = checks.collectives.busbw(own, op="all_reduce", placement="nvswitch-2gpu-0.1", placement_class="nvswitch",
                                       n_gpus=2, simulated=True, busbw_bytes_per_s=1e9, size_bytes=2**22,
                                       link_ceiling_bytes_per_s=None)
    assert not verdict.ok
    w = RunWriter(tmp_path / "run.jsonl")
    w.header(run_header(simulated=True, simulation_source="h200-sxm-2", thresholds=thresholds_path, versions={},
                        placements=[]))
    w.verdict(verdict, "tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]")
    w.verdict(checks.inventory.gpu_count(own, n_gpus=2, profile=None, simulated=True), "tests/test_inventory.py::x")
    w.end("complete", 1, {"failed": 1, "skipped": 4}, skipped_without_verdict={"needs live NVML; simulating": 3})
    w.close()
    return w.path


def test_judge_uses_the_runs_own_thresholds_and_says_why_skips_differ(tmp_path, capsys):
    raised = tmp_path / "raised.yaml"
    raised.write_text(thresholds_with(lambda d: d["collectives"]["simulated_floors"].update(
        all_reduce={"any": {"min": "5000 GB/s", "source": "selftest: raised"}})))
    record = _record_with_own_thresholds(tmp_path, raised)
    raised.unlink()  # gone from this machine: the record keeps what the run read
    assert judge([str(record)]) == 1
    out = capsys.readouterr().out
    assert "judged against its own thresholds" in out and f"{raised} is gone from this machine" in out, out
    assert "0 changed since recorded" in out and "floor 5000.0 GB/s" in out
    assert ("pytest counted 4 skipped tests, the record holds 1 skip verdicts: a test that skips before its check "
            "runs records no verdict; most often: 3 x needs live NVML; simulating") in out, out
    # another file is an explicit choice
    assert judge([str(record), "--thresholds", str(PROJECT / "thresholds.yaml")]) == 10
    assert "was fail when recorded" in capsys.readouterr().out


def test_the_header_keeps_the_thresholds_at_a_known_size(tmp_path):
    header = run_header(simulated=True, simulation_source="x", thresholds=PROJECT / "thresholds.yaml", versions={},
                        placements=[])
    size = len(json.dumps(header["thresholds_gz_b64"]))
    assert size < 0.5 * (PROJECT / "thresholds.yaml").stat().st_size, size  # gzip: about a third of the file


def _edit_records_copy(record: Path, update_sha: bool) -> None:
    import base64
    import gzip
    import hashlib

    lines = record.read_text().splitlines()
    header = json.loads(lines[0])
    data = gzip.decompress(base64.b64decode(header["thresholds_gz_b64"])) + b"\n# edited in the record\n"
    header["thresholds_gz_b64"] = base64.b64encode(gzip.compress(data)).decode()
    if update_sha:
        header["thresholds_sha256"] = hashlib.sha256(data).hexdigest()
    record.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")


def test_judge_says_whether_the_file_or_the_records_copy_changed(tmp_path, capsys):
    """An edited copy in the record read as "thresholds.yaml has changed since", the file on disk untouched."""
    own = tmp_path / "thresholds.yaml"
    own.write_text(thresholds_with(lambda d: d["collectives"]["simulated_floors"].update(
        all_reduce={"any": {"min": "5000 GB/s", "source": "selftest: raised"}})))
    os.utime(own, (time.time() - 3600, time.time() - 3600))  # written an hour before the run
    record = _record_with_own_thresholds(tmp_path, own)
    judge([str(record)])
    assert f"{own} differs" not in capsys.readouterr().out  # the same bytes: nothing said
    _edit_records_copy(record, update_sha=True)
    judge([str(record)])
    out = capsys.readouterr().out
    assert (f"{own} is unchanged since before the run (last written " in out
            and "but differs from the copy in the record: the record's copy was edited after the run" in out), out
    assert "has changed since" not in out
    own.write_text(own.read_text() + "# edited on disk\n")  # now the file moves too, after the run
    judge([str(record)])
    out = capsys.readouterr().out
    assert f"{own} differs from the copy the run read and was written after the run started" in out, out
    _edit_records_copy(record, update_sha=False)  # the copy no longer matches its own hash
    assert judge([str(record)]) == 2
    err = capsys.readouterr().err
    assert ("the thresholds copy in the record's header does not match the sha256 recorded beside it: the record was "
            "edited or damaged after the run") in err, err
