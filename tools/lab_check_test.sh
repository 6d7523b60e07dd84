#!/usr/bin/env bash
# The exercise checks' harness bites: on a program whose cases all pass it
# prints `check demo: ok` and exits 0; with a failing, a crashing and a
# hanging case it prints one FAIL line for each (the hang killed by its
# watchdog), still runs the case after them, and exits 1.
set -uo pipefail
demo=$1
fail() { echo "lab_check_test: $*"; exit 1; }

out=$("$demo") || fail "all-pass run exited $?: $out"
[[ $out == "check demo: ok" ]] || fail "all-pass run printed: $out"

out=$("$demo" bad); status=$?
echo "$out"
((status == 1)) || fail "bad run exited $status, wanted 1"
grep -q '^check demo: FAIL: fails: got 2, wanted 3$' <<<"$out" ||
  fail "no FAIL line for the failing CHECK"
grep -q '^check demo: FAIL: crashes: .*Segmentation fault' <<<"$out" ||
  fail "no FAIL line naming the crash's signal"
grep -q '^check demo: FAIL: hangs: .*' <<<"$out" ||
  fail "no FAIL line for the hang"
[[ $(grep -c 'FAIL' <<<"$out") == 3 ]] || fail "wanted exactly 3 FAIL lines"
grep -q 'check demo: ok' <<<"$out" && fail "printed ok despite failures"
echo "lab_check_test: ok"
