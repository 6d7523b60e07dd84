#!/usr/bin/env bash
# gdb_test — tools/gdb/coro.py's `coro bt` in gdb batch mode, on Chapter
# 1's ping_pong, on a live process and on a core file, for both switch
# back-ends; and on AArch64, cross-built and run under qemu-aarch64, whose
# gdb stub gdb-multiarch attaches to (live only: qemu's stub cannot write
# a core file).
#
# ping_pong is built here with gcc -g (as `-c dbg` would: the command needs
# the library's debug information) from the chapter's sources, and stopped
# in main just before it resumes `pong` the first time: `ping` has yielded
# once, inside player(), and `pong` has not started. `coro bt ping` must
# show the frames the switch saved, from the switch's caller down to the
# coroutine's first frame, with player() at its coro_yield() line; the
# same from a core file written with gcore; `coro bt pong` says it has
# not started; a bad expression is refused with a message.
#
# Run by `bazel test //tools:gdb_test`, or by hand: tools/gdb_test.sh
set -uo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  root="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  root="$(cd "$(dirname "$0")/.." && pwd)"
fi
chapter="$root/ch01_context"
script="$root/tools/gdb/coro.py"
work="${TEST_TMPDIR:-$(mktemp -d)}/gdb_test"
rm -rf "$work" && mkdir -p "$work"
failures=0

pass() { echo "PASS  $*"; }
fail() { echo "FAIL  $*"; failures=$((failures + 1)); }
expect() {  # expect REGEX WHAT: a line of $out matches REGEX
  if grep -Eq -- "$1" <<<"$out"; then pass "$2"
  else fail "$2: no line matches /$1/"; echo "$out"; fi
}

# The lines to stop at and to find, read from the sources (not numbers
# written here, which would go stale).
stop_line=$(grep -n 'coro_resume(pong);' "$chapter/examples/ping_pong.c" | head -1 | cut -d: -f1)
yield_line=$(grep -n 'coro_yield();' "$chapter/examples/ping_pong.c" | head -1 | cut -d: -f1)
[[ -n $stop_line && -n $yield_line ]] || { echo "gdb_test: ping_pong.c changed"; exit 1; }

build() {  # build NAME [CC] EXTRA-FLAGS...: ping_pong as $work/NAME
  local name=$1 cc=gcc
  shift
  if [[ ${1:-} == *gcc ]]; then cc=$1; shift; fi
  "$cc" -std=c11 -g -O0 -fno-omit-frame-pointer -I"$chapter" "$@" \
    "$chapter/coro.c" "$chapter/stack.c" "$chapter/examples/ping_pong.c" \
    -pthread -o "$work/$name"
}

run_gdb() {  # run_gdb ARGS...: gdb in batch mode with the script; sets $out
  out=$(gdb -nx -q -batch -ex "source $script" "$@" 2>&1)
}

check_backtrace() {  # check_backtrace WHAT FIRST-FRAME ENTRY-FRAME
  local what=$1 first=$2 entry=$3
  expect "^coroutine 0x[0-9a-f]+, CORO_SUSPENDED, fn .*<player>" \
    "$what: the header names the coroutine, its state and its function"
  expect "^#0 +0x[0-9a-f]+ in $first( at .*)?$" \
    "$what: frame 0 is where the switch was called ($first)"
  expect "^#[0-9]+ +0x[0-9a-f]+ in coro_yield at .*ch01_context/coro\.c:[0-9]+$" \
    "$what: coro_yield() is on the coroutine's stack"
  expect "^#[0-9]+ +0x[0-9a-f]+ in player at .*examples/ping_pong\.c:$yield_line$" \
    "$what: player() at its coro_yield() line ($yield_line)"
  expect "^#[0-9]+ +0x[0-9a-f]+ in coroutine_main at " \
    "$what: coroutine_main() below it"
  local last
  last=$(grep -E '^#[0-9]+ ' <<<"$out" | tail -1)
  if grep -Eq " in $entry at " <<<"$last"; then
    pass "$what: the walk ends at the coroutine's first frame ($entry)"
  else
    fail "$what: the last frame is not $entry: $last"
  fi
}

