// timers_test.cc — the contract of waiting: sleep, park and wake with
// permits and deadlines, events, and pumps that wait for the next deadline
// instead of spinning.
//
// This suite is chapter 3's concept. It runs against chapter 3 and every
// later chapter, on both switch back-ends (see tests/suite.bzl), so every
// later stage keeps every promise made here. The one change SPEC.md names
// (from chapter 4, coro_sched_run with only parked coroutines waits for a
// cross-thread wake instead of returning EDEADLK; coro_wake becomes legal
// from any thread) is skipped where it applies, with the reason.
//
// Reading guide: each TEST checks one promise of coro.h / SPEC.md, named
// TEST(Function, WhatItPromises). Most tests use the fixture below: a fresh
// scheduler, coroutines written as lambdas (Go, Spawn), and a check at the
// end that everything finished and the scheduler can be destroyed.
//
// Time: assertions about time are one-sided where they can be ("never
// early": a waiter resumes at t >= its deadline) and generous where they
// cannot ("promptly": far sooner than a 10 s timeout that must not be waited
// for), so they hold under Valgrind, the sanitizers and a busy CI machine.
// A test never assumes the machine keeps up: where a check needs every
// timer set before the first is due, or a wake to come before a timeout,
// the clock says afterwards whether that was so (a timer never fires
// early), and a stalled attempt runs again with more room
// (RetryWithMoreRoom in harness.h). Deadlines shared by many coroutines are
// absolute, computed once from one base.
#include <errno.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "coro.h"
#include "harness.h"
#include "trace_events.h"

namespace {

using coro_test::Iterations;
using coro_test::Prng;
using coro_test::UnderValgrind;

// ---------------------------------------------------------------------------
// Time helpers.

constexpr uint64_t kMs = CORO_MSEC;
constexpr uint64_t kUs = CORO_USEC;

// A timeout no test may actually wait for.
constexpr uint64_t kNever = 10 * CORO_SEC;

// "Promptly": far less than kNever, with room for Valgrind and noisy CI.
constexpr uint64_t kPrompt = 5 * CORO_SEC;

// Time since `start` (a coro_now() value).
uint64_t Since(uint64_t start) { return coro_now() - start; }

// Block the calling thread (not a coroutine) for at least `ns`.
void SleepThread(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / CORO_SEC),
              static_cast<long>(ns % CORO_SEC)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

// CPU time (user + system) used so far by the calling thread.
uint64_t ThreadCpuNs() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
             CORO_SEC +
         static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) *
             CORO_USEC;
}

// Runs `fn` on a new thread and waits for it.
void OnAnotherThread(const std::function<void()>& fn) {
  std::thread t([&fn] {
    fn();
#if CORO_CHAPTER >= 4
    coro_thread_detach();  // the per-thread state chapter 4 introduces
#endif
  });
  t.join();
}

// ---------------------------------------------------------------------------
// Coroutines and posts written as lambdas.

using Body = std::function<void()>;

void* RunBody(void* arg) {
  std::unique_ptr<Body> body(static_cast<Body*>(arg));
  (*body)();
  return nullptr;
}

void RunPostBody(coro_sched*, void* arg) {
  std::unique_ptr<Body> body(static_cast<Body*>(arg));
  (*body)();
}

// A fresh scheduler per test. Go() queues a detached coroutine, Spawn() a
// joinable one (kept for coro_wake; destroyed at the end), Post() a post.
// At the end every spawned coroutine must be done and the scheduler empty.
class SchedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    s_ = coro_sched_create();
    ASSERT_NE(s_, nullptr);
  }

  void TearDown() override {
    for (coro* c : spawned_) {
      if (coro_status(c) == CORO_DONE) {
        EXPECT_EQ(coro_destroy(c), 0);
      } else {
        ADD_FAILURE() << "a spawned coroutine never finished";
      }
    }
    if (coro_sched_alive(s_) == 0) {
      EXPECT_EQ(coro_sched_destroy(s_), 0);
    } else {
      ADD_FAILURE() << coro_sched_alive(s_) << " coroutine(s) still alive";
    }
  }

  void Go(Body body) {
    auto* b = new Body(std::move(body));
    const int rc = coro_go(s_, RunBody, b);
    if (rc != 0) {
      delete b;
      ADD_FAILURE() << "coro_go: " << rc;
    }
  }

  coro* Spawn(Body body) {
    auto* b = new Body(std::move(body));
    coro* c = coro_spawn(s_, RunBody, b);
    if (c == nullptr) {
      delete b;
      ADD_FAILURE() << "coro_spawn: errno " << errno;
    } else {
      spawned_.push_back(c);
    }
    return c;
  }

  void Post(Body body) {
    auto* b = new Body(std::move(body));
    const int rc = coro_post(s_, RunPostBody, b);
    if (rc != 0) {
      delete b;
      ADD_FAILURE() << "coro_post: " << rc;
    }
  }

  // coro_sched_run on the test's scheduler.
  int Pump() { return coro_sched_run(s_); }

  coro_sched* s_ = nullptr;
  std::vector<coro*> spawned_;
};

// One fixture per subject, so test names read Subject.Promise.
class Sleep : public SchedTest {};
class Park : public SchedTest {};
class Wake : public SchedTest {};
class WaitContext : public SchedTest {};
class Event : public SchedTest {};
class Run : public SchedTest {};
class RunUntil : public SchedTest {};
class Poll : public SchedTest {};
class Step : public SchedTest {};
class IdleCpu : public SchedTest {};
class Stress : public SchedTest {};

// ===========================================================================
// coro_now and the units
// ===========================================================================

// coro_now() is CLOCK_MONOTONIC in nanoseconds: it lies between two reads of
// that clock, never goes backwards, and advances with real time.
TEST(Now, IsMonotonicClockNanoseconds) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t lo = static_cast<uint64_t>(ts.tv_sec) * CORO_SEC +
                      static_cast<uint64_t>(ts.tv_nsec);
  const uint64_t now = coro_now();
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t hi = static_cast<uint64_t>(ts.tv_sec) * CORO_SEC +
                      static_cast<uint64_t>(ts.tv_nsec);
  EXPECT_LE(lo, now);
  EXPECT_LE(now, hi);

  uint64_t previous = coro_now();
  const long reads = Iterations(200000);
  for (long i = 0; i < reads; ++i) {
    const uint64_t t = coro_now();
    ASSERT_GE(t, previous) << "read " << i << " went backwards";
    previous = t;
  }

  const uint64_t before = coro_now();
  SleepThread(10 * kMs);
  EXPECT_GE(coro_now() - before, 10 * kMs);
}

TEST(Units, AreNanosecondMultipliers) {
  static_assert(std::is_same<decltype(CORO_USEC), uint64_t>::value &&
                    std::is_same<decltype(CORO_MSEC), uint64_t>::value &&
                    std::is_same<decltype(CORO_SEC), uint64_t>::value,
                "the units are uint64_t nanoseconds");
  static_assert(std::is_same<decltype(coro_now()), uint64_t>::value,
                "coro_now() returns uint64_t nanoseconds");
  EXPECT_EQ(CORO_USEC, 1000u);
  EXPECT_EQ(CORO_MSEC, 1000u * 1000u);
  EXPECT_EQ(CORO_SEC, 1000u * 1000u * 1000u);
  // uint64_t arithmetic: a day of nanoseconds does not overflow.
  EXPECT_EQ(86400 * CORO_SEC, 86400000000000ull);
}

// ===========================================================================
// coro_sleep
// ===========================================================================

// Each sleep returns 0, and never before its deadline: the time read after
// waking is at least the time read before sleeping plus the duration.
TEST_F(Sleep, ReturnsZeroNeverBeforeItsDeadline) {
  const uint64_t durations[] = {0, 1, kUs, 50 * kUs, kMs, 5 * kMs, 20 * kMs};
  int finished = 0;
  for (uint64_t d : durations) {
    Go([&, d] {  // all at once
      const uint64_t before = coro_now();
      EXPECT_EQ(coro_sleep(d), 0);
      EXPECT_GE(coro_now(), before + d) << "woke early from sleep(" << d << ")";
      ++finished;
    });
  }
  Go([&] {  // one after another
    for (uint64_t d : durations) {
      const uint64_t before = coro_now();
      EXPECT_EQ(coro_sleep(d), 0);
      EXPECT_GE(coro_now(), before + d) << "woke early from sleep(" << d << ")";
    }
    ++finished;
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(finished, 8);
}

// Sleepers wake in deadline order, not in the order they started: sleeper
// i (the i-th started) sleeps (8 - i) steps, so the last one started has
// the earliest deadline, and they must wake last-started first.
//
// The library reads the clock inside coro_sleep(), at a moment the test
// cannot see, so each deadline is known within bounds: at least (the
// sleeper's own clock read just before the call + its duration), at most
// (the next clock read anyone takes after it + its duration), because that
// read comes after the sleeper has switched out, hence after the library's
// read. When one sleeper's upper bound is below another's lower bound, its
// deadline is certainly earlier and it must wake first: every such pair is
// checked.
//
// On a quiet machine the eight start within microseconds of each other,
// far less than a step, so every neighbouring pair is certain and the order
// is fully checked. On a loaded machine a stall between two starts may make
// a pair uncertain (their deadlines may really be in either order): then
// the round is run again with longer steps, until one round is certain of
// every pair.
TEST_F(Sleep, WakesInDeadlineOrderNotStartOrder) {
  constexpr int kSleepers = 8;
  const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
    const uint64_t step = room * 20 * kMs;
    SCOPED_TRACE("step " + std::to_string(step / kMs) + " ms");
    std::vector<uint64_t> before(kSleepers, 0), duration(kSleepers, 0);
    uint64_t after_all = 0;
    std::vector<int> woke;
    for (int i = 0; i < kSleepers; ++i) {
      duration[i] = static_cast<uint64_t>(kSleepers - i) * step;
      Go([&, i] {
        before[i] = coro_now();
        EXPECT_EQ(coro_sleep(duration[i]), 0);
        EXPECT_GE(coro_now(), before[i] + duration[i]) << "sleeper " << i
                                                       << " woke early";
        woke.push_back(i);
      });
    }
    // Queued behind the sleepers: runs once the last has started sleeping
    // (sleepers whose timers fire meanwhile queue up behind it).
    Go([&] { after_all = coro_now(); });
    EXPECT_EQ(Pump(), 0);
    if (woke.size() != static_cast<size_t>(kSleepers)) {
      ADD_FAILURE() << woke.size() << " of " << kSleepers << " sleepers woke";
      return true;  // nothing to retry: that is a failure already
    }

    // The bounds of each deadline, and each sleeper's place in the wake order.
    std::vector<uint64_t> lower(kSleepers), upper(kSleepers);
    std::vector<size_t> place(kSleepers);
    for (int i = 0; i < kSleepers; ++i) {
      const uint64_t next_read = i + 1 < kSleepers ? before[i + 1] : after_all;
      lower[i] = before[i] + duration[i];
      upper[i] = next_read + duration[i];
      place[static_cast<size_t>(woke[i])] = static_cast<size_t>(i);
    }
    for (int a = 0; a < kSleepers; ++a) {
      for (int b = 0; b < kSleepers; ++b) {
        if (upper[a] < lower[b]) {  // a's deadline is certainly earlier
          EXPECT_LT(place[a], place[b])
              << "sleeper " << a << " (deadline <= " << upper[a]
              << ") woke after sleeper " << b << " (deadline >= " << lower[b]
              << ")";
        }
      }
    }
    // Arranged: every sleeper's deadline is certainly earlier than that of
    // the one started just before it, so the order above is total.
    bool every_pair_certain = true;
    for (int i = 0; i + 1 < kSleepers; ++i) {
      if (!(upper[i + 1] < lower[i])) every_pair_certain = false;
    }
    if (every_pair_certain) {
      std::vector<int> expected;
      for (int i = kSleepers - 1; i >= 0; --i) expected.push_back(i);
      EXPECT_EQ(woke, expected);
    }
    return every_pair_certain;
  });
  EXPECT_TRUE(arranged) << "no round started its sleepers within one step "
                           "of each other, even with 1.28 s steps";
}

// A sleep never blocks the thread: the others run meanwhile. B is queued
// when A starts its 100 ms sleep, so B runs at once, before A wakes,
// however slow the machine. If B's three turns are over before A's deadline
// (as on any machine that is not stalled for 100 ms), A cannot have woken
// in between (never early), so the whole order is known.
TEST_F(Sleep, OthersRunWhileOneSleeps) {
  std::vector<std::string> log;
  uint64_t a_deadline_at_least = 0, b_done_at = 0;
  Go([&] {
    log.push_back("A sleeps");
    a_deadline_at_least = coro_now() + 100 * kMs;
    EXPECT_EQ(coro_sleep(100 * kMs), 0);
    EXPECT_GE(coro_now(), a_deadline_at_least) << "A woke early";
    log.push_back("A wakes");
  });
  Go([&] {
    for (int i = 0; i < 3; ++i) {
      log.push_back("B " + std::to_string(i));
      b_done_at = coro_now();
      EXPECT_EQ(coro_yield(), 0);
    }
  });
  EXPECT_EQ(Pump(), 0);
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[0], "A sleeps");
  EXPECT_EQ(log[1], "B 0") << "B did not run while A slept";
  std::vector<std::string> b_only;
  for (const std::string& entry : log)
    if (entry[0] == 'B') b_only.push_back(entry);
  EXPECT_EQ(b_only, (std::vector<std::string>{"B 0", "B 1", "B 2"}));
  if (b_done_at < a_deadline_at_least) {
    EXPECT_EQ(log, (std::vector<std::string>{"A sleeps", "B 0", "B 1", "B 2",
                                             "A wakes"}));
  }
}

