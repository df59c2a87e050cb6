"""The GPU node scripts measure the install they made, never an older one (scripts/device/fresh_install.sh,
common.sh's fresh_venv and newest_fresh_venv).

A real fresh_install.sh runs in a small git repository of its own whose install.sh either makes a venv or fails,
with TMPDIR a folder of the test's: a failed install must stop a script (exit 2) even when an older install that
succeeded is there, and a script that goes on from another's gets the newest install that succeeded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What a GPU node's install leaves for the scripts: a venv with a python and a wirecheck (the inventory run).
INSTALL_OK = """#!/usr/bin/env bash
mkdir -p .venv/bin
ln -s "$PYTHON" .venv/bin/python
printf '#!/bin/sh\\nexit 0\\n' > .venv/bin/wirecheck && chmod +x .venv/bin/wirecheck
"""
# A failed install that got as far as making the venv (pip's error after `python -m venv`).
INSTALL_FAILS = """#!/usr/bin/env bash
mkdir -p .venv/bin
ln -s "$PYTHON" .venv/bin/python
echo "ERROR: Could not find a version that satisfies the requirement deepspeed" >&2
exit 3
"""


def _repo(tmp: Path, install: str) -> Path:
    repo = tmp / "checkout"
    if repo.exists():
        shutil.rmtree(repo)
    (repo / "scripts/device").mkdir(parents=True)
    (repo / ".whl").mkdir()
    for name in ("fresh_install.sh", "common.sh"):
        shutil.copy(ROOT / "scripts/device" / name, repo / "scripts/device" / name)
    (repo / "install.sh").write_text(install)
    (repo / "install.sh").chmod(0o755)
    (repo / ".gitignore").write_text(".whl/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "c"], cwd=repo, check=True)
    return repo


def _script(repo: Path, tmp: Path, body: str) -> subprocess.CompletedProcess:
    """`body` after common.sh is sourced, as a device script runs it (NAME, BUDGET, OUT set)."""
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp / "t"), "PYTHON": sys.executable}
    (tmp / "t").mkdir(exist_ok=True)
    script = f'ROOT={repo}; NAME=check; BUDGET=100; OUT={out}\n. "$ROOT/scripts/device/common.sh"\n{body}\n'
    return subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=120)


def test_a_failed_install_stops_the_script_though_an_older_one_succeeded(tmp_path):
    repo = _repo(tmp_path, INSTALL_OK)
    first = _script(repo, tmp_path, 'fresh_venv "$OUT"; echo "venv=$venv"')
    assert first.returncode == 0, first.stdout + first.stderr
    older = first.stdout.split("venv=")[1].strip()
    assert older.startswith(str(tmp_path / "t" / "wirecheck-fresh.")) and Path(older, "bin/python").exists()

    repo = _repo(tmp_path, INSTALL_FAILS)
    failed = _script(repo, tmp_path, 'fresh_venv "$OUT"; echo "venv=$venv"')
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "no fresh install (see fresh.log)" in failed.stdout and "venv=" not in failed.stdout
    assert "exit 3" in (tmp_path / "out/fresh.log").read_text()
    # Two installs are there, the failed one the newer; a script going on from another's gets the one that worked.
    assert len(list((tmp_path / "t").glob("wirecheck-fresh.*/wirecheck/.venv"))) == 2
    newest = _script(repo, tmp_path, "newest_fresh_venv")
    assert newest.stdout.strip() == older


def test_a_later_install_is_the_one_measured(tmp_path):
    repo = _repo(tmp_path, INSTALL_OK)
    first = _script(repo, tmp_path, 'fresh_venv "$OUT"; echo "venv=$venv"').stdout.split("venv=")[1].strip()
    second = _script(repo, tmp_path, 'fresh_venv "$OUT"; echo "venv=$venv"').stdout.split("venv=")[1].strip()
    assert first != second
    assert _script(repo, tmp_path, "newest_fresh_venv").stdout.strip() == second


def test_no_install_is_none(tmp_path):
    repo = _repo(tmp_path, INSTALL_OK)
    got = _script(repo, tmp_path, 'newest_fresh_venv || echo "none"')
    assert got.stdout.strip() == "none"
