#!/usr/bin/env bash
# On a GPU node: this tree gives the same checks and figures as the code before it.
# Runs `wirecheck validate` from an earlier tree (BEFORE, a copy of the repository at the commit to compare
# with, e.g. `git archive ab60cc7 | tar -x -C .before`) and from this checkout, one after the other, each
# with its own record, then prints every test id both ran with its outcome and its measured figure side by
# side, and the ids only one of them ran.
#   bash scripts/device/same_checks.sh OUTDIR [VALIDATE-ARGS ...]
# The arguments after OUTDIR go to both validate runs (default: none). Environment: BEFORE (default .before), PYTHON.
# The environment is passed through untouched.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: bash scripts/device/same_checks.sh OUTDIR [VALIDATE-ARGS ...]" >&2; exit 4; fi
case $1 in /*) OUT=$1 ;; *) OUT=$OLDPWD/$1 ;; esac  # OUTDIR as given, from where the script was started
shift
BEFORE=$(cd "${BEFORE:-$ROOT/.before}" 2>/dev/null && pwd) || { echo "same_checks: no earlier tree (BEFORE)" >&2; exit 2; }
BUDGET=${SAME_BUDGET_S:-280}
NAME=same_checks
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
. "$ROOT/scripts/device/common.sh"
PY=$(pick_python) || { log "no Python whose torch sees a GPU"; exit 2; }

run_tree() {  # TREE LABEL MODULE: validate from TREE (its src/ and plugin package first on the import path)
  local tree=$1 label=$2 module=$3 shim t0=$SECONDS rc
  shim=$(checkout_shim "$tree")
  (cd "$tree" && PYTHONPATH="$tree/src:$shim${PYTHONPATH:+:$PYTHONPATH}" \
     timeout -s INT "$(allow 130)" "$PY" -m "$module" validate -p no:cacheprovider --node-lock="$OUT/$label.lock" \
     --wirecheck-json="$OUT/$label.jsonl" "${@:4}" > "$OUT/$label.log" 2>&1)
  rc=$?
  log "$label: exit $rc, wall $((SECONDS - t0)) s; $(grep -E 'passed|failed' "$OUT/$label.log" | tail -1)"
}

before_cli=wirecheck.cli.main  # the command's module in the earlier tree (older trees: wirecheck.cli)
[ -f "$BEFORE/src/wirecheck/cli/main.py" ] || before_cli=wirecheck.cli
run_tree "$BEFORE" before "$before_cli" "$@"
run_tree "$ROOT" after wirecheck.cli.main "$@"
"$PY" - "$OUT/before.jsonl" "$OUT/after.jsonl" <<'PY' | tee "$OUT/compare.txt"
import json, sys
def verdicts(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        rec = json.loads(line)
        if rec.get("type") == "verdict":
            out[rec["test"]] = (rec["outcome"], rec.get("measured"), rec.get("unit") or "")
    return out
before, after = (verdicts(p) for p in sys.argv[1:3])
fmt = lambda v: "-" if v is None else (f"{v:.4g}" if isinstance(v, (int, float)) else str(v)[:28])
print(f"{'test':<78} {'before':>26} {'after':>26}")
same = 0
for test in sorted(set(before) & set(after)):
    (ob, mb, u), (oa, ma, _) = before[test], after[test]
    same += ob == oa
    print(f"{test[-78:]:<78} {ob + ' ' + fmt(mb) + ' ' + u:>26} {oa + ' ' + fmt(ma) + ' ' + u:>26}")
print(f"{len(set(before) & set(after))} tests in both, {same} with the same outcome")
for name, only in (("before", set(before) - set(after)), ("after", set(after) - set(before))):
    print(f"only {name} ({len(only)}): " + ", ".join(sorted(t.split('::')[-1] for t in only)))
PY
