#!/usr/bin/env bash
# //bench:all — every benchmark of the course, one after the other.
# The list is BENCHMARKS in bench/BUILD; Bazel passes their paths here.
set -euo pipefail

if (($# == 0)); then
  echo "usage: ./tools/bazelw run -c opt //bench:all" >&2
  exit 2
fi
for benchmark in "$@"; do
  echo "== ${benchmark}"
  "${benchmark}"
  echo
done
