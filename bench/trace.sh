#!/usr/bin/env bash
# //bench:trace — what the trace costs (issue 34; Chapter 2's lesson, "Seeing
# it run: a trace"). The scheduled yield of //bench:sched (one coroutine,
# coro_sched_run, ns per switch), built two ways:
#
#   yield1_untraced       the library built with CORO_NO_TRACE: no trace at all
#   yield1                the library as it ships: the trace compiled in, off
#
# and the same two on Chapter 5's pump (yield1_untraced_ch05, yield1_ch05).
# Target: compiled in and off costs at most 2% (yield1 / yield1_untraced
# <= 1.02, and the same for Chapter 5). What a trace costs while it
# records is //bench:sched's row yield1_tracing: not here, because its
# writer thread goes on formatting for tens of milliseconds after its
# round, on the other core, beside the next rounds.
#
# Why short rounds, and many of them. A 2% target asks for a paired ratio
# steadier than the machine: on a shared 2-vCPU VM, the same binary's
# rounds of 30 ms ran 6.3 to 9.3 ns per switch within one process, in
# slow spells a few rounds long (AMD EPYC, Zen 4). Inside //bench:sched's
# sweep of 21 binaries of 60 ms, the two rounds of a pair run up to a
# second apart, so a spell lands on one and not the other: the pair read
# 1.00 to 1.06 there, in runs one after the other. Here the two builds of a
# pair sit next to each other in the list, so their rounds run back to
# back, and the rounds are 10 ms, so that both fall in the same spell: the
# paired ratio read 0.97 to 1.01 over the same minutes. 201 rounds of 10
# ms are 2 s per binary, twice what //bench:sched gives each of its own,
# and three processes per binary are three address-space layouts
# (interleave.py says why). Extra arguments go to bench/interleave.py.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

exec python3 bench/interleave.py \
  --title "The trace (scheduled yield, 1 coroutine, coro_sched_run; a yield = 2 switches)" \
  --rounds 201 --round-ms 10 --processes 3 \
  --label "yield1_untraced=ch02, built without the trace" \
  --label "yield1=ch02, the trace compiled in, off" \
  --label "yield1_ch05=ch05, the trace compiled in, off" \
  --label "yield1_untraced_ch05=ch05, built without the trace" \
  --ratio "yield1/yield1_untraced<=1.02" \
  --ratio "yield1_ch05/yield1_untraced_ch05<=1.02" \
  yield1_untraced=bench/sched_yield1_untraced \
  yield1=bench/sched_yield1 \
  yield1_ch05=bench/sched_yield1_ch05 \
  yield1_untraced_ch05=bench/sched_yield1_untraced_ch05 \
  "$@"
