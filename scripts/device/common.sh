# Shared by the GPU node check scripts of scripts/device (sourced, not run). The caller sets ROOT (the checkout)
# before sourcing, and NAME (its log prefix) and BUDGET (seconds for the whole script) before it logs or times a step.
# The environment is never changed beyond PYTHONPATH: NCCL_NVLS_ENABLE=0 and the other multicast
# switches a node sets reach every process.

log() { echo "[$NAME +${SECONDS}s] $*"; }

# outdir USAGE ARG: OUT, the script's output folder ARG made absolute against the folder it was started from
# (the scripts cd to the checkout first) and made; no ARG is a usage error, exit 4, USAGE said.
outdir() {
  [ -n "${2:-}" ] || { echo "usage: $1" >&2; exit 4; }
  case $2 in /*) OUT=$2 ;; *) OUT=$OLDPWD/$2 ;; esac
  mkdir -p "$OUT"
}

# Seconds a step may take: its own cap, or what is left of the budget.
allow() {
  local cap=$1 left=$((BUDGET - SECONDS))
  [ "$left" -lt "$cap" ] && cap=$left
  echo "$cap"
}

# Run a step only if its expected duration still fits the budget.
fits() {
  local need=$1 left=$((BUDGET - SECONDS))
  if [ "$left" -lt "$need" ]; then
    log "SKIP $2: needs ~${need} s, ${left} s of the budget left"
    return 1
  fi
}

# The first of $PYTHON, the checkout's .venv and python3 whose torch sees a GPU (any torch when
# ALLOW_CPU is set: a rehearsal on a CPU machine).
pick_python() {
  local cand
  for cand in "${PYTHON:-}" "$ROOT/.venv/bin/python" python3; do
    [ -n "$cand" ] || continue
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() or '${ALLOW_CPU:-}' else 1)" 2>/dev/null; then
      echo "$cand"
      return 0
    fi
  done
  return 1
}

# checkout_shim TREE: a folder that, after TREE/src on PYTHONPATH, stands in for installing TREE: the
# plugin package is the folder fixtures/pytest_wirecheck/ (the checkout's layout; in an older tree, as
# same_checks.sh runs, fixtures/ itself), reached through a link, and the checks' entry point
# (pyproject.toml's "wirecheck.checks" group, which the thresholds loader reads the checks' limits
# through) is a metadata folder of its own. Prints the folder.
checkout_shim() {
  local shim meta plugin=$1/fixtures/pytest_wirecheck
  [ -d "$plugin" ] || plugin=$1/fixtures
  shim=$(mktemp -d)
  ln -s "$plugin" "$shim/pytest_wirecheck"
  meta=$shim/wirecheck_checkout-0.dist-info
  mkdir "$meta"
  printf 'Metadata-Version: 2.1\nName: wirecheck-checkout\nVersion: 0\n' > "$meta/METADATA"
  printf '[wirecheck.checks]\nbuiltin = wirecheck.checks\n' > "$meta/entry_points.txt"
  echo "$shim"
}

# wirecheck from this checkout when it is not installed into $PY's environment (checkout_shim).
use_checkout() {
  "$1" -c "import sys, wirecheck, pytest_wirecheck, importlib.metadata as m
sys.exit(not m.entry_points(group='wirecheck.checks'))" 2>/dev/null && return 0
  export PYTHONPATH=$ROOT/src:$(checkout_shim "$ROOT")${PYTHONPATH:+:$PYTHONPATH}
}

# run_steps KNOWN... -- STEP...: runs the function step_STEP for each STEP in order while at least
# 20 s of BUDGET is left, logging each; a failed or skipped step sets status=1 (the caller's). An
# unknown STEP stops there and returns 2.
run_steps() {
  local known=() step
  while [ "$1" != "--" ]; do known+=("$1"); shift; done
  shift
  for step in "$@"; do
    case " ${known[*]} " in
      *" $step "*) ;;
      *) log "unknown step $step (${known[*]})"; return 2 ;;
    esac
    if [ $((BUDGET - SECONDS)) -lt 20 ]; then
      log "$step: skipped, the ${BUDGET}s budget is spent"
      status=1
      continue
    fi
    log "== $step"
    "step_$step" || status=1
  done
}

# The README's quick start from a fresh copy (scripts/device/fresh_install.sh, offline, .whl/ beside the
# checkout) with the inventory tests; sets `venv` to its .venv, or logs why not and exits 2. $1: a folder for
# fresh.log (copied to $OUT when it failed).
fresh_venv() {
  local t0=$SECONDS
  bash "$ROOT/scripts/device/fresh_install.sh" -k inventory > "$1/fresh.log" 2>&1
  log "fresh install and inventory: exit $?, $((SECONDS - t0)) s"
  # This install's venv, which fresh_install.sh names only once install.sh succeeded: never an older
  # $TMPDIR/wirecheck-fresh.* that a failed install would leave the script measuring.
  venv=$(sed -n 's/^== venv: //p' "$1/fresh.log" | tail -1)
  [ -n "$venv" ] && [ -x "$venv/bin/python" ] || { log "no fresh install (see fresh.log)"; cp "$1/fresh.log" "$OUT/"; exit 2; }
}

# The venv of the newest fresh install on this machine that succeeded (fresh_install.sh marks it), for a
# script that goes on from another's; nothing when there is none.
newest_fresh_venv() {
  local marker
  marker=$(ls -dt "${TMPDIR:-/tmp}"/wirecheck-fresh.*/wirecheck/.venv/.fresh-install-ok 2>/dev/null | head -1)
  [ -n "$marker" ] && dirname "$marker"
}
