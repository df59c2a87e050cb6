"""What a run writes, and the code its workers import, when root runs it (docs/running-as-root.md): another local
user plants links, files and folders first (as `nobody`, in a sticky directory as /tmp is), and
root's run must neither write through them nor run what they wrote. The node lock and the bytecode
cache have their own tests (test_node_lock.py, test_bytecode.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from pathlib import Path

import pytest
from e2e import PROJECT, make_project, run_suite
from other_user import NOBODY, name, need_root, run_as, sticky_dir

from wirecheck.workers import launcher, spawn
from wirecheck.records.file import RecordFile, RecordFileError, default_name, read_run
from wirecheck.core.safefs import UnsafePath, path_problem, write_atomically

HEADER = {"simulated": True}


@pytest.fixture
def sticky():
    need_root()
    path = sticky_dir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def victim(tmp_path):
    """Root's own file, which nothing of the run may touch."""
    path = tmp_path / "victim.txt"
    path.write_text("secret\n")
    path.chmod(0o600)
    return path


def _untouched(victim) -> bool:
    st = victim.stat()
    return victim.read_text() == "secret\n" and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0


def _plant(*argv: str) -> None:
    done = run_as(NOBODY, list(argv))
    assert done.returncode == 0, done.stderr


# ---- record files -------------------------------------------------------------------------------


def test_a_link_planted_at_a_named_record_path_is_refused(sticky, victim):
    planted = sticky / "node1.jsonl"
    _plant("ln", "-s", str(victim), str(planted))
    with pytest.raises(RecordFileError) as info:
        RecordFile(planted)
    message = str(info.value)
    assert f"the record file {planted}: a symbolic link to {victim}, made by {name(NOBODY)}" in message, message
    assert "never writes through a link" in message and "pass the real path" in message
    assert _untouched(victim)


def test_a_link_planted_at_a_named_record_path_stops_the_run_before_it_starts(sticky, victim, pytester):
    make_project(pytester)
    planted = sticky / "node1.jsonl"
    _plant("ln", "-s", str(victim), str(planted))
    result = run_suite(pytester, "--simulate", "-k", "inventory", f"--wirecheck-json={planted}")
    err = result.stderr.str()
    assert result.ret == 4 and f"--wirecheck-json: the record file {planted}: a symbolic link to {victim}" in err, err
    assert "Traceback" not in err and "INTERNALERROR" not in result.stdout.str() + err
    assert _untouched(victim)


def test_another_users_or_a_hard_linked_record_file_is_not_appended_to_as_root(sticky, victim):
    theirs = sticky / "theirs.jsonl"
    _plant("touch", str(theirs))
    with pytest.raises(RecordFileError, match=f"owned by {name(NOBODY)} .*who could rewrite what root records"):
        RecordFile(theirs)
    assert theirs.read_bytes() == b""
    linked = sticky / "linked.jsonl"
    os.link(victim, linked)  # a second name for root's file (what protected_hardlinks=0 lets anyone make)
    with pytest.raises(RecordFileError, match=r"2 names \(hard links\)"):
        RecordFile(linked)
    assert _untouched(victim)
    fifo = sticky / "fifo.jsonl"
    _plant("mkfifo", str(fifo))
    with pytest.raises(RecordFileError, match="not a regular file"):  # refused, not hung on the open
        RecordFile(fifo)


def test_a_named_record_of_roots_own_is_appended_to(tmp_path):
    path = tmp_path / "nightly.jsonl"
    for night in (1, 2):
        rf = RecordFile(path)
        rf.header({**HEADER, "night": night})
        rf.close()
    run = read_run(path)
    assert run.run["night"] == 2 and run.earlier_runs == 1  # runs append, as before


