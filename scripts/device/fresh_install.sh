#!/usr/bin/env bash
# The README's quick start on a GPU node, as a new user runs it: a fresh clone, offline, with only
# a directory of wheels brought along (what the node's image lacks: deepspeed and its pydantic,
# hjson, ...; see README "Install"). Prints the wall time of each command.
#
#   bash scripts/device/fresh_install.sh [--wheels DIR] [--full | VALIDATE-ARGS...]
#
# Run it inside a copy of the repository, with or without its .git. DIR defaults to .whl at the
# repository's root (made by scripts/wheelhouse.py, never committed; carry it along). VALIDATE-ARGS go
# to `wirecheck validate` (default: -k inventory); --full runs the whole suite. Exits with validate's exit code.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
wheels=$src/.whl
if [ "${1:-}" = "--wheels" ]; then wheels=$2; shift 2; fi
[ -d "$wheels" ] || { echo "fresh_install: $wheels: no such directory of wheels (--wheels DIR)" >&2; exit 2; }
wheels=$(cd "$wheels" && pwd)
if [ "${1:-}" = "--full" ]; then shift; elif [ $# -eq 0 ]; then set -- -k inventory; fi
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

dest=$(mktemp -d "${TMPDIR:-/tmp}/wirecheck-fresh.XXXXXX")/wirecheck
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1 && [ -z "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  git clone -q "$src" "$dest" || exit 2
  echo "== fresh clone of $(git -C "$dest" log -1 --format='%h %s') in $dest"
elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  # The working tree is ahead of its .git (a copy sent with stale git data): what a clone of the
  # current tree would hold is git's file list, tracked and untracked-but-not-ignored.
  mkdir -p "$dest"
  # (a file the stale index still lists but the tree no longer has is left out: it was moved or deleted)
  (cd "$src" && git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
     [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -C "$dest" -xf - || exit 2
  echo "== copy of the working tree's files (git ls-files; its .git is behind) in $dest"
else
  # No git data here: copy the files, less what a run leaves behind (venv, records, build outputs).
  mkdir -p "$dest"
  tar -C "$src" --exclude=./.git --exclude=./.venv --exclude=./.whl --exclude=./.wirecheck \
      --exclude=./.benchmarks --exclude=./build --exclude=./dist --exclude='*.egg-info' \
      --exclude=__pycache__ -cf - . | tar -C "$dest" -xf - || exit 2
  echo "== copy of $src (no .git there) in $dest"
fi
cd "$dest" || exit 2
echo "== node: $(nvidia-smi -L 2>/dev/null | wc -l) GPUs; PYTHON is $(command -v "${PYTHON:-python3}")" \
     "($("${PYTHON:-python3}" -c 'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -1))"
echo "== wheels brought along ($wheels): $(cd "$wheels" && ls *.whl | tr '\n' ' ')"

echo "== ./install.sh --wheels $wheels"
t=$(now)
./install.sh --wheels "$wheels"
install_rc=$?
install_s=$(since "$t")
echo "== install.sh: exit $install_rc, wall ${install_s} s"
[ "$install_rc" = 0 ] || exit "$install_rc"
# This install's venv, for the scripts that go on with it (common.sh's fresh_venv and newest_fresh_venv): named
# and marked only once install.sh succeeded.
touch "$dest/.venv/.fresh-install-ok"
echo "== venv: $dest/.venv"
echo "== .venv's torch: $(.venv/bin/python -c 'import torch; print(torch.__version__, torch.__file__)')"

echo "== .venv/bin/wirecheck validate $*"
t=$(now)
.venv/bin/wirecheck validate "$@"
validate_rc=$?
validate_s=$(since "$t")
echo "== wirecheck validate: exit $validate_rc, wall ${validate_s} s"
echo "== fresh install: install.sh ${install_s} s (exit $install_rc), wirecheck validate ${validate_s} s (exit $validate_rc)"
exit "$validate_rc"
