"""What a node says about its GPUs beyond wirecheck's own records, for the evidence bundle of a GPU to
replace: `nvidia-smi -q`, the kernel log's Xid lines (NVIDIA's driver logs each as `NVRM: Xid (PCI:...): N,
...`), and on request NVIDIA's `nvidia-bug-report.sh` file. Each is read with a time limit and, when the
tool is missing or fails, replaced by a line saying so: a bundle is never held back by one missing piece.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

XID_MARK = "NVRM: Xid"
TOOL_TIMEOUT_S = 30.0
BUG_REPORT_TIMEOUT_S = 300.0  # nvidia-bug-report.sh gathers minutes of logs on a large node


def _run(cmd: list[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[str | None, str]:
    """(stdout, None-or-why) of `cmd`."""
    if shutil.which(cmd[0]) is None:
        return None, f"{cmd[0]} not found on this node"
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"`{' '.join(cmd)}` ran past {timeout:g} s"
    except OSError as exc:
        return None, f"`{' '.join(cmd)}`: {exc}"
    if done.returncode:
        return None, f"`{' '.join(cmd)}` exited {done.returncode}: {' '.join(done.stderr.split())[:300]}"
    return done.stdout, ""


def nvidia_smi_q() -> str | None:
    """`nvidia-smi -q`, or None where there is no nvidia-smi (a CPU node, a simulation)."""
    if shutil.which("nvidia-smi") is None:
        return None
    out, why = _run(["nvidia-smi", "-q"])
    return out if out is not None else f"nvidia-smi -q failed: {why}\n"


def xid_lines() -> str:
    """The kernel log's Xid lines (this boot's: journalctl -k, else dmesg), with where they came from."""
    tried = []
    for cmd in (["journalctl", "-k", "--no-pager", "-o", "short-iso"], ["dmesg", "-T"], ["dmesg"]):
        out, why = _run(cmd)
        if out is None:
            tried.append(why)
            continue
        lines = [line for line in out.splitlines() if XID_MARK in line]
        head = f"# `{' '.join(cmd)}` | grep '{XID_MARK}': {len(lines)} line(s)\n"
        return head + "".join(line + "\n" for line in lines)
    return "# no kernel log could be read: " + "; ".join(tried) + "\n"


def bug_report(folder: Path) -> tuple[Path | None, str]:
    """nvidia-bug-report.sh's file in `folder` (it appends .gz where gzip is there), or None and why."""
    base = folder / "nvidia-bug-report.log"
    out, why = _run(["nvidia-bug-report.sh", "--output-file", str(base)], BUG_REPORT_TIMEOUT_S)
    for made in (base.with_name(base.name + ".gz"), base):
        if made.is_file():
            return made, ""
    return None, why or "nvidia-bug-report.sh wrote no file"
