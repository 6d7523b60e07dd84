#!/usr/bin/env bash
# browser_test — the course site as a student sees it: builds it with
# docs/build_docs.sh, then opens every page in headless Chromium
# (docs/browser_check.py: literal markup, broken links and images, the way
# to the index and the neighbouring chapters, each new file on each diff
# page and no lab/ file there, the search, each chapter's instructors' page
# linked from the landing page and from no lesson).
#
# Bazel passes the chapters in course order and runs this in the runfiles
# tree. The screenshots of each chapter's lesson and diff page go to the
# test's undeclared outputs, for review:
#   bazel-testlogs/docs/browser_test/test.outputs/ (outputs.zip)
# By hand, from the repository root: docs/browser_test.sh CHAPTER... writes
# the site and the screenshots under a scratch directory and says where.
set -euo pipefail
work=${TEST_TMPDIR:-$(mktemp -d)}
shots=${TEST_UNDECLARED_OUTPUTS_DIR:-$work/screenshots}
[[ -f docs/build_docs.sh ]] || cd "$(dirname "$0")/.."

# The site, built into the scratch directory; the diff pages compare the
# chapters as they are here (the runfiles: what Bazel's filegroups bring).
docs/build_docs.sh --out "$work/site" --sources . "$@" > "$work/build_docs.log" 2>&1 || {
  cat "$work/build_docs.log"
  echo "browser_test: the docs build failed (log above)" >&2
  exit 1
}

python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
"$python" docs/browser_check.py --site "$work/site" --sources . --shots "$shots" "$@"