def test_default_record_names_are_new_files_never_an_existing_one(sticky, victim):
    """Two records made in the same second get different names; a link planted at the name a run
    will pick is never followed (the run takes the next name)."""
    before = default_name()  # the names of the second before and after: a slow machine crosses one between them
    first, second = RecordFile.fresh(sticky), RecordFile.fresh(sticky)
    after = default_name()
    assert first.path != second.path
    assert any(first.path.name == name or first.path.name.startswith(name[:-len(".jsonl")]) for name in (before, after))
    assert f"-{os.getpid()}" in first.path.name and os.uname().nodename.split(".")[0][:20] in first.path.name
    for rf in (first, second):
        rf.close()
    guessed = sticky / default_name("guessed")
    _plant("ln", "-s", str(victim), str(guessed))
    rf = RecordFile.fresh(sticky, "guessed")
    rf.header(HEADER)
    rf.close()
    assert rf.path != guessed and os.path.islink(guessed) and _untouched(victim)
    with pytest.raises(RecordFileError, match="a symbolic link to .*a new file is never written over or through"):
        RecordFile(guessed, new=True)


def test_as_root_a_record_folder_another_user_can_write_is_refused(sticky, victim):
    theirs = sticky / "theirs"
    _plant("mkdir", str(theirs))
    with pytest.raises(RecordFileError) as info:
        RecordFile(theirs / "node1.jsonl")
    message = str(info.value)
    assert f"{theirs} is owned by {name(NOBODY)} (uid {NOBODY}), mode 0755: another user owns it" in message, message
    assert "running as root" in message and "--wirecheck-json" in message
    assert not list(theirs.iterdir())
    open_dir = sticky / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(RecordFileError, match="mode 0777: writable by every user"):
        RecordFile(open_dir / "sub" / "node1.jsonl")
    assert not (open_dir / "sub").exists()
    # A sticky folder (as /tmp) is fine: no one can rename or replace what root makes in it.
    rf = RecordFile(sticky / "node1.jsonl")
    rf.close()
    assert (sticky / "node1.jsonl").stat().st_uid == 0


def test_folders_are_made_with_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        rf = RecordFile(tmp_path / "a" / "b" / "node1.jsonl")
        rf.close()
    finally:
        os.umask(old)
    modes = [stat.S_IMODE((tmp_path / p).stat().st_mode) for p in ("a", "a/b", "a/b/node1.jsonl")]
    assert modes == [0o750, 0o750, 0o640]


def test_logs_folders_another_user_made_beside_the_record_stop_the_run(sticky, pytester):
    """The workers' logs (`<record>-logs/`) and NCCL's (`<record>.nccl/`) go beside the record: one that
    another user made first is refused before any test runs."""
    make_project(pytester)
    record = sticky / "node1.jsonl"
    _plant("mkdir", str(sticky / "node1-logs"))
    result = run_suite(pytester, "--simulate", "-k", "inventory", f"--wirecheck-json={record}")
    err = result.stderr.str()
    assert result.ret == 4 and f"{sticky / 'node1-logs'} (where this run keeps logs beside its record" in err, err
    assert f"owned by {name(NOBODY)}" in err and "Traceback" not in err


def test_a_worker_groups_log_folder_refuses_a_folder_another_user_owns(sticky):
    _plant("mkdir", str(sticky / "logs"))
    with pytest.raises(UnsafePath, match=f"the workers' log folder {sticky / 'logs'}: running as root"):
        launcher.WorkerGroup("x", 1, backend="gloo", log_dir=sticky / "logs")


# ---- whole files: replaced, never written through ------------------------------------------------


def test_reports_replace_a_planted_link_instead_of_writing_through_it(sticky, victim):
    page = sticky / "fleet.html"
    _plant("ln", "-s", str(victim), str(page))
    write_atomically(page, "<!doctype html>\n")
    assert not page.is_symlink() and page.read_text() == "<!doctype html>\n" and _untouched(victim)
    assert stat.S_IMODE(page.stat().st_mode) == 0o644  # set on the descriptor, not on a name


