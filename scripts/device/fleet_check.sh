#!/usr/bin/env bash
# On a GPU host: the network inventory read from the real node, and the multi-node path run
# as 2 "nodes" of 1 GPU each on this one host through torchrun (c10d rendezvous on localhost).
#
#   bash scripts/device/fleet_check.sh OUTDIR [STEP ...]     STEP: inventory network same-host net-transport report
#                                                launcher (default: the first five, in that order)
#
#   inventory      `wirecheck fleet inventory`: NIC ports from /sys/class/infiniband and /sys/class/net,
#                  each GPU's nearest NIC from `nvidia-smi topo -m`, the line rate, the network verdicts.
#   network        pytest tests/test_network.py on this node (no --simulate).
#   same-host      2 torchrun agents (CUDA_VISIBLE_DEVICES=0 and =1, --node-name gpu0/gpu1), one rank each,
#                  rendezvous c10d on 127.0.0.1: wirecheck.fleet.multinode runs all_reduce, all_gather and
#                  reduce_scatter across both "nodes" and the pair schedule (one pair). NCCL knows both
#                  ranks are on one host, so it takes its intra-node path (NVLink): this exercises the
#                  launch, the rendezvous, the records and the verdicts, not a network.
#   net-transport  the same with NCCL_HOSTID=gpu0/gpu1 per agent: NCCL then treats the agents as two hosts
#                  and uses its network transport between them (IB loopback through an HCA if the host
#                  has one, else TCP sockets): the network code path of a real two-node job, with its
#                  traffic looping back inside this host. all_reduce only (the one pair of two nodes is
#                  the same two ranks).
#   report         `wirecheck fleet report` on the records written above.
#   launcher       `wirecheck fleet multinode` itself (one agent, every GPU of this host, all_reduce at
#                  64 MiB, no pairs), three times: with wirecheck's bytecode cache (built by the first
#                  run where the image keeps no .pyc), with WIRECHECK_PYCACHE=off, and with the cache
#                  again: each run's wall time, and whether the ranks were given the cache.
#
# What one host cannot show: traffic that leaves the host (switches, cables, another node's NIC), the
# line-rate floor met by a real fabric, and the pair schedule telling a slow node from a slow link
# (that needs 4 or more nodes; CI runs it with 4 simulated nodes).
#
# Environment: FLEET_CHECK_SIMULATE=1
# (rehearse the script's plumbing on a CPU machine: gloo ranks, nothing about the host is measured), PYTHON (default:
# .venv/bin/python, else python3; the first whose torch sees CUDA), FLEET_BUDGET_S (default 115: a
# step that would not fit in what is left is skipped). The environment is passed through untouched:
# NCCL_NVLS_ENABLE=0 and the other multicast switches reach every process.
# Files in OUTDIR: inventory.json, network.jsonl, network.log, same-host.jsonl, same-host.log,
# net-transport.jsonl, net-transport.log, report.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/fleet_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
BUDGET=${FLEET_BUDGET_S:-115}
SIMULATE=${FLEET_CHECK_SIMULATE:-}
ALLOW_CPU=$SIMULATE  # a rehearsal on CPU takes any torch
SIM_ARGS=()
SIZES=(--sizes "64 MiB,1 GiB")  # the floor size (1 GiB) and one below; the sweep's small sizes add little here
if [ -n "$SIMULATE" ]; then SIM_ARGS=(--simulate); SIZES=(); fi
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(inventory network same-host net-transport report)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=fleet_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")')"
[ -n "$SIMULATE" ] && log "FLEET_CHECK_SIMULATE: CPU ranks and gloo; nothing about this host is measured"
log "environment: $(env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_)' | sort | tr '\n' ' ')"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader 2>&1 | sed 's/^/  /'
log "nvidia-smi topo -m:"
nvidia-smi topo -m 2>&1 | sed 's/\x1b\[[0-9;]*m//g; s/^/  /'
log "/sys/class/infiniband: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ' || true)$( [ -d /sys/class/infiniband ] || echo '(absent)')"
log "/sys/class/net: $(for i in /sys/class/net/*; do n=${i##*/}; printf '%s(%s,%s,%sMb/s) ' "$n" "$(cat "$i/operstate" 2>/dev/null)" "$([ -e "$i/device" ] && basename "$(readlink -f "$i/device")" || echo virtual)" "$(cat "$i/speed" 2>/dev/null || echo '?')"; done)"

step_inventory() {
  "$PY" -m wirecheck.cli.main fleet inventory --thresholds "$ROOT/thresholds.yaml"
  local rc=$?
  "$PY" -m wirecheck.cli.main fleet inventory --thresholds "$ROOT/thresholds.yaml" --json >"$OUT/inventory.json" 2>&1
  log "inventory: exit $rc (0: no network check failed)"
  return 0
}

step_network() {
  local t rc
  t=$(allow 40)
  timeout "$t" "$PY" -m pytest tests/test_network.py -v -rs -W always::UserWarning -p no:cacheprovider \
    --thresholds="$ROOT/thresholds.yaml" --wirecheck-json="$OUT/network.jsonl" >"$OUT/network.log" 2>&1
  rc=$?
  grep -E "PASSED|FAILED|SKIPPED|ERROR|NetworkWarning|passed|failed" "$OUT/network.log" | sed 's/^/  /' | head -40
  log "network: tests/test_network.py exit $rc"
  [ $rc -eq 0 ] || [ $rc -eq 5 ]
}

