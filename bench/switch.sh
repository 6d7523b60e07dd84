#!/usr/bin/env bash
# //bench:switch — what one context switch costs: our two back-ends
# (assembly, ucontext) against Boost.Context's jump_fcontext, interleaved
# round by round in one run. Extra arguments go to bench/interleave.py,
# e.g. `./tools/bazelw run -c opt //bench:switch -- --raw --rounds 15`.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths).
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

exec python3 bench/interleave.py \
  --title "Context switch (resume+yield = 2 switches)" \
  --label "asm=asm (ours, //ch01_context:coro)" \
  --label "ucontext=ucontext (ours, //ch01_context:coro_ucontext)" \
  --label "boost=Boost.Context jump_fcontext (baseline)" \
  --ratio asm/boost \
  --ratio ucontext/asm \
  asm=bench/switch_asm \
  ucontext=bench/switch_ucontext \
  boost=bench/switch_boost \
  "$@"
