#!/usr/bin/env bash
# //bench:all — every benchmark of the course, one after the other, then one
# summary table: each of the course's targets, our figure, the same-run
# baseline, the ratio, met or not (bench/summary.py). The first line is the
# machine: its CPU model and count of CPUs.
#
#   ./tools/bazelw run -c opt //bench:all
#   ./tools/bazelw run -c opt //bench:all -- --markdown     # the table in Markdown too
#   ./tools/bazelw run -c opt //bench:all -- --keep /tmp/b  # keep every output in /tmp/b
#
# The list is BENCHMARKS in bench/BUILD; Bazel passes their paths here
# (arguments that do not start with "--"). Each benchmark's output is shown
# as it runs and kept in a directory, NAME.log, with the machine-readable
# lines of bench/interleave.py in NAME.results (BENCH_RESULTS); summary.py
# reads them. A benchmark that fails does not stop the others; the exit
# status is then 1.
set -uo pipefail

benchmarks=()
summary_options=()
keep=""
while (($#)); do
  case "$1" in
    --markdown) summary_options+=(--markdown) ;;
    --keep)
      if (($# < 2)); then
        echo "all: --keep needs a directory" >&2
        exit 2
      fi
      keep="$2"
      # A relative path is relative to Bazel's working directory (the
      # repository root, when run through tools/bazelw).
      if [[ "$keep" != /* && -n "${BUILD_WORKING_DIRECTORY:-}" ]]; then
        keep="$BUILD_WORKING_DIRECTORY/$keep"
      fi
      shift
      ;;
    --*)
      echo "usage: ./tools/bazelw run -c opt //bench:all [-- --markdown] [-- --keep DIR]" >&2
      exit 2
      ;;
    *) benchmarks+=("$1") ;;
  esac
  shift
done
if ((${#benchmarks[@]} == 0)); then
  echo "usage: ./tools/bazelw run -c opt //bench:all" >&2
  exit 2
fi

# Paths are relative to the runfiles root: `bazel run` starts us there.
if [[ ! -f bench/summary.py ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course" || exit 1
fi

if [[ -n "$keep" ]]; then
  mkdir -p "$keep" || exit 1
  out="$keep"
else
  out="$(mktemp -d)" || exit 1
  trap 'rm -rf "$out"' EXIT
fi

# The machine, first: the figures mean little without it. The model name,
# its family and model numbers (a VM's model name is often only "AMD EPYC"
# or "Intel(R) Xeon(R) Processor", whatever the generation) and the count
# of CPUs come from /proc/cpuinfo (summary.py prints the same line above
# its table).
model=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
family=$(sed -n 's/^cpu family[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
number=$(sed -n 's/^model[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
if [[ -n "$family" && -n "$number" ]]; then
  model="${model:-unknown CPU} (family $family, model $number)"
fi
cpus=$(grep -c '^processor' /proc/cpuinfo)
echo "CPU: ${model:-unknown CPU}, ${cpus} CPUs"
echo

status=0
start=$(date +%s)
read -r load_start _ </proc/loadavg
for benchmark in "${benchmarks[@]}"; do
  name="$(basename "$benchmark")"
  rm -f "$out/$name.log" "$out/$name.results"
  echo "== ${benchmark}"
  if ! BENCH_RESULTS="$out/$name.results" "$benchmark" | tee "$out/$name.log"; then
    echo "all: ${benchmark} failed" >&2
    status=1
  fi
  echo
done
read -r load_end _ </proc/loadavg

python3 bench/summary.py "${summary_options[@]}" \
  --seconds "$(($(date +%s) - start))" --load "$load_start" --load "$load_end" \
  "$out" || status=1
exit "$status"