for backend in asm ucontext; do
  if [[ $backend == asm ]]; then
    build pp_asm "$chapter/context_asm.c" "$chapter/switch_x86_64.S" ||
      { fail "asm: the build failed"; continue; }
    first=switch_to entry=coro_context_start
  else
    build pp_ucontext -DCORO_SWITCH_UCONTEXT "$chapter/context_ucontext.c" ||
      { fail "ucontext: the build failed"; continue; }
    first=coro_context_switch entry=context_start
  fi
  binary="$work/pp_$backend"
  core="$work/core.$backend"

  run_gdb -ex "break ping_pong.c:$stop_line" -ex run \
    -ex "coro bt ping" -ex "coro bt pong" -ex "coro bt 42" \
    -ex "gcore $core" -ex kill "$binary"
  check_backtrace "$backend, live" "$first" "$entry"
  expect "^coroutine 0x[0-9a-f]+, CORO_SUSPENDED, .*: not started yet, no frames$" \
    "$backend, live: a coroutine that has not run has no frames"
  expect "^coro: int is not a struct coro or a pointer to one$" \
    "$backend, live: an expression that is no coroutine is refused"

  if [[ -s $core ]]; then
    run_gdb -ex "frame function main" -ex "coro bt ping" "$binary" "$core"
    check_backtrace "$backend, core file" "$first" "$entry"
  else
    fail "$backend: gcore wrote no core file"
  fi
done

# AArch64: the same walk over the frame switch_aarch64.S saves (x29 and
# x30 at sp + 80 and + 88), and over glibc's AArch64 ucontext.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
for backend in asm ucontext; do
  if [[ $backend == asm ]]; then
    build arm_asm aarch64-linux-gnu-gcc -static "$chapter/context_asm.c" \
      "$chapter/switch_aarch64.S" || { fail "aarch64 asm: the build failed"; continue; }
    first=switch_to entry=coro_context_start
  else
    build arm_ucontext aarch64-linux-gnu-gcc -static -DCORO_SWITCH_UCONTEXT \
      "$chapter/context_ucontext.c" || { fail "aarch64 ucontext: the build failed"; continue; }
    first=swapcontext entry=context_start
  fi
  port=$(free_port)
  qemu-aarch64 -g "$port" "$work/arm_$backend" >"$work/arm_$backend.out" 2>&1 &
  qemu=$!
  # Until the stub listens (read from /proc: a probe connection would be
  # the one connection the stub accepts).
  hex_port=$(printf ':%04X ' "$port")
  for _ in $(seq 100); do
    grep -q " 0100007F$hex_port.* 0A " /proc/net/tcp 2>/dev/null && break
    grep -q " 00000000$hex_port.* 0A " /proc/net/tcp 2>/dev/null && break
    sleep 0.1
  done
  out=$(gdb-multiarch -nx -q -batch -ex "source $script" \
    -ex "target remote 127.0.0.1:$port" -ex "break ping_pong.c:$stop_line" \
    -ex continue -ex "coro bt ping" -ex "coro bt pong" -ex kill \
    "$work/arm_$backend" 2>&1)
  kill "$qemu" 2>/dev/null
  wait "$qemu" 2>/dev/null
  check_backtrace "aarch64 $backend, live (qemu)" "$first" "$entry"
  expect "^coroutine 0x[0-9a-f]+, CORO_SUSPENDED, .*: not started yet, no frames$" \
    "aarch64 $backend, live (qemu): a coroutine that has not run has no frames"
done

echo
if ((failures)); then
  echo "gdb_test: $failures check(s) failed"
  exit 1
fi
echo "gdb_test: all checks passed"
