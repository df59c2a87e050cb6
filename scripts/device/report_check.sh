#!/usr/bin/env bash
# On a GPU node: NCCL's path as evidence, copy bandwidth without NCCL, and a full run's report.
#
#   bash scripts/device/report_check.sh OUTDIR [STEP ...]        STEP: evidence suite report (default: all three)
#
#   evidence  pytest tests/test_nccl_path.py tests/test_copy_bandwidth.py alone: NCCL's path table per
#             placement (nvswitch-2gpu-0.1 must read P2P over NVLink, forced_pcie-2gpu-0.1 must not),
#             H2D/D2H per GPU and peer copies per pair, their verdicts, and the wall time of the two files.
#   suite     the whole suite as an operator runs it (pytest --profile $PROFILE), with every test's
#             duration: the seconds the two new files add to it.
#   report    wirecheck report over the suite's record (the evidence record when the suite did not run)
#             -> report.html and wirecheck.prom; prints the page's size and its figures.
#
# Run from the repository root on a 2x H200 node, with .whl/ beside it (DeepSpeed and the dependencies
# the image lacks; without it the suite step is skipped, evidence and report still run).
# Environment: PROFILE (default
# h200-sxm-2), REPORT_BUDGET_S (default 540: a step that would not fit in what is left is skipped).
# The environment is passed through untouched: NCCL_NVLS_ENABLE=0 and the other multicast switches
# reach every worker.
# Files in OUTDIR (at most 8): summary.txt, evidence.jsonl, suite.jsonl, suite.log, report.html,
# wirecheck.prom, nccl-logs.tar.gz (NCCL's own logs, <record>.nccl/<placement>/nccl.<pid>.log: the
# evidence run's placement folders go to fixtures/reference/h200-sxm-2/nccl-path/), evidence.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/report_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
WORK=$(mktemp -d /tmp/wirecheck-report-check.XXXXXX)  # records and NCCL logs; selected files go to $OUT
PROFILE=${PROFILE:-h200-sxm-2}
BUDGET=${REPORT_BUDGET_S:-540}
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(evidence suite report)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=report_check
. "$ROOT/scripts/device/common.sh"
wall() { local ms=$((($(date +%s%N) - $1) / 1000000)); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }

step_evidence() {
  local t start rc
  t=$(allow 150)
  start=$(date +%s%N)
  timeout "$t" "$PY" -m pytest tests/test_nccl_path.py tests/test_copy_bandwidth.py -v -rs -p no:cacheprovider \
    --thresholds="$ROOT/thresholds.yaml" --durations=0 --durations-min=0 --wirecheck-json="$WORK/evidence.jsonl" \
    >"$OUT/evidence.log" 2>&1
  rc=$?
  grep -E "PASSED|FAILED|SKIPPED|ERROR" "$OUT/evidence.log" | sed 's/^/  /' | head -40
  log "evidence: exit $rc, wall $(wall "$start") s for both files (pytest start-up included)"
  "$PY" scripts/device/report_check.py durations "$OUT/evidence.log"
  "$PY" scripts/device/report_check.py evidence "$WORK/evidence.jsonl"
  cp "$WORK/evidence.jsonl" "$OUT/" 2>/dev/null
  return $rc
}

step_suite() {
  local t start rc
  if ! "$PY" -c "import deepspeed" 2>/dev/null; then
    log "suite: skipped: DeepSpeed does not import (carry .whl/ with its wheels)"
    return 1
  fi
  t=$(allow 420)
  start=$(date +%s%N)
  timeout "$t" "$PY" -m pytest --profile "$PROFILE" -rs -p no:cacheprovider --thresholds="$ROOT/thresholds.yaml" \
    --durations=0 --durations-min=0 --wirecheck-json="$WORK/suite.jsonl" >"$OUT/suite.log" 2>&1
  rc=$?
  tail -4 "$OUT/suite.log" | sed 's/^/  /'
  grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | sed 's/^/  /' | head -20
  log "suite: exit $rc (124: out of time), wall $(wall "$start") s"
  "$PY" scripts/device/report_check.py durations "$OUT/suite.log"
  cp "$WORK/suite.jsonl" "$OUT/" 2>/dev/null
  return $rc
}

step_report() {
  local record=$WORK/suite.jsonl rc
  [ -s "$record" ] || record=$WORK/evidence.jsonl
  [ -s "$record" ] || { log "report: no record to report on"; return 1; }
  timeout "$(allow 60)" "$PY" -m wirecheck.cli.main report "$record" -o "$OUT/report.html" --prometheus "$OUT/wirecheck.prom"
  rc=$?
  log "report: exit $rc, $(stat -c %s "$OUT/report.html" 2>/dev/null) bytes, from $(basename "$record")"
  grep -c '^wirecheck_' "$OUT/wirecheck.prom" 2>/dev/null | sed 's/^/  Prometheus samples: /'
  return $rc
}

main() {
  PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; return 2; }

  # wirecheck from this checkout, not installed into the image; DeepSpeed and what it needs from .whl/
  # into a private directory, so the image's own packages stay in charge.
  use_checkout "$PY"
  if ! "$PY" -c "import deepspeed" 2>/dev/null; then
    wheels=()
    for pattern in deepspeed- hjson- pydantic- pydantic_core- annotated_types- typing_inspection- typing_extensions-; do
      for w in .whl/${pattern}*.whl; do [ -e "$w" ] && wheels+=("$w"); done
    done
    if [ ${#wheels[@]} -gt 0 ]; then
      site=$(mktemp -d)
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${wheels[@]}" \
        && export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    fi
  fi
  log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')"
  log "matplotlib $("$PY" -c 'import matplotlib; print(matplotlib.__version__)' 2>&1 | tail -1); deepspeed $("$PY" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1 || echo missing)"
  log "environment: $(env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_|CUDA_VISIBLE)' | sort | tr '\n' ' ')"
  nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader | sed 's/^/  /'

  run_steps evidence suite report -- "${STEPS[@]}" || return 2
  # NCCL's logs per placement and rank (beside the records), for fixtures/reference/<node>/nccl-path/.
  (cd "$WORK" && ls -d ./*.nccl >/dev/null 2>&1 && tar -czf "$OUT/nccl-logs.tar.gz" ./*.nccl) \
    && log "NCCL logs: nccl-logs.tar.gz ($(tar -tzf "$OUT/nccl-logs.tar.gz" | grep -c '\.log$') files)"
  log "done, exit $status; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
  return $status
}

# Everything printed also goes to summary.txt (the pipe ends before the script does).
main 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
