#!/usr/bin/env bash
# //bench:switch — what one context switch costs: our two back-ends
# (assembly, ucontext), bare and through the API, against Boost.Context's
# jump_fcontext (bare) and boost::context::fiber (API against API),
# interleaved round by round in one run, each binary as three processes
# (three address-space layouts: interleave.py says why). Extra arguments go to bench/interleave.py,
# e.g. `./tools/bazelw run -c opt //bench:switch -- --raw --rounds 15`.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

exec python3 bench/interleave.py \
  --title "Context switch (a round trip = 2 switches)" \
  --rounds 15 --processes 3 \
  --label "raw_asm=asm switch, bare (ours, context.h)" \
  --label "boost=Boost.Context jump_fcontext, bare (baseline)" \
  --label "raw_ucontext=ucontext switch, bare (ours, context.h)" \
  --label "asm=asm, coro_resume + coro_yield (ours)" \
  --label "boost_fiber=boost::context::fiber resume (baseline, API)" \
  --label "ucontext=ucontext, coro_resume + coro_yield (ours)" \
  --label "raw_asm_compare=asm switch, bare, MXCSR mode COMPARE" \
  --label "raw_asm_load=asm switch, bare, MXCSR mode LOAD" \
  --label "raw_asm_compare_flags=asm switch, bare, COMPARE, flags differ" \
  --label "raw_asm_load_flags=asm switch, bare, LOAD, flags differ" \
  --label "boost_flags=Boost.Context jump_fcontext, flags differ" \
  --ratio "raw_asm/boost<=1" \
  --ratio "asm/boost_fiber<=1" \
  --ratio raw_ucontext/raw_asm \
  --ratio asm/raw_asm \
  --ratio ucontext/asm \
  --ratio raw_asm_load/raw_asm_compare \
  --ratio raw_asm_load_flags/raw_asm_compare_flags \
  --ratio boost_flags/boost \
  raw_asm=bench/switch_raw_asm \
  boost=bench/switch_boost \
  raw_ucontext=bench/switch_raw_ucontext \
  asm=bench/switch_asm \
  boost_fiber=bench/switch_boost_fiber \
  ucontext=bench/switch_ucontext \
  raw_asm_compare=bench/switch_raw_asm_compare \
  raw_asm_load=bench/switch_raw_asm_load \
  raw_asm_compare_flags=bench/switch_raw_asm_compare_flags \
  raw_asm_load_flags=bench/switch_raw_asm_load_flags \
  boost_flags=bench/switch_boost_flags \
  "$@"
