#!/usr/bin/env bash
# gdb_test — tools/gdb/coro.py's `coro bt` and `info coroutines` in gdb
# batch mode, on Chapter 1's ping_pong and Chapter 3's producer_consumer,
# on a live process and on a core file, for both switch back-ends; and on
# AArch64, cross-built and run under qemu-aarch64, whose gdb stub
# gdb-multiarch attaches to (live only: qemu's stub cannot write a core
# file).
#
# ping_pong is built here with gcc -g (as `-c dbg` would: the command needs
# the library's debug information) from the chapter's sources, and stopped
# in main just before it resumes `pong` the first time: `ping` has yielded
# once, inside player(), and `pong` has not started. `coro bt ping` must
# show the frames the switch saved, from the switch's caller down to the
# coroutine's first frame, with player() at its coro_yield() line; the
# same from a core file written with gcore; `coro bt pong` says it has
# not started; a bad expression is refused with a message. `info
# coroutines` lists both, ping at its yield; `coro bt 1` is ping's walk.
#
# producer_consumer is stopped in the producer at its printf, after it
# filled the slot: the consumer is waiting on the event `filled`, inside
# coro_event_await(). `info coroutines` lists the consumer with that state
# and its await line, and the producer as the running one; `coro bt 1`
# shows coro_event_await() and consumer() at that line; so does the core.
#
# tools/testdata/gdb/looper_hang.c, built against Chapter 4, hangs: its
# coroutine parks on a looper and nothing wakes it, so coro_looper_stop()
# waits for ever. gdb attaches to it (gdb -p, as to any hung program):
# `info coroutines` lists the coroutine as parked at its coro_park() line,
# on the looper's thread (gdb's thread 2); `coro bt 1` shows coro_park()
# and wait_for_reply(); so does a core file written then.
#
# Run by `bazel test //tools:gdb_test`, or by hand: tools/gdb_test.sh
set -uo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  root="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  root="$(cd "$(dirname "$0")/.." && pwd)"
fi
chapter="$root/ch01_context"
ch03="$root/ch03_timers"
ch04="$root/ch04_threads"
hang="$root/tools/testdata/gdb/looper_hang.c"
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
put_line=$(grep -n 'printf("  producer: put' "$ch03/examples/producer_consumer.c" | head -1 | cut -d: -f1)
await_line=$(grep -n 'coro_event_await(&ch->filled);' "$ch03/examples/producer_consumer.c" | head -1 | cut -d: -f1)
[[ -n $put_line && -n $await_line ]] || { echo "gdb_test: producer_consumer.c changed"; exit 1; }
park_line=$(grep -n 'coro_park();' "$hang" | head -1 | cut -d: -f1)
[[ -n $park_line ]] || { echo "gdb_test: looper_hang.c changed"; exit 1; }

build() {  # build NAME [CC] EXTRA-FLAGS...: ping_pong as $work/NAME
  local name=$1 cc=gcc
  shift
  if [[ ${1:-} == *gcc ]]; then cc=$1; shift; fi
  "$cc" -std=c11 -g -O0 -fno-omit-frame-pointer -I"$chapter" "$@" \
    "$chapter/coro.c" "$chapter/stack.c" "$chapter/examples/ping_pong.c" \
    -pthread -o "$work/$name"
}

# A later chapter's library (every .c but the two back-ends) and a program.
build_with() {  # build_with CHAPTER-DIR NAME PROGRAM.c EXTRA-FLAGS...
  local dir=$1 name=$2 program=$3 sources=()
  shift 3
  for file in "$dir"/*.c; do
    [[ $file == */context_* ]] || sources+=("$file")
  done
  gcc -std=c11 -g -O0 -fno-omit-frame-pointer -I"$dir" "$@" "${sources[@]}" \
    "$program" -pthread -o "$work/$name"
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
    -ex "coro bt ping" -ex "coro bt pong" -ex "coro bt 42" -ex "coro bt 1+1" \
    -ex "gcore $core" -ex kill "$binary"
  check_backtrace "$backend, live" "$first" "$entry"
  expect "^coroutine 0x[0-9a-f]+, CORO_SUSPENDED, .*: not started yet, no frames$" \
    "$backend, live: a coroutine that has not run has no frames"
  expect "^coro bt: no coroutine 42 \(info coroutines lists 2\)$" \
    "$backend, live: a number that info coroutines does not list is refused"
  expect "^coro: int is not a struct coro or a pointer to one$" \
    "$backend, live: an expression that is no coroutine is refused"

  if [[ -s $core ]]; then
    run_gdb -ex "frame function main" -ex "coro bt ping" -ex "info coroutines" \
      -ex "coro bt 2" "$binary" "$core"
    check_backtrace "$backend, core file" "$first" "$entry"
    expect "^ +1 +0x[0-9a-f]+ +player +suspended +1 +player \(.*examples/ping_pong\.c:$yield_line\)$" \
      "$backend, core file: info coroutines lists ping, suspended at its yield"
    expect "^ +2 +0x[0-9a-f]+ +player +not started +1$" \
      "$backend, core file: info coroutines lists pong, not started"
    expect "^2 coroutines$" "$backend, core file: info coroutines counts 2"
    expect ": not started yet, no frames$" \
      "$backend, core file: coro bt 2 is pong's"
  else
    fail "$backend: gcore wrote no core file"
  fi
