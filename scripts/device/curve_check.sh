#!/usr/bin/env bash
# On a GPU node: the suite's collective curve next to nccl-tests built on the same node.
#
#   bash scripts/device/curve_check.sh OUTDIR [STEP ...]      STEP: build suite crosscheck explore
#                                                 (default: build suite crosscheck)
#
#   build       compile nccl-tests (all_reduce/all_gather/reduce_scatter_perf) from .nccl-tests-src
#               against the NCCL that torch loads (the nvidia-nccl wheel's include/ and lib/), for this
#               GPU's architecture only.
#   suite       pytest tests/test_collectives.py on this node (quick sweep, -v tables with the path per
#               size), and its wall time.
#   crosscheck  wirecheck nccl-tests: suite vs nccl-tests for all_reduce, all_gather, reduce_scatter from
#               8 B to 1 GiB (factor 2) on $PLACEMENT, side by side with the ratio.
#   explore     eager calls vs CUDA-graph replay at every size (scripts/device/explore_paths.py).
#   midsizes    why 1-16 MiB may trail nccl-tests: nccl-tests as plain launches and as CUDA-graph
#               launches (-G), with more iterations; the suite's graph path with 1 and 5 timed replays,
#               NCCL_GRAPH_MIXING_SUPPORT=0 and NCCL_GRAPH_REGISTER=0; NCCL's algorithm/protocol/channel
#               choice at 4 MiB (NCCL_DEBUG_SUBSYS=TUNING) for nccl-tests and for the suite.
#
# Environment: PLACEMENT (default nvswitch-2gpu-0.1), NCCL_TESTS_SRC (default .nccl-tests-src), NCCL_TESTS_BUILD (default /tmp/nccl-tests-build),
# PYTHON (default: .venv/bin/python, else python3; the first whose torch sees CUDA), CURVE_BUDGET_S
# (default 330: steps that would not fit in what is left are skipped, so the whole run ends in time).
# The environment is passed through untouched: NCCL_NVLS_ENABLE=0 and the other multicast switches reach
# every process.
# Files in OUTDIR: build.log, suite.log, suite.jsonl, crosscheck.log, crosscheck.jsonl, nccl-tests-raw.txt,
# explore.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/curve_check.sh OUTDIR [STEP ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
SRC=${NCCL_TESTS_SRC:-$ROOT/.nccl-tests-src}
BUILD=${NCCL_TESTS_BUILD:-/tmp/nccl-tests-build}
PLACEMENT=${PLACEMENT:-nvswitch-2gpu-0.1}
BUDGET=${CURVE_BUDGET_S:-330}
OPS=all_reduce,all_gather,reduce_scatter
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(build suite crosscheck)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

NAME=curve_check
. "$ROOT/scripts/device/common.sh"

PY=$(pick_python) || { log "no Python whose torch sees a GPU (tried \$PYTHON, .venv/bin/python, python3)"; exit 2; }

use_checkout "$PY"
log "python $PY: $("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')"
log "environment: $(env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_)' | sort | tr '\n' ' ')"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader | sed 's/^/  /'

# NCCL as torch loads it: the nvidia-nccl wheel's lib/libnccl.so.2 and, next to it, include/nccl.h
# (else a system nccl.h, with a warning: nccl-tests refuses a header/library major.minor mismatch).
# Prints two lines: the include directory and the lib directory.
nccl_dirs() {
  "$PY" - <<'EOF'
import glob, os, site, sys
import torch
roots = [os.path.dirname(os.path.dirname(torch.__file__)), *site.getsitepackages()]
libs = [p for root in roots for p in sorted(glob.glob(os.path.join(root, "nvidia", "**", "lib", "libnccl.so*"), recursive=True))]
if not libs:
    sys.exit(1)
lib = os.path.dirname(libs[0])
include = os.path.join(os.path.dirname(lib), "include")
if not os.path.isfile(os.path.join(include, "nccl.h")):
    system = [d for d in ("/usr/include", "/usr/local/cuda/include", "/usr/local/include") if os.path.isfile(os.path.join(d, "nccl.h"))]
    if not system:
        sys.exit(1)
    print(f"WARNING: the NCCL wheel has no nccl.h; using {system[0]}/nccl.h with {lib}", file=sys.stderr)
    include = system[0]
print(include)
print(lib)
EOF
}

step_build() {
  local dirs inc lib nh cuda cc t rc f
  dirs=$(nccl_dirs) || { log "build: no libnccl.so (nvidia-nccl wheel) next to torch, or no nccl.h for it"; return 1; }
  inc=$(echo "$dirs" | sed -n 1p)
  lib=$(echo "$dirs" | sed -n 2p)
  [ -f "$SRC/src/Makefile" ] || { log "build: no nccl-tests source in $SRC (carry .nccl-tests-src)"; return 1; }
  nh=$BUILD/nccl-home
  mkdir -p "$nh/lib"
  ln -sfn "$inc" "$nh/include"
  for f in "$lib"/libnccl.so*; do ln -sf "$f" "$nh/lib/"; done
  [ -e "$nh/lib/libnccl.so" ] || ln -sf "$(ls "$lib"/libnccl.so.* | head -1)" "$nh/lib/libnccl.so"  # for -lnccl
  log "build: nccl.h $(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$inc/nccl.h" | awk '{print $3}' | paste -sd.) ($inc), library $lib"
  cuda=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")}
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
  t=$(allow 200)
  log "build: $("$cuda/bin/nvcc" --version | grep -o 'release [0-9.]*') in $cuda, sm_$cc only, $(nproc) jobs, up to ${t}s"
  timeout "$t" make -C "$SRC/src" -j"$(nproc)" MPI=0 BUILDDIR="$BUILD" NCCL_HOME="$nh" CUDA_HOME="$cuda" \
    NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc" \
    "$BUILD/all_reduce_perf" "$BUILD/all_gather_perf" "$BUILD/reduce_scatter_perf" >"$OUT/build.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { log "build: failed (rc $rc; 124: out of time), see build.log"; tail -25 "$OUT/build.log"; return 1; }
  # Run the binaries with the NCCL torch uses, and the toolkit's cudart they were linked against.
  echo "$nh/lib:$cuda/lib64" >"$BUILD/ld_library_path"
  log "build: done"
}

