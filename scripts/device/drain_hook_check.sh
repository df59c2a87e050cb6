#!/usr/bin/env bash
# The drain hook's rules on a GPU node (wirecheck node-state --hook slurm): a real quick-level run of one
# check, the same record with that check's verdict turned to a failure (what a flaky check leaves), and the
# hook's decision: the re-test must run the one failed test on the GPUs through `wirecheck validate -k` and
# pass it (exit 30, flaky). Then the evidence a replacement's bundle holds, read on this node: `nvidia-smi -q`
# and the kernel log's Xid lines, packed as the hook packs them. The guard reads a fake sinfo listing this
# node alone (there is no Slurm here), so nothing else of the cluster is read.
#
#   bash scripts/device/drain_hook_check.sh OUTDIR
#
# OUTDIR gets the records, the hook's folder (records/: drain-events.jsonl, the re-test's record, the .prom
# file), bundle.tar.gz and its listing, and the log; exit 0 when the decision was flaky and the bundle holds
# nvidia-smi-q.txt.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/device/drain_hook_check.sh OUTDIR" >&2; exit 2; }
OUTDIR=$1
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
mkdir -p "$OUTDIR/records" && OUTDIR=$(cd "$OUTDIR" && pwd)
export PYTHONUNBUFFERED=1
BUDGET=${DRAIN_BUDGET_S:-400}
NAME=drain_hook_check
. "$ROOT/scripts/device/common.sh"
PY=$(pick_python) || { log "no Python whose torch sees a GPU"; exit 2; }
use_checkout "$PY"
status=0
SELECT=${DRAIN_SELECT:-test_large_all_reduce_busbw}

"$PY" -m wirecheck.cli.main validate --level quick -k "$SELECT" --wirecheck-json "$OUTDIR/first-pass.jsonl" \
  >"$OUTDIR/first.log" 2>&1
log "first run: exit $? ($(tail -1 "$OUTDIR/first.log"))"
# The same record, its first verdict of the selected test a failure: the re-test decides.
"$PY" - "$OUTDIR/first-pass.jsonl" "$OUTDIR/first.jsonl" <<'PYEOF' || { log "no verdict to turn"; exit 1; }
import json, sys
lines, turned = [json.loads(l) for l in open(sys.argv[1]) if l.strip()], False
for line in lines:
    if line.get("type") == "verdict" and line.get("outcome") == "pass" and not turned:
        line["outcome"], turned = "fail", True
open(sys.argv[2], "w").write("".join(json.dumps(l) + "\n" for l in lines))
sys.exit(0 if turned else 1)
PYEOF
node=$(hostname -s)
# The command the hook re-runs validate with: this Python's wirecheck (PYTHONPATH from use_checkout).
printf '#!/bin/bash\nexec %q -m wirecheck.cli.main "$@"\n' "$PY" >"$OUTDIR/wirecheck"
chmod +x "$OUTDIR/wirecheck"
printf '#!/bin/bash\n[ "$1" = -R ] && exit 0\necho "%s|gpu*"\n' "$node" >"$OUTDIR/sinfo"
chmod +x "$OUTDIR/sinfo"
"$PY" -m wirecheck.cli.main node-state --exit-code 1 --record "$OUTDIR/first.jsonl" --hook slurm --node "$node" \
  --records "$OUTDIR/records" --mode prolog --wirecheck "$OUTDIR/wirecheck" \
  --sinfo "$OUTDIR/sinfo" --time-left "$(allow 240)" -- --level quick >"$OUTDIR/decision.txt" 2>&1
code=$?
log "decision: exit $code: $(cat "$OUTDIR/decision.txt")"
[ "$code" = 30 ] || { log "FAIL: expected 30 (flaky: the re-test passed on the GPUs)"; status=1; }
grep -q '"outcome": "pass"' "$OUTDIR/records/prolog-retest.jsonl" 2>/dev/null || { log "FAIL: no passing re-test record"; status=1; }
"$PY" - "$OUTDIR" <<'PYEOF' || status=1
import sys, tarfile
from pathlib import Path
from wirecheck.node import evidence
from wirecheck.records import drain_policy as dp
out = Path(sys.argv[1])
smi = evidence.nvidia_smi_q()
texts = {"kernel-xid.txt": evidence.xid_lines(), **({"nvidia-smi-q.txt": smi} if smi else {})}
path = dp.write_bundle(out / "bundle.tar.gz", [out / "first.jsonl", out / "records" / "prolog-retest.jsonl"], texts)
names = tarfile.open(path).getnames()
(out / "bundle-listing.txt").write_text("\n".join(names) + "\n" + texts["kernel-xid.txt"])
print("bundle:", names, "| xid:", texts["kernel-xid.txt"].splitlines()[0])
sys.exit(0 if "nvidia-smi-q.txt" in names and smi and "GPU" in smi else 1)
PYEOF
log "done, status $status"
exit $status
