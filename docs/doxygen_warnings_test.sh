#!/usr/bin/env bash
# doxygen_warnings_test — the reference of every chapter builds without a
# single Doxygen warning: every public item of coro.h documented, every
# parameter described, every reference resolved, the lesson well-formed.
#
# Bazel passes the chapters in course order (from //tests:chapters.bzl) and
# runs this in the runfiles tree, where docs/ and the chapters are. The HTML
# goes to the test's scratch directory; on failure the warnings are in the
# test log, with paths relative to the repository.
set -euo pipefail
exec docs/build_docs.sh --out "$TEST_TMPDIR/docs" "$@"
