#!/usr/bin/env bash
# doxygen_warnings_fixture_test — proves that doxygen_warnings_test bites.
#
# Copies a chapter (README.md and coro.h, given as $1), docs/ and
# tools/stage_diff into a scratch workspace, appends an undocumented public
# function to the copy of coro.h, and checks that docs/build_docs.sh then
# fails, naming that function.
set -euo pipefail
chapter=${1:?usage: doxygen_warnings_fixture_test.sh CHAPTER}
ws=$TEST_TMPDIR/ws
log=$TEST_TMPDIR/build_docs.log

# The scratch workspace: real copies (-L), writable.
rm -rf "$ws"
mkdir -p "$ws/docs" "$ws/tools" "$ws/$chapter"
cp -rL docs/. "$ws/docs/"
cp -L tools/stage_diff "$ws/tools/"
cp -L "$chapter/README.md" "$chapter/coro.h" "$ws/$chapter/"
chmod -R u+w "$ws"

# The fixture: a public declaration without a documentation comment.
echo 'int coro_fixture_undocumented(int x);' >> "$ws/$chapter/coro.h"

if (cd "$ws" && docs/build_docs.sh --out "$TEST_TMPDIR/out" "$chapter") > "$log" 2>&1; then
  cat "$log"
  echo "FAIL: build_docs.sh passed although coro.h has an undocumented function" >&2
  exit 1
fi
if ! grep -q 'coro_fixture_undocumented.*is not documented' "$log"; then
  cat "$log"
  echo "FAIL: build_docs.sh failed, but not because of the undocumented function" >&2
  exit 1
fi
echo "PASS: an undocumented public function fails the docs build:"
grep 'coro_fixture_undocumented' "$log"