// coro_sleep(0) goes through the timers: every coroutine that was ready
// runs before the sleeper continues. Its timer is due at once, but the pump
// looks at its timers once per turn (a turn runs what was ready when it
// began, at least 16 entries): so B, which yielded during this turn, is
// queued before A's timer fires at the start of the next, and runs again
// first. (A pump that looked before every resume would have run A1 before
// B1.)
TEST_F(Sleep, ZeroLetsTheReadyRunOnceLikeAYield) {
  std::vector<std::string> log;
  Go([&] {
    log.push_back("A0");
    EXPECT_EQ(coro_sleep(0), 0);
    log.push_back("A1");
  });
  Go([&] {
    log.push_back("B0");
    EXPECT_EQ(coro_yield(), 0);
    log.push_back("B1");
  });
  Go([&] { log.push_back("C0"); });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"A0", "B0", "C0", "B1", "A1"}));
}

// A turn runs at least 16 entries (TURN_MIN_ENTRIES in sched.c): while
// fewer are ready, the ready ones run again within the turn, and the pump
// looks at the clock only when the turn ends. A sleeps for 0 beside B,
// which keeps yielding: the first turn is A and 15 resumes of B; A's timer
// fires as the second turn begins, behind B, so A continues after exactly
// 16 of B's resumes. (With turns of what was ready, 2 here, A would
// continue after 2; a pump that looked at its timers only when idle,
// after all 48.)
TEST_F(Sleep, ATurnRunsAtLeastSixteenEntries) {
  const int kTurnMin = coro_test::kTurnMinEntries;
  int b_resumes = 0;
  int b_resumes_when_a_continued = -1;
  Go([&] {
    EXPECT_EQ(coro_sleep(0), 0);
    b_resumes_when_a_continued = b_resumes;
  });
  Go([&] {
    for (int i = 0; i < 3 * kTurnMin; ++i) {
      ++b_resumes;
      EXPECT_EQ(coro_yield(), 0);
    }
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(b_resumes_when_a_continued, kTurnMin);
}

// A wake does not end a sleep (it returns 0 at its deadline, not earlier),
// and the wake's permit is kept: the next park returns 0 at once, without
// suspending (nobody else runs in between).
TEST_F(Sleep, WakeDoesNotEndItAndThePermitWaitsForTheNextPark) {
  std::vector<std::string> log;
  coro* a = Spawn([&] {
    const uint64_t before = coro_now();
    EXPECT_EQ(coro_sleep(50 * kMs), 0);
    EXPECT_GE(coro_now(), before + 50 * kMs) << "the wake ended the sleep";
    log.push_back("A slept");
    EXPECT_EQ(coro_park_for(kNever), 0);  // the permit
    log.push_back("A parked on the permit");
  });
  Go([&] {
    EXPECT_EQ(coro_wake(a), 0);
    log.push_back("B woke A");
    EXPECT_EQ(coro_yield(), 0);
    log.push_back("B yielded");
  });
  Go([&] {
    EXPECT_EQ(coro_sleep(50 * kMs), 0);  // set just after A's: fires after it
    log.push_back("C slept");
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(log, (std::vector<std::string>{"B woke A", "B yielded", "A slept",
                                           "A parked on the permit",
                                           "C slept"}));
}

// ===========================================================================
// Waiting needs a scheduled coroutine: EPERM everywhere else
// ===========================================================================

// Every waiting call, with every kind of deadline, returns EPERM at once.
void ExpectEveryWaitIsEperm(const char* where) {
  coro_event unset, set_manual, set_auto;
  ASSERT_EQ(coro_event_init(&unset, false, false), 0);
  ASSERT_EQ(coro_event_init(&set_manual, true, true), 0);
  ASSERT_EQ(coro_event_init(&set_auto, false, true), 0);

  EXPECT_EQ(coro_sleep(0), EPERM) << where;
  EXPECT_EQ(coro_sleep(kMs), EPERM) << where;
  EXPECT_EQ(coro_park(), EPERM) << where;
  EXPECT_EQ(coro_park_for(0), EPERM) << where;
  EXPECT_EQ(coro_park_for(kNever), EPERM) << where;
  EXPECT_EQ(coro_park_until(0), EPERM) << where;
  EXPECT_EQ(coro_park_until(UINT64_MAX), EPERM) << where;
  EXPECT_EQ(coro_event_await(&unset), EPERM) << where;
  EXPECT_EQ(coro_event_await_for(&unset, 0), EPERM) << where;
  EXPECT_EQ(coro_event_await_for(&unset, kNever), EPERM) << where;
  EXPECT_EQ(coro_event_await(&set_manual), EPERM) << where;
  EXPECT_EQ(coro_event_await_for(&set_manual, kNever), EPERM) << where;
  EXPECT_EQ(coro_event_await(&set_auto), EPERM) << where;
  EXPECT_EQ(coro_event_await_for(&set_auto, kNever), EPERM) << where;

  EXPECT_EQ(coro_event_destroy(&unset), 0);
  EXPECT_EQ(coro_event_destroy(&set_manual), 0);
  EXPECT_EQ(coro_event_destroy(&set_auto), 0);
}

TEST(Wait, OnTheThreadsOwnStackIsEperm) {
  ExpectEveryWaitIsEperm("on the thread's own stack");
}

// A post runs on the pump, not in a coroutine.
TEST_F(WaitContext, InAPostIsEperm) {
  bool ran = false;
  Post([&] {
    ExpectEveryWaitIsEperm("in a post");
    ran = true;
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(ran);
}

// A post of a pump that a coroutine of another scheduler entered runs on
// that coroutine's stack, so coro_self() is the coroutine; the code running
// is still a post, and a wait there would suspend the other scheduler's
// coroutine with this pump inside it.
void PostTriesToWait(coro_sched*, void* arg) {
  ExpectEveryWaitIsEperm("in a post of a pump a coroutine entered");
  *static_cast<bool*>(arg) = true;
}

TEST_F(WaitContext, InAPostOfAPumpACoroutineEnteredIsEperm) {
  bool ran = false;
  Go([&] {
    coro_sched* inner = coro_sched_create();
    ASSERT_NE(inner, nullptr);
    ASSERT_EQ(coro_post(inner, PostTriesToWait, &ran), 0);
    EXPECT_EQ(coro_sched_run(inner), 0);
    EXPECT_EQ(coro_sched_destroy(inner), 0);
    EXPECT_EQ(coro_sleep(0), 0);  // the coroutine itself can still wait
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(ran);
}

void* HandMadeTriesToWait(void* arg) {
  ExpectEveryWaitIsEperm(static_cast<const char*>(arg));
  // A coroutine of coro_create() is not one coro_wake() can wake.
  EXPECT_EQ(coro_wake(coro_self()), EINVAL);
  return arg;
}

// A coroutine of coro_create(), resumed by hand, has no scheduler.
TEST(Wait, InAHandMadeCoroutineIsEperm) {
  char where[] = "in a hand-made coroutine";
  coro* c = coro_create(HandMadeTriesToWait, where, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_destroy(c), 0);
}

// Even when a scheduled coroutine resumes it: what counts is the running
// coroutine, and that one has no scheduler.
TEST_F(WaitContext, InAHandMadeCoroutineInsideAScheduledOneIsEperm) {
  bool ran = false;
  Go([&] {
    char where[] = "in a hand-made coroutine resumed by a scheduled one";
    coro* c = coro_create(HandMadeTriesToWait, where, 0);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(coro_resume(c), 0);
    EXPECT_EQ(coro_status(c), CORO_DONE);
    EXPECT_EQ(coro_destroy(c), 0);
    EXPECT_EQ(coro_sleep(0), 0);  // the scheduled one can still wait
    ran = true;
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(ran);
}

// ===========================================================================
// coro_park, coro_park_for, coro_park_until and coro_wake: permits
// ===========================================================================

// A park without a permit suspends until a wake; the wake does not switch
// (the waker goes on), and the park returns 0.
TEST_F(Park, WaitsForAWakeAndReturnsZero) {
  std::vector<std::string> log;
  coro* a = Spawn([&] {
    log.push_back("A parks");
    EXPECT_EQ(coro_park(), 0);
    log.push_back("A woken");
  });
  Go([&] {
    log.push_back("B wakes A");
    EXPECT_EQ(coro_wake(a), 0);
    log.push_back("B goes on");
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"A parks", "B wakes A", "B goes on",
                                           "A woken"}));
}

// A wake that comes before the park leaves a permit: the park returns 0 at
// once, without suspending (C, queued behind A, does not run in between).
TEST_F(Park, WakeBeforeParkLeavesAPermitAndParkReturnsAtOnce) {
  std::vector<std::string> log;
  coro* a = nullptr;
  Go([&] {
    EXPECT_EQ(coro_wake(a), 0);  // A is queued, not parked yet
    log.push_back("B woke A");
  });
  a = Spawn([&] {
    log.push_back("A parks");
    EXPECT_EQ(coro_park(), 0);
    log.push_back("A back");
  });
  Go([&] { log.push_back("C"); });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log,
            (std::vector<std::string>{"B woke A", "A parks", "A back", "C"}));
}

// A coroutine may wake itself: that leaves it a permit.
TEST_F(Park, WakingYourselfLeavesAPermit) {
  std::vector<std::string> log;
  Go([&] {
    EXPECT_EQ(coro_wake(coro_self()), 0);
    EXPECT_EQ(coro_park_for(kNever), 0);
    log.push_back("A");
  });
  Go([&] { log.push_back("B"); });
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(log, (std::vector<std::string>{"A", "B"}));
}

// Permits do not add up: two wakes, then the first park takes the one
// permit and the second blocks until its timeout.
TEST_F(Park, TwoWakesLeaveOnePermit) {
  coro* a = nullptr;
  Go([&] {
    EXPECT_EQ(coro_wake(a), 0);
    EXPECT_EQ(coro_wake(a), 0);
  });
  a = Spawn([&] {
    EXPECT_EQ(coro_park(), 0);
    const uint64_t before = coro_now();
    EXPECT_EQ(coro_park_for(20 * kMs), ETIMEDOUT);
    EXPECT_GE(coro_now(), before + 20 * kMs);
  });
  EXPECT_EQ(Pump(), 0);
}

// park_for times out with ETIMEDOUT, never before its deadline. A zero
// timeout times out at once.
TEST_F(Park, ForTimesOutNoEarlierThanItsDeadline) {
  const uint64_t durations[] = {0, 1, kUs, 100 * kUs, kMs, 20 * kMs};
  int finished = 0;
  for (uint64_t d : durations) {
    Go([&, d] {
      const uint64_t before = coro_now();
      EXPECT_EQ(coro_park_for(d), ETIMEDOUT) << "park_for(" << d << ")";
      EXPECT_GE(coro_now(), before + d) << "park_for(" << d << ") was early";
      ++finished;
    });
  }
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(finished, 6);
}

// Woken before its timeout, park_for returns 0, and its timer is gone: the
// pump does not wait for the stale 10 s deadline.
TEST_F(Park, ForWokenBeforeTheTimeoutReturnsZeroPromptly) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_for(kNever); });
  Go([&] { EXPECT_EQ(coro_wake(a), 0); });
  // Keeps the pump busy with timers after A is done, so a stale timer of A's
  // would be seen (and fired on a finished coroutine).
  Go([&] {
    for (int i = 0; i < 5; ++i) EXPECT_EQ(coro_sleep(kMs), 0);
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(result, 0);
}

// The same, seen through poll: once the woken park's timer (200 ms) is
// removed, a poll with nothing ready sleeps until the next real timer (a
// 400 ms sleeper), not until the stale one.
//
// That shows only if the third poll starts before the stale deadline would
// have come (else both are due, and nothing tells them apart): the clock
// says whether it did, and if a stall made it late, the attempt is run
// again with longer timers.
TEST_F(Park, WokenParkLeavesNoStaleTimerBehind) {
  const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
    SCOPED_TRACE("room x" + std::to_string(room));
    const uint64_t park_ns = room * 200 * kMs, sleep_ns = room * 400 * kMs;
    int park_result = -1;
    uint64_t sleeper_deadline = 0;
    bool sleeper_done = false;
    coro* a = Spawn([&] { park_result = coro_park_for(park_ns); });
    Go([&] { EXPECT_EQ(coro_wake(a), 0); });
    Go([&] {
      sleeper_deadline = coro_now() + sleep_ns;
      EXPECT_EQ(coro_sleep(sleep_ns), 0);
      sleeper_done = true;
    });
    // A's (stale) deadline would come no earlier than this.
    const uint64_t stale_at_least = coro_now() + park_ns;
    EXPECT_EQ(coro_sched_poll_for(s_, 0), 3u);  // A parks, B wakes, C sleeps
    const size_t second = coro_sched_poll_for(s_, 0);  // A returns
    EXPECT_EQ(park_result, 0);
    if (coro_now() >= stale_at_least) {
      // Stalled: C's timer may be due already. Finish, and try again.
      EXPECT_EQ(Pump(), 0);
      EXPECT_TRUE(sleeper_done);
      return false;
    }
    // Neither timer can have fired yet (never early): exactly A ran.
    EXPECT_EQ(second, 1u);
    EXPECT_EQ(coro_sched_alive(s_), 1u);
    EXPECT_EQ(coro_sched_poll_for(s_, kNever), 1u);  // wakes for the sleeper
    EXPECT_TRUE(sleeper_done) << "the poll woke for a stale timer";
    EXPECT_GE(coro_now(), sleeper_deadline);
    EXPECT_EQ(Pump(), 0);  // (nothing left, unless the checks above failed)
    return true;
  });
  EXPECT_TRUE(arranged) << "every attempt was stalled past its timers";
}

// A deadline already past times out at once, without suspending — unless a
// permit is held, which the park consumes and returns 0.
TEST_F(Park, UntilAPastDeadlineTimesOutAtOnceUnlessAPermitIsHeld) {
  std::vector<std::string> log;
  Go([&] {
    log.push_back("A0");
    EXPECT_EQ(coro_park_until(0), ETIMEDOUT);
    EXPECT_EQ(coro_park_until(coro_now()), ETIMEDOUT);
    EXPECT_EQ(coro_park_for(0), ETIMEDOUT);
    log.push_back("A1");
    EXPECT_EQ(coro_wake(coro_self()), 0);
    EXPECT_EQ(coro_park_until(0), 0);  // the permit
    EXPECT_EQ(coro_park_until(0), ETIMEDOUT);  // consumed
    log.push_back("A2");
  });
  Go([&] { log.push_back("B"); });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"A0", "A1", "A2", "B"}));
}

TEST_F(Park, UntilTimesOutNoEarlierThanItsDeadline) {
  Go([&] {
    const uint64_t deadline = coro_now() + 20 * kMs;
    EXPECT_EQ(coro_park_until(deadline), ETIMEDOUT);
    EXPECT_GE(coro_now(), deadline);
  });
  EXPECT_EQ(Pump(), 0);
}

TEST_F(Park, UntilWokenBeforeTheDeadlineReturnsZero) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_until(coro_now() + kNever); });
  Go([&] { EXPECT_EQ(coro_wake(a), 0); });
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(result, 0);
}

