#!/usr/bin/env bash
# //bench:plots — the plots of docs/performance.md, measured now:
#
#   ./tools/bazelw run -c opt //bench:plots                 # into docs/perf/
#   ./tools/bazelw run -c opt //bench:plots -- /tmp/plots   # anywhere else
#
#   switch.svg  ns per switch by back-end (log axis): the bare asm switch,
#               Boost.Context's jump_fcontext, coro_resume + coro_yield, a
#               scheduled yield, and the same three on the ucontext back-end;
#               one interleaved run of bench/interleave.py (9 rounds);
#   live.svg    resident memory against the number of live coroutines, up
#               to 1,000,000 suspended on dense 16 KiB stacks (bench/live
#               at each size, a fresh process each), beside blocked threads
#               with 16 KiB stacks (bench/live_threads, up to 20,000).
#
# Beside each SVG goes its data (switch.dat, live.dat, live_threads.dat),
# so a plot can be redrawn or checked without running anything:
# `gnuplot -e "dir='docs/perf'" bench/plot_switch.gp`.
#
# The default directory is docs/perf of the source tree
# ($BUILD_WORKSPACE_DIRECTORY, set by `bazel run`). Needs gnuplot (Debian's
# gnuplot-nox, which tools/bazelw installs) and about 4.2 GB of free memory
# for the million coroutines. About a minute.
set -euo pipefail

if (($# > 1)); then
  echo "usage: ./tools/bazelw run -c opt //bench:plots [-- OUTPUT_DIR]" >&2
  exit 2
fi
if (($# == 1)); then
  out="$1"
  # A relative path is relative to Bazel's working directory (the
  # repository root, when run through tools/bazelw).
  if [[ "$out" != /* && -n "${BUILD_WORKING_DIRECTORY:-}" ]]; then
    out="$BUILD_WORKING_DIRECTORY/$out"
  fi
elif [[ -n "${BUILD_WORKSPACE_DIRECTORY:-}" ]]; then
  out="$BUILD_WORKSPACE_DIRECTORY/docs/perf"
else
  echo "plots: run it with \`./tools/bazelw run -c opt //bench:plots\`, or name the output directory" >&2
  exit 2
fi
if ! command -v gnuplot >/dev/null; then
  echo "plots: gnuplot not found; install Debian's gnuplot-nox (tools/bazelw does)" >&2
  exit 1
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# Paths below are relative to the runfiles root: `bazel run` starts us there.
if [[ ! -f bench/interleave.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# ── ns per switch by back-end ──────────────────────────────────────────────
# Labels are those of the plot; "\n" is a line break there. Group 1: ours,
# assembly back-end; 2: the baseline; 3: ours, ucontext back-end.
echo "plots: ns per switch by back-end (interleaved rounds)..." >&2
load_before="$(cut -d' ' -f1 /proc/loadavg)"
BENCH_RESULTS="$tmp/switch.results" python3 bench/interleave.py \
  --title "Switch by back-end, for the plot" \
  raw_asm=bench/switch_raw_asm \
  boost=bench/switch_boost \
  resume=bench/switch_asm \
  yield=bench/sched_yield1 \
  raw_ucontext=bench/switch_raw_ucontext \
  resume_ucontext=bench/switch_ucontext \
  yield_ucontext=bench/sched_yield1_ucontext >&2
{
  echo "# ns per switch: median, fastest, slowest of 9 interleaved rounds;"
  echo "# group 1 ours (asm), 2 baseline, 3 ours (ucontext). $(date -u +%F), $(nproc) cores,"
  echo "# load average before: $load_before, after: $(cut -d' ' -f1 /proc/loadavg)"
  echo "# label median fastest slowest group"
  awk '
    BEGIN {
      label["raw_asm"] = "bare switch, asm (ch01 context.h)"; group["raw_asm"] = 1
      label["boost"] = "Boost.Context jump_fcontext (baseline)"; group["boost"] = 2
      label["resume"] = "coro_resume + coro_yield, asm (ch01)"; group["resume"] = 1
      label["yield"] = "scheduled yield, asm (ch02 pump)"; group["yield"] = 1
      label["raw_ucontext"] = "bare switch, ucontext (ch01 context.h)"; group["raw_ucontext"] = 3
      label["resume_ucontext"] = "coro_resume + coro_yield, ucontext (ch01)"; group["resume_ucontext"] = 3
      label["yield_ucontext"] = "scheduled yield, ucontext (ch02 pump)"; group["yield_ucontext"] = 3
    }
    $1 == "result" {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      printf "\"%s\" %s %s %s %d\n", label[f["name"]], f["median"], f["fastest"], f["slowest"], group[f["name"]]
    }' "$tmp/switch.results"
} >"$out/switch.dat"

# ── resident memory against live coroutines ─────────────────────────────────
# live prints "after first run (all suspended)  TOTAL MiB  +GROWTH MiB
# PER KiB per coroutine"; live_threads "VmRSS, all blocked ..." and
# "kernel stacks ...".
echo "plots: live coroutines at each size..." >&2
{
  echo "# bench/live N: VmRSS with N coroutines suspended on dense 16 KiB stacks. $(date -u +%F)"
  echo "# N total_MiB growth_MiB KiB_per_coroutine"
  for n in 1000 2000 5000 10000 20000 50000 100000 200000 500000 1000000; do
    bench/live "$n" >"$tmp/live.txt"
    awk -v n="$n" '/after first run/ {
        gsub(/[+]/, ""); printf "%d %s %s %s\n", n, $(NF-7), $(NF-5), $(NF-3) }' \
      "$tmp/live.txt"
  done
} >"$out/live.dat"
echo "plots: blocked threads at each size..." >&2
{
  echo "# bench/live_threads N: VmRSS with N threads (16 KiB stacks) blocked; kernel stacks from /proc/meminfo. $(date -u +%F)"
  echo "# N growth_MiB KiB_per_thread kernel_stack_MiB kernel_stack_KiB_per_thread"
  for n in 1000 2000 5000 10000 20000; do
    bench/live_threads "$n" >"$tmp/threads.txt"
    awk -v n="$n" '
      /VmRSS, all blocked/ { gsub(/[+]/, ""); mib = $(NF-5); kib = $(NF-3) }
      /kernel stacks/ { gsub(/[+]/, ""); kmib = $(NF-5); kkib = $(NF-3) }
      END { printf "%d %s %s %s %s\n", n, mib, kib, kmib, kkib }' "$tmp/threads.txt"
  done
} >"$out/live_threads.dat"

gnuplot -e "dir='$out'" bench/plot_switch.gp
gnuplot -e "dir='$out'" bench/plot_live.gp
echo "plots: wrote $out/switch.svg and $out/live.svg (data: switch.dat, live.dat, live_threads.dat)" >&2
cat "$out/switch.dat" "$out/live.dat" "$out/live_threads.dat"