step_suite() {
  local t start rc ms
  t=$(allow 150)
  start=$(date +%s%N)
  timeout "$t" "$PY" -m pytest tests/test_collectives.py -v -rs -p no:cacheprovider --thresholds="$ROOT/thresholds.yaml" \
    --wirecheck-json="$OUT/suite.jsonl" >"$OUT/suite.log" 2>&1
  rc=$?
  grep -E "PASSED|FAILED|SKIPPED|ERROR" "$OUT/suite.log" | sed 's/^/  /' | head -80
  sed -n '/wirecheck measurements/,$p' "$OUT/suite.log"
  ms=$((($(date +%s%N) - start) / 1000000))
  log "suite: tests/test_collectives.py exit $rc, wall $(printf '%d.%03d' $((ms / 1000)) $((ms % 1000))) s (limit 60 s on 2 GPUs)"
  return $rc
}

step_crosscheck() {
  local t rc
  [ -x "$BUILD/all_reduce_perf" ] || { log "crosscheck: no nccl-tests in $BUILD (run the build step)"; return 1; }
  export LD_LIBRARY_PATH=$(cat "$BUILD/ld_library_path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  t=$(allow 150)
  rm -rf "$BUILD/raw"
  timeout "$t" "$PY" -m wirecheck.cli.main nccl-tests --build-dir "$BUILD" --placement "$PLACEMENT" --ops "$OPS" \
    --sizes 8B:1GiB:2 --out "$OUT/crosscheck.jsonl" --raw-dir "$BUILD/raw" --binary-timeout 90 2>&1 | tee "$OUT/crosscheck.log"
  rc=${PIPESTATUS[0]}
  cat "$BUILD"/raw/*.txt >"$OUT/nccl-tests-raw.txt" 2>/dev/null
  log "crosscheck: exit $rc"
  return $rc
}

step_explore() {
  local t rc
  t=$(allow 120)
  timeout "$t" "$PY" scripts/device/explore_paths.py --placement "$PLACEMENT" --ops "$OPS" --sizes 8B:512MiB:4 \
    --out "$OUT/explore.jsonl" ${EXPLORE_ARGS:-}
  rc=$?
  log "explore: exit $rc"
  return $rc
}

step_midsizes() {
  local op bin t v
  [ -x "$BUILD/all_reduce_perf" ] || { log "midsizes: no nccl-tests in $BUILD (run the build step)"; return 1; }
  t=$(allow 40)
  for op in all_reduce all_gather reduce_scatter; do
    bin=$BUILD/${op}_perf
    for v in "-n 20" "-n 100" "-n 20 -G 5"; do
      echo "# nccl-tests $op $v" >>"$OUT/midsizes-nccl-tests.txt"
      LD_LIBRARY_PATH=$(cat "$BUILD/ld_library_path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout "$t" \
        "$bin" -b 1M -e 16M -f 2 -g 2 -w 5 $v -c 1 -d float >>"$OUT/midsizes-nccl-tests.txt" 2>&1
    done
    LD_LIBRARY_PATH=$(cat "$BUILD/ld_library_path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=TUNING timeout "$t" "$bin" -b 4M -e 4M -g 2 -w 1 -n 2 -c 0 -d float \
      >"$OUT/tuning-nccl-tests-$op.txt" 2>&1
  done
  grep -E "^#|^ +[0-9]+ +[0-9]+ +float" "$OUT/midsizes-nccl-tests.txt" | awk '{print "  " $0}' | cut -c1-150
  for v in "--graph-replays 1" "--graph-replays 5" "--graph-replays 5 --env NCCL_GRAPH_MIXING_SUPPORT=0" \
           "--graph-replays 5 --env NCCL_GRAPH_REGISTER=0"; do
    log "midsizes: suite paths $v"
    timeout "$(allow 60)" "$PY" scripts/device/explore_paths.py --placement "$PLACEMENT" --ops "$OPS" --sizes 1MiB:16MiB:2 \
      $v --out "$OUT/midsizes-explore.jsonl" | grep -vE "^#   " | grep -E "^#|^ +[0-9]"
  done
  timeout "$(allow 60)" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_DEBUG_FILE="$OUT/tuning-suite.%p.txt" \
    "$PY" scripts/device/explore_paths.py --placement "$PLACEMENT" --ops "$OPS" --sizes 4MiB:4MiB:2 >/dev/null 2>&1
  log "midsizes: NCCL's choice at 4 MiB (nccl-tests, then the suite's ranks)"
  for f in "$OUT"/tuning-nccl-tests-*.txt "$OUT"/tuning-suite.*.txt; do
    [ -e "$f" ] || continue
    echo "  $(basename "$f"): $(grep -ohE "[A-Za-z]+: [0-9]+ Bytes -> .*" "$f" | sort | uniq -c | head -6 | tr '\n' ';')"
  done
}

run_steps build suite crosscheck explore midsizes -- "${STEPS[@]}" || exit 2
log "done, exit $status"
exit $status
