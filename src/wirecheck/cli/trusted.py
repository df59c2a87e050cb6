"""`wirecheck validate --trust-recent[=WINDOW]`: let this node's latest pass stand for a new run when
nothing could have changed since (wirecheck.records.trust decides), reading only NVML and the kernel log.

It gathers what the decision needs: the latest run of this host in the record folder (that of
--wirecheck-json, else .wirecheck/) and --history DIR, the node now (wirecheck.node.snapshot), the kernel
log's Xid lines since the pass began (wirecheck.node.kernel_xid), the GPUs this run would validate (its
CUDA_VISIBLE_DEVICES, as the suite reads it), the thresholds' digest and window (prolog.trust_window) and
wirecheck's version. validate runs the level as before when it is refused.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Callable, Sequence

import wirecheck
from wirecheck.core.levels import DEFAULT_LEVEL
from wirecheck.core.paths import suite_paths
from wirecheck.node import kernel_xid, snapshot, visible
from wirecheck.node.topology import Gpu
from wirecheck.records import trust
from wirecheck.records.run import thresholds_fields
from wirecheck.thresholds.file import ThresholdsError, load_thresholds

DEFAULT_RECORD_FOLDER = ".wirecheck"  # RunWriter's, where a run without --wirecheck-json keeps its record


def folders(option_value: Callable[[Sequence[str], str], str | None], pytest_args: Sequence[str]) -> list[Path]:
    """Where the node's records are: the folder of --wirecheck-json (else .wirecheck/), and --history DIR."""
    record = option_value(pytest_args, "--wirecheck-json")
    out = [Path(record).parent if record else Path(DEFAULT_RECORD_FOLDER)]
    history = option_value(pytest_args, "--history")
    if history:
        out.append(Path(history))
    return out


def thresholds_path(option_value: Callable[[Sequence[str], str], str | None], pytest_args: Sequence[str]) -> Path:
    given = option_value(pytest_args, "--thresholds")
    return Path(given) if given else suite_paths().thresholds


def attempt(pytest_args: Sequence[str], level: str | None, window: str,
            option_value: Callable[[Sequence[str], str], str | None]) -> tuple[trust.Decision, str, float]:
    """The decision, where its window comes from, and the seconds it took. ValueError (ThresholdsError,
    TrustWindowError, VisibleDevicesError) for a thresholds file, window or CUDA_VISIBLE_DEVICES that cannot be
    read: the caller's usage error."""
    started = time.monotonic()
    path = thresholds_path(option_value, pytest_args)
    try:
        loaded = load_thresholds(path)
    except FileNotFoundError:
        raise ThresholdsError(f"--thresholds: {path} does not exist; pass the path of a thresholds file") from None
    seconds, where = trust.trust_window(loaded.prolog, str(path), window or None)
    host = platform.node()
    searched = folders(option_value, pytest_args)
    run = trust.last_run(searched, host)
    now_snapshot = snapshot.snapshot_or_reason()
    asked = asked_gpus(now_snapshot)
    since = trust.epoch(run.started) if run is not None else None
    xids = kernel_xid.read_since(since) if since is not None else kernel_xid.KernelXids(())
    decision = trust.decide(
        run, now_snapshot, now=time.time(), window_s=seconds, window_where=where, asked_level=level or DEFAULT_LEVEL,
        thresholds=trust.thresholds_digest(thresholds_fields(path)), version=wirecheck.__version__,
        xid_lines=[line.as_record() for line in xids.lines], xid_unreadable=xids.unreadable,
        xid_oldest_at=xids.oldest_at, host=host, folders=", ".join(str(f) for f in searched), asked_gpus=asked,
        asked_profile=option_value(pytest_args, "--profile"))
    return decision, where, time.monotonic() - started


def asked_gpus(now_snapshot: dict, environ=None) -> tuple[int, ...] | None:
    """The NVML indices of the GPUs this run would validate: those its CUDA_VISIBLE_DEVICES names (read as
    wirecheck.node.visible reads it for the suite), None for every GPU. VisibleDevicesError for a value the
    suite would refuse too."""
    gpus = tuple(Gpu(index=g["index"], name=g.get("name"), uuid=g.get("uuid")) for g in now_snapshot.get("gpus") or [])
    env = os.environ if environ is None else environ
    spec = env.get(visible.ENV)
    if spec is None or not gpus:
        return None
    return visible.visible_indices(spec, gpus, env.get(visible.ORDER_ENV))


def trusted_lines(decision: trust.Decision, window_where: str, seconds: float) -> list[str]:
    """What the operator reads when the pass stands: what was compared, what could not be, which pass."""
    run = decision.run
    ended = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run.ended_at)) if run.ended_at else run.started
    lines = [f"checked since the pass: {'; '.join(decision.checked)}"]
    lines += [f"not checked: {said}" for said in decision.said]
    age = (time.time() - run.ended_at) / 3600 if run.ended_at else None
    ago = f", {age:.1f} h ago" if age is not None else ""
    lines.append(f"trusted the {run.level} pass of {run.path} (ended {ended}{ago}, within the window of {window_where}): "
                 f"nothing changed since; pytest not run ({seconds:.2f} s)")
    return lines


def refused_lines(decision: trust.Decision) -> list[str]:
    lines = [f"not trusting the latest pass{f' ({decision.run.path})' if decision.run else ''}: "
             f"{len(decision.refusals)} reason(s); running the level"]
    lines += [f"  - {refusal.text()}" for refusal in decision.refusals]
    lines += [f"  (not checked: {said})" for said in decision.said]
    return lines