// Timeouts so large that now + timeout passes the end of time mean "never":
// they do not wrap around into the past (which would time out at once).
TEST_F(Park, HugeTimeoutsMeanNeverNotThePast) {
  std::vector<int> results;
  coro* a = Spawn([&] {
    results.push_back(coro_park_for(UINT64_MAX));
    results.push_back(coro_park_for(UINT64_MAX - coro_now() + 1));
    results.push_back(coro_park_until(UINT64_MAX));
  });
  Go([&] {
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(coro_wake(a), 0);  // A is parked: it becomes ready
      EXPECT_EQ(coro_yield(), 0);  // A runs and parks again
    }
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(results, (std::vector<int>{0, 0, 0}));
}

// Many parkers, all parked before a common deadline that is not far off.
// A coroutine's first run costs far more than a later one (its stack is
// faulted in; the sanitizers and Valgrind set up their view of it), and a
// busy machine may stall the thread at any time. So the parkers start and
// wait at a gate; the opener lets them through a first stage and times that
// pass, then sets the deadlines' base to a few such passes from now, and
// lets them through the second stage, after which each parks at once.
//
// `room` multiplies that margin: a test whose parkers did not all park in
// time (a stall longer than the margin) runs again with more room (see
// RetryWithMoreRoom in harness.h).
class Gate {
 public:
  explicit Gate(uint64_t room = 1) : room_(room) {
    EXPECT_EQ(coro_event_init(&first_, true, false), 0);
    EXPECT_EQ(coro_event_init(&second_, true, false), 0);
  }
  ~Gate() {
    EXPECT_EQ(coro_event_destroy(&first_), 0);
    EXPECT_EQ(coro_event_destroy(&second_), 0);
  }

  // In each parker, before it computes its deadline.
  void Pass() {
    EXPECT_EQ(coro_event_await(&first_), 0);
    EXPECT_EQ(coro_event_await(&second_), 0);
  }

  // In the opener: a coroutine queued after every parker. Returns when the
  // parkers are through (they run next, in the order they came).
  void Open() {
    const uint64_t start = coro_now();
    EXPECT_EQ(coro_event_set(&first_), 0);
    EXPECT_EQ(coro_yield(), 0);  // every parker passes the first stage
    const uint64_t pass = coro_now() - start;
    base_ = coro_now() + room_ * (4 * pass + 50 * kMs);
    EXPECT_EQ(coro_event_set(&second_), 0);
  }

  // The deadlines' base: valid once Open() has returned.
  uint64_t base() const { return base_; }

 private:
  uint64_t room_;
  coro_event first_, second_;
  uint64_t base_ = 0;
};

// Equal deadlines time out in the order they were set. Thirty coroutines
// park in order 0..29 until one of three shared absolute deadlines (later
// parkers get earlier deadlines); they must time out sorted by (deadline,
// park order).
//
// A parker that got to park only after its deadline (the machine stalled
// for longer than the gate's margin) times out at once, without entering
// the timers; the others must still be in order. The attempt counts as
// arranged when none was late, and is run again with more room otherwise.
TEST_F(Park, EqualDeadlinesTimeOutInTheOrderTheyWereSet) {
  constexpr int kParkers = 30;
  const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
    SCOPED_TRACE("room x" + std::to_string(room));
    Gate gate(room);
    auto deadline_of = [&](int i) {
      return gate.base() + static_cast<uint64_t>(2 - i % 3) * 10 * kMs;
    };
    uint64_t events = 0;  // bumped by every park and every return
    std::vector<bool> at_once(kParkers, false);
    std::vector<int> timed_out;
    for (int i = 0; i < kParkers; ++i) {
      Go([&, i] {
        gate.Pass();
        const uint64_t seen = ++events;
        EXPECT_EQ(coro_park_until(deadline_of(i)), ETIMEDOUT);
        at_once[i] = events == seen;  // nobody ran: it did not suspend
        ++events;
        EXPECT_GE(coro_now(), deadline_of(i));
        timed_out.push_back(i);
      });
    }
    Go([&] { gate.Open(); });
    EXPECT_EQ(Pump(), 0);
    std::vector<int> expected, in_heap;
    for (int i = 0; i < kParkers; ++i)
      if (!at_once[i]) expected.push_back(i);
    std::stable_sort(expected.begin(), expected.end(), [&](int x, int y) {
      return deadline_of(x) < deadline_of(y);
    });
    for (int i : timed_out)
      if (!at_once[i]) in_heap.push_back(i);
    EXPECT_EQ(in_heap, expected);
    return std::count(at_once.begin(), at_once.end(), true) == 0;
  });
  EXPECT_TRUE(arranged) << "in every attempt some parker parked too late";
}

// Timers leave the middle of the heap when their parkers are woken early;
// the rest still time out in (deadline, order set) order.
//
// Robust to a slow machine: a wake that comes before the parker's deadline
// must end its park with 0 (its timer cannot have fired: never early); one
// that comes later may find it timed out already (EINVAL once it has
// finished). A parker that times out at once, without entering the timers
// (it got to park only after its deadline), is left out of the order check.
// The attempt counts as arranged when most parkers went through the timers
// and many wakes came in time; otherwise it runs again with more room.
TEST_F(Park, WakingSomeTimedParkersLeavesTheRestInOrder) {
  constexpr int kParkers = 300;
  const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
    SCOPED_TRACE("room x" + std::to_string(room));
    Prng prng(3003);
    Gate gate(room);
    uint64_t events = 0;  // bumped by every park and return, and the waker
    std::vector<uint64_t> offset(kParkers), woken_at(kParkers, 0);
    std::vector<bool> to_wake(kParkers), at_once(kParkers, false);
    std::vector<int> result(kParkers, -1), wake_rc(kParkers, -1);
    std::vector<coro*> handles(kParkers);
    std::vector<int> timed_out;
    auto deadline = [&](int i) { return gate.base() + offset[i]; };
    for (int i = 0; i < kParkers; ++i) {
      offset[i] = prng.Below(40) * kMs;  // many ties
      to_wake[i] = prng.Below(2) == 0;
      handles[i] = Spawn([&, i] {
        gate.Pass();
        const uint64_t seen = ++events;
        result[i] = coro_park_until(deadline(i));
        at_once[i] = events == seen;
        ++events;
        if (result[i] == ETIMEDOUT) {
          EXPECT_GE(coro_now(), deadline(i)) << "parker " << i << " early";
          timed_out.push_back(i);
        }
      });
    }
    Go([&] {
      gate.Open();
      EXPECT_EQ(coro_yield(), 0);  // behind every parker: they all park
      ++events;
      for (int i = 0; i < kParkers; ++i) {
        if (!to_wake[i]) continue;
        woken_at[i] = coro_now();
        wake_rc[i] = coro_wake(handles[i]);
      }
    });
    EXPECT_EQ(Pump(), 0);

    std::vector<int> expected;
    int woken_in_time = 0, parked_late = 0;
    for (int i = 0; i < kParkers; ++i) {
      if (at_once[i]) {
        ++parked_late;
        continue;
      }
      if (to_wake[i] && woken_at[i] < deadline(i)) {
        ++woken_in_time;
        EXPECT_EQ(wake_rc[i], 0) << "parker " << i;
        EXPECT_EQ(result[i], 0) << "parker " << i << " was woken in time";
        continue;
      }
      if (to_wake[i]) {  // woken late: either outcome, but a consistent one
        EXPECT_TRUE(wake_rc[i] == 0 || wake_rc[i] == EINVAL) << wake_rc[i];
        if (wake_rc[i] == EINVAL) {
          EXPECT_EQ(result[i], ETIMEDOUT);
        }
      }
      if (result[i] == ETIMEDOUT) expected.push_back(i);
    }
    std::stable_sort(expected.begin(), expected.end(),
                     [&](int x, int y) { return offset[x] < offset[y]; });
    std::vector<int> timed_out_in_heap;
    for (int i : timed_out)
      if (!at_once[i]) timed_out_in_heap.push_back(i);
    EXPECT_EQ(timed_out_in_heap, expected);
    // Most went through the timers, and many were woken out of the heap.
    return parked_late < kParkers / 2 && woken_in_time > kParkers / 4;
  });
  EXPECT_TRUE(arranged) << "in every attempt most parkers were late";
}

// A timer cancelled by a wake stays in the heap, dead, until it reaches the
// top or the heap fills up and drops the dead (timer.c). Here one coroutine
// parks for 5 ms and is woken at once, thousands of times: its dead timers
// come due while it is parked again (a dead timer that fired would end
// that later park early), and they fill the heap over and over (it has
// room for about two per coroutine), while twenty parkers with near
// deadlines (many equal) are pending among them: every purge must keep
// those, in heap order. The parkers must time out in (deadline, park
// order) order; the churner may time out only if the machine stalled for
// 5 ms before the wake, and then never before its own deadline.
TEST_F(Park, ManyCancelledTimersNeverFireAndKeepTheOthersInOrder) {
  constexpr int kParkers = 20;
  const long rounds = Iterations(20000);
  const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
    SCOPED_TRACE("room x" + std::to_string(room));
    Gate gate(room);
    const uint64_t churn_timeout = room * 5 * kMs;
    auto deadline_of = [&](int i) {
      return gate.base() + static_cast<uint64_t>(3 - i % 4) * 10 * kMs;
    };
    uint64_t events = 0;  // bumped by every park and every return
    std::vector<bool> at_once(kParkers, false);
    std::vector<int> timed_out;
    long churner_woken = 0, churner_timed_out = 0;
    for (int i = 0; i < kParkers; ++i) {
      Go([&, i] {
        gate.Pass();
        const uint64_t seen = ++events;
        EXPECT_EQ(coro_park_until(deadline_of(i)), ETIMEDOUT);
        at_once[i] = events == seen;  // nobody ran: it did not suspend
        ++events;
        EXPECT_GE(coro_now(), deadline_of(i));
        timed_out.push_back(i);
      });
    }
    Go([&] { gate.Open(); });
    coro* churner = Spawn([&] {
      for (long r = 0; r < rounds; ++r) {
        const uint64_t parked_at = coro_now();
        if (coro_park_for(churn_timeout) == 0) {
          ++churner_woken;
        } else {
          ++churner_timed_out;
          EXPECT_GE(coro_now(), parked_at + churn_timeout)
              << "round " << r << ": a cancelled timer fired";
        }
      }
    });
    Go([&] {
      // Once per round (a wake that finds it not parked leaves a permit,
      // which its next park takes at once: still 0).
      for (long r = 0; r < rounds && coro_status(churner) != CORO_DONE;
           ++r) {
        coro_wake(churner);
        EXPECT_EQ(coro_yield(), 0);  // the churner returns and parks again
      }
    });
    EXPECT_EQ(Pump(), 0);
    EXPECT_EQ(churner_woken + churner_timed_out, rounds);
    std::vector<int> expected, in_heap;
    for (int i = 0; i < kParkers; ++i)
      if (!at_once[i]) expected.push_back(i);
    std::stable_sort(expected.begin(), expected.end(), [&](int x, int y) {
      return deadline_of(x) < deadline_of(y);
    });
    for (int i : timed_out)
      if (!at_once[i]) in_heap.push_back(i);
    EXPECT_EQ(in_heap, expected);
    return churner_timed_out == 0 &&
           std::count(at_once.begin(), at_once.end(), true) == 0;
  });
  EXPECT_TRUE(arranged) << "in every attempt the machine stalled";
}