def test_fleet_report_and_topology_snapshot_replace_a_planted_link(sticky, victim, capsys):
    from test_fleet_report import write_node

    from wirecheck.cli.fleet.report import main as fleet_report
    from wirecheck.core.paths import suite_paths
    from wirecheck.node.topo_text import load_recorded

    results = sticky / "results"
    results.mkdir()
    for node in ("n1", "n2", "n3"):
        write_node(results / f"{node}.jsonl")
    outputs = {"--json": sticky / "fleet.json", "--html": sticky / "fleet.html"}
    for planted in outputs.values():
        _plant("ln", "-s", str(victim), str(planted))
    fleet_report([str(results), "--expect", "3", *[a for o, p in outputs.items() for a in (o, str(p))]])
    assert "wrote" in capsys.readouterr().out
    for written in outputs.values():
        assert not written.is_symlink() and written.stat().st_uid == 0 and written.stat().st_size > 0
    snapshot = sticky / "topo.json"
    _plant("ln", "-s", str(victim), str(snapshot))
    load_recorded("h200-sxm-2", suite_paths().topologies).save(snapshot)
    assert not snapshot.is_symlink() and snapshot.read_text().startswith("{")
    assert _untouched(victim)


# ---- what the workers import ----------------------------------------------------------------------


def test_as_root_the_workers_import_path_leaves_out_folders_another_user_can_write(sticky, monkeypatch):
    """A world-writable working directory (or one another user owns) is not put on the workers' import
    path: a module planted there would be imported by every worker, as root."""
    theirs = sticky / "theirs"
    _plant("mkdir", str(theirs))
    _plant("sh", "-c", f"echo 'raise SystemExit(\"planted\")' > {theirs}/wirecheck_planted.py")
    monkeypatch.chdir(theirs)
    path = spawn.python_path(str(sticky)).split(os.pathsep)
    assert str(theirs) not in path and str(sticky) not in path
    said = " ".join(spawn.untrusted_import_path())
    assert f"{theirs} ({theirs} is owned by {name(NOBODY)}" in said, said
    done = subprocess.run([sys.executable, "-c", "import wirecheck_planted"], cwd="/",
                          env={**os.environ, "PYTHONPATH": spawn.python_path(None)}, capture_output=True, text=True)
    assert "ModuleNotFoundError" in done.stderr and "planted" not in done.stdout
    mine = sticky / "mine"  # root's own folder (in a sticky /tmp): kept
    mine.mkdir()
    monkeypatch.chdir(mine)
    assert str(mine) in spawn.python_path(None).split(os.pathsep)


