#!/usr/bin/env bash
# The burn-in level on a GPU node (1 GPU or more): a 5-minute burn-in with its progress line, its record
# and its report, then a second burn-in stopped by SIGINT after a minute that must keep every round so far.
# About 7.5 minutes on 1 H200.
#
#   bash scripts/device/burn_in_check.sh OUTDIR [STEP ...]     STEP: burn report interrupt (default: all, in order)
#
#   burn       `wirecheck validate --level burn-in --duration 5min`: the whole level (inventory, GPU figures,
#              the burn-in's rounds, its verdicts, the counters at the end) in a pseudo-terminal (`script -q -c`,
#              plain lines without it), so the progress line is rewritten in place; each round's line is shown
#   report     `wirecheck report` on its record: the burn-in section (rounds, figures per GPU, what stopped it)
#   interrupt  `wirecheck validate --level burn-in --duration 10min -k burn_in` (plain lines: not a terminal),
#              SIGINT to wirecheck after INTERRUPT_AFTER_S: exit 130, every round so far in the record, the
#              round cut short marked, the record's end `interrupted`
#
# Environment: PYTHON (default .venv/bin/python,
# else python3: the first whose torch sees CUDA; ALLOW_CPU=1 for a rehearsal in simulation), BURN_DURATION
# (default 5min), INTERRUPT_AFTER_S (default 60), BURN_BUDGET_S (default 500: a step that would not fit in what
# is left is skipped, saying so). The environment is passed through untouched.
# Files in OUTDIR: summary.log and burn_in_check.tar.gz (burn.tty or burn.log, burn.jsonl, burn.html,
# interrupt.log, interrupt.jsonl, gpus.txt, and the workers' logs beside the records, if any).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/burn_in_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
WORK=$(mktemp -d "${TMPDIR:-/tmp}/burn-in-check.XXXXXX")
BUDGET=${BURN_BUDGET_S:-500}
DURATION=${BURN_DURATION:-5min}
INTERRUPT_AFTER=${INTERRUPT_AFTER_S:-60}
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(burn report interrupt)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=burn_in_check
. "$ROOT/scripts/device/common.sh"

finish() {
  tar -czf "$OUT/burn_in_check.tar.gz" -C "$WORK" . 2>/dev/null
  rm -rf "$WORK"
}
trap finish EXIT
exec > >(tee "$OUT/summary.log") 2>&1

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }
use_checkout "$PY"
log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)')"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,power.limit,temperature.gpu,clocks.max.sm \
  --format=csv,noheader 2>&1 | sed 's/^/  /' | tee "$WORK/gpus.txt"
LOCK=$WORK/node.lock  # these runs take this lock, not the node's default one
VALIDATE=("$PY" -m wirecheck.cli.main validate -p no:cacheprovider --node-lock="$LOCK" --level burn-in)

# The burn-in's rounds in a record, one line each, and how it ended.
rounds() {
  "$PY" - "$1" <<'PY'
import json, sys
end = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "end":
        end = r
    if r.get("kind") == "burn_in_round":
        d = r["details"]
        gpus = "; ".join(f"{k} {(g['flops_per_s'] or 0) / 1e12:.1f} TFLOP/s {g['temperature']['max_c']} C "
                         f"{g['power_w'] or 0:.0f} W SM {g['sm_mhz'] or 0:.0f} MHz reasons {g['clocks']['reason_counts']} "
                         f"memory {((g.get('memory') or {}).get('bytes_covered') or 0) / 2**30:.1f} GiB"
                         for k, g in d["gpus"].items())
        coll = "; ".join(f"{k} {c['median'] / 1e9:.1f} GB/s x{len(c['busbw'])}" for k, c in d["collectives"].items())
        windows = sum(len(s["windows"]) for s in d["series"].values())
        samples = sum(len(s["samples"]) for s in d["series"].values())
        flag = (d["fault"] or {}).get("kind") or ("INTERRUPTED" if d["interrupted"] else d["stopped"])
        print(f"  round {d['round']}: {d['ended'] - d['started']:.1f} s, {windows} windows, {samples} NVML samples, "
              f"{flag}: {gpus}" + (f" | {coll}" if coll else ""))
    elif r.get("kind") == "burn_in":
        d = r["details"]
        print(f"  burn-in {d['status']}: {d['rounds']} rounds in {d['seconds']} s of {d['duration_s']} s"
              + (f"; fault: {d['fault']}" if d.get("fault") else "")
              + f"; cycle: {len(d['cycle'])} steps; left out: {len(d['left_out'])} placement(s)")
    elif r.get("type") == "verdict" and "test_burn_in" in str(r.get("test")):
        print(f"  verdict {r['outcome']}: {r['message'][:300]}")
print(f"  record end: {end['status'] if end else 'NONE (cut short)'}, exit_status {end.get('exit_status') if end else '-'}")
PY
}