# Two torchrun agents on this host, one GPU each. $1: name; $2: "hostid" (NCCL_HOSTID per agent) or "";
# $3: time cap (s); the rest: wirecheck.fleet.multinode options.
two_agents() {
  local name=$1 mode=$2 t port k pids=() rc=0 r
  t=$(allow "$3")
  shift 3
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$OUT/$name.jsonl"
  : >"$OUT/$name.log"
  for k in 0 1; do
    (
      export CUDA_VISIBLE_DEVICES=$k NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
      [ "$mode" = hostid ] && export NCCL_HOSTID=gpu$k
      exec timeout "$t" "$PY" -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "fleet-check-$name" --rdzv-conf join_timeout=60 \
        -m wirecheck.multinode --thresholds "$ROOT/thresholds.yaml" --node-name "gpu$k" \
        --wirecheck-json "$OUT/$name.jsonl" "${SIM_ARGS[@]}" "$@"
    ) >"$OUT/$name.agent$k.log" 2>&1 &
    pids+=($!)
  done
  for k in 0 1; do
    wait "${pids[$k]}"
    r=$?
    [ $r -gt $rc ] && rc=$r
  done
  for k in 0 1; do
    { echo "===== agent $k (CUDA_VISIBLE_DEVICES=$k)"; cat "$OUT/$name.agent$k.log"; } >>"$OUT/$name.log"
    rm -f "$OUT/$name.agent$k.log"
  done
  log "$name: what rank 0 printed (tables, verdicts):"
  grep -hE "^(wirecheck multinode|#|  round| +[0-9]+ +[0-9]+ |PASS|FAIL|SKIP|note)" "$OUT/$name.log" | cut -c1-240 | sed 's/^/  /'
  log "$name: NCCL's transport between the two agents:"
  grep -hoE "NCCL INFO (NET/[A-Za-z]+ ?: ?.{0,120}|Using network [A-Za-z]+|Channel 00/[0-9]+ : [0-9]+\[[0-9]+\] -> [0-9]+\[[0-9]+\] (\[[a-z]+\] )?via [A-Za-z/]+[^ ]*)" \
    "$OUT/$name.log" | sort | uniq -c | head -12 | sed 's/^/  /'
  log "$name: torchrun agents exit $rc (0 pass, 1 a verdict failed, 2 bad input; 124 out of time)"
  [ $rc -le 1 ]
}

step_same_host() {
  two_agents same-host "" 45 "${SIZES[@]}"
}

step_net_transport() {
  # With two nodes the schedule's one pair is the same two ranks again: --no-pairs halves the time on a
  # loopback socket.
  two_agents net-transport hostid 60 "${SIZES[@]}" --ops all_reduce --no-pairs
}

step_report() {
  local dir=$OUT/fleet-dir
  mkdir -p "$dir"
  for f in same-host net-transport; do [ -f "$OUT/$f.jsonl" ] && cp "$OUT/$f.jsonl" "$dir/"; done
  # This node's own record (tests/test_network.py) is a hardware record: not beside a rehearsal's.
  [ -z "$SIMULATE" ] && [ -f "$OUT/network.jsonl" ] && cp "$OUT/network.jsonl" "$dir/$(hostname).jsonl"
  "$PY" -m wirecheck.cli.main fleet report "$dir" --thresholds "$ROOT/thresholds.yaml" --expect 1 >"$OUT/report.txt" 2>&1
  local rc=$?
  sed 's/^/  /' "$OUT/report.txt" | cut -c1-300
  rm -rf "$dir"
  log "report: exit $rc (0 pass, 1 a node or network verdict failed, 10 simulation)"
  return 0
}

step_launcher() {
  local port n rc=0 r label start
  n=$("$PY" -c 'import torch; print(torch.cuda.device_count() or 1)')
  for label in cache-build off cache; do
    port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start=$SECONDS
    (
      [ "$label" = off ] && export WIRECHECK_PYCACHE=off
      exec timeout "$(allow 90)" "$PY" -m wirecheck.cli.main fleet multinode --nnodes 1 --nproc-per-node "$n" \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-id "fleet-check-launcher-$label" -- \
        --thresholds "$ROOT/thresholds.yaml" --node-name launcher "${SIM_ARGS[@]}" --sizes "64 MiB" \
        --ops all_reduce --no-pairs --wirecheck-json "$OUT/launcher-$label.jsonl"
    ) >"$OUT/launcher-$label.log" 2>&1
    r=$?
    [ $r -gt $rc ] && rc=$r
    log "launcher ($label): exit $r in $((SECONDS - start)) s; $(grep -hoE 'bytecode cache [^;]*' "$OUT/launcher-$label.log" | head -1 || true)"
  done
  [ $rc -le 1 ]
}

for step in "${STEPS[@]}"; do
  fn=step_${step//-/_}
  if ! declare -F "$fn" >/dev/null; then log "unknown step $step"; status=2; continue; fi
  if [ $((BUDGET - SECONDS)) -lt 10 ]; then log "$step: skipped, the ${BUDGET} s budget is spent"; status=1; continue; fi
  log "== $step"
  "$fn" || status=1
done
log "done in ${SECONDS} s, exit $status"
exit $status