def test_path_problem_follows_links_and_checks_their_owner(sticky, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    assert path_problem(real) is None
    link = sticky / "link"
    _plant("ln", "-s", str(real), str(link))  # nobody's link to root's folder: nobody chose where it leads
    assert f"{link} is a symbolic link owned by {name(NOBODY)}" in path_problem(link / "x")
    own = sticky / "own"
    own.symlink_to(real)
    assert path_problem(own / "x") is None
    assert "mode 1777" in path_problem(sticky)  # sticky is fine above a path, not as the path itself
    assert path_problem(sticky, sticky_ok_here=True) is None


# ---- the recipes that run as root ---------------------------------------------------------------------

SBATCH = PROJECT / "scripts" / "slurm" / "fleet-acceptance.sbatch"
K8S = sorted((PROJECT / "scripts" / "k8s").glob("*.yaml"))


def _sbatch(wirecheck: Path, results: Path) -> subprocess.CompletedProcess:
    """The batch script as Slurm starts it on the batch host (as root here), without Slurm: it must stop
    before its first srun, so no Slurm is needed to see it stop."""
    env = {"PATH": "/usr/bin:/bin", "SLURM_SUBMIT_DIR": str(results.parent), "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "wc[1-2]", "WIRECHECK": str(wirecheck)}
    return subprocess.run(["/bin/bash", str(SBATCH), str(results)], env=env, capture_output=True, text=True, timeout=120)


def test_the_slurm_recipe_as_root_runs_no_wirecheck_another_user_can_write(sticky, tmp_path):
    theirs = sticky / "theirs"
    _plant("mkdir", "-p", str(theirs / "bin"))
    ran = sticky / "ran"
    _plant("sh", "-c", f"printf '#!/bin/sh\\ntouch {ran}\\n' > {theirs}/bin/wirecheck && chmod 755 {theirs}/bin/wirecheck")
    results = tmp_path / "results"
    done = _sbatch(theirs / "bin" / "wirecheck", results)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"running as root, and {theirs}/bin/wirecheck (owner {name(NOBODY)}, mode 755)" in done.stderr, done.stderr
    assert not ran.exists() and not results.exists()
    assert _sbatch(Path("relative/wirecheck"), results).stderr.startswith("fleet-acceptance: WIRECHECK=relative/")


def test_the_slurm_recipe_as_root_writes_into_no_folder_another_user_can_write(sticky, tmp_path, victim):
    wirecheck = tmp_path / "bin" / "wirecheck"  # root's own install
    wirecheck.parent.mkdir()
    wirecheck.write_text("#!/bin/sh\nexit 0\n")
    wirecheck.chmod(0o755)
    results = sticky / "results"
    _plant("mkdir", str(results))
    _plant("ln", "-s", str(victim), str(results / "nodes.txt"))  # the shell's `>` would follow it
    done = _sbatch(wirecheck, results)
    assert done.returncode == 2 and f"{results} (owner {name(NOBODY)}, mode 755)" in done.stderr, done.stderr
    assert "pass a RESULTS folder only root can write" in done.stderr and _untouched(victim)


def test_the_recipes_set_path_and_run_absolute_paths():
    lines = [line for line in SBATCH.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert lines[0] == "set -uo pipefail" and lines[1].startswith("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin")
    assert "." not in lines[1].split("=", 1)[1].split("#")[0].split(":") and "umask 022" in lines
    assert " bash -c" not in SBATCH.read_text() and "/bin/bash -c" in SBATCH.read_text()
    import yaml

    for path in K8S:
        for doc in yaml.safe_load_all(path.read_text()):
            spec = doc["spec"].get("template", {}).get("spec", doc["spec"])
            for container in spec.get("containers", []):
                assert container["command"][0].startswith("/"), (path.name, container["command"])
                program = " ".join(container.get("args") or container["command"][1:])
                first = program.split()[0] if container["command"][0] == "/bin/bash" else container["command"][0]
                assert first.startswith("/opt/wirecheck/"), (path.name, program)
                env = {e["name"]: e.get("value") for e in container.get("env", [])}
                assert env["PATH"].split(":")[0] == "/opt/wirecheck/.venv/bin" and "." not in env["PATH"].split(":")


def test_every_manifest_that_runs_on_gpus_shares_the_nodes_one_lock():
    """The health check's DaemonSet says an acceptance Job that mounts the node lock too is never measured beside
    it: each pod that requests GPUs mounts the host's /run/wirecheck, else each has a lock of its own."""
    import yaml

    manifests = [*K8S, *sorted((PROJECT / "scripts" / "k8s" / "node-problem-detector").glob("*.yaml"))]
    gpu_pods = 0
    for path in manifests:
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or "spec" not in doc:
                continue
            spec = doc["spec"].get("template", {}).get("spec", doc["spec"])
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            for container in spec.get("containers", []):
                env = {e["name"] for e in container.get("env", [])}
                if "nvidia.com/gpu" not in str(container.get("resources")) and "NVIDIA_VISIBLE_DEVICES" not in env:
                    continue  # a pod that reads records only (the fleet report)
                gpu_pods += 1
                mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
                assert "/run/wirecheck" in mounts, (path.name, container["name"])
                assert volumes[mounts["/run/wirecheck"]]["hostPath"]["path"] == "/run/wirecheck", path.name
    assert gpu_pods >= 2