step_burn() {
  fits 330 burn || return 0
  local t0=$SECONDS rc cmd
  cmd=("${VALIDATE[@]}" --duration "$DURATION" -rfEs --wirecheck-json="$WORK/burn.jsonl")
  if command -v script >/dev/null 2>&1; then
    # a pseudo-terminal: the progress line is rewritten in place, as an operator sees it
    COLUMNS=200 timeout -s INT "$(allow 420)" script -q -e -f -c "$(printf '%q ' "${cmd[@]}")" "$WORK/burn.tty" \
      < /dev/null > /dev/null
    rc=$?
    log "the progress line as the terminal got it (each carriage return made a line here):"
    tr '\r' '\n' < "$WORK/burn.tty" | grep -E '^burn-in |^wirecheck: burn-in' | sed 's/ *$//; s/^/  | /'
    grep -E "^(FAILED|ERROR)|passed|failed|^wirecheck validate" "$WORK/burn.tty" | tr -d '\r' | tail -12
  else
    timeout -s INT "$(allow 420)" "${cmd[@]}" > "$WORK/burn.log" 2>&1
    rc=$?
    grep -E '^burn-in |^wirecheck: burn-in' "$WORK/burn.log" | sed 's/^/  | /'
    grep -E "^(FAILED|ERROR)|passed|failed|^wirecheck validate" "$WORK/burn.log" | tail -12
  fi
  log "wirecheck validate --level burn-in --duration $DURATION: exit $rc, wall $((SECONDS - t0)) s"
  rounds "$WORK/burn.jsonl"
  local want=0
  [ "${ALLOW_CPU:-}" ] && want=10  # a rehearsal in simulation exits 10 when nothing failed
  [ "$rc" -eq "$want" ]
}

step_report() {
  fits 30 report || return 0
  [ -s "$WORK/burn.jsonl" ] || { log "no record of the burn step"; return 1; }
  "$PY" -m wirecheck.cli.main report "$WORK/burn.jsonl" -o "$WORK/burn.html" 2>&1 | sed 's/^/  /'
  local rc=${PIPESTATUS[0]}
  "$PY" - "$WORK/burn.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
section = html[html.index('<section id="burn-in">'):]
section = section[:section.index("</section>")]
text = re.sub(r"<img [^>]*>", "[figure]", section)
text = re.sub(r"<[^>]+>", " ", text)
print("  burn-in section: " + re.sub(r"\s+", " ", text)[:1500])
PY
  [ "$rc" -eq 0 ]
}

step_interrupt() {
  local need=$((INTERRUPT_AFTER + 40))
  fits "$need" interrupt || return 0
  local t0=$SECONDS pid rc
  set -m  # its own process group, SIGINT not ignored (a background job of a script would ignore it)
  "${VALIDATE[@]}" --duration 10min -k burn_in -rfEs --wirecheck-json="$WORK/interrupt.jsonl" \
    > "$WORK/interrupt.log" 2>&1 &
  pid=$!
  set +m
  sleep "$INTERRUPT_AFTER"
  log "SIGINT to wirecheck validate (pid $pid) after ${INTERRUPT_AFTER} s"
  kill -INT "$pid"
  for _ in $(seq 90); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    log "still running 90 s after SIGINT: killed"
    kill -KILL "$pid"
  fi
  wait "$pid"
  rc=$?
  grep -E '^burn-in |^wirecheck: burn-in|KeyboardInterrupt|^wirecheck validate' "$WORK/interrupt.log" | sed 's/^/  | /'
  log "interrupted burn-in: exit $rc (expected 130), wall $((SECONDS - t0)) s"
  rounds "$WORK/interrupt.jsonl"
  "$PY" - "$WORK/interrupt.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rounds = [r["details"] for r in lines if r.get("kind") == "burn_in_round"]
ok = (rounds and [r["round"] for r in rounds] == list(range(1, len(rounds) + 1)) and rounds[-1]["interrupted"]
      and lines[-1].get("type") == "end" and lines[-1].get("status") == "interrupted")
print(f"  every round so far kept: {'yes' if ok else 'NO'} ({len(rounds)} rounds, the last one interrupted: "
      f"{rounds[-1]['interrupted'] if rounds else '-'}, record end: {lines[-1].get('status')})")
sys.exit(0 if ok else 1)
PY
  local kept=$?
  [ "$rc" -eq 130 ] && [ "$kept" -eq 0 ]
}

run_steps burn report interrupt -- "${STEPS[@]}" || exit 2
log "done: $([ $status -eq 0 ] && echo 'every step passed' || echo 'some step failed') (files in $OUT)"
exit $status