// ===========================================================================
// coro_wake: errors and wakes from outside the pump
// ===========================================================================

TEST(WakeErrors, NullIsEinval) { EXPECT_EQ(coro_wake(nullptr), EINVAL); }

// A finished (joinable, not yet destroyed) coroutine cannot be woken.
TEST_F(Wake, FinishedCoroutineIsEinval) {
  coro* done = Spawn([] {});
  Spawn([&] {
    EXPECT_EQ(coro_wake(done), EINVAL);  // from a coroutine
  });
  EXPECT_EQ(Pump(), 0);
  ASSERT_EQ(coro_status(done), CORO_DONE);
  EXPECT_EQ(coro_wake(done), EINVAL);  // from the thread
}

void* YieldOnce(void*) {
  EXPECT_EQ(coro_yield(), 0);
  return nullptr;
}

// A coroutine of coro_create() is not run by a scheduler: EINVAL, in every
// state it can be in.
TEST(WakeErrors, HandMadeCoroutineIsEinval) {
  coro* c = coro_create(YieldOnce, nullptr, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(coro_wake(c), EINVAL);  // never started
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_wake(c), EINVAL);  // suspended mid-body
  ASSERT_EQ(coro_resume(c), 0);
  ASSERT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_wake(c), EINVAL);  // done
  EXPECT_EQ(coro_destroy(c), 0);
}

// In chapter 3 a coroutine belongs to its thread, and so does waking it.
TEST_F(Wake, FromAnotherThreadIsEperm) {
  CORO_SKIP_FROM_CHAPTER(4, "coro_wake is safe from any thread (ch04)");
  std::vector<int> results;
  coro* a = Spawn([&] {
    results.push_back(coro_park_for(kNever));
  });
  int rc = -1;
  OnAnotherThread([&] { rc = coro_wake(a); });  // queued, not started
  EXPECT_EQ(rc, EPERM);

  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + 20 * kMs), ETIMEDOUT);
  EXPECT_TRUE(results.empty()) << "a refused wake must leave no permit";
  rc = -1;
  OnAnotherThread([&] { rc = coro_wake(a); });  // parked
  EXPECT_EQ(rc, EPERM);
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + 20 * kMs), ETIMEDOUT);
  EXPECT_TRUE(results.empty()) << "a refused wake must not end the park";

  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(results, (std::vector<int>{0}));
}

// The owning thread may wake a parked coroutine from outside the pump (the
// pump is not running); the next pump continues it.
TEST_F(Wake, FromTheThreadOutsideThePumpContinuesAParkedCoroutine) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_for(kNever); });
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + 20 * kMs), ETIMEDOUT);
  EXPECT_EQ(result, -1);
  EXPECT_EQ(coro_wake(a), 0);
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(result, 0);
}

// ===========================================================================
// Events
// ===========================================================================

// Manual reset: one set wakes every waiter (in the order they came), and
// the event stays set: later waits return 0 at once.
TEST_F(Event, ManualResetWakesEveryWaiterAndStaysSet) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, false), 0);
  std::vector<int> woke;
  for (int i = 0; i < 3; ++i) {
    Go([&, i] {
      EXPECT_EQ(coro_event_await(&e), 0);
      woke.push_back(i);
    });
  }
  Go([&] {
    EXPECT_TRUE(woke.empty());
    EXPECT_EQ(coro_event_set(&e), 0);
    EXPECT_TRUE(woke.empty()) << "set does not switch";
    EXPECT_EQ(coro_yield(), 0);
    EXPECT_EQ(woke, (std::vector<int>{0, 1, 2}));
    // Still set: waits return at once, however many.
    EXPECT_EQ(coro_event_await(&e), 0);
    EXPECT_EQ(coro_event_await(&e), 0);
    EXPECT_EQ(coro_event_await_for(&e, 0), 0);
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// Auto reset: each set wakes exactly one waiter, the longest waiting, and
// the event stays unset after handing itself over.
TEST_F(Event, AutoResetWakesExactlyTheLongestWaitingOne) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  std::vector<int> woke;
  for (int i = 0; i < 3; ++i) {
    Go([&, i] {
      EXPECT_EQ(coro_event_await(&e), 0);
      woke.push_back(i);
    });
  }
  Go([&] {
    for (int round = 1; round <= 3; ++round) {
      EXPECT_EQ(coro_event_set(&e), 0);
      EXPECT_EQ(coro_yield(), 0);  // the woken one runs, then us
      EXPECT_EQ(woke.size(), static_cast<size_t>(round));
      // Handed over, not left set.
      EXPECT_EQ(coro_event_await_for(&e, 0), ETIMEDOUT) << "round " << round;
    }
    EXPECT_EQ(woke, (std::vector<int>{0, 1, 2}));
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// Auto reset with no waiter: a set is kept until one wait takes it; the
// next wait waits again.
TEST_F(Event, AutoResetWithNoWaiterStaysSetUntilAWaitTakesIt) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  EXPECT_EQ(coro_event_set(&e), 0);  // from the thread, nobody waiting
  EXPECT_EQ(coro_event_set(&e), 0);  // sets do not add up either
  std::vector<std::string> log;
  Go([&] {
    EXPECT_EQ(coro_event_await(&e), 0);  // takes it, without suspending
    log.push_back("A took it");
    const uint64_t before = coro_now();
    EXPECT_EQ(coro_event_await_for(&e, 20 * kMs), ETIMEDOUT);
    EXPECT_GE(coro_now(), before + 20 * kMs);
    log.push_back("A timed out");
  });
  Go([&] { log.push_back("B"); });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"A took it", "B", "A timed out"}));
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// reset clears a set event, manual or auto.
TEST_F(Event, ResetClearsIt) {
  for (bool manual : {true, false}) {
    coro_event e;
    ASSERT_EQ(coro_event_init(&e, manual, false), 0);
    EXPECT_EQ(coro_event_set(&e), 0);
    EXPECT_EQ(coro_event_reset(&e), 0);
    EXPECT_EQ(coro_event_reset(&e), 0);  // resetting an unset event is fine
    Go([&] {
      const uint64_t before = coro_now();
      EXPECT_EQ(coro_event_await_for(&e, 10 * kMs), ETIMEDOUT)
          << (manual ? "manual" : "auto");
      EXPECT_GE(coro_now(), before + 10 * kMs);
    });
    EXPECT_EQ(Pump(), 0);
    EXPECT_EQ(coro_event_destroy(&e), 0);
  }
}

// initially_set: a manual event starts set for every wait, an auto event
// for the first.
TEST_F(Event, InitiallySetStartsSet) {
  coro_event manual, once;
  ASSERT_EQ(coro_event_init(&manual, true, true), 0);
  ASSERT_EQ(coro_event_init(&once, false, true), 0);
  std::vector<std::string> log;
  Go([&] {
    EXPECT_EQ(coro_event_await(&manual), 0);
    EXPECT_EQ(coro_event_await(&manual), 0);
    EXPECT_EQ(coro_event_await(&once), 0);
    log.push_back("A did not wait");
    EXPECT_EQ(coro_event_await_for(&once, 0), ETIMEDOUT);
  });
  Go([&] { log.push_back("B"); });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"A did not wait", "B"}));
  EXPECT_EQ(coro_event_destroy(&manual), 0);
  EXPECT_EQ(coro_event_destroy(&once), 0);
}

// await_for times out with ETIMEDOUT, not early, and the waiter leaves the
// list: a later set with nobody else waiting leaves an auto event set (it is
// not handed to the gone waiter), and destroy is not EBUSY.
TEST_F(Event, AwaitForTimesOutAndLeavesTheWaiterList) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  Go([&] {
    const uint64_t before = coro_now();
    EXPECT_EQ(coro_event_await_for(&e, 20 * kMs), ETIMEDOUT);
    EXPECT_GE(coro_now(), before + 20 * kMs);
  });
  EXPECT_EQ(Pump(), 0);

  EXPECT_EQ(coro_event_set(&e), 0);  // nobody waits: it stays set
  bool took = false;
  Go([&] {
    EXPECT_EQ(coro_event_await_for(&e, 0), 0);
    took = true;
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(took);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// A waiter that times out from the middle of the list leaves it; the others
// keep their places.
TEST_F(Event, TimeoutInTheMiddleOfTheListKeepsTheOthersInOrder) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  std::vector<std::string> log;
  Go([&] {
    EXPECT_EQ(coro_event_await(&e), 0);
    log.push_back("first");
  });
  Go([&] {
    EXPECT_EQ(coro_event_await_for(&e, 20 * kMs), ETIMEDOUT);
    log.push_back("middle timed out");
  });
  Go([&] {
    EXPECT_EQ(coro_event_await(&e), 0);
    log.push_back("last");
  });
  Go([&] {
    EXPECT_EQ(coro_sleep(60 * kMs), 0);  // the middle one has timed out
    EXPECT_EQ(coro_event_set(&e), 0);
    EXPECT_EQ(coro_yield(), 0);
    EXPECT_EQ(coro_event_set(&e), 0);
    EXPECT_EQ(coro_yield(), 0);
    EXPECT_EQ(coro_event_await_for(&e, 0), ETIMEDOUT);  // nothing left over
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"middle timed out", "first",
                                           "last"}));
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// Set before the timeout, await_for returns 0 and its timer is gone: the
// pump does not wait for the stale 10 s deadline.
TEST_F(Event, AwaitForSetBeforeTheTimeoutReturnsZeroPromptly) {
  for (bool manual : {true, false}) {
    coro_event e;
    ASSERT_EQ(coro_event_init(&e, manual, false), 0);
    int result = -1;
    Go([&] { result = coro_event_await_for(&e, kNever); });
    Go([&] { EXPECT_EQ(coro_event_set(&e), 0); });
    Go([&] {
      for (int i = 0; i < 5; ++i) EXPECT_EQ(coro_sleep(kMs), 0);
    });
    const uint64_t start = coro_now();
    EXPECT_EQ(Pump(), 0);
    EXPECT_LT(Since(start), kPrompt);
    EXPECT_EQ(result, 0) << (manual ? "manual" : "auto");
    EXPECT_EQ(coro_event_destroy(&e), 0);
  }
}

// The thread may set an event from outside the pump; the next pump
// continues the waiters.
TEST_F(Event, SetFromTheThreadOutsideThePumpWakesTheWaiters) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, false), 0);
  int results[2] = {-1, -1};
  Go([&] { results[0] = coro_event_await_for(&e, kNever); });
  Go([&] { results[1] = coro_event_await_for(&e, kNever); });
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + 20 * kMs), ETIMEDOUT);
  EXPECT_EQ(results[0], -1);
  EXPECT_EQ(coro_event_set(&e), 0);
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(results[0], 0);
  EXPECT_EQ(results[1], 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// Destroying an event with waiters is EBUSY and changes nothing: the event
// still works, and once the waiters are gone destroy succeeds.
TEST_F(Event, DestroyWithWaitersIsEbusy) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  int result = -1;
  Go([&] { result = coro_event_await(&e); });
  Go([&] {
    EXPECT_EQ(coro_event_destroy(&e), EBUSY);
    EXPECT_EQ(coro_event_set(&e), 0);  // still a working event
    EXPECT_EQ(coro_yield(), 0);
    EXPECT_EQ(result, 0);
    EXPECT_EQ(coro_event_destroy(&e), 0);
  });
  EXPECT_EQ(Pump(), 0);
}

// After destroy the event is no longer one: every call is EINVAL, destroy
// included. It may be initialised again.
TEST_F(Event, UseAfterDestroyIsEinval) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, true), 0);
  ASSERT_EQ(coro_event_destroy(&e), 0);
  EXPECT_EQ(coro_event_set(&e), EINVAL);
  EXPECT_EQ(coro_event_reset(&e), EINVAL);
  EXPECT_EQ(coro_event_destroy(&e), EINVAL);
  Go([&] {
    EXPECT_EQ(coro_event_await(&e), EINVAL);
    EXPECT_EQ(coro_event_await_for(&e, 0), EINVAL);
    EXPECT_EQ(coro_event_await_for(&e, kNever), EINVAL);
  });
  EXPECT_EQ(Pump(), 0);

  ASSERT_EQ(coro_event_init(&e, true, true), 0);
  Go([&] { EXPECT_EQ(coro_event_await(&e), 0); });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// NULL, or an event never initialised (all zero bytes), is EINVAL.
TEST_F(Event, NullOrUninitialisedIsEinval) {
  EXPECT_EQ(coro_event_init(nullptr, true, false), EINVAL);
  EXPECT_EQ(coro_event_set(nullptr), EINVAL);
  EXPECT_EQ(coro_event_reset(nullptr), EINVAL);
  EXPECT_EQ(coro_event_destroy(nullptr), EINVAL);
  coro_event zero{};
  EXPECT_EQ(coro_event_set(&zero), EINVAL);
  EXPECT_EQ(coro_event_reset(&zero), EINVAL);
  EXPECT_EQ(coro_event_destroy(&zero), EINVAL);
  Go([&] {
    EXPECT_EQ(coro_event_await(nullptr), EINVAL);
    EXPECT_EQ(coro_event_await_for(nullptr, 0), EINVAL);
    EXPECT_EQ(coro_event_await_for(nullptr, kNever), EINVAL);
    EXPECT_EQ(coro_event_await(&zero), EINVAL);
    EXPECT_EQ(coro_event_await_for(&zero, kNever), EINVAL);
  });
  EXPECT_EQ(Pump(), 0);
}

