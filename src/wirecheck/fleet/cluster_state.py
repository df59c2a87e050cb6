"""What the fleet guard reads of the cluster before a hook drains a node: how many of the node's peers
wirecheck drained within the guard's window, and how many peers there are.

- Slurm: `sinfo -h -N -o '%N|%R'` (every node with each partition it is in) and `sinfo -R -N -h -o
  '%N|%E|%H'` (each unavailable node, its reason and the reason's time); the guard is judged per partition the
  node is in, and the fullest partition counts (a node in a small partition and a large one is held by the
  small one).
- Kubernetes: `kubectl get nodes -o json`, where kubectl is installed and allowed to list nodes: the peers are the
  nodes that carry the condition `WirecheckFailed` at all (those node-problem-detector runs the plugin on: CPU
  and control-plane nodes are no share of the GPU fleet), and one whose condition turned True within the window
  is a recent drain (a remediation controller drains on it).
Where neither can be read, `GuardUnavailable` says why: the hook says so loudly and acts without the guard
(the guard can only hold a drain back; it never makes one).

The commands run with a time limit of their own; their text is parsed here, the rule is drain_policy's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from wirecheck.records import drain_policy as dp

CONDITION = "WirecheckFailed"  # scripts/k8s/node-problem-detector/wirecheck-monitor.json
TIMEOUT_S = 5.0  # a controller that does not answer within this is no guard (two reads fit the hook's reserve)


class GuardUnavailable(RuntimeError):
    """The cluster's state cannot be read: the message says what was tried and what failed."""


@dataclass(frozen=True)
class Peers:
    where: str  # "partition gpu" or "cluster"
    drained: list[str]  # drained by wirecheck within the window, in the order their reasons were stamped (Slurm)
    size: int


Runner = Callable[[list[str]], str]


def _runner(timeout: float = TIMEOUT_S) -> Runner:
    def run(cmd: list[str]) -> str:
        if shutil.which(cmd[0]) is None:
            raise GuardUnavailable(f"{cmd[0]} not found")
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise GuardUnavailable(f"`{' '.join(cmd)}` did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise GuardUnavailable(f"`{' '.join(cmd)}`: {exc}") from None
        if done.returncode:
            said = " ".join((done.stderr or done.stdout).split())[:200]
            raise GuardUnavailable(f"`{' '.join(cmd)}` exited {done.returncode}: {said}")
        return done.stdout
    return run


def slurm_peers(node: str, now: float, policy: dp.Policy, sinfo: str = "sinfo", run: Runner | None = None) -> list[Peers]:
    """Each partition `node` is in, with its nodes drained by wirecheck within the window."""
    run = run or _runner()
    members: dict[str, set[str]] = {}
    for raw in run([sinfo, "-h", "-N", "-o", "%N|%R"]).splitlines():
        name, _, partition = raw.strip().partition("|")
        if name and partition:
            members.setdefault(partition.strip().rstrip("*"), set()).add(name.strip())
    mine = sorted(p for p, nodes in members.items() if node in nodes)
    if not mine:
        raise GuardUnavailable(f"sinfo lists no partition with the node {node} (is the hook's node name Slurm's?)")
    recent = dp.recently_drained(run([sinfo, "-R", "-N", "-h", "-o", "%N|%E|%H"]), now, policy)
    return [Peers(f"partition {p}", [n for n in recent if n in members[p]], len(members[p])) for p in mine]


def _stamp(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def k8s_peers(now: float, policy: dp.Policy, kubectl: str = "kubectl", run: Runner | None = None) -> list[Peers]:
    """The cluster's nodes, and those whose WirecheckFailed condition turned True within the window."""
    run = run or _runner()
    text = run([kubectl, "get", "nodes", "-o", "json", f"--request-timeout={int(TIMEOUT_S)}s"])
    try:
        items = json.loads(text).get("items") or []
    except (ValueError, AttributeError):
        raise GuardUnavailable("`kubectl get nodes -o json` did not print a node list") from None
    drained, watched = [], set()
    for item in items:
        name = (item.get("metadata") or {}).get("name")
        for c in (item.get("status") or {}).get("conditions") or []:
            if c.get("type") != CONDITION or not name:
                continue
            watched.add(name)
            when = _stamp(c.get("lastTransitionTime"))
            if c.get("status") == "True" and when is not None and now - when <= policy.guard_window_s:
                drained.append(name)
    if not watched:
        raise GuardUnavailable(f"no node carries the {CONDITION} condition yet (node-problem-detector sets it where "
                               "the plugin runs): no fleet to count")
    return [Peers(f"nodes with {CONDITION}", sorted(set(drained)), len(watched))]


def fullest(peers: list[Peers], node: str, policy: dp.Policy) -> tuple[Peers, dp.Guard]:
    """The partition whose guard would hold (or come closest to it) if `node` drained now."""
    judged = [(p, dp.guard(p.drained, p.size, node, policy)) for p in peers]
    return max(judged, key=lambda pg: (pg[1].hold, (len(set(pg[0].drained) - {node}) + 1) / max(pg[0].size, 1)))
