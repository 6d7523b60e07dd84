// harness.h — helpers shared by every suite in tests/.
//
// Each suite is compiled once per (chapter, back-end) by coro_suite() in
// suite.bzl, which passes two macros:
//
//   CORO_CHAPTER   the chapter the test binary runs against (1, 2, ...)
//   CORO_UCONTEXT  1 with the ucontext switch, 0 with the assembly switch
//
// Everything here is small on purpose: a test should be readable without
// opening this file.
#ifndef CORO_TESTS_HARNESS_H
#define CORO_TESTS_HARNESS_H

#include <gtest/gtest.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#if __cplusplus < 201703L
#error "the suites are C++17: build them with coro_suite (tests/suite.bzl)"
#endif
#ifndef CORO_CHAPTER
#error "CORO_CHAPTER must be defined (coro_suite in tests/suite.bzl does it)"
#endif
#ifndef CORO_UCONTEXT
#error "CORO_UCONTEXT must be defined (coro_suite in tests/suite.bzl does it)"
#endif

// Skip a test from chapter `n` on, because that chapter changes the
// behaviour on purpose. `reason` names the change (see SPEC.md), so the skip
// explains itself in the test output:
//
//   CORO_SKIP_FROM_CHAPTER(4, "run waits for cross-thread wakes (ch04)");
#define CORO_SKIP_FROM_CHAPTER(n, reason)                                  \
  do {                                                                     \
    if (CORO_CHAPTER >= (n)) GTEST_SKIP() << "superseded from chapter "    \
                                          << (n) << ": " << (reason);      \
  } while (0)

namespace coro_test {

// ---------------------------------------------------------------------------
// Which tool is watching us.

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// True when the binary runs under Valgrind (bazel test --config=valgrind).
inline bool UnderValgrind() { return RUNNING_ON_VALGRIND != 0; }

// The fewest entries a turn of the pump runs (TURN_MIN_ENTRIES in the
// sched.c of chapters 3 to 5): the contract's bound on how late a timer,
// a request from another thread or a hook's poll comes beside few ready
// coroutines.
inline constexpr int kTurnMinEntries = 16;

// How many iterations a stress test should do: `n`, or a tenth of it under
// Valgrind, which runs every instruction some 50 times slower. A tenth still
// exercises the same paths; only the wall-clock budget differs.
inline long Iterations(long n) { return UnderValgrind() ? n / 10 : n; }

// ---------------------------------------------------------------------------
// Tests that need the machine to keep up for a moment.
//
// Some checks only mean something if the machine kept up with the test for
// a moment: "every parker parked before the first deadline", "the wakes all
// came before the timeouts". A loaded CI machine, Valgrind or a sanitizer
// can stall the test process for a long while at any point, and the test
// cannot prevent that. It can see it afterwards, from the clock: a timer
// never fires before its deadline (the contract), so if the clock still
// read less than a deadline after some step, that timer had not fired
// during the step.
//
// RetryWithMoreRoom(attempt) calls attempt(room) with room = 1, 4, 16, 64,
// until an attempt returns true ("the machine kept up: the scenario was
// arranged as intended"). The attempt multiplies its time margins by
// `room`. It returns whether some attempt was arranged; the test asserts
// that, so it cannot pass without checking anything.
//
// Every attempt checks the contract on what it observed, arranged or not:
// a real bug fails the attempt it shows up in. Only the checks that need
// the arrangement are skipped in an attempt that did not get it.
template <typename Attempt>
bool RetryWithMoreRoom(Attempt attempt) {
  for (std::uint64_t room = 1; room <= 64; room *= 4) {
    if (attempt(room)) return true;
    std::printf("[   INFO   ] the machine did not keep up (room x%llu): "
                "again with more room\n",
                static_cast<unsigned long long>(room));
  }
  return false;
}

// The process's virtual memory size (VmSize), in bytes; 0 if unknown. The
// out-of-memory tests cap the address space just above it.
inline std::size_t VirtualMemoryBytes() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  unsigned long kib = 0;
  while (std::fgets(line, sizeof line, status) != nullptr)
    if (std::sscanf(line, "VmSize: %lu kB", &kib) == 1) break;
  std::fclose(status);
  return static_cast<std::size_t>(kib) * 1024;
}

// ---------------------------------------------------------------------------
// Death tests.

// Death tests run their statement in a child process. "threadsafe" style
// re-executes the test binary for the child, so it is safe even though the
// parent has run threads. One environment cannot re-execute the binary:
// qemu-user without binfmt_misc (the AArch64 run), where the kernel cannot
// exec an AArch64 file; that run sets CORO_DEATH_TEST_STYLE=fast (fork only).
inline void UseThreadsafeDeathTests() {
  const char* style = std::getenv("CORO_DEATH_TEST_STYLE");
  GTEST_FLAG_SET(death_test_style, style != nullptr ? style : "threadsafe");
}

// ---------------------------------------------------------------------------
// A tiny deterministic PRNG (SplitMix64) for random-operation tests: the same
// seed gives the same sequence on every machine, so a failure reproduces.

class Prng {
 public:
  explicit Prng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // A number in [0, n), n > 0.
  std::uint64_t Below(std::uint64_t n) { return Next() % n; }

 private:
  std::uint64_t state_;
};

// ---------------------------------------------------------------------------
// The process's memory mappings, from /proc/self/maps.

struct Mapping {
  std::uintptr_t start = 0;  // first byte
  std::uintptr_t end = 0;    // one past the last byte
  std::string perms;         // e.g. "rw-p", "---p"

  std::size_t size() const { return end - start; }
  bool readable() const { return perms.size() > 0 && perms[0] == 'r'; }
  bool writable() const { return perms.size() > 1 && perms[1] == 'w'; }
};

// Calls `fn(mapping)` for every line of /proc/self/maps.
template <typename Fn>
void ForEachMapping(Fn fn) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range;
    Mapping m;
    fields >> range >> m.perms;
    const std::size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    m.start = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    fn(m);
  }
}

// How many mappings the process has (each mmap'd stack adds at least one).
inline std::size_t CountMappings() {
  std::size_t n = 0;
  ForEachMapping([&n](const Mapping&) { ++n; });
  return n;
}

// The mapping that contains `address`, if any.
inline std::optional<Mapping> MappingContaining(std::uintptr_t address) {
  std::optional<Mapping> found;
  ForEachMapping([&](const Mapping& m) {
    if (m.start <= address && address < m.end) found = m;
  });
  return found;
}

// The mapping that ends exactly at `address` (the one just below it), if any.
inline std::optional<Mapping> MappingEndingAt(std::uintptr_t address) {
  std::optional<Mapping> found;
  ForEachMapping([&](const Mapping& m) {
    if (m.end == address) found = m;
  });
  return found;
}

inline std::size_t PageSize() {
  return static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace coro_test

#endif  // CORO_TESTS_HARNESS_H