// coro_wake does not end an event wait (it times out anyway); its permit is
// kept for the next park, which returns 0 at once.
TEST_F(Event, WakeDoesNotEndAnEventWait) {
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, false), 0);
  std::vector<std::string> log;
  coro* a = Spawn([&] {
    const uint64_t before = coro_now();
    EXPECT_EQ(coro_event_await_for(&e, 30 * kMs), ETIMEDOUT);
    EXPECT_GE(coro_now(), before + 30 * kMs);
    log.push_back("A timed out");
    EXPECT_EQ(coro_park(), 0);  // the permit
    log.push_back("A parked on the permit");
  });
  Go([&] {
    EXPECT_EQ(coro_wake(a), 0);
    log.push_back("B woke A");
    EXPECT_EQ(coro_yield(), 0);
    log.push_back("B yielded");
  });
  Go([&] {
    EXPECT_EQ(coro_sleep(100 * kMs), 0);
    log.push_back("C slept");
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(log, (std::vector<std::string>{"B woke A", "B yielded",
                                           "A timed out",
                                           "A parked on the permit",
                                           "C slept"}));
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// ===========================================================================
// coro_sched_run: EDEADLK when nothing can ever wake the parked
// ===========================================================================

// Only parked coroutines, no timer, nothing ready: on one thread nothing can
// wake them. run says EDEADLK; they stay parked; a wake and run finish them.
TEST_F(Run, OnlyParkedCoroutinesLeftIsEdeadlkAndTheyStayParked) {
  CORO_SKIP_FROM_CHAPTER(4, "run waits for a cross-thread wake (ch04)");
  std::vector<int> results(2, -1);
  coro* a = Spawn([&] { results[0] = coro_park(); });
  coro* b = Spawn([&] { results[1] = coro_park(); });
  EXPECT_EQ(Pump(), EDEADLK);
  EXPECT_EQ(coro_sched_alive(s_), 2u);
  EXPECT_EQ(coro_status(a), CORO_SUSPENDED);
  EXPECT_EQ(coro_sched_destroy(s_), EBUSY);
  EXPECT_EQ(Pump(), EDEADLK);  // still, and still harmless
  EXPECT_EQ(results, (std::vector<int>{-1, -1}));

  EXPECT_EQ(coro_wake(b), 0);
  EXPECT_EQ(Pump(), EDEADLK);  // b finished, a still parked
  EXPECT_EQ(results, (std::vector<int>{-1, 0}));
  EXPECT_EQ(coro_sched_alive(s_), 1u);

  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(results, (std::vector<int>{0, 0}));
}

// Event waiters without a timeout count as parked too.
TEST_F(Run, EventWaitersWithNoTimeoutAreEdeadlk) {
  CORO_SKIP_FROM_CHAPTER(4, "run waits for a cross-thread wake (ch04)");
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, false), 0);
  int result = -1;
  Go([&] { result = coro_event_await(&e); });
  EXPECT_EQ(Pump(), EDEADLK);
  EXPECT_EQ(coro_sched_alive(s_), 1u);
  EXPECT_EQ(coro_event_destroy(&e), EBUSY);
  EXPECT_EQ(coro_event_set(&e), 0);
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(result, 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// While a timer is pending, something will happen: run waits for it first,
// and says EDEADLK only once no timer is left.
TEST_F(Run, WaitsForPendingTimersBeforeSayingEdeadlk) {
  CORO_SKIP_FROM_CHAPTER(4, "run waits for a cross-thread wake (ch04)");
  int park_result = -1;
  bool slept = false;
  coro* a = Spawn([&] { park_result = coro_park(); });
  Go([&] {
    EXPECT_EQ(coro_sleep(30 * kMs), 0);
    slept = true;
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), EDEADLK);
  EXPECT_GE(Since(start), 30 * kMs);
  EXPECT_TRUE(slept);
  EXPECT_EQ(park_result, -1);
  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(park_result, 0);
}

// ===========================================================================
// coro_sched_run_until
// ===========================================================================

// 0 once nothing is alive, without waiting for the deadline.
TEST_F(RunUntil, ReturnsZeroOnceNothingIsAlive) {
  EXPECT_EQ(coro_sched_run_until(s_, 0), 0);  // nothing at all
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + kNever), 0);
  bool done = false;
  Go([&] {
    EXPECT_EQ(coro_sleep(20 * kMs), 0);
    done = true;
  });
  Post([] {});
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, start + kNever), 0);
  EXPECT_TRUE(done);
  EXPECT_GE(Since(start), 20 * kMs);
  EXPECT_LT(Since(start), kPrompt);
}

// The deadline comes first: ETIMEDOUT at (not before, not long after) the
// deadline, work remaining; a later run finishes it.
TEST_F(RunUntil, DeadlineFirstIsEtimedoutAndTheWorkRemains) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_for(kNever); });
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, start + 50 * kMs), ETIMEDOUT);
  EXPECT_GE(Since(start), 50 * kMs);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(coro_sched_alive(s_), 1u);
  EXPECT_EQ(result, -1);

  // A deadline already past: still ETIMEDOUT, at once.
  const uint64_t again = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, 0), ETIMEDOUT);
  EXPECT_LT(Since(again), kPrompt);

  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + kNever), 0);
  EXPECT_EQ(result, 0);
}

// The same with a sleeper: run_until stops at its deadline even though a
// timer is pending; the sleeper is not cut short.
TEST_F(RunUntil, StopsAtTheDeadlineWhileASleeperWaits) {
  uint64_t sleeper_deadline = 0;
  bool done = false;
  Go([&] {
    sleeper_deadline = coro_now() + 500 * kMs;
    EXPECT_EQ(coro_sleep(500 * kMs), 0);
    EXPECT_GE(coro_now(), sleeper_deadline);
    done = true;
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, start + 30 * kMs), ETIMEDOUT);
  EXPECT_GE(Since(start), 30 * kMs);
  EXPECT_FALSE(done);
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + kNever), 0);
  EXPECT_TRUE(done);
}

// Parked coroutines with no timer: run_until does not say EDEADLK, it waits
// for its deadline.
TEST_F(RunUntil, WithOnlyParkedCoroutinesWaitsForTheDeadline) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park(); });
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, start + 50 * kMs), ETIMEDOUT);
  EXPECT_GE(Since(start), 50 * kMs);
  EXPECT_EQ(result, -1);
  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(coro_sched_run_until(s_, coro_now() + kNever), 0);
  EXPECT_EQ(result, 0);
}

// A coroutine that is always ready (yields in a loop) must not keep
// run_until past its deadline. The coroutine gives up by itself after 20 s
// so that a failing library does not hang the test: the result (0 instead
// of ETIMEDOUT) says so, and the time bound is generous, far below 20 s.
//
// Regression: pump_until (sched.c) once checked the deadline only when the
// ready queue was empty, so run_until returned 0 when the coroutine gave up
// here instead of ETIMEDOUT after 50 ms.
TEST_F(RunUntil, ReturnsAtTheDeadlineEvenWhileWorkIsAlwaysReady) {
  bool stop = false;
  long turns = 0;
  const uint64_t give_up = coro_now() + 20 * CORO_SEC;
  Go([&] {
    while (!stop && coro_now() < give_up) {
      ++turns;
      EXPECT_EQ(coro_yield(), 0);
    }
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, start + 50 * kMs), ETIMEDOUT);
  EXPECT_GE(Since(start), 50 * kMs);
  EXPECT_LT(Since(start), 10 * CORO_SEC);
  EXPECT_GT(turns, 0);
  stop = true;
  EXPECT_EQ(Pump(), 0);
}

TEST(RunUntilErrors, NullIsEinval) {
  EXPECT_EQ(coro_sched_run_until(nullptr, 0), EINVAL);
  EXPECT_EQ(coro_sched_run_until(nullptr, UINT64_MAX), EINVAL);
}

TEST_F(RunUntil, InsideItsOwnPumpIsEperm) {
  bool ran = false;
  Go([&] {
    EXPECT_EQ(coro_sched_run_until(coro_sched_self(), coro_now() + kMs), EPERM);
    ran = true;
  });
  Post([&] {
    EXPECT_EQ(coro_sched_run_until(coro_sched_self(), coro_now() + kMs), EPERM);
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(ran);
}

TEST_F(RunUntil, FromAnotherThreadIsEperm) {
  bool ran = false;
  Go([&] { ran = true; });
  int rc = -1;
  OnAnotherThread([&] { rc = coro_sched_run_until(s_, coro_now() + kMs); });
  EXPECT_EQ(rc, EPERM);
  EXPECT_FALSE(ran);
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(ran);
}

// ===========================================================================
// coro_sched_poll_for / coro_sched_poll_until
// ===========================================================================

// poll returns how many entries ran: resumes plus posts.
TEST_F(Poll, ReturnsHowManyEntriesRanResumesPlusPosts) {
  int ran = 0;
  Go([&] { ++ran; });
  Spawn([&] { ++ran; });
  Post([&] { ++ran; });
  Go([&] { ++ran; });
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 4u);
  EXPECT_EQ(ran, 4);
  EXPECT_EQ(coro_sched_alive(s_), 0u);
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 0u);
  EXPECT_EQ(coro_sched_poll_until(s_, 0), 0u);
}

// Each call runs only what was ready when it looked: a coroutine that yields
// in a loop runs once per call, and the caller keeps control.
TEST_F(Poll, RunsAYieldingCoroutineOncePerCall) {
  int turns = 0;
  Go([&] {
    for (int i = 0; i < 5; ++i) {
      ++turns;
      EXPECT_EQ(coro_yield(), 0);
    }
  });
  for (int call = 1; call <= 5; ++call) {
    EXPECT_EQ(coro_sched_poll_for(s_, kNever), 1u) << "call " << call;
    EXPECT_EQ(turns, call);
  }
  EXPECT_EQ(coro_sched_poll_until(s_, coro_now() + kNever), 1u);  // returns
  EXPECT_EQ(coro_sched_alive(s_), 0u);
}

// The count poll reads (what was ready when it looked) stays exact after
// entries that did not come back: coroutines that waited, coroutines that
// ended, posts. Then a yielding coroutine still runs once per call; a count
// that kept any of them would let it run again within the call.
TEST_F(Poll, WhatWasReadyStaysExactAfterWaitsEndsAndPosts) {
  constexpr int kParkers = 3;
  std::vector<coro*> parkers;
  for (int i = 0; i < kParkers; ++i)
    parkers.push_back(Spawn([] { EXPECT_EQ(coro_park(), 0); }));
  Go([&] {
    for (coro* c : parkers) EXPECT_EQ(coro_wake(c), 0);
  });
  Post([] {});
  Post([] {});
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 3u + 1u + 2u);  // parks, waker, posts
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 3u);  // the parkers end
  EXPECT_EQ(coro_sched_alive(s_), 0u);
  int turns = 0;
  Go([&] {
    for (int i = 0; i < 3; ++i) {
      ++turns;
      EXPECT_EQ(coro_yield(), 0);
    }
  });
  for (int call = 1; call <= 3; ++call) {
    EXPECT_EQ(coro_sched_poll_for(s_, 0), 1u) << "call " << call;
    EXPECT_EQ(turns, call);
  }
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 1u);  // it returns
  EXPECT_EQ(coro_sched_alive(s_), 0u);
}

// What becomes ready during a call (a wake, a post) waits for the next call.
TEST_F(Poll, WhatBecomesReadyDuringACallWaitsForTheNext) {
  std::vector<std::string> log;
  coro* a = Spawn([&] {
    EXPECT_EQ(coro_park(), 0);
    log.push_back("A woken");
  });
  Go([&] {
    EXPECT_EQ(coro_wake(a), 0);
    EXPECT_EQ(coro_post(coro_sched_self(), RunPostBody,
                        new Body([&] { log.push_back("post"); })),
              0);
    log.push_back("B done");
  });
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 2u);  // A parks, B wakes and posts
  EXPECT_EQ(log, (std::vector<std::string>{"B done"}));
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 2u);  // A, then the post
  EXPECT_EQ(log, (std::vector<std::string>{"B done", "A woken", "post"}));
  EXPECT_EQ(coro_sched_alive(s_), 0u);
}

// Nothing ready: poll sleeps until the next timer (sooner than its timeout),
// then runs what became ready.
TEST_F(Poll, NothingReadySleepsUntilTheNextTimer) {
  uint64_t deadline = 0;
  bool done = false;
  Go([&] {
    deadline = coro_now() + 50 * kMs;
    EXPECT_EQ(coro_sleep(50 * kMs), 0);
    done = true;
  });
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 1u);  // starts sleeping
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_poll_for(s_, kNever), 1u);
  EXPECT_TRUE(done);
  EXPECT_GE(coro_now(), deadline);
  EXPECT_LT(Since(start), kPrompt);
}

// Nothing ready, next timer far away: poll sleeps until its timeout and
// returns 0.
TEST_F(Poll, NothingReadySleepsUntilTheTimeout) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_for(kNever); });
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 1u);  // A parks
  uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_poll_for(s_, 50 * kMs), 0u);
  EXPECT_GE(Since(start), 50 * kMs);
  EXPECT_LT(Since(start), kPrompt);

  start = coro_now();
  EXPECT_EQ(coro_sched_poll_until(s_, start + 30 * kMs), 0u);
  EXPECT_GE(Since(start), 30 * kMs);
  EXPECT_LT(Since(start), kPrompt);

  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(coro_sched_poll_for(s_, kNever), 1u);
  EXPECT_EQ(result, 0);
}

