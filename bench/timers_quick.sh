#!/usr/bin/env bash
# //bench:timers_quick — //bench:timers with 100,000 sleepers instead of a
# million: the figures at 100,000, in seconds rather than minutes (every
# coroutine's stack is a cold page, see README.md). //bench:all runs both.
# Extra arguments go to bench/timers.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/timers ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

exec bench/timers --n 100000 --rounds 5 "$@"
