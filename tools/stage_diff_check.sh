#!/usr/bin/env bash
# stage_diff_check — `tools/stage_diff --check` on the real chapters.
#
# Under `bazel test`, the chapters' sources are in the runfiles tree, at its
# workspace root, exactly as in the repository. The arguments are the chapter
# directories tests/chapters.bzl lists: each must be there, so a chapter
# missing from the test's data fails loudly instead of being skipped.
#
# By hand (outside Bazel) it checks the repository it sits in:
#   tools/stage_diff_check.sh
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  root="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  root="$(cd "$(dirname "$0")/.." && pwd)"
fi

for chapter in "$@"; do
  if [[ ! -f "$root/$chapter/README.md" ]]; then
    echo "stage_diff_check: $chapter is not in the test's data" \
         "(add //$chapter:sources in tools/BUILD)" >&2
    exit 1
  fi
  if [[ ! -d "$root/$chapter/examples" ]]; then
    echo "stage_diff_check: warning: $chapter/examples/ is not in the test's" \
         "data, so its functions are not checked (see SOURCE_PACKAGES in" \
         "tools/BUILD)" >&2
  fi
done

exec "$root/tools/stage_diff" --check --root "$root"