// With nothing alive at all, poll just sleeps for its timeout.
TEST_F(Poll, EmptySchedulerSleepsForTheTimeout) {
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_poll_for(s_, 30 * kMs), 0u);
  EXPECT_GE(Since(start), 30 * kMs);
  EXPECT_LT(Since(start), kPrompt);
}

// A deadline already past: nothing sleeps.
TEST_F(Poll, UntilAPastDeadlineDoesNotSleep) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_for(kNever); });
  EXPECT_EQ(coro_sched_poll_until(s_, 0), 1u);  // A parks
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_poll_until(s_, 0), 0u);
  EXPECT_EQ(coro_sched_poll_until(s_, coro_now()), 0u);
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 0u);
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(coro_sched_poll_until(s_, 0), 1u);
  EXPECT_EQ(result, 0);
}

// NULL: 0, at once (no sleeping on a bad argument).
TEST(PollErrors, NullIsZeroAtOnce) {
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_poll_for(nullptr, 0), 0u);
  EXPECT_EQ(coro_sched_poll_for(nullptr, kNever), 0u);
  EXPECT_EQ(coro_sched_poll_until(nullptr, 0), 0u);
  EXPECT_EQ(coro_sched_poll_until(nullptr, coro_now() + kNever), 0u);
  EXPECT_LT(Since(start), kPrompt);
}

// Inside its own pump (a coroutine or a post of it): 0, and step is false.
TEST_F(Poll, InsideItsOwnPumpIsZero) {
  bool ran = false;
  Go([&] {
    EXPECT_EQ(coro_sched_poll_for(coro_sched_self(), 0), 0u);
    EXPECT_EQ(coro_sched_poll_until(coro_sched_self(), 0), 0u);
    EXPECT_FALSE(coro_sched_step(coro_sched_self()));
    ran = true;
  });
  Go([] {});  // ready the whole time: a nested poll would have run it
  Post([&] {
    EXPECT_EQ(coro_sched_poll_for(coro_sched_self(), 0), 0u);
  });
  EXPECT_EQ(Pump(), 0);
  EXPECT_TRUE(ran);
}

TEST_F(Poll, FromAnotherThreadIsZero) {
  bool ran = false;
  Go([&] { ran = true; });
  size_t polled = 99, until = 99;
  OnAnotherThread([&] {
    polled = coro_sched_poll_for(s_, 0);
    until = coro_sched_poll_until(s_, 0);
  });
  EXPECT_EQ(polled, 0u);
  EXPECT_EQ(until, 0u);
  EXPECT_FALSE(ran);
  EXPECT_EQ(coro_sched_poll_for(s_, 0), 1u);
  EXPECT_TRUE(ran);
}

// ===========================================================================
// coro_sched_step and timers
// ===========================================================================

// step moves due timers to the ready queue before it picks an entry.
TEST_F(Step, FiresDueTimers) {
  bool done = false;
  Go([&] {
    EXPECT_EQ(coro_sleep(200 * kMs), 0);
    done = true;
  });
  // The library reads the clock inside coro_sleep, between these two reads:
  // the deadline lies in [before + 200 ms, after + 200 ms].
  const uint64_t before = coro_now();
  EXPECT_TRUE(coro_sched_step(s_));  // starts the sleep
  const uint64_t after = coro_now();
  const bool ran_early = coro_sched_step(s_);
  if (coro_now() < before + 200 * kMs) {
    EXPECT_FALSE(ran_early) << "not due yet";
  }
  while (coro_now() <= after + 200 * kMs)
    SleepThread(after + 200 * kMs + 1 - coro_now());
  if (!ran_early) {
    EXPECT_TRUE(coro_sched_step(s_));  // the timer fires
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(coro_sched_alive(s_), 0u);
  EXPECT_FALSE(coro_sched_step(s_));
}

// step never sleeps: with only a far-away timer it returns false at once.
TEST_F(Step, NeverSleeps) {
  int result = -1;
  coro* a = Spawn([&] { result = coro_park_for(kNever); });
  EXPECT_TRUE(coro_sched_step(s_));
  const uint64_t start = coro_now();
  EXPECT_FALSE(coro_sched_step(s_));
  EXPECT_FALSE(coro_sched_step(s_));
  EXPECT_LT(Since(start), kPrompt);
  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_TRUE(coro_sched_step(s_));
  EXPECT_EQ(result, 0);
}

// ===========================================================================
// An idle pump costs no CPU
// ===========================================================================

// Generous: the real cost is a few microseconds, but CI machines are noisy.
constexpr uint64_t kIdleCpuBudget = 50 * kMs;

// Runs a short sleep through `s` first, so that first-time costs (page
// faults on a new stack, Valgrind translating code) are not measured.
void WarmUp(coro_sched* s) {
  ASSERT_EQ(coro_go(s, [](void*) -> void* {
              EXPECT_EQ(coro_sleep(kMs), 0);
              EXPECT_EQ(coro_park_for(kMs), ETIMEDOUT);
              return nullptr;
            }, nullptr), 0);
  ASSERT_EQ(coro_sched_run(s), 0);
  coro_sched_poll_for(s, kMs);
}

TEST_F(IdleCpu, RunWaitingForASleeperUsesAlmostNoCpu) {
  ASSERT_NO_FATAL_FAILURE(WarmUp(s_));
  Go([] { EXPECT_EQ(coro_sleep(300 * kMs), 0); });
  const uint64_t cpu = ThreadCpuNs();
  const uint64_t start = coro_now();
  EXPECT_EQ(Pump(), 0);
  const uint64_t used = ThreadCpuNs() - cpu;
  EXPECT_GE(Since(start), 300 * kMs);
  EXPECT_LT(used, kIdleCpuBudget) << "CPU used over a 300 ms wait: "
                                  << used / kUs << " us";
}

TEST_F(IdleCpu, PollWithNothingToDoUsesAlmostNoCpu) {
  ASSERT_NO_FATAL_FAILURE(WarmUp(s_));
  const uint64_t cpu = ThreadCpuNs();
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_poll_for(s_, 300 * kMs), 0u);
  const uint64_t used = ThreadCpuNs() - cpu;
  EXPECT_GE(Since(start), 300 * kMs);
  EXPECT_LT(used, kIdleCpuBudget) << "CPU used over a 300 ms poll: "
                                  << used / kUs << " us";
}

TEST_F(IdleCpu, RunUntilWithOnlyParkedCoroutinesUsesAlmostNoCpu) {
  ASSERT_NO_FATAL_FAILURE(WarmUp(s_));
  int result = -1;
  coro* a = Spawn([&] { result = coro_park(); });
  const uint64_t cpu = ThreadCpuNs();
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s_, start + 300 * kMs), ETIMEDOUT);
  const uint64_t used = ThreadCpuNs() - cpu;
  EXPECT_GE(Since(start), 300 * kMs);
  EXPECT_LT(used, kIdleCpuBudget) << "CPU used over a 300 ms wait: "
                                  << used / kUs << " us";
  EXPECT_EQ(coro_wake(a), 0);
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(result, 0);
}

// ===========================================================================
// Random operations against a model of permits
// ===========================================================================
//
// Coroutines perform random sleeps, timed parks, wakes of random coroutines
// (themselves and finished ones included) and yields, with tiny durations.
// Everything runs on one thread, so the operations happen one at a time in
// an order the coroutines can log, and the model is updated at each one.
// The exact interleaving depends on time, so instead of predicting it the
// test checks what must hold in every interleaving:
//
//  - a sleep returns 0, never before its deadline;
//  - a park with a permit returns 0 at once, without suspending, and uses
//    the permit; wakes do not add up;
//  - a park without a permit returns 0 only if woken while parked;
//    otherwise ETIMEDOUT, never before its deadline; and if it was woken
//    but timed out anyway, the timer must have fired first (so the wake came
//    at or after the deadline) and that wake is kept as a permit;
//  - a wake of a finished coroutine is EINVAL, otherwise 0;
//  - every coroutine finishes (nothing lost).

struct ModelCoro {
  coro* handle = nullptr;
  bool permit = false;        // a wake not yet consumed by a park
  bool parked = false;        // inside coro_park_for without a permit
  int wakes_while_parked = 0;
  uint64_t first_wake_at = 0;  // coro_now() just before the first such wake
  bool done = false;
};

struct Model {
  explicit Model(uint64_t seed) : prng(seed) {}
  Prng prng;
  std::vector<ModelCoro> coros;
  long ops_each = 0;
  uint64_t max_wait = 0;  // the longest sleep or park, in nanoseconds
  uint64_t ops = 0;       // operations started so far, by anyone
  // What happened, to show the test exercised every case.
  long sleeps = 0, parks_woken = 0, parks_timed_out = 0, parks_on_permit = 0,
       late_wakes_kept = 0, wakes = 0, wakes_of_finished = 0, yields = 0;
};

struct ModelArg {
  Model* model;
  size_t self;
};

void* ModelCoroutine(void* arg) {
  Model& m = *static_cast<ModelArg*>(arg)->model;
  const size_t self = static_cast<ModelArg*>(arg)->self;
  for (long k = 0; k < m.ops_each; ++k) {
    ModelCoro& me = m.coros[self];
    ++m.ops;
    switch (m.prng.Below(4)) {
      case 0: {  // sleep
        const uint64_t d = m.prng.Below(m.max_wait + 1);
        const uint64_t before = coro_now();
        EXPECT_EQ(coro_sleep(d), 0);
        EXPECT_GE(coro_now(), before + d) << "sleep woke early";
        ++m.sleeps;
        break;
      }
      case 1: {  // park_for
        const uint64_t d = m.prng.Below(m.max_wait + 1);
        if (me.permit) {
          const uint64_t ops_before = m.ops;
          EXPECT_EQ(coro_park_for(d), 0) << "a permit was held";
          EXPECT_EQ(m.ops, ops_before) << "a park on a permit suspended";
          me.permit = false;
          ++m.parks_on_permit;
          break;
        }
        me.parked = true;
        me.wakes_while_parked = 0;
        const uint64_t before = coro_now();
        const int rc = coro_park_for(d);
        const uint64_t after = coro_now();
        me.parked = false;
        if (me.wakes_while_parked == 0) {
          EXPECT_EQ(rc, ETIMEDOUT) << "returned without a wake or permit";
          EXPECT_GE(after, before + d) << "park_for timed out early";
          ++m.parks_timed_out;
        } else if (rc == 0) {
          me.permit = me.wakes_while_parked >= 2;  // the rest: one permit
          ++m.parks_woken;
        } else {
          EXPECT_EQ(rc, ETIMEDOUT);
          EXPECT_GE(after, before + d) << "park_for timed out early";
          EXPECT_GE(me.first_wake_at, before + d)
              << "timed out although woken before its deadline";
          me.permit = true;  // the late wake is kept
          ++m.parks_timed_out;
          ++m.late_wakes_kept;
        }
        break;
      }
      case 2: {  // wake someone (maybe itself, maybe a finished one)
        ModelCoro& target = m.coros[m.prng.Below(m.coros.size())];
        const uint64_t at = coro_now();
        const int rc = coro_wake(target.handle);
        if (target.done) {
          EXPECT_EQ(rc, EINVAL) << "wake of a finished coroutine";
          ++m.wakes_of_finished;
        } else {
          EXPECT_EQ(rc, 0);
          if (target.parked) {
            if (target.wakes_while_parked++ == 0) target.first_wake_at = at;
          } else {
            target.permit = true;
          }
          ++m.wakes;
        }
        break;
      }
      case 3:  // yield
        EXPECT_EQ(coro_yield(), 0);
        ++m.yields;
        break;
    }
  }
  m.coros[self].done = true;
  return nullptr;
}

// One run of the model with waits of up to `max_wait`; returns whether the
// run saw every case (a park woken, a park timed out, ...). That depends on
// time: on a machine slowed down enough (Valgrind), every wait expires
// before anyone wakes it, so the caller retries with longer waits. The
// contract is checked in every run, whatever it saw.
bool RunPermitModel(coro_sched* s, uint64_t seed, uint64_t max_wait) {
  constexpr size_t kCoros = 16;
  Model m(seed);
  m.ops_each = Iterations(640);
  m.max_wait = max_wait;
  m.coros.resize(kCoros);
  std::vector<ModelArg> args(kCoros);
  for (size_t i = 0; i < kCoros; ++i) {
    args[i] = ModelArg{&m, i};
    m.coros[i].handle = coro_spawn(s, ModelCoroutine, &args[i]);
    EXPECT_NE(m.coros[i].handle, nullptr);
    if (m.coros[i].handle == nullptr) return false;
  }
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run(s), 0);
  const uint64_t elapsed = Since(start);
  EXPECT_EQ(coro_sched_alive(s), 0u);
  for (size_t i = 0; i < kCoros; ++i) {
    EXPECT_TRUE(m.coros[i].done) << "coroutine " << i << " was lost";
    EXPECT_EQ(coro_status(m.coros[i].handle), CORO_DONE);
    EXPECT_EQ(coro_destroy(m.coros[i].handle), 0);
  }
  EXPECT_EQ(m.ops, static_cast<uint64_t>(kCoros * m.ops_each));
  std::printf(
      "seed %llu, waits up to %llu us: %llu ops in %.0f ms: %ld sleeps, %ld "
      "parks woken, %ld timed out (%ld woken too late, kept as permit), %ld "
      "on a permit, %ld wakes, %ld of finished, %ld yields\n",
      static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(max_wait / kUs),
      static_cast<unsigned long long>(m.ops), elapsed / 1e6, m.sleeps,
      m.parks_woken, m.parks_timed_out, m.late_wakes_kept, m.parks_on_permit,
      m.wakes, m.wakes_of_finished, m.yields);
  return m.sleeps > 0 && m.parks_woken > 0 && m.parks_timed_out > 0 &&
         m.parks_on_permit > 0 && m.wakes > 0 && m.yields > 0;
}

