#!/usr/bin/env bash
# //bench:threads — what crossing threads costs: posts from a producer
# thread to a scheduler's pump (items per second) beside a mutex +
# condition-variable queue, and a coro_wake() ping-pong between coroutines
# on two threads (ns per one-way wake) beside a condition-variable
# ping-pong between two plain threads, interleaved round by round; then the
# CPU time of a pump with nothing to do for 5 s (threads_idle). Extra
# arguments go to bench/interleave.py, e.g.
# `./tools/bazelw run -c opt //bench:threads -- --rounds 15`.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

python3 bench/interleave.py \
  --title "Threads (post: producer thread -> pump; wake: coroutine ping-pong across threads)" \
  --row-header "case" \
  --rates \
  --label "post=coro_post from another thread, coro_sched_run pump (ours)" \
  --label "queue=mutex + condvar linked-list queue (baseline)" \
  --label "wake=coro_wake + coro_park ping-pong, 2 threads (ours)" \
  --label "condvar=mutex + condvar ping-pong, 2 threads (baseline)" \
  --rate-ratio "post/queue>=2" \
  --ratio "wake/condvar<=1" \
  post=bench/threads_post \
  queue=bench/threads_queue \
  wake=bench/threads_wake \
  condvar=bench/threads_condvar \
  "$@"
echo
exec bench/threads_idle
