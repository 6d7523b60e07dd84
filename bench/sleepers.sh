#!/usr/bin/env bash
# //bench:sleepers — N coroutines in coro_sleep() beside N Boost.Fiber
# fibers in sleep_for(), each sleeping until a random deadline within
# N x 50 ns: the thread's CPU time per sleeper (create, set, fire, finish),
# at 100,000 and at 1,000,000, interleaved round by round (the method:
# bench/sleepers.h). The million takes about a minute, most of it
# Boost.Fiber's, and about 16 GiB of memory while both processes are
# alive. Extra arguments go to bench/interleave.py, e.g.
# `./tools/bazelw run -c opt //bench:sleepers -- --rounds 5`.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

python3 bench/interleave.py \
  --title "Sleepers, 100,000 at once (thread CPU time per sleeper)" \
  --row-header "case" \
  --rounds 5 \
  --label "coro_100k=coro_sleep, coroutines (ours, ch03)" \
  --label "fiber_100k=boost::this_fiber::sleep_for, fibers (baseline)" \
  --ratio "coro_100k/fiber_100k" \
  coro_100k=bench/sleepers_coro_100k \
  fiber_100k=bench/sleepers_fiber_100k \
  "$@"
echo

# A million of each, both processes alive at once: about 4.5 GiB resident
# for the coroutines and 12 GiB for the fibers. Rather than push the
# machine into the out-of-memory killer, skip the million (the summary
# then says "not run") when less than 17 GiB is available.
available_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if ((available_kib < 17 * 1024 * 1024)); then
  echo "sleepers: skipping 1,000,000: $((available_kib / 1024 / 1024)) GiB" \
    "available, about 17 GiB needed"
  exit 0
fi
exec python3 bench/interleave.py \
  --title "Sleepers, 1,000,000 at once (thread CPU time per sleeper)" \
  --row-header "case" \
  --rounds 3 \
  --label "coro_1m=coro_sleep, coroutines (ours, ch03)" \
  --label "fiber_1m=boost::this_fiber::sleep_for, fibers (baseline)" \
  --ratio "coro_1m/fiber_1m<=0.5" \
  coro_1m=bench/sleepers_coro_1m \
  fiber_1m=bench/sleepers_fiber_1m \
  "$@"