TEST_F(Stress, RandomOperationsAgreeWithAPermitModel) {
  // 16 x 640 = 10,240 operations (a tenth under Valgrind), waits of up to
  // 200 us, more if the machine was too slow for the run to see every case.
  for (uint64_t seed : {1u, 20240603u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    EXPECT_TRUE(coro_test::RetryWithMoreRoom([&](uint64_t room) {
      return RunPermitModel(s_, seed, 200 * kUs * room);
    })) << "no run saw every case";
  }
}

// ===========================================================================
// Stress: many timers
// ===========================================================================

// How many coroutines the stress tests keep waiting at once: 10,000, a
// tenth of it under Valgrind (see Iterations), and 2,000 under
// ThreadSanitizer, which gives every coroutine a fiber that counts as a
// thread: it dies past 8,128 live threads, and its cost per switch grows
// with their number (4,000 took 20 s).
size_t ManyCoroutines() {
  const long n = Iterations(10000);
  return static_cast<size_t>(coro_test::kThreadSanitizer ? std::min(n, 2000L)
                                                         : n);
}

// 10,000 sleepers (fewer under Valgrind and TSan) with random durations
// under 50 ms wake in deadline order, none early.
//
// The library computes each deadline from its own clock read inside
// coro_sleep(), a moment the test cannot see; so each sleeper's deadline is
// known within bounds. Every coroutine appends a time stamp to one log when
// it starts and when it wakes. Sleeper j's deadline is at least
// (its start stamp + duration) and at most (the next stamp anyone logged
// after it, + duration), because the next stamp is taken after j has
// switched out, hence after the library read the clock. If i wakes before
// j, then deadline(i) <= deadline(j), so lower(i) <= upper(j) must hold.
TEST_F(Stress, TenThousandSleepersWakeInDeadlineOrder) {
  const size_t n = ManyCoroutines();
  struct Sleeper {
    uint64_t ns = 0, before = 0, after = 0;
    size_t stamp = 0;       // index of its start stamp in `stamps`
    size_t order = SIZE_MAX;  // its place in the wake order
    int result = -1;
  };
  std::vector<Sleeper> sleepers(n);
  std::vector<uint64_t> stamps;
  stamps.reserve(2 * n);
  size_t woken = 0;
  Prng prng(10000);
  ASSERT_EQ(coro_sched_set_stack_size(s_, 32 * 1024), 0);
  for (size_t i = 0; i < n; ++i) {
    sleepers[i].ns = prng.Below(50 * kMs);
    Go([&, i] {
      Sleeper& me = sleepers[i];
      me.stamp = stamps.size();
      me.before = coro_now();
      stamps.push_back(me.before);
      me.result = coro_sleep(me.ns);
      me.after = coro_now();
      stamps.push_back(me.after);
      me.order = woken++;
    });
  }
  EXPECT_EQ(Pump(), 0);
  ASSERT_EQ(woken, n);

  std::vector<size_t> by_wake(n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(sleepers[i].result, 0);
    ASSERT_LT(sleepers[i].order, n);
    by_wake[sleepers[i].order] = i;
  }
  uint64_t max_lower = 0;  // of every sleeper that woke so far
  size_t early = 0, out_of_order = 0;
  for (size_t j : by_wake) {
    const Sleeper& s = sleepers[j];
    const uint64_t lower = s.before + s.ns;
    const uint64_t upper = stamps[s.stamp + 1] + s.ns;
    if (s.after < lower && early++ < 5)
      ADD_FAILURE() << "sleeper " << j << " woke " << (lower - s.after)
                    << " ns early";
    if (max_lower > upper && out_of_order++ < 5)
      ADD_FAILURE() << "sleeper " << j << " (deadline <= " << upper
                    << ") woke after one whose deadline is >= " << max_lower;
    max_lower = std::max(max_lower, lower);
  }
  EXPECT_EQ(early, 0u);
  EXPECT_EQ(out_of_order, 0u);
}

// 10,000 parkers (fewer under Valgrind and TSan) until absolute deadlines
// on a 0.5 ms grid (so about a hundred share each deadline) time out exactly
// in (deadline, order parked) order. They start and wait at a Gate first. A
// parker that got to park only after its deadline would time out at once,
// without entering the timers; it is left out of the order check. The
// attempt counts as arranged when most parkers went through the timers; a
// stalled one runs again with more room.
TEST_F(Stress, TenThousandParkersTimeOutInDeadlineThenFifoOrder) {
  const size_t n = ManyCoroutines();
  struct Parker {
    uint64_t offset = 0;      // its deadline is base + offset
    uint64_t deadline = 0;
    size_t parked_as = 0;     // order of the park calls
    size_t order = SIZE_MAX;  // order of the returns
    bool at_once = false;     // returned without suspending
    int result = -1;
  };
  ASSERT_EQ(coro_sched_set_stack_size(s_, 32 * 1024), 0);
  const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
    SCOPED_TRACE("room x" + std::to_string(room));
    std::vector<Parker> parkers(n);
    size_t parks = 0, returns = 0;
    uint64_t events = 0;  // bumped by every park and every return
    Gate gate(room);
    Prng prng(20000);
    for (size_t i = 0; i < n; ++i) {
      parkers[i].offset = prng.Below(100) * 500 * kUs;
      Go([&, i] {
        Parker& me = parkers[i];
        gate.Pass();
        me.deadline = gate.base() + me.offset;
        me.parked_as = parks++;
        const uint64_t seen = ++events;
        me.result = coro_park_until(me.deadline);
        me.at_once = events == seen;
        ++events;
        me.order = returns++;
        if (coro_now() < me.deadline)
          ADD_FAILURE() << "parker " << i << " early";
      });
    }
    Go([&] { gate.Open(); });
    EXPECT_EQ(Pump(), 0);
    if (returns != n) {
      ADD_FAILURE() << returns << " of " << n << " parkers returned";
      return true;  // a failure already: nothing to retry
    }

    std::vector<size_t> by_return(n);
    size_t at_once = 0;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(parkers[i].result, ETIMEDOUT);
      by_return[parkers[i].order] = i;
      if (parkers[i].at_once) ++at_once;
    }
    const Parker* previous = nullptr;
    size_t out_of_order = 0;
    for (size_t i : by_return) {
      const Parker& p = parkers[i];
      if (p.at_once) continue;
      if (previous != nullptr &&
          std::make_pair(previous->deadline, previous->parked_as) >
              std::make_pair(p.deadline, p.parked_as) &&
          out_of_order++ < 5)
        ADD_FAILURE() << "parker " << i << " (deadline " << p.deadline
                      << ", parked #" << p.parked_as << ") timed out after one"
                      << " with deadline " << previous->deadline << ", parked #"
                      << previous->parked_as;
      previous = &p;
    }
    EXPECT_EQ(out_of_order, 0u);
    return at_once < n / 2;  // most parkers went through the timers
  });
  EXPECT_TRUE(arranged) << "in every attempt most parkers parked too late";
}

// Timers removed from the middle of the heap leave the others in order.
// 10,000 parkers (fewer under Valgrind and TSan) park until absolute
// deadlines on a 0.5 ms grid; then one coroutine wakes a random half of
// them, in random order, so each wake takes a timer out of the middle of
// the heap. The rest time out exactly in (deadline, order parked) order,
// none early. Three rounds on the same scheduler: the heap's slots and
// timer ids freed by one round are reused by the next.
//
// What a slow machine changes, and what it does not: a wake that comes
// before the parker's deadline (by the clock read just before the wake)
// finds its timer still pending, because a timer never fires early, so
// that park must return 0. A wake that comes later may find the timer fired
// already (the park returns ETIMEDOUT, the wake is kept as a permit), and
// either outcome is right. Every woken park that returned 0 was queued
// during the waker's turn, so it returns before every timeout that could
// only fire after that turn (a deadline after the waker's last clock
// read). A round counts as arranged when most parkers went through the
// timers and many wakes came in time; a stalled one runs again with more
// room.
TEST_F(Stress, TimersRemovedFromTheMiddleLeaveTheRestInOrder) {
  const size_t n = ManyCoroutines();
  struct Parker {
    coro* self = nullptr;
    uint64_t deadline = 0;
    size_t parked_as = 0;
    size_t order = SIZE_MAX;
    bool woken = false;        // chosen to be woken
    uint64_t woken_at = 0;     // coro_now() just before its wake
    bool at_once = false;      // returned without suspending
    int result = -1;
  };
  ASSERT_EQ(coro_sched_set_stack_size(s_, 32 * 1024), 0);
  Prng prng(30000);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const bool arranged = coro_test::RetryWithMoreRoom([&](uint64_t room) {
      SCOPED_TRACE("room x" + std::to_string(room));
      std::vector<Parker> parkers(n);
      size_t parks = 0, returns = 0, woken = 0;
      uint64_t events = 0, wakes_done_at = 0;
      Gate gate(room);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t offset = prng.Below(100) * 500 * kUs;
        Go([&, i, offset] {
          Parker& me = parkers[i];
          me.self = coro_self();
          gate.Pass();
          me.deadline = gate.base() + offset;
          me.parked_as = parks++;
          const uint64_t seen = ++events;
          me.result = coro_park_until(me.deadline);
          me.at_once = events == seen;
          ++events;
          me.order = returns++;
          if (me.result == ETIMEDOUT && coro_now() < me.deadline)
            ADD_FAILURE() << "parker " << i << " timed out early";
        });
      }
      Go([&] {
        gate.Open();
        EXPECT_EQ(coro_yield(), 0);  // every parker parks
        std::vector<size_t> chosen;
        for (size_t i = 0; i < n; ++i)  // (one that already returned is gone)
          if (prng.Below(2) == 0 && parkers[i].order == SIZE_MAX)
            chosen.push_back(i);
        for (size_t k = chosen.size(); k > 1; --k)  // shuffle
          std::swap(chosen[k - 1], chosen[prng.Below(k)]);
        for (size_t i : chosen) {
          parkers[i].woken = true;
          parkers[i].woken_at = coro_now();
          EXPECT_EQ(coro_wake(parkers[i].self), 0);
        }
        woken = chosen.size();
        wakes_done_at = coro_now();
      });
      EXPECT_EQ(Pump(), 0);
      if (returns != n) {
        ADD_FAILURE() << returns << " of " << n << " parkers returned";
        return true;  // a failure already: nothing to retry
      }
      EXPECT_LT(woken, 3 * n / 4);

      std::vector<size_t> by_return(n);
      size_t at_once = 0, woken_in_time = 0;
      size_t last_returned_zero = 0, first_later_timeout = SIZE_MAX;
      for (size_t i = 0; i < n; ++i) {
        const Parker& p = parkers[i];
        by_return[p.order] = i;
        if (p.at_once) ++at_once;
        if (p.woken && p.woken_at < p.deadline) {
          ++woken_in_time;
          EXPECT_EQ(p.result, 0) << "parker " << i << " was woken in time";
        } else if (p.woken) {
          EXPECT_TRUE(p.result == 0 || p.result == ETIMEDOUT)
              << "parker " << i << ": " << p.result;
        } else {
          EXPECT_EQ(p.result, ETIMEDOUT) << "parker " << i;
        }
        if (p.result == 0)
          last_returned_zero = std::max(last_returned_zero, p.order);
        if (p.result == ETIMEDOUT && !p.at_once && p.deadline > wakes_done_at)
          first_later_timeout = std::min(first_later_timeout, p.order);
      }
      EXPECT_LT(last_returned_zero, first_later_timeout)
          << "a woken parker returned after a timeout that fired later";
      const Parker* previous = nullptr;
      size_t out_of_order = 0;
      for (size_t i : by_return) {
        const Parker& p = parkers[i];
        if (p.result != ETIMEDOUT || p.at_once) continue;
        if (previous != nullptr &&
            std::make_pair(previous->deadline, previous->parked_as) >
                std::make_pair(p.deadline, p.parked_as) &&
            out_of_order++ < 5)
          ADD_FAILURE() << "parker " << i << " (deadline " << p.deadline
                        << ", parked #" << p.parked_as << ") timed out after"
                        << " one with deadline " << previous->deadline
                        << ", parked #" << previous->parked_as;
        previous = &p;
      }
      EXPECT_EQ(out_of_order, 0u);
      // Most went through the timers, and many were woken out of the heap.
      return at_once < n / 2 && woken_in_time > n / 4;
    });
    EXPECT_TRUE(arranged) << "in every attempt the wakes came too late";
  }
}


// ===========================================================================
// The trace of waiting (Chapter 2's trace, with Chapter 3's events)
// ===========================================================================
//
// Each wait is a mark ("sleep", "park", "await") with its coroutine and its
// deadline on the trace's time axis ("none" without one); a resume that
// ends in a wait says "parked"; a timer that fires is a "timer" mark; and
// each time a coroutine is made ready an arrow starts there, to end at the
// start of its next slice. The events are read back with trace_events.h:
// Summary() puts them on one line ("wake~1>#2" is arrow 1 starting,
// making coroutine #2 ready; "f~1" its end), and ArrowProblems() checks
// that every arrow's two ends agree.

