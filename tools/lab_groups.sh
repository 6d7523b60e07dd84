#!/usr/bin/env bash
# lab_groups.sh — runs one test binary of a lab's grader, one test group
# at a time (tests/suite.bzl, lab_suites; read by tools/lab grade).
#
#   lab_groups.sh BINARY            a GoogleTest binary: every group
#                                   (TEST(Group, Name)) in a process of its own
#   lab_groups.sh --plain NAME BINARY   a plain test program: one group, NAME
#
# Each group runs under a watchdog of LAB_GROUP_TIMEOUT seconds (default
# 60): a stub that aborts, or a student's hang, fails that group and no
# other. The output brackets each group's own output with lines that
# tools/lab parses:
#
#   === lab group Sleep
#   ... the group's output ...
#   === lab group Sleep: PASS        (or FAIL exit 134, or HUNG after 60 s)
#
# Exit status: 0 if every group passed.
set -uo pipefail

limit=${LAB_GROUP_TIMEOUT:-60}
plain=""
if [[ ${1:-} == --plain ]]; then
  plain=$2
  shift 2
fi
binary=$1

run_group() {
  local group=$1 status
  shift
  echo "=== lab group $group"
  timeout --kill-after=5 "$limit" "$binary" "$@" 2>&1
  status=$?
  if ((status == 0)); then
    echo "=== lab group $group: PASS"
  elif ((status == 124 || status == 137)); then
    echo "=== lab group $group: HUNG after $limit s"
  else
    echo "=== lab group $group: FAIL exit $status"
  fi
  return "$status"
}

failed=0
if [[ -n $plain ]]; then
  run_group "$plain" || failed=1
  exit "$failed"
fi

# "Group." lines name the groups; indented lines are their tests.
groups=$("$binary" --gtest_list_tests | sed -n 's/^\([^ #][^ ]*\)\.\( .*\)\?$/\1/p')
if [[ -z $groups ]]; then
  echo "lab_groups.sh: $binary lists no test groups" >&2
  exit 1
fi
for group in $groups; do
  run_group "$group" --gtest_filter="$group.*" || failed=1
done
exit "$failed"
