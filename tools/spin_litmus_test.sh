#!/usr/bin/env bash
# spin_litmus_test.sh — checks the memory models on litmus tests, as one
# Bazel test.
#
#   spin_litmus_test.sh SPIN_MODEL_TEST LITMUS.pml FILE... -- CASE...
#
# Each CASE is NAME:TSO:WEAK:DEFINES, with TSO and WEAK "pass" (the memory
# model forbids the outcome the test asserts never happens) or "fail" (it
# allows it), and DEFINES comma-separated. Each case runs
# spin_model_test.sh twice, on tso.pml and on weak.pml (-DMM_WEAK), and
# prints one line; the test fails if any line does not say what the
# table in litmus.pml says.
set -uo pipefail

checker=$1
shift
files=()
while (($#)) && [[ $1 != -- ]]; do files+=("$1"); shift; done
shift
status=0
printf '%-28s %-22s %-22s\n' "litmus test" "x86-TSO" "weak (C11/ARMv8)"
for case in "$@"; do
  IFS=: read -r name tso weak defines <<<"$case"
  IFS=, read -r -a defs <<<"$defines"
  line=$(printf '%-28s' "$name")
  for mm in tso weak; do
    expect=$tso extra=()
    if [[ $mm == weak ]]; then expect=$weak extra=(-DMM_WEAK); fi
    if out=$("$checker" --expect "$expect" "${files[@]}" -- "${defs[@]}" "${extra[@]}" 2>&1); then
      verdict=$([[ $expect == fail ]] && echo "outcome seen" || echo "outcome never")
      line+=$(printf ' %-22s' "$verdict (ok)")
    else
      line+=$(printf ' %-22s' "WRONG (expected $expect)")
      status=1
      echo "$out" | tail -n 20
    fi
  done
  echo "$line"
done
exit $status
