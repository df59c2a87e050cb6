#!/usr/bin/env bash
# Where the fixed seconds of a short run go on a GPU node (about 2 minutes on a 1x H200 node): the
# README's quick start once from a fresh copy (offline, .whl/ beside the checkout), then
#   - the command's own start (`wirecheck validate --help`: Python and the CLI's imports);
#   - pytest's start and collection at the quick level, nothing run (`--collect-only`);
#   - a worker's start, phase by phase, in a plain Python (interpreter, import torch, the CUDA
#     context, a one-rank NCCL group, the first GEMM), twice;
#   - `wirecheck validate --level quick` N times with pytest's per-phase durations (set-up, call).
#   bash scripts/device/start_costs.sh OUTDIR [N]
# OUTDIR gets console.log (every figure), costs.tsv (step, repeat, seconds) and the runs' records and
# logs in records.tgz. The environment is passed through unchanged (NCCL_NVLS_ENABLE=0 and the rest
# reach every process).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
. "$ROOT/scripts/device/common.sh"
outdir "bash scripts/device/start_costs.sh OUTDIR [N]" "${1:-}"
REPEATS=${2:-2}
case $REPEATS in ''|*[!0-9]*) echo "start_costs: N must be a whole number, not '$REPEATS'" >&2; exit 4 ;; esac
WORK=$(mktemp -d /tmp/start-costs.XXXXXX)
mkdir -p "$WORK/runs"
exec > >(tee "$OUT/console.log") 2>&1
export PYTHONUNBUFFERED=1
NAME=start_costs
BUDGET=${START_COSTS_BUDGET_S:-400}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
printf 'step\trepeat\tseconds\n' > "$OUT/costs.tsv"
cost() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$OUT/costs.tsv"; log "$1 ($2): $3 s"; }

fresh_venv "$WORK"
checkout=$(dirname "$venv")

for i in $(seq 1 "$REPEATS"); do
  s=$(now); (cd "$checkout" && "$venv/bin/wirecheck" validate --help > /dev/null 2>&1); cost cli_help "$i" "$(since "$s")"
  s=$(now); (cd "$checkout" && "$venv/bin/python" -m pytest --collect-only -q --level quick > "$WORK/collect-$i.log" 2>&1)
  cost pytest_collect_quick "$i" "$(since "$s")"
  # A worker's phases, each from the previous one (seconds); the interpreter's from the shell's clock.
  s=$(now)
  (cd "$checkout" && WIRECHECK_T0="$s" "$venv/bin/python" - <<'EOF'
import os, time
t = [float(os.environ["WIRECHECK_T0"]), time.time()]
import torch
t.append(time.time())
torch.cuda.set_device(0); torch.empty(1, device="cuda"); torch.cuda.synchronize()
t.append(time.time())
import torch.distributed as dist
import tempfile  # a file store: no TCP port to pick, so a port another process holds cannot fail it
store = os.path.join(tempfile.mkdtemp(prefix="start-costs-"), "store")
dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1, device_id=torch.device("cuda", 0))
t.append(time.time())
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); (a @ a).sum().item()
t.append(time.time())
dist.destroy_process_group()
names = ["interpreter", "import_torch", "cuda_context", "nccl_group_1_rank", "first_gemm"]
for name, (x, y) in zip(names, zip(t, t[1:])):
    print(f"PHASE {name} {y - x:.3f}")
EOF
  ) > "$WORK/phases-$i.log" 2>&1
  while read -r _ name secs; do cost "worker_$name" "$i" "$secs"; done < <(grep '^PHASE' "$WORK/phases-$i.log")
done

for i in $(seq 1 "$REPEATS"); do
  fits 40 "quick $i" || continue
  s=$(now)
  (cd "$checkout" && timeout -s INT "$(allow 120)" "$venv/bin/wirecheck" validate --level quick -rfEs \
     --durations=0 --durations-min=0.05 --wirecheck-json "$WORK/runs/quick-$i.jsonl" > "$WORK/runs/quick-$i.log" 2>&1)
  rc=$?
  cost "quick_wall(exit $rc)" "$i" "$(since "$s")"
  sed -n '/slowest durations/,/^=/p' "$WORK/runs/quick-$i.log"
done
cp "$WORK/fresh.log" "$WORK"/collect-*.log "$WORK"/phases-*.log "$WORK/runs/"
tar czf "$OUT/records.tgz" -C "$WORK" runs
cat "$OUT/costs.tsv"
