#!/usr/bin/env bash
# Runs AArch64 GoogleTest binaries under qemu-user:
#
#   run_under_qemu_aarch64.sh BINARY...
#
# Each binary runs with the AArch64 system libraries from
# /usr/aarch64-linux-gnu (Debian's cross toolchain), on one host CPU (see
# below). Fails if any fails.
set -euo pipefail

# Death tests: GoogleTest's "threadsafe" style re-executes the test binary
# for the child, and the kernel cannot execute an AArch64 file here (qemu
# is not registered with binfmt_misc), so the children fork instead.
export CORO_DEATH_TEST_STYLE=fast

# Tests that cannot work under qemu-user, and why:
#   CreateDeathTest.StackThatCannotBeMappedIsEnomem: qemu-user does not pass
#     setrlimit(RLIMIT_AS) on to the host (the limit would also bind qemu's
#     own memory), so the address-space limit the test relies on never bites.
#   DenseStacksDeathTest.NoMemoryIsEnomemAndLeavesThemOff and
#   DenseStacksDeathTest.AStackFinishedWithNoMemoryLeftIsStillReused: the
#     same limit, which there lets the test's malloc() loop take all the
#     host's memory.
EXCLUDE="CreateDeathTest.StackThatCannotBeMappedIsEnomem"
EXCLUDE+=":DenseStacksDeathTest.NoMemoryIsEnomemAndLeavesThemOff"
EXCLUDE+=":DenseStacksDeathTest.AStackFinishedWithNoMemoryLeftIsStillReused"

# One host CPU per binary. qemu-user (7.2) on an x86-64 host does not keep
# a sequentially consistent store and the sequentially consistent load
# after it in order: it translates the store (STLR) as "fence, then store"
# and the load (LDAR) as "load, then fence", so nothing stops the host's
# store buffer from letting the load overtake the store. Real AArch64
# processors never do that (STLR then LDAR is ordered), and the C11
# handshakes of the library rely on it: the pump's "sleeping = true, then
# look at the inbox" (inbox.c) then loses a wake now and then, and a test
# hangs. Threads that share one CPU see each other's memory operations in
# program order, so on one CPU qemu is faithful again. (qemu on x86-64
# cannot show AArch64's weaker orders anyway: the host orders more. What
# this run checks is the AArch64 code: the switch, the calling convention,
# the atomics compiled for AArch64.)
#
# The CPU: one of those this script may use, chosen by process id, so that
# the AArch64 tests Bazel runs side by side tend to use different CPUs.
cpus=()
IFS=, read -ra ranges <<<"$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
for range in "${ranges[@]}"; do
  first=${range%-*}
  last=${range#*-}
  for ((cpu = first; cpu <= last; cpu++)); do
    cpus+=("$cpu")
  done
done
cpu=${cpus[$(($$ % ${#cpus[@]}))]}

status=0
for binary in "$@"; do
  echo "=== qemu-aarch64 $binary (on CPU $cpu)"
  start=$SECONDS
  if ! taskset -c "$cpu" qemu-aarch64 -L /usr/aarch64-linux-gnu "$binary" \
      --gtest_filter="-$EXCLUDE"; then
    status=1
  fi
  echo "=== $binary: $((SECONDS - start)) s"
done
exit $status
