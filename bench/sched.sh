#!/usr/bin/env bash
# //bench:sched — what the scheduler costs: a yield through the pump (ns per
# switch; one yield = pump -> coroutine -> pump = 2 switches), and a
# short-lived coroutine, coro_go + coro_sched_run + finish (ns per
# coroutine), beside pthread_create + pthread_join (ns per thread) and
# their Boost.Fiber counterparts (this_fiber::yield of one fiber; a fiber
# created and joined), with the bare switch, the manual coro_resume
# ping-pong and the same yield on the ch05 library for reference, and with
# a trace recording (what a trace costs while off is //bench:trace), all
# interleaved round by round in one run, each binary as three processes
# (three address-space layouts: interleave.py says why). Extra arguments go to
# bench/interleave.py, e.g. `./tools/bazelw run -c opt //bench:sched -- --rounds 15`.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

exec python3 bench/interleave.py \
  --title "Scheduler (a yield = 2 switches; go+run = coro_go + coro_sched_run + finish)" \
  --rounds 15 --processes 3 \
  --row-header "case" \
  --label "raw_asm=bare switch (context.h, reference)" \
  --label "resume=coro_resume + coro_yield, no scheduler" \
  --label "yield1=scheduled yield, 1 coroutine, coro_sched_run" \
  --label "yield100=scheduled yield, 100 coroutines, coro_sched_run" \
  --label "yield1_step=scheduled yield, 1 coroutine, coro_sched_step" \
  --label "yield1_ucontext=scheduled yield, 1 coroutine, ucontext back-end" \
  --label "yield1_ch03=scheduled yield, 1 coroutine, ch03 library" \
  --label "yield1_ch04=scheduled yield, 1 coroutine, ch04 library" \
  --label "yield1_ch05=scheduled yield, 1 coroutine, ch05 library" \
  --label "yield1_timer_ch03=scheduled yield, 1 coroutine, a timer set, ch03" \
  --label "yield1_timer_ch05=scheduled yield, 1 coroutine, a timer set, ch05" \
  --label "yield1_tracing=scheduled yield, 1 coroutine, a trace recording" \
  --label "fiber_yield=Boost.Fiber this_fiber::yield, 1 fiber (baseline)" \
  --label "go1=go + run, 1 per run, guarded stacks" \
  --label "go1_dense=go + run, 1 per run, dense stacks" \
  --label "go100=go + run, 100 per run, guarded stacks" \
  --label "go100_dense=go + run, 100 per run, dense stacks" \
  --label "pthread=pthread_create + pthread_join (baseline)" \
  --label "fiber_create=Boost.Fiber fiber(fn) + join (baseline)" \
  --ratio yield1/raw_asm \
  --ratio yield1/resume \
  --ratio yield100/yield1 \
  --ratio yield1_ucontext/yield1 \
  --ratio yield1_ch03/yield1 \
  --ratio yield1_ch04/yield1 \
  --ratio "yield1_ch05/yield1<=1.1" \
  --ratio yield1_timer_ch03/yield1_ch03 \
  --ratio yield1_timer_ch05/yield1_ch05 \
  --ratio yield1_tracing/yield1 \
  --ratio "yield1/fiber_yield<=0.25" \
  --ratio go1/pthread \
  --ratio go1_dense/pthread \
  --ratio go100/pthread \
  --ratio go100_dense/pthread \
  --ratio "go1/fiber_create<=0.25" \
  raw_asm=bench/sched_raw_asm \
  resume=bench/sched_resume_asm \
  yield1=bench/sched_yield1 \
  yield100=bench/sched_yield100 \
  yield1_step=bench/sched_yield1_step \
  yield1_ucontext=bench/sched_yield1_ucontext \
  yield1_ch03=bench/sched_yield1_ch03 \
  yield1_ch04=bench/sched_yield1_ch04 \
  yield1_ch05=bench/sched_yield1_ch05 \
  yield1_timer_ch03=bench/sched_yield1_timer_ch03 \
  yield1_timer_ch05=bench/sched_yield1_timer_ch05 \
  yield1_tracing=bench/sched_yield1_tracing \
  fiber_yield=bench/fiber_yield \
  go1=bench/sched_go1 \
  go1_dense=bench/sched_go1_dense \
  go100=bench/sched_go100 \
  go100_dense=bench/sched_go100_dense \
  pthread=bench/thread_create \
  fiber_create=bench/fiber_create \
  "$@"