// A test of the trace: the SchedTest scheduler, and a trace file that is
// stopped when the test ends, however it ends.
class TraceWaits : public SchedTest {
 protected:
  coro_trace_test::TraceFile file_;
};

using coro_trace_test::ArrowProblems;
using coro_trace_test::Deadline;
using coro_trace_test::EventsOf;
using coro_trace_test::IdNamed;
using coro_trace_test::Json;
using coro_trace_test::Ns;
using coro_trace_test::ResumesOf;
using coro_trace_test::SliceStartingAt;
using coro_trace_test::Summary;
using coro_trace_test::ThisThreadsLane;
using coro_trace_test::Trace;
using coro_trace_test::Within;

// Names the running coroutine (its slices carry the name).
void NameSelf(const char* name) {
  EXPECT_EQ(coro_set_name(coro_self(), name), 0);
}

// The resume of coroutine `id` during which instant `e` happened, or
// nullptr.
const Json* SliceAround(const Trace& t, const Json& e, double id) {
  for (const Json& x : t.events)
    if (x.Text("ph") == "X" && x.Text("cat") == "resume" && x.Arg("id") == id &&
        Within(e, x))
      return &x;
  return nullptr;
}

// Proves that each kind of wait is recorded as what it is, with its
// deadline, and that the slice that waits says "parked": a sleep (200 µs:
// its deadline is 200 µs after its call, which lies between the start of
// its slice and its mark), a park with an absolute deadline (the very
// deadline given, less the trace's time 0, which lies between the
// coro_now() read before and after the start), and an event await
// ("none"). A fourth coroutine ends the park and the await.
TEST_F(TraceWaits, EachWaitIsAMarkOfItsKindWithItsDeadline) {
  uint64_t before = 0, after = 0;
  ASSERT_EQ(file_.Start(&before, &after), 0);
  const uint64_t park_deadline = coro_now() + kNever;
  coro_event event;
  ASSERT_EQ(coro_event_init(&event, false, false), 0);
  coro* parker = nullptr;
  Spawn([] {
    NameSelf("sleeper");
    EXPECT_EQ(coro_sleep(200 * kUs), 0);
  });
  parker = Spawn([&] {
    NameSelf("parker");
    EXPECT_EQ(coro_park_until(park_deadline), 0);
  });
  Spawn([&] {
    NameSelf("awaiter");
    EXPECT_EQ(coro_event_await(&event), 0);
  });
  Go([&] {
    NameSelf("waker");
    EXPECT_EQ(coro_wake(parker), 0);
    EXPECT_EQ(coro_event_set(&event), 0);
  });
  ASSERT_EQ(Pump(), 0);
  ASSERT_EQ(coro_trace_stop(), 0);
  EXPECT_EQ(coro_event_destroy(&event), 0);

  const Trace t = file_.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t),
            "spawn#1 spawn#2 spawn#3 go#4 "
            "sleep#1 sleeper#1:parked park#2 parker#2:parked "
            "await#3 awaiter#3:parked "
            "wake~1>#2 wake~2>#3 waker#4:finished "
            "f~1 parker#2:finished f~2 awaiter#3:finished "
            "timer#1 wake~3>#1 f~3 sleeper#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");

  const std::vector<Json> waits = EventsOf(t, "i", "wait");
  ASSERT_EQ(waits.size(), 3u);
  for (const Json& wait : waits) {
    SCOPED_TRACE(wait.Text("name"));
    EXPECT_EQ(wait.Number("tid"), ThisThreadsLane());
    const Json* slice = SliceAround(t, wait, wait.Arg("coroutine"));
    ASSERT_NE(slice, nullptr) << "the mark is not within its coroutine's slice";
    EXPECT_EQ(slice->ArgText("left"), "parked");
  }
  const Json& sleep = waits[0];
  const long long sleep_from = Ns(SliceAround(t, sleep, sleep.Arg("coroutine"))->Number("ts"));
  EXPECT_GE(Deadline(sleep), sleep_from + static_cast<long long>(200 * kUs));
  EXPECT_LE(Deadline(sleep), Ns(sleep.Number("ts")) + static_cast<long long>(200 * kUs));
  EXPECT_GE(Deadline(waits[1]), static_cast<long long>(park_deadline - after));
  EXPECT_LE(Deadline(waits[1]), static_cast<long long>(park_deadline - before));
  EXPECT_EQ(waits[2].ArgText("deadline"), "none");
  EXPECT_EQ(Deadline(waits[2]), -1);
}

// Proves that a timer firing is recorded for the coroutine whose timer it
// is, never before its deadline, and makes it ready: an arrow starts
// after the timer, outside any slice (the pump fires timers between
// them), and ends at the start of the sleeper's next slice.
TEST_F(TraceWaits, ASleepersTimerFiresAtItsDeadlineThenAnArrowToItsNextSlice) {
  ASSERT_EQ(file_.Start(), 0);
  Go([] {
    NameSelf("sleeper");
    EXPECT_EQ(coro_sleep(kMs), 0);
  });
  ASSERT_EQ(Pump(), 0);
  ASSERT_EQ(coro_trace_stop(), 0);

  const Trace t = file_.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t),
            "go#1 sleep#1 sleeper#1:parked timer#1 wake~1>#1 f~1 "
            "sleeper#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");
  const std::vector<Json> waits = EventsOf(t, "i", "wait"),
                          timers = EventsOf(t, "i", "timer", "timer"),
                          starts = EventsOf(t, "s", "wake", "wake");
  const std::vector<Json> slices = ResumesOf(t, IdNamed(t, "sleeper"));
  ASSERT_EQ(waits.size(), 1u);
  ASSERT_EQ(timers.size(), 1u);
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(timers[0].Arg("coroutine"), slices[0].Arg("id"));
  EXPECT_EQ(timers[0].Number("tid"), ThisThreadsLane());
  EXPECT_GE(Ns(timers[0].Number("ts")), Deadline(waits[0]))
      << "the timer fired before its deadline";
  EXPECT_LE(Ns(timers[0].Number("ts")), Ns(starts[0].Number("ts")));
  EXPECT_FALSE(Within(starts[0], slices[0]) || Within(starts[0], slices[1]))
      << "the timer's arrow starts inside a slice";
  const std::vector<Json> ends = EventsOf(t, "f", "wake", "wake");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(Ns(ends[0].Number("ts")), Ns(slices[1].Number("ts")));
}

// Proves that coro_wake() from coroutine A of a parked B is an arrow from
// A's slice to B's next: its start is on this thread's lane, at a time
// within A's slice, for B; its end has the same id, on the same lane, at
// the very start of B's next slice (which comes after A's), and at no
// later slice of B (B yields once more after its park).
TEST_F(TraceWaits, AWakeIsAnArrowFromTheWakersSliceToTheWokensNextSlice) {
  ASSERT_EQ(file_.Start(), 0);
  coro* b = Spawn([] {
    NameSelf("B");
    EXPECT_EQ(coro_park(), 0);
    EXPECT_EQ(coro_yield(), 0);
  });
  Go([b] {
    NameSelf("A");
    EXPECT_EQ(coro_wake(b), 0);
    EXPECT_EQ(coro_yield(), 0);
  });
  ASSERT_EQ(Pump(), 0);
  ASSERT_EQ(coro_trace_stop(), 0);

  const Trace t = file_.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t),
            "spawn#1 go#2 park#1 B#1:parked wake~1>#1 A#2:yielded "
            "f~1 B#1:yielded A#2:finished B#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");
  const std::vector<Json> a = ResumesOf(t, IdNamed(t, "A")),
                          bs = ResumesOf(t, IdNamed(t, "B")),
                          starts = EventsOf(t, "s", "wake", "wake"),
                          ends = EventsOf(t, "f", "wake", "wake");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(bs.size(), 3u);
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0].Number("tid"), ThisThreadsLane());
  EXPECT_TRUE(Within(starts[0], a[0])) << "the arrow does not start in A's slice";
  EXPECT_EQ(starts[0].Arg("coroutine"), bs[0].Arg("id"));
  EXPECT_EQ(ends[0].Number("id"), starts[0].Number("id"));
  EXPECT_EQ(ends[0].Number("tid"), ThisThreadsLane());
  EXPECT_EQ(Ns(ends[0].Number("ts")), Ns(bs[1].Number("ts")))
      << "the arrow does not end where B's next slice starts";
  EXPECT_GE(Ns(bs[1].Number("ts")),
            Ns(a[0].Number("ts")) + Ns(a[0].Number("dur")));
}

// Proves that a park that times out shows its timer, then the arrow from
// it to the parker's next slice (in that order in time), and that the
// timer fired no earlier than the deadline the park mark gave.
TEST_F(TraceWaits, AParkThatTimesOutShowsItsTimerThenTheArrow) {
  ASSERT_EQ(file_.Start(), 0);
  Go([] { EXPECT_EQ(coro_park_for(kMs), ETIMEDOUT); });
  ASSERT_EQ(Pump(), 0);
  ASSERT_EQ(coro_trace_stop(), 0);

  const Trace t = file_.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t),
            "go#1 park#1 coro#1:parked timer#1 wake~1>#1 f~1 coro#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");
  const std::vector<Json> waits = EventsOf(t, "i", "wait", "park"),
                          timers = EventsOf(t, "i", "timer", "timer"),
                          starts = EventsOf(t, "s", "wake", "wake"),
                          ends = EventsOf(t, "f", "wake", "wake");
  ASSERT_EQ(waits.size(), 1u);
  ASSERT_EQ(timers.size(), 1u);
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  const long long deadline = Deadline(waits[0]);
  EXPECT_GE(deadline, Ns(waits[0].Number("ts")));
  EXPECT_LE(deadline, Ns(waits[0].Number("ts")) + static_cast<long long>(kMs));
  EXPECT_GE(Ns(timers[0].Number("ts")), deadline) << "the timer fired early";
  EXPECT_LE(Ns(timers[0].Number("ts")), Ns(starts[0].Number("ts")));
  EXPECT_LE(Ns(starts[0].Number("ts")), Ns(ends[0].Number("ts")));
  EXPECT_NE(SliceStartingAt(t, ThisThreadsLane(), Ns(ends[0].Number("ts"))),
            nullptr);
}

// Proves that a set of a manual-reset event draws one arrow from the
// setter's slice to each waiter, in the order they waited, and that a
// timed await carries its deadline (a plain one "none").
TEST_F(TraceWaits, AnEventSetIsAnArrowToEachWaiter) {
  ASSERT_EQ(file_.Start(), 0);
  coro_event event;
  ASSERT_EQ(coro_event_init(&event, true, false), 0);
  Go([&] {
    NameSelf("first");
    EXPECT_EQ(coro_event_await(&event), 0);
  });
  Go([&] {
    NameSelf("second");
    EXPECT_EQ(coro_event_await_for(&event, kNever), 0);
  });
  Go([&] {
    NameSelf("setter");
    EXPECT_EQ(coro_event_set(&event), 0);
  });
  ASSERT_EQ(Pump(), 0);
  ASSERT_EQ(coro_trace_stop(), 0);
  EXPECT_EQ(coro_event_destroy(&event), 0);

  const Trace t = file_.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t),
            "go#1 go#2 go#3 await#1 first#1:parked await#2 second#2:parked "
            "wake~1>#1 wake~2>#2 setter#3:finished "
            "f~1 first#1:finished f~2 second#2:finished");
  EXPECT_EQ(ArrowProblems(t), "");
  const std::vector<Json> setter = ResumesOf(t, IdNamed(t, "setter"));
  ASSERT_EQ(setter.size(), 1u);
  for (const Json& start : EventsOf(t, "s", "wake", "wake"))
    EXPECT_TRUE(Within(start, setter[0])) << "an arrow starts outside the set";
  const std::vector<Json> waits = EventsOf(t, "i", "wait", "await");
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(Deadline(waits[0]), -1);
  EXPECT_GE(Deadline(waits[1]), Ns(waits[1].Number("ts")));
  EXPECT_LE(Deadline(waits[1]),
            Ns(waits[1].Number("ts")) + static_cast<long long>(kNever));
  EXPECT_GE(Deadline(waits[1]),
            Ns(ResumesOf(t, IdNamed(t, "second"))[0].Number("ts")) +
                static_cast<long long>(kNever));
}

// Proves that an arrow means "made ready", not "coro_wake() was called":
// a wake of a coroutine that is not parked (it leaves a permit; its next
// park returns at once, with no mark) and a wake of a sleeper (which it
// does not end) draw nothing.
TEST_F(TraceWaits, AWakeThatMakesNothingReadyDrawsNoArrow) {
  ASSERT_EQ(file_.Start(), 0);
  coro* sleeper = Spawn([] { EXPECT_EQ(coro_sleep(kMs), 0); });
  Go([] {
    EXPECT_EQ(coro_wake(coro_self()), 0);  // a permit for the next park
    EXPECT_EQ(coro_park(), 0);             // takes it: no wait
  });
  Go([sleeper] { EXPECT_EQ(coro_wake(sleeper), 0); });
  ASSERT_EQ(Pump(), 0);
  ASSERT_EQ(coro_trace_stop(), 0);

  const Trace t = file_.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t),
            "spawn#1 go#2 go#3 sleep#1 coro#1:parked coro#2:finished "
            "coro#3:finished timer#1 wake~1>#1 f~1 coro#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");
}

}  // namespace
