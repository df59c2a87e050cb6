"""Summaries for scripts/device/report_check.sh, read from a run's record file and pytest's log.

  python scripts/device/report_check.py evidence RECORD.jsonl   NCCL's path per placement, copy figures, verdicts
  python scripts/device/report_check.py durations PYTEST.log     seconds per test file (pytest --durations=0 --durations-min=0)

Plain printing over wirecheck.report.model, no GPU needed: it also runs on a record brought back.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

from wirecheck.report.model import RunView
from wirecheck.records.file import read_run


def _gb(bps) -> str:
    return "-" if bps is None else f"{bps / 1e9:7.1f}"


def evidence(path: str) -> int:
    view = RunView.of(read_run(path))
    verdicts = defaultdict(list)
    for v in view.verdicts:
        verdicts[v.get("check")].append(v)
    print(f"== NCCL's path ({len(view.nccl_paths)} placements)")
    for pid, d in view.nccl_paths.items():
        gpus = d.get("gpus") or list(view.gpus_of(pid))
        print(f"-- {pid}: NCCL {d.get('nccl_version')}, env {d.get('env', {}).get('NCCL_P2P_DISABLE', '-')}"
              f" (NCCL_P2P_DISABLE), {d.get('info_lines')} INFO lines, logs {', '.join(d.get('log_files') or [])}")
        if d.get("error"):
            print(f"   probe failed: {d['error']}")
            continue
        paths = d.get("path_types") or {}
        print(f"   {'pair':16} {'transport':22} {'path':5} {'channels':>8}  NCCL's first line")
        for c in d.get("connections") or []:
            pair = f"GPU{gpus[c['src']]}->GPU{gpus[c['dst']]}" if max(c["src"], c["dst"]) < len(gpus) else f"{c['src']}->{c['dst']}"
            transport = f"{c['transport']}/{c['detail']}".rstrip("/")
            path_type = paths.get(f"{c['src']}-{c['dst']}", "-")
            print(f"   {pair:16} {transport:22} {path_type:5} {len(c['channels']):>8}  {c['line']}")
        for g in d.get("graphs") or []:
            print(f"   graph: pattern {g['pattern']}, {g['n_channels']} channels, type {g['type_intra']}/{g['type_inter']}, "
                  f"bw {g['bw_intra']:g}/{g['bw_inter']:g} GB/s")
        if d.get("channel_counts"):
            print("   channels: " + ", ".join(f"{k} {n}" for k, n in d["channel_counts"].items()))
        for c in d.get("collectives") or []:
            print(f"   {c.get('op') or '?':14} {c['bytes']:>12} B -> {c['algo']}/{c['proto']}"
                  + (f", {c['channels']} channels" if c.get("channels") else ""))
    for v in verdicts.get("nccl_path", []):
        print(f"   {v['outcome'].upper():4} {v['message']}")
    c = view.copies or {}
    print(f"== copy bandwidth without NCCL ({c.get('size', 0) / 2**30:g} GiB per copy, {c.get('iters')} timed copies)")
    if c.get("error"):
        print(f"   measurement failed: {c['error']}")
    for h in c.get("host") or []:
        link = (h.get("pcie") or {}).get("link") or {}
        print(f"   GPU{h['gpu']}: H2D {_gb(h['h2d_bytes_per_s'])} GB/s  D2H {_gb(h['d2h_bytes_per_s'])} GB/s  "
              f"PCIe under load Gen{link.get('gen')} x{link.get('width')} (max Gen{link.get('gen_max')} x{link.get('width_max')}, "
              f"under load: {(h.get('pcie') or {}).get('under_load')})")
    for p in c.get("peer") or []:
        print(f"   GPU{p['src']} -> GPU{p['dst']}: {_gb(p['bytes_per_s'])} GB/s (peer access {p['peer_access']})")
    for check in ("host_copy", "pcie_link_under_load", "peer_copy"):
        for v in verdicts.get(check, []):
            print(f"   {v['outcome'].upper():4} {v['message']}")
    return 0


DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(tests/[\w/]+\.py)::")


def durations(path: str) -> int:
    per_file: dict[str, float] = defaultdict(float)
    for line in open(path, encoding="utf-8", errors="replace"):
        m = DURATION.match(line)
        if m:
            per_file[m.group(3)] += float(m.group(1))
    if not per_file:
        print(f"no --durations lines in {path}")
        return 1
    for f, s in sorted(per_file.items(), key=lambda kv: -kv[1]):
        print(f"   {s:8.1f} s  {f}")
    added = sum(s for f, s in per_file.items() if f.endswith(("test_nccl_path.py", "test_copy_bandwidth.py")))
    print(f"   {added:8.1f} s  added by tests/test_nccl_path.py + tests/test_copy_bandwidth.py "
          f"(aim: under 20 s), of {sum(per_file.values()):.1f} s in all tests")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("evidence", "durations"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit({"evidence": evidence, "durations": durations}[sys.argv[1]](sys.argv[2]))
