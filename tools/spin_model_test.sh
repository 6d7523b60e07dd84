#!/usr/bin/env bash
# spin_model_test.sh — checks one SPIN model, as a Bazel test.
#
#   spin_model_test.sh --expect pass|fail MODEL.pml [FILE...] [-- -DNAME=VALUE...]
#
# Copies the model and the files it includes (FILE...) into a scratch
# directory, generates the verifier (spin -a), compiles it for a safety
# search (assertions and invalid end states; a lost wake is an end state
# where someone waits forever), and runs an exhaustive search.
#
#   --expect pass   the model of the code as it is: fails on any error, and
#                   if the search was not exhaustive (depth limit hit or
#                   search incomplete). Prints the states explored.
#   --expect fail   a mutant (a known-bad variant, built with the defines
#                   after --): must report an error, or the model could not
#                   fail and proves nothing. Prints the error and the start
#                   of its counterexample trail.
set -euo pipefail

usage() { echo "usage: $0 --expect pass|fail MODEL.pml [FILE...] [-- -DNAME...]" >&2; exit 2; }

[[ ${1-} == --expect ]] || usage
expect=${2-}
[[ $expect == pass || $expect == fail ]] || usage
shift 2
model=${1-}
[[ -n $model ]] || usage
shift
files=() defines=()
while (($#)); do
  if [[ $1 == -- ]]; then shift; defines=("$@"); break; fi
  files+=("$1"); shift
done

command -v spin >/dev/null || { echo "spin is not installed (tools/bazelw installs it)" >&2; exit 1; }

work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/spin.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$model" "${files[@]}" "$work/"
cd "$work"
name=$(basename "$model")

echo "=== spin -a ${defines[*]} $name"
spin "${defines[@]}" -a "$name" >spin.out 2>&1 || { cat spin.out; exit 1; }
# -w: pan.c has warnings of its own (array bounds it checks at run time).
# Compiling pan.c is most of a small model's test: -O2 takes 15-40 s on a
# loaded machine, -O1 about 2 s, -O0 under 1 s. A model as the code is
# searches its whole state space (up to a few million states), so it gets
# -O1; a mutant's search stops at its first error, so it gets -O0.
if [[ $expect == pass ]]; then opt=-O1 hash=24; else opt=-O0 hash=20; fi
gcc $opt -w -DSAFETY -DVECTORSZ=4096 -o pan pan.c
# -m: a depth bound far above any model here; -w24: a 16M-slot hash table
# (-w20, 1M slots, for a mutant), no bitstate hashing, so a search that
# ends is exhaustive (states past the table's size are chained, not lost).
./pan -m10000000 -w$hash >pan.out 2>&1 || true

errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' pan.out | tail -n 1)
states=$(grep -E 'states, stored' pan.out | tail -n 1 | sed -E 's/^ +//')
incomplete=0
grep -qE 'Search not completed|max search depth too small|out of memory' pan.out && incomplete=1

if [[ -z $errors ]]; then
  cat pan.out
  echo "FAIL: pan printed no result" >&2
  exit 1
fi

if [[ $expect == pass ]]; then
  sed -n '/Full statespace/,/total actual memory/p' pan.out
  if ((errors != 0)); then
    echo "--- counterexample (spin -t -p):"
    { spin -t -p "${defines[@]}" "$name" || true; } | head -n 200 || true
    echo "FAIL: $name: $errors error(s)" >&2
    exit 1
  fi
  if ((incomplete)); then
    cat pan.out
    echo "FAIL: $name: the search was not exhaustive" >&2
    exit 1
  fi
  echo "PASS: $name: no error in an exhaustive search, $states"
else
  if ((errors == 0)); then
    cat pan.out
    echo "FAIL: the mutant ${defines[*]} of $name reports no error: the model cannot catch it" >&2
    exit 1
  fi
  grep -E '^pan:' pan.out | head -n 5
  echo "--- the counterexample, first steps (spin -t -p):"
  { spin -t -p "${defines[@]}" "$name" || true; } | head -n 60 || true
  echo "PASS: the mutant ${defines[*]} of $name fails, as it must ($errors error)"
fi