done

# Chapter 3: a coroutine waiting on an event, found by info coroutines.
check_waiting() {  # check_waiting WHAT
  local what=$1
  expect "^ +1 +0x[0-9a-f]+ +consumer +consumer +awaiting an event +0x[0-9a-f]+ +1 +consumer \(.*examples/producer_consumer\.c:$await_line\)$" \
    "$what: info coroutines lists the consumer (named so) awaiting the event, at its await line"
  expect "^\* +2 +0x[0-9a-f]+ +producer +producer +running +0x[0-9a-f]+ +1$" \
    "$what: info coroutines marks the producer as the running one"
  expect "^#[0-9]+ +0x[0-9a-f]+ in coro_event_await at .*ch03_timers/event\.c:[0-9]+$" \
    "$what: coro bt 1 shows coro_event_await() on the consumer's stack"
  expect "^#[0-9]+ +0x[0-9a-f]+ in consumer at .*examples/producer_consumer\.c:$await_line$" \
    "$what: coro bt 1 shows consumer() at its await line ($await_line)"
}
for backend in asm ucontext; do
  if [[ $backend == asm ]]; then
    build_with "$ch03" pc_asm "$ch03/examples/producer_consumer.c" \
      "$ch03/context_asm.c" "$ch03/switch_x86_64.S" ||
      { fail "ch03 asm: the build failed"; continue; }
  else
    build_with "$ch03" pc_ucontext "$ch03/examples/producer_consumer.c" \
      -DCORO_SWITCH_UCONTEXT "$ch03/context_ucontext.c" ||
      { fail "ch03 ucontext: the build failed"; continue; }
  fi
  binary="$work/pc_$backend"
  core="$work/core.pc.$backend"
  run_gdb -ex "break producer_consumer.c:$put_line" -ex run \
    -ex "info coroutines" -ex "coro bt 1" -ex "gcore $core" -ex kill "$binary"
  check_waiting "ch03 $backend, live"
  if [[ -s $core ]]; then
    run_gdb -ex "info coroutines" -ex "coro bt 1" "$binary" "$core"
    check_waiting "ch03 $backend, core file"
  else
    fail "ch03 $backend: gcore wrote no core file"
  fi
done

# Chapter 4: a hung program, attached to.
check_hang() {  # check_hang WHAT
  local what=$1
  expect "^ +1 +0x[0-9a-f]+ +wait_for_reply +parked +0x[0-9a-f]+ +2 +wait_for_reply \(.*looper_hang\.c:$park_line\)$" \
    "$what: info coroutines lists the parked coroutine, on the looper's thread, at its park line"
  expect "^1 coroutine$" "$what: info coroutines counts 1"
  expect "^#[0-9]+ +0x[0-9a-f]+ in coro_park at .*ch04_threads/park\.c:[0-9]+$" \
    "$what: coro bt 1 shows coro_park() on its stack"
  expect "^#[0-9]+ +0x[0-9a-f]+ in wait_for_reply at .*looper_hang\.c:$park_line$" \
    "$what: coro bt 1 shows wait_for_reply() at its park line ($park_line)"
}
for backend in asm ucontext; do
  if [[ $backend == asm ]]; then
    build_with "$ch04" hang_asm "$hang" "$ch04/context_asm.c" "$ch04/switch_x86_64.S" ||
      { fail "ch04 asm: the build failed"; continue; }
  else
    build_with "$ch04" hang_ucontext "$hang" -DCORO_SWITCH_UCONTEXT \
      "$ch04/context_ucontext.c" || { fail "ch04 ucontext: the build failed"; continue; }
  fi
  core="$work/core.hang.$backend"
  "$work/hang_$backend" >"$work/hang_$backend.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do  # until it waits in coro_looper_stop()
    grep -q "stopping the looper" "$work/hang_$backend.out" && break
    sleep 0.1
  done
  # The looper may not have run the coroutine up to its park yet: look
  # again, a few times, until it has (a slow machine is no failure).
  for _ in $(seq 10); do
    rm -f "$core"
    run_gdb -p "$pid" -ex "info coroutines" -ex "coro bt 1" -ex "gcore $core" -ex detach
    grep -q " parked " <<<"$out" && break
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  check_hang "ch04 $backend, attached"
  if [[ -s $core ]]; then
    run_gdb -ex "info coroutines" -ex "coro bt 1" "$work/hang_$backend" "$core"
    check_hang "ch04 $backend, core file"
  else
    fail "ch04 $backend: gcore wrote no core file"
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
