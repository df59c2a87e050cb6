"""A fault of the harness is never a verdict on the node: a record whose disk fills mid-run, one full at
the start, one whose folder is removed mid-run, a worker log folder that cannot be made. Each run ends
with exit 74 (HARNESS_FAULT), a last line naming the path and the cause, the record keeping every whole
line written before the fault, and `wirecheck node-state` saying unknown (the hooks never drain on it:
test_drain_hooks.py plays the same outcome through each hook).

Before: a full disk turned 30 tests F with OSError, crashed pytest's session finish with two raw
tracebacks and exited 1 ("checks FAILED": the code the hooks drain on); full at start: INTERNALERROR, exit 3.

The disk is faked where a test needs it exactly (the record's write raising ENOSPC from its Nth line, in
this process: the suite runs in-process on the inventory checks, a second or so); where this machine lets
root mount a small tmpfs, one run of `wirecheck validate` fills a real one.
"""

from __future__ import annotations

import base64
import errno
import gzip
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from e2e import PROJECT, make_project, pythonpath
from wirecheck.cli.node_state import UNHEALTHY, UNKNOWN, decide
from wirecheck.core import exit_codes, problems
from wirecheck.core.harness import HarnessFault, from_os_error
from wirecheck.core.verdict import Verdict
from wirecheck.records.file import Measurement, RecordFile, read_run
from wirecheck.records.run import FAULT, RunWriter, fault_lines

INVENTORY = ("-p", "no:cacheprovider", "--simulate=h200-sxm-2", "tests/test_inventory.py")


