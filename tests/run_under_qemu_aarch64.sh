#!/usr/bin/env bash
# Runs AArch64 GoogleTest binaries under qemu-user:
#
#   run_under_qemu_aarch64.sh BINARY...
#
# Each binary runs with the AArch64 system libraries from
# /usr/aarch64-linux-gnu (Debian's cross toolchain). Fails if any fails.
set -euo pipefail

# Death tests: GoogleTest's "threadsafe" style re-executes the test binary
# for the child, and the kernel cannot execute an AArch64 file here (qemu
# is not registered with binfmt_misc), so the children fork instead.
export CORO_DEATH_TEST_STYLE=fast

# Tests that cannot work under qemu-user, and why:
#   CreateDeathTest.StackThatCannotBeMappedIsEnomem: qemu-user does not pass
#     setrlimit(RLIMIT_AS) on to the host (the limit would also bind qemu's
#     own memory), so the address-space limit the test relies on never bites.
EXCLUDE="CreateDeathTest.StackThatCannotBeMappedIsEnomem"

status=0
for binary in "$@"; do
  echo "=== qemu-aarch64 $binary"
  if ! qemu-aarch64 -L /usr/aarch64-linux-gnu "$binary" \
      --gtest_filter="-$EXCLUDE"; then
    status=1
  fi
done
exit $status