def _fail_from(monkeypatch, line: int, error: int = errno.ENOSPC) -> None:
    """The record's disk refuses every write from its `line`-th on (1: the header), as a full disk does."""
    real = RecordFile._put
    written = [0]

    def put(fd, data):
        written[0] += 1
        if written[0] >= line:
            os.write(fd, data[: len(data) // 2])  # the disk took part of the line, then filled
            raise OSError(error, os.strerror(error))
        real(fd, data)

    monkeypatch.setattr(RecordFile, "_put", staticmethod(put))


def _run(pytester, *args):
    """The run, and its lines: stderr's first (pytest writes them before the final lines), then stdout's."""
    result = pytester.runpytest_inprocess(*INVENTORY, *args)
    lines = [line for line in result.errlines + result.outlines if line.strip()]
    return result, lines


def _verdict(outcome: str = "fail") -> Verdict:
    return Verdict(check="busbw", what="all_reduce busbw at 1 GiB", where="nvswitch-2gpu-0.1", outcome=outcome,
                   message="m", measured=12.3, unit="GB/s")


# ---- the writer ---------------------------------------------------------------------------------------


def test_the_writer_keeps_whole_lines_and_says_what_it_lost(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    writer = RunWriter(path, keep_going=True)
    writer.header({"simulated": True})
    writer.verdict(_verdict("pass"), "t::a")
    _fail_from(monkeypatch, 1)
    writer.verdict(_verdict("fail"), "t::b")  # refused: the half line is taken back
    writer.measurement(Measurement("collective", "p", "x", 1.0))
    monkeypatch.undo()  # the disk takes the end line again (the cut line freed its room)
    writer.end("complete", exit_codes.FAILED)
    assert writer.exit_status == exit_codes.HARNESS_FAULT
    run = read_run(path)
    assert [v["test"] for v in run.verdicts] == ["t::a"]
    assert run.end["status"] == FAULT and run.end["exit_status"] == 74
    assert run.end["fault"]["path"] == str(path) and "ENOSPC" in run.end["fault"]["cause"]
    assert run.end["not_written"] == {"verdict": 1, "measurement": 1}
    said = fault_lines(writer)
    writer.close()
    assert said[0] == (f"the record {path} keeps every line before the fault, and its end line; not written: "
                       "1 verdict line(s), 1 measurement line(s)")
    assert said[1] == "not in the record: FAILED busbw nvswitch-2gpu-0.1 all_reduce busbw at 1 GiB: 12.3 GB/s (t::b)", said


def test_without_keep_going_the_writer_raises_the_fault(tmp_path, monkeypatch):
    writer = RunWriter(tmp_path / "r.jsonl")
    _fail_from(monkeypatch, 1, errno.EIO)
    with pytest.raises(HarnessFault, match=r"cannot write the record file .*r\.jsonl: .* \(EIO\)"):
        writer.header({})
    writer.close()


def test_a_read_only_disk_at_the_start_is_a_fault_and_a_bad_path_a_usage_error(tmp_path, monkeypatch):
    from wirecheck.records import file as record_file
    from wirecheck.records.file import RecordFileError

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    with pytest.raises(RecordFileError):  # the path is wrong: the user's to fix (exit 4)
        RecordFile("/proc/wirecheck-x.jsonl")
    monkeypatch.setattr(record_file, "create_new", read_only)
    with pytest.raises(HarnessFault) as fault:
        RecordFile(tmp_path / "r.jsonl", new=True)
    assert "(EROFS); the filesystem is read-only" in fault.value.line()


def test_node_state_never_drains_on_a_harness_fault(tmp_path):
    """Even with a failed verdict recorded before the fault: the run that could not be kept is not judged."""
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in (
        {"type": "run", "schema": 2, "simulated": False, "gpus": [{"index": 0}]},
        {"type": "verdict", "check": "busbw", "where": "nvswitch-2gpu-0.1", "outcome": "fail", "measured": 12.3,
         "unit": "GB/s", "limit": {"min": 360.0}},
        {"type": "end", "status": "fault", "exit_status": 74,
         "fault": {"what": "the record file", "path": str(path), "cause": "No space left on device (ENOSPC)"}})))
    run = read_run(path)
    assert decide(1, run).state == UNHEALTHY  # the same record with a check's exit code drains...
    state = decide(74, run)
    assert state.state == UNKNOWN, state  # ...a fault of the harness never does
    assert state.line == f"wirecheck: not checked (harness fault, exit 74): No space left on device (ENOSPC): the record file {path}"
    assert decide(70, None).state == UNKNOWN


def test_every_io_fault_names_its_fix():
    for code, fix in ((errno.ENOSPC, "free space there"), (errno.EROFS, "read-only"), (errno.EIO, "dmesg"),
                      (errno.EDQUOT, "quota")):
        fault = from_os_error(OSError(code, os.strerror(code), "/var/lib/wirecheck/x"), "a worker's log")
        assert fault.line().startswith(f"cannot write a worker's log /var/lib/wirecheck/x: {os.strerror(code)}")
        assert fix in fault.fix


# ---- the suite: the run's own exit code, the path named last, the record kept -------------------------


def test_a_record_that_fills_mid_run_ends_the_run_as_a_fault(pytester, monkeypatch):
    make_project(pytester)
    record = Path(pytester.path) / "rec" / "r.jsonl"
    _fail_from(monkeypatch, 6)  # the header and four verdicts, then the disk is full
    result, lines = _run(pytester, f"--wirecheck-json={record}")
    text = "\n".join(lines)
    assert result.ret == exit_codes.HARNESS_FAULT, text
    assert lines[-1] == (f"wirecheck: HARNESS FAULT, not a verdict on this node (exit 74): cannot write the record "
                         f"file {record}: No space left on device (ENOSPC); free space there, or pass --wirecheck-json "
                         "PATH on another disk"), lines[-1]
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes, outcomes  # no test is failed for the disk
    assert outcomes.get("skipped", 0) < 19, outcomes  # the run stopped after the test in progress
    assert "Interrupted: wirecheck: cannot write the record file" in text
    run = read_run(record)  # every whole line before the fault, and nothing torn
    assert len(run.verdicts) == 4 and run.end is None
    assert decide(result.ret, run).state == UNKNOWN


def test_a_record_full_at_the_start_runs_nothing(pytester, monkeypatch):
    make_project(pytester)
    record = Path(pytester.path) / "r.jsonl"
    _fail_from(monkeypatch, 1)
    result, lines = _run(pytester, f"--wirecheck-json={record}")
    text = "\n".join(lines)
    assert result.ret == exit_codes.HARNESS_FAULT, text
    assert lines[-1].startswith(f"wirecheck: HARNESS FAULT, not a verdict on this node (exit 74): cannot write the "
                                f"record file {record}: No space left on device (ENOSPC)"), lines[-1]
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert f"wirecheck: the record {record} could not take its first line: nothing ran, nothing was measured" in text
    assert "passed" not in text and not record.exists()  # nothing ran, no empty record left


def test_a_read_only_record_folder_runs_nothing(pytester, monkeypatch):
    from wirecheck.records import file as record_file

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    make_project(pytester)
    record = Path(pytester.path) / "r.jsonl"
    monkeypatch.setattr(record_file, "open_append", read_only)
    result, lines = _run(pytester, f"--wirecheck-json={record}")
    assert result.ret == exit_codes.HARNESS_FAULT, lines
    assert lines[-1] == (f"wirecheck: HARNESS FAULT, not a verdict on this node (exit 74): cannot write the record file "
                         f"{record}: Read-only file system (EROFS); the filesystem is read-only (remounted after "
                         "errors?): pass --wirecheck-json PATH on another disk"), lines[-1]
    assert "INTERNALERROR" not in "\n".join(lines)


REMOVE_THE_FOLDER = '''
import shutil
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def remove_the_record_folder(request):
    if request.node.name == "test_gpu_model[gpu0]":  # a cleanup job takes the folder mid-run
        shutil.rmtree(Path(request.config.option.wirecheck_json).parent)
    yield
'''


def test_a_record_folder_removed_mid_run_ends_the_run_as_a_fault(pytester):
    make_project(pytester, tests_conftest=REMOVE_THE_FOLDER)
    record = Path(pytester.path) / "rec" / "r.jsonl"
    result, lines = _run(pytester, f"--wirecheck-json={record}")
    text = "\n".join(lines)
    assert result.ret == exit_codes.HARNESS_FAULT, text
    assert lines[-1].startswith(f"wirecheck: HARNESS FAULT, not a verdict on this node (exit 74): cannot write the "
                                f"record file {record}: removed while the run wrote it (its folder {record.parent} "
                                "is gone)"), lines[-1]
    assert f"wirecheck: the record {record} kept nothing (removed while the run wrote it)" in text
    assert f"wirecheck: next: wirecheck report" not in text  # there is no record to report on
    assert "Traceback" not in text and "failed" not in result.parseoutcomes(), text


def test_a_disk_fault_in_a_test_is_the_harnesss_not_the_nodes(pytester):
    """An OSError of the disk out of a test (a worker's log folder on a full disk): not a failed check."""
    make_project(pytester, tests_conftest='''
import errno, os
import pytest

@pytest.fixture(autouse=True)
def full_log_disk(request):
    if request.node.name == "test_gpu_model[gpu0]":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/var/lib/wirecheck/r-logs/x")
    yield
''')
    record = Path(pytester.path) / "r.jsonl"
    result, lines = _run(pytester, f"--wirecheck-json={record}")
    text = "\n".join(lines)
    assert result.ret == exit_codes.HARNESS_FAULT, text
    assert lines[-1].startswith("wirecheck: HARNESS FAULT, not a verdict on this node (exit 74): cannot write a file "
                                "of the run /var/lib/wirecheck/r-logs/x: No space left on device (ENOSPC)"), lines[-1]
    run = read_run(record)  # the record itself was fine: it ends naming the fault
    assert run.end["status"] == FAULT and run.end["exit_status"] == 74
    assert run.end["fault"]["path"] == "/var/lib/wirecheck/r-logs/x"


def _plugin_module(name: str):
    """The plugin's module the next in-process run uses: sys.modules' (an earlier run may have left another
    copy as an attribute of the package), imported now so that the run takes this one and monkeypatch puts
    it back afterwards."""
    import importlib

    return importlib.import_module(f"pytest_wirecheck.{name}")


def test_a_crash_of_the_plugin_is_its_own_code_not_a_verdict(pytester, monkeypatch):
    def broken(self, exitstatus, signal=None):
        raise KeyError("a bug of ours")

    make_project(pytester)
    monkeypatch.setattr(_plugin_module("reporting").RecordReporter, "end", broken)
    result, lines = _run(pytester, f"--wirecheck-json={Path(pytester.path) / 'r.jsonl'}")
    text = "\n".join(lines)
    assert result.ret == exit_codes.HARNESS_CRASH, text
    assert lines[-1].startswith("wirecheck: the wirecheck plugin crashed, not a verdict on this node (exit 70): "
                                "KeyError: 'a bug of ours' in pytest_wirecheck.reporting.end"), lines[-1]


# ---- a real small disk, through `wirecheck validate` ---------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    # Room for the run's header (mostly the thresholds file, gzipped and base64-encoded) and a page more,
    # so the disk fills after the run has started, whatever size the thresholds file has.
    header = len(base64.b64encode(gzip.compress((PROJECT / "thresholds.yaml").read_bytes()))) + 4096
    size = -(-header // 4096) * 4096
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        pytest.skip("this machine lets no one mount a tmpfs here (the faked disks above cover the same paths)")
    yield folder
    subprocess.run(["umount", str(folder)], capture_output=True)


def test_validate_on_a_disk_that_fills_exits_74_naming_it(small_tmpfs, tmp_path):
    record = small_tmpfs / "r.jsonl"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    env.pop("WIRECHECK_FAULT_FD", None)
    cmd = [sys.executable, "-m", "wirecheck.cli.main", "validate", "-p", "no:cacheprovider", "--color=no",
           "--simulate=h200-sxm-2", "-k", "inventory", "--wirecheck-json", str(record)]
    try:  # seconds on a quiet machine, minutes on a loaded one: a bound that only a hang reaches
        done = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as expired:  # subprocess.run has killed it (-9): say so, with what it printed
        said = b"".join(x if isinstance(x, bytes) else x.encode() for x in (expired.stdout, expired.stderr) if x)
        pytest.fail(f"wirecheck validate did not end within {expired.timeout:.0f} s (killed); its output:\n"
                    + said.decode(errors="replace"))
    out = done.stdout + done.stderr
    assert done.returncode == exit_codes.HARNESS_FAULT, out
    last = [line for line in done.stdout.splitlines() if line.strip()][-1]
    assert last == (f"wirecheck validate: SIMULATION of h200-sxm-2 — no GPU was validated; HARNESS FAULT, not a verdict "
                    f"on this node (exit 74): cannot write the record file {record}: No space left on device (ENOSPC); "
                    "free space there, or pass --wirecheck-json PATH on another disk, exit 74"), last
    assert "Traceback" not in out and not re.search(r"^tests/\S+ [.sxF]*F", out, re.M), out  # no test failed for it
    read_run(record)  # what it holds reads back: whole lines only
    state = subprocess.run([sys.executable, "-m", "wirecheck.cli.main", "node-state", "--exit-code", "74", "--record",
                            str(record)], env=env, capture_output=True, text=True)
    assert state.returncode == UNKNOWN, state.stdout


def test_validate_names_the_fault_pytest_named_on_its_last_line():
    """pytest's plugin writes its last line into the pipe validate passes; validate ends on the same cause."""
    from wirecheck.cli import validate
    from wirecheck.core.harness import WRAPPER_FD_ENV

    told = {"line": "HARNESS FAULT ...: cannot write the record file /r.jsonl: No space left on device (ENOSPC)",
            "problem": "harness_fault", "crash": None,
            "fault": {"what": "the record file", "path": "/r.jsonl", "cause": "No space left on device (ENOSPC)"}}
    with validate.FaultLine() as fault:
        fd = int(os.environ[WRAPPER_FD_ENV])
        subprocess.run([sys.executable, "-c", f"import os, sys; os.write({fd}, sys.argv[1].encode() + b'\\n')",
                        json.dumps(told)], pass_fds=fault.pass_fds, check=True)
    assert WRAPPER_FD_ENV not in os.environ
    line = validate.last_line(74, validate.Mode(gpus=8), fault.line)
    assert line == ("wirecheck validate: HARNESS FAULT ...: cannot write the record file /r.jsonl: No space left on "
                    "device (ENOSPC); exit 74")
    # the state line validate prints before it: the fault as data, which node-state reads when no record says it
    said = problems.read_state(fault.state)
    assert said["problem"] == problems.HARNESS_FAULT and said["fault"]["path"] == "/r.jsonl"
    assert decide(74, None, fault.state).line == ("wirecheck: not checked (harness fault, exit 74): No space left on "
                                                  "device (ENOSPC): the record file /r.jsonl")
    with validate.FaultLine() as quiet:
        pass
    assert quiet.line is None
    assert validate.last_line(74, validate.Mode(gpus=8), None) == (
        "wirecheck validate: HARNESS FAULT, not a verdict on this node: wirecheck could not write its record, a log "
        "or a cache; exit 74")


def test_a_crash_of_the_plugin_at_session_start_is_its_own_code(pytester, monkeypatch):
    """pytest reports an exception out of a session hook as INTERNALERROR (exit 3); ours exits 70, saying so last."""
    def broken(config):
        raise RuntimeError("a bug of ours")

    make_project(pytester)
    monkeypatch.setattr(_plugin_module("node"), "load", broken)
    result, lines = _run(pytester, "-W", "ignore::pytest.PytestAssertRewriteWarning")
    assert result.ret == exit_codes.HARNESS_CRASH, lines
    assert lines[-1].startswith("wirecheck: the wirecheck plugin crashed, not a verdict on this node (exit 70): "
                                "RuntimeError: a bug of ours"), lines[-1]
    assert any(line.startswith("INTERNALERROR> ") for line in lines)  # the traceback, for the bug report


# ---- a bug of ours inside a test -------------------------------------------------------------------------

def _raising_conftest(raising: dict[str, str]) -> str:
    """A tests/conftest.py whose fixture runs, for each named test, its statement (real code in the suite's
    own file, so that the traceback's innermost frame is ours)."""
    branches = "".join(f"    if request.node.name == {name!r}:\n        {statement}\n" for name, statement in raising.items())
    return f"import pytest\n\n@pytest.fixture(autouse=True)\ndef broken(request):\n{branches}    yield\n"


@pytest.mark.parametrize("raising, code, last", [
    # a NameError in the suite's own code, the only failure: ours, exit 70, the node unknown
    ({"test_gpu_model[gpu0]": "undefined_name + 1"}, exit_codes.HARNESS_CRASH,
     "wirecheck: a bug of wirecheck, not a verdict on this node (exit 70): tests/test_inventory.py::test_gpu_model"
     "[gpu0]: NameError: name 'undefined_name' is not defined at conftest.py:"),
    # the same bug beside a check that failed for the node: that failure stands, exit 1
    ({"test_gpu_model[gpu0]": "undefined_name + 1", "test_gpu_model[gpu1]": "assert 3 >= 4, 'GPUs visible'"},
     exit_codes.FAILED, None),
    # what torch raises for a GPU's fault (a RuntimeError) is no bug of ours: the node's verdict, exit 1
    ({"test_gpu_model[gpu0]": "raise RuntimeError('CUDA error: an illegal memory access was encountered')"},
     exit_codes.FAILED, None),
], ids=["bug-alone", "bug-beside-a-failure", "runtime-error-is-the-nodes"])
def test_a_bug_of_ours_in_a_test_is_never_the_nodes_failure(pytester, raising, code, last):
    make_project(pytester, tests_conftest=_raising_conftest(raising))
    record = Path(pytester.path) / "r.jsonl"
    result, lines = _run(pytester, f"--wirecheck-json={record}")
    text = "\n".join(lines)
    assert result.ret == code, text
    run = read_run(record)
    assert run.end["exit_status"] == code  # what node-state and the hooks read
    assert run.run["selection"] == ["tests/test_inventory.py"]  # a part of the level: never a pass to trust
    if code == exit_codes.HARNESS_CRASH:
        assert decide(run.end["exit_status"], run).state == UNKNOWN
    if last is not None:
        assert lines[-1].startswith(last), lines[-1]
    else:
        assert "a bug of wirecheck, not a verdict" not in lines[-1], lines[-1]


@pytest.mark.parametrize("raised, ours", [("builtins.NameError", True), ("builtins.TypeError", True),
                                          ("torch.AcceleratorError", False), ("builtins.RuntimeError", False)])
def test_a_worker_functions_programming_error_is_ours_a_cuda_error_the_nodes(raised, ours):
    from wirecheck.core.failures import RAISED, CALL, GroupFailure, RankFailure
    from wirecheck.workers.errors import error_for

    root = RankFailure(rank=1, kind=RAISED, at=0.0, summary=f"{raised.rsplit('.', 1)[1]}: x", exception=raised)
    failure = GroupFailure(label="nvswitch-2gpu-0.1", what="all_reduce at 1 MiB", phase=CALL, root=root, ranks=(root,))
    with pytest.raises(Exception) as excinfo:
        raise error_for(failure, {})
    bug = _plugin_module("harness").bug_of_ours(excinfo)
    assert (bug is not None) == ours, bug
    if ours:
        assert bug.endswith("in a worker of nvswitch-2gpu-0.1 (all_reduce at 1 MiB)"), bug
