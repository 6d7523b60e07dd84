// threads_test.cc — the contract of chapter 4: one scheduler per thread,
// work and wake-ups handed across threads, loopers and the N:M pool.
//
// This suite is chapter 4's concept. It runs against chapter 4 and every
// later chapter, on both switch back-ends (see tests/suite.bzl).
//
// Reading guide: each TEST checks one promise of coro.h / SPEC.md, named
// TEST(Subject, WhatItPromises). The helpers below are small on purpose:
//
//   Go / Spawn / Post      hand a lambda to a scheduler (any thread)
//   PoolGo / PoolGoOn ...  the same for a pool
//   PumpThread             a thread that owns a scheduler and polls it
//   Latch, Rendezvous      plain-thread synchronisation (C++17 has no latch)
//   WaitUntil              spin (with short sleeps) until a condition holds
//   Watchdog               aborts with a message instead of hanging forever
//
// Cross-thread races are run many times. Under ThreadSanitizer and Valgrind
// every instruction costs far more (and Valgrind runs one thread at a
// time), so the iteration counts are divided there (Reps below): the same
// paths are exercised, only the wall-clock budget differs.
//
// Time: assertions about latency are generous ("a wake reaches a sleeping
// pump within 1 s", where the real figure is microseconds, 3 s under the
// tools), far below the 10 s timeout a lost wake would fall back to, so
// they hold on a busy CI machine and still catch a wake that never lands.
// No test assumes that another thread gets the CPU within some time: where
// one thread must be somewhere before another acts, the test waits for a
// sign of it (a post queued behind a coroutine runs only once that
// coroutine has suspended; a blocker holds its thread until what it must
// not hold back has run), not for a fixed sleep.
//
// A few tests are marked "Regression": each caught a real library bug while
// this suite was written; the comment above it describes the bug (in the
// past tense: it is fixed) so that a student can see what the test guards.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coro.h"
#include "harness.h"
#include "trace_events.h"

namespace {

using coro_test::kThreadSanitizer;
using coro_test::Prng;
using coro_test::UnderValgrind;

// ---------------------------------------------------------------------------
// Tools, repetitions and time.

constexpr uint64_t kMs = CORO_MSEC;
constexpr uint64_t kUs = CORO_USEC;

// Whether a tool that slows every instruction down a lot is watching.
bool SlowTool() { return kThreadSanitizer || UnderValgrind(); }

// `n` repetitions normally; n / tsan_div under ThreadSanitizer, n /
// valgrind_div under Valgrind (it runs one thread at a time, so cross-thread
// hand-offs cost a scheduling round each). Never fewer than 1.
long Reps(long n, long tsan_div, long valgrind_div) {
  long r = n;
  if (UnderValgrind()) {
    r = n / valgrind_div;
  } else if (kThreadSanitizer) {
    r = n / tsan_div;
  }
  return r > 0 ? r : 1;
}

// How soon a cross-thread post or wake must reach a sleeping pump. The
// library promises microseconds; this leaves room for a loaded machine
// (the woken thread may wait for a CPU), and stays far below the 10 s
// timeouts that a lost wake would have to wait for.
uint64_t WakeLatencyBound() { return SlowTool() ? 3 * CORO_SEC : CORO_SEC; }

// CPU an idle pump may use over ~300 ms (first-time costs excluded).
uint64_t IdleCpuBound() { return SlowTool() ? 100 * kMs : 30 * kMs; }

// How long any single test may take before the watchdog gives up on it.
uint64_t WatchdogLimit() { return SlowTool() ? 200 * CORO_SEC : 60 * CORO_SEC; }

uint64_t Since(uint64_t start) { return coro_now() - start; }

// Block the calling thread (not a coroutine) for at least `ns`.
void SleepThread(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / CORO_SEC),
              static_cast<long>(ns % CORO_SEC)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

// Busy-wait about `n` short steps: a random moment without a syscall.
void Spin(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
  }
}

uint64_t RusageNs(int who) {
  rusage ru{};
  getrusage(who, &ru);
  return static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
             CORO_SEC +
         static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) *
             CORO_USEC;
}

// CPU time (user + system) used so far by the calling thread / the process.
uint64_t ThreadCpuNs() { return RusageNs(RUSAGE_THREAD); }
uint64_t ProcessCpuNs() { return RusageNs(RUSAGE_SELF); }

// The kernel's id of the calling thread.
pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Waits until `pred()` holds or `timeout` passes; says whether it holds.
// What the tests wait for takes microseconds to milliseconds; the default
// timeout only turns a hang into a failure.
template <typename Pred>
bool WaitUntil(Pred pred,
               uint64_t timeout = (SlowTool() ? 60 : 20) * CORO_SEC) {
  const uint64_t start = coro_now();
  while (!pred()) {
    if (Since(start) > timeout) return pred();
    SleepThread(50 * kUs);
  }
  return true;
}

// Runs `fn` on a new thread, which detaches from the library at the end.
void OnAnotherThread(const std::function<void()>& fn) {
  std::thread t([&fn] {
    fn();
    coro_thread_detach();
  });
  t.join();
}

// ---------------------------------------------------------------------------
// Plain-thread synchronisation.

// Counts down to zero once; Wait() blocks until it is there.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}

  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ <= 0) cv_.notify_all();
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return count_ <= 0; });
  }

  void ArriveAndWait() {
    CountDown();
    Wait();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

// A meeting of `n` parties with a timeout: ArriveAndWaitFor() says whether
// all of them arrived in time. It blocks the thread (a real blocking call).
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}

  bool ArriveAndWaitFor(uint64_t ns) {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ >= n_) cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::nanoseconds(ns),
                        [this] { return arrived_ >= n_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
};

// Aborts the test binary with a message if not destroyed within `limit`:
// a lost wake-up shows up as this message instead of a silent timeout.
class Watchdog {
 public:
  explicit Watchdog(const char* what, uint64_t limit = WatchdogLimit())
      : what_(what), thread_([this, limit] { Watch(limit); }) {}

  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Watch(uint64_t limit) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::nanoseconds(limit),
                      [this] { return done_; })) {
      std::fprintf(stderr, "watchdog: %s did not finish within %llu s\n",
                   what_, static_cast<unsigned long long>(limit / CORO_SEC));
      std::fflush(stderr);
      std::abort();
    }
  }

  const char* what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// Coroutines and posts written as lambdas, handed over from any thread.

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

int Go(coro_sched* s, Body body) {
  auto* b = new Body(std::move(body));
  const int rc = coro_go(s, RunBody, b);
  if (rc != 0) delete b;
  return rc;
}

coro* Spawn(coro_sched* s, Body body) {
  auto* b = new Body(std::move(body));
  coro* c = coro_spawn(s, RunBody, b);
  if (c == nullptr) delete b;
  return c;
}

int Post(coro_sched* s, Body body) {
  auto* b = new Body(std::move(body));
  const int rc = coro_post(s, RunPostBody, b);
  if (rc != 0) delete b;
  return rc;
}

int PoolGo(coro_pool* p, Body body) {
  auto* b = new Body(std::move(body));
  const int rc = coro_pool_go(p, RunBody, b);
  if (rc != 0) delete b;
  return rc;
}

int PoolGoOn(coro_pool* p, size_t worker, Body body) {
  auto* b = new Body(std::move(body));
  const int rc = coro_pool_go_on(p, worker, RunBody, b);
  if (rc != 0) delete b;
  return rc;
}

using PostBody = std::function<void(coro_sched*)>;

void RunPoolPostBody(coro_sched* s, void* arg) {
  std::unique_ptr<PostBody> body(static_cast<PostBody*>(arg));
  (*body)(s);
}

int PoolPost(coro_pool* p, PostBody body) {
  auto* b = new PostBody(std::move(body));
  const int rc = coro_pool_post(p, RunPoolPostBody, b);
  if (rc != 0) delete b;
  return rc;
}

// Runs `fn` as a post on `s`'s thread and waits for it to finish.
void CallOn(coro_sched* s, const std::function<void()>& fn) {
  std::atomic<bool> done{false};
  ASSERT_EQ(Post(s, [&] {
              fn();
              done.store(true);
            }),
            0);
  ASSERT_TRUE(WaitUntil([&] { return done.load(); }));
}

// A thread that owns a scheduler and pumps it (`while running: poll`),
// like a looper but written here, so the core API is tested on its own.
// At the end it runs the scheduler empty, destroys it and detaches.
class PumpThread {
 public:
  PumpThread() : thread_([this] { Main(); }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return ready_; });
  }

  ~PumpThread() { Stop(); }

  PumpThread(const PumpThread&) = delete;
  PumpThread& operator=(const PumpThread&) = delete;

  coro_sched* sched() const { return sched_; }
  pid_t tid() const { return tid_; }
  pthread_t handle() const { return handle_; }

  // Lets the queued work finish, then joins the thread. Idempotent.
  void Stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    EXPECT_EQ(Post(sched_, [] {}), 0);  // wakes a sleeping poll
    // The pump may see `stop_` and empty its scheduler while this thread is
    // still inside coro_post; it must not free the scheduler under a call
    // in progress, so it waits for this before coro_sched_destroy.
    stop_posted_.CountDown();
    thread_.join();
    EXPECT_EQ(destroy_rc_, 0) << "the pump thread's coro_sched_destroy";
  }

 private:
  void Main() {
    coro_sched* s = coro_sched_create();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sched_ = s;
      tid_ = Tid();
      handle_ = pthread_self();
      ready_ = true;
    }
    cv_.notify_all();
    if (s == nullptr) return;
    while (!stop_.load()) coro_sched_poll_for(s, 100 * kMs);
    stop_posted_.Wait();
    EXPECT_EQ(coro_sched_run(s), 0);
    destroy_rc_ = coro_sched_destroy(s);
    coro_thread_detach();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  coro_sched* sched_ = nullptr;
  pid_t tid_ = 0;
  pthread_t handle_{};
  std::atomic<bool> stop_{false};
  Latch stop_posted_{1};
  int destroy_rc_ = -1;
  std::thread thread_;  // last: starts once the rest is initialised
};

void* ReturnArg(void* arg) { return arg; }

// ===========================================================================
// Ownership: a scheduler belongs to the thread that created it
// ===========================================================================

// Driving a scheduler — run, step, poll, run_until, destroy, its stack
// settings — from another thread is EPERM (step: false, poll: 0), and
// nothing of it runs there.
TEST(Ownership, DrivingASchedulerFromAnotherThreadIsEperm) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  coro_sched* empty = coro_sched_create();  // EPERM, not EBUSY, even empty
  ASSERT_NE(empty, nullptr);
  std::atomic<int> ran{0};
  coro* c = Spawn(s, [&] { ran++; });
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(Post(s, [&] { ran++; }), 0);

  OnAnotherThread([&] {
    EXPECT_EQ(coro_sched_run(s), EPERM);
    EXPECT_FALSE(coro_sched_step(s));
    EXPECT_EQ(coro_sched_poll_for(s, 20 * kMs), 0u);
    EXPECT_EQ(coro_sched_poll_until(s, coro_now() + 20 * kMs), 0u);
    EXPECT_EQ(coro_sched_run_until(s, coro_now() + 20 * kMs), EPERM);
    EXPECT_EQ(coro_sched_destroy(s), EPERM);
    EXPECT_EQ(coro_sched_destroy(empty), EPERM);
    EXPECT_EQ(coro_sched_set_stack_size(empty, 128 * 1024), EPERM);
    EXPECT_EQ(coro_sched_use_dense_stacks(empty), EPERM);
    // The coroutine belongs to the scheduler's thread too.
    EXPECT_EQ(coro_resume(c), EPERM);
    EXPECT_EQ(coro_destroy(c), EPERM);
    EXPECT_EQ(coro_set_priority(c, 5), EPERM);
    EXPECT_EQ(ran.load(), 0) << "work of the scheduler ran on another thread";
  });

  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(coro_sched_alive(s), 1u);
  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(coro_destroy(c), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
  EXPECT_EQ(coro_sched_destroy(empty), 0);
}

// coro_go, coro_spawn, coro_post, coro_wake, coro_event_set and
// coro_sched_alive work from another thread; what they hand over runs on
// the scheduler's own thread.
TEST(Ownership, HandingWorkOverWorksFromAnotherThread) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, false), 0);
  const pid_t owner = Tid();
  std::vector<pid_t> ran_on;  // written on the owner thread only
  int park_rc = -1, await_rc = -1;

  coro* parker = Spawn(s, [&] {
    park_rc = coro_park();
    ran_on.push_back(Tid());
  });
  ASSERT_NE(parker, nullptr);
  ASSERT_EQ(Go(s, [&] {
              await_rc = coro_event_await(&e);
              ran_on.push_back(Tid());
            }),
            0);
  while (coro_sched_step(s)) {
  }
  ASSERT_EQ(coro_sched_alive(s), 2u) << "both should be waiting now";

  coro* joinable = nullptr;
  OnAnotherThread([&] {
    EXPECT_EQ(coro_sched_alive(s), 2u);
    EXPECT_EQ(Go(s, [&] { ran_on.push_back(Tid()); }), 0);
    joinable = coro_spawn(s, ReturnArg, reinterpret_cast<void*>(42));
    EXPECT_NE(joinable, nullptr);
    EXPECT_EQ(coro_sched_alive(s), 4u);
    EXPECT_EQ(Post(s, [&] { ran_on.push_back(Tid()); }), 0);
    EXPECT_EQ(coro_wake(parker), 0);
    EXPECT_EQ(coro_event_set(&e), 0);
    EXPECT_EQ(coro_wake(nullptr), EINVAL);
    EXPECT_EQ(coro_go(s, nullptr, nullptr), EINVAL);
    EXPECT_EQ(coro_post(s, nullptr, nullptr), EINVAL);
  });

  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(park_rc, 0);
  EXPECT_EQ(await_rc, 0);
  ASSERT_EQ(ran_on.size(), 4u);
  for (pid_t t : ran_on) EXPECT_EQ(t, owner);
  ASSERT_NE(joinable, nullptr);
  EXPECT_EQ(coro_status(joinable), CORO_DONE);
  EXPECT_EQ(coro_result(joinable), reinterpret_cast<void*>(42));
  EXPECT_EQ(coro_destroy(joinable), 0);
  EXPECT_EQ(coro_destroy(parker), 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// ===========================================================================
// Posts from other threads
// ===========================================================================

// What the owner's pump sees of the producers' posts (owner thread only).
struct PostLog {
  std::vector<uint32_t> next;  // per producer: the sequence number expected
  long total = 0;
  long out_of_order = 0;       // a loss, a duplicate or a reordering
  long wrong_thread = 0;
  pthread_t owner{};
};

PostLog* g_post_log = nullptr;

void CountPost(coro_sched*, void* arg) {
  const auto tag = reinterpret_cast<uintptr_t>(arg);
  const auto producer = static_cast<size_t>(tag >> 32);
  const auto seq = static_cast<uint32_t>(tag & 0xffffffffu);
  PostLog& log = *g_post_log;
  if (!pthread_equal(pthread_self(), log.owner)) log.wrong_thread++;
  if (producer >= log.next.size() || seq != log.next[producer]) {
    log.out_of_order++;
  } else {
    log.next[producer] = seq + 1;
  }
  log.total++;
}

// Four threads post 100,000 times each while the owner pumps: every post
// runs exactly once, on the owner's thread, and each producer's posts run
// in the order it posted them.
TEST(CrossThreadPost, ManyProducersLoseNothingAndKeepEachThreadsOrder) {
  constexpr int kProducers = 4;
  // ThreadSanitizer: 1/2; Valgrind (one thread at a time): 1/5.
  const long per_producer = Reps(100000, 2, 5);
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  PostLog log;
  log.next.assign(kProducers, 0);
  log.owner = pthread_self();
  g_post_log = &log;

  std::atomic<long> accepted{0}, refused{0};
  std::atomic<int> finished{0};
  Latch start(kProducers + 1);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      start.ArriveAndWait();
      for (long seq = 0; seq < per_producer; ++seq) {
        const uintptr_t tag =
            (static_cast<uintptr_t>(p) << 32) | static_cast<uintptr_t>(seq);
        const int rc = coro_post(s, CountPost, reinterpret_cast<void*>(tag));
        if (rc == 0) {
          accepted++;
        } else {
          refused++;
          break;  // a gap would read as out of order; stop this producer
        }
      }
      finished++;
      coro_thread_detach();
    });
  }

  Watchdog watchdog("4 producers x posts");
  start.ArriveAndWait();
  // The owner pumps with both pumps that wait: run (returns when nothing is
  // pending at that moment) and poll (sleeps until a post arrives).
  bool use_run = true;
  while (!(finished.load() == kProducers && log.total == accepted.load())) {
    if (use_run) {
      EXPECT_EQ(coro_sched_run(s), 0);
    } else {
      coro_sched_poll_for(s, kMs);
    }
    use_run = !use_run;
  }
  for (auto& t : producers) t.join();

  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(accepted.load(), kProducers * per_producer);
  EXPECT_EQ(log.total, kProducers * per_producer);
  EXPECT_EQ(log.out_of_order, 0);
  EXPECT_EQ(log.wrong_thread, 0);
  for (int p = 0; p < kProducers; ++p) {
    EXPECT_EQ(log.next[p], static_cast<uint32_t>(per_producer))
        << "producer " << p;
  }
  EXPECT_EQ(coro_sched_alive(s), 0u);
  EXPECT_EQ(coro_sched_destroy(s), 0);
  g_post_log = nullptr;
}

// A post limit holds across threads: producers that get EAGAIN and try
// again lose nothing, and nothing accepted is dropped.
TEST(CrossThreadPost, LimitHoldsAcrossThreadsAndNothingAcceptedIsDropped) {
  constexpr int kProducers = 3;
  constexpr size_t kLimit = 4;
  const long per_producer = Reps(5000, 2, 5);
  coro_sched* s = coro_sched_create_limit(kLimit);
  ASSERT_NE(s, nullptr);
  long ran = 0;  // owner thread only
  std::atomic<long> accepted{0}, eagain{0}, other_errors{0};
  std::atomic<int> finished{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&] {
      for (long i = 0; i < per_producer; ++i) {
        for (;;) {
          auto* body = new Body([&ran] { ran++; });
          const int rc = coro_post(s, RunPostBody, body);
          if (rc == 0) {
            accepted++;
            break;
          }
          delete body;
          if (rc == EAGAIN) {
            eagain++;
            std::this_thread::yield();
          } else {
            other_errors++;
            break;
          }
        }
      }
      finished++;
    });
  }
  Watchdog watchdog("posts under a limit");
  while (!(finished.load() == kProducers && ran == accepted.load())) {
    coro_sched_poll_for(s, kMs);
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(accepted.load(), kProducers * per_producer);
  EXPECT_EQ(ran, kProducers * per_producer);
  std::printf("[   INFO   ] %ld EAGAIN answers under a limit of %zu\n",
              eagain.load(), kLimit);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// A pump sleeping in coro_sched_poll_for(10 s) with nothing to do wakes
// for a post from another thread at once, runs it, and returns.
TEST(CrossThreadPost, WakesAPollForThatSleepsWithNothingToDo) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  std::atomic<uint64_t> posted_at{0};
  uint64_t ran_at = 0;
  const uint64_t start = coro_now();
  std::thread poster([&] {
    SleepThread(50 * kMs);  // the pump is asleep by now
    posted_at.store(coro_now());
    EXPECT_EQ(Post(s, [&] { ran_at = coro_now(); }), 0);
  });
  const size_t ran = coro_sched_poll_for(s, 10 * CORO_SEC);
  const uint64_t elapsed = Since(start);
  poster.join();
  EXPECT_EQ(ran, 1u);
  EXPECT_GE(elapsed, 50 * kMs);
  EXPECT_LT(elapsed, 5 * CORO_SEC) << "the poll slept through the post";
  ASSERT_NE(ran_at, 0u);
  EXPECT_LT(ran_at - posted_at.load(), WakeLatencyBound())
      << "post-to-run latency " << (ran_at - posted_at.load()) / kUs << " us";
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// A request from another thread waits for the pump's turn in progress to
// end: the pump looks at its inbox at the start of every turn (not only
// when it runs out of work), and the request queues behind the entries
// ready then. Three coroutines keep yielding; while the first one runs,
// another thread posts, and that coroutine waits until the post is in the
// inbox. A turn runs at least 16 entries (TURN_MIN_ENTRIES in sched.c), so
// the post must run within 15 + 3 resumes: at most 15 left in that turn,
// then the three of the next. (It may come in sooner; a pump that looked
// only when idle would run it after all 3 x 20 resumes.)
TEST(CrossThreadPost, ARequestSentDuringATurnRunsWithinTheNextTurn) {
  constexpr int kYielders = 3;
  constexpr int kRounds = 20;
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  int resumes = 0;          // resumes of the yielders, in all
  int sent_after = -1;      // `resumes` when the post was in the inbox
  int ran_after = -1;       // `resumes` when the post ran
  std::atomic<bool> pushed{false};
  std::thread poster;
  for (int i = 0; i < kYielders; ++i) {
    ASSERT_EQ(Go(s, [&, i] {
                for (int round = 0; round < kRounds; ++round) {
                  ++resumes;
                  if (i == 0 && round == 5) {
                    poster = std::thread([&] {
                      EXPECT_EQ(Post(s, [&] { ran_after = resumes; }), 0);
                      pushed.store(true);
                      coro_thread_detach();
                    });
                    // Mid-turn, until the request is in the inbox.
                    EXPECT_TRUE(WaitUntil([&] { return pushed.load(); }));
                    sent_after = resumes;
                  }
                  coro_yield();
                }
              }),
              0);
  }
  Watchdog watchdog("a post sent during a turn");
  EXPECT_EQ(coro_sched_run(s), 0);
  poster.join();
  ASSERT_GE(sent_after, 0);
  ASSERT_GE(ran_after, 0) << "the post never ran";
  EXPECT_LE(ran_after - sent_after,
            coro_test::kTurnMinEntries - 1 + kYielders)
      << "the post waited " << ran_after - sent_after << " resumes";
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// The same for a coroutine handed over with coro_go.
TEST(CrossThreadGo, WakesAPollForThatSleepsWithNothingToDo) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  std::atomic<uint64_t> sent_at{0};
  uint64_t ran_at = 0;
  std::thread sender([&] {
    SleepThread(50 * kMs);
    sent_at.store(coro_now());
    EXPECT_EQ(Go(s, [&] { ran_at = coro_now(); }), 0);
  });
  const uint64_t start = coro_now();
  const size_t ran = coro_sched_poll_for(s, 10 * CORO_SEC);
  const uint64_t elapsed = Since(start);
  sender.join();
  EXPECT_EQ(ran, 1u);
  EXPECT_LT(elapsed, 5 * CORO_SEC) << "the poll slept through the go";
  ASSERT_NE(ran_at, 0u);
  EXPECT_LT(ran_at - sent_at.load(), WakeLatencyBound());
  EXPECT_EQ(coro_sched_alive(s), 0u);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// ===========================================================================
// Coroutines created from other threads
// ===========================================================================

// Coroutines handed over by coro_go from several threads start on the
// scheduler's thread, and stay there across yields, sleeps and parks.
TEST(CrossThreadGo, CoroutinesRunOnTheOwnerThreadAndNeverMigrate) {
  constexpr int kSenders = 3;
  const int per_sender = static_cast<int>(Reps(200, 1, 4));
  PumpThread owner;
  std::atomic<int> finished{0}, started_elsewhere{0}, migrated{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < kSenders; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < per_sender; ++i) {
        const uint64_t seed = static_cast<uint64_t>(t) * 1000003u + i;
        ASSERT_EQ(Go(owner.sched(),
                     [&, seed] {
                       Prng rng(seed);
                       const pid_t first = Tid();
                       if (first != owner.tid()) started_elsewhere++;
                       for (int k = 0; k < 4; ++k) {
                         switch (rng.Below(3)) {
                           case 0: EXPECT_EQ(coro_yield(), 0); break;
                           case 1:
                             EXPECT_EQ(coro_sleep(rng.Below(200) * kUs), 0);
                             break;
                           default:
                             EXPECT_EQ(coro_park_for(rng.Below(100) * kUs),
                                       ETIMEDOUT);
                         }
                         if (Tid() != first ||
                             !pthread_equal(pthread_self(), owner.handle()))
                           migrated++;
                       }
                       finished++;
                     }),
                  0);
      }
      coro_thread_detach();
    });
  }
  for (auto& t : senders) t.join();
  ASSERT_TRUE(WaitUntil([&] { return finished.load() == kSenders * per_sender; }))
      << finished.load() << " of " << kSenders * per_sender << " finished";
  EXPECT_EQ(started_elsewhere.load(), 0);
  EXPECT_EQ(migrated.load(), 0);
}

// A joinable coroutine spawned from another thread: its handle is used on
// the scheduler's thread (status, result, destroy), where it ran.
TEST(CrossThreadGo, SpawnFromAnotherThreadIsJoinedOnTheOwnerThread) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  constexpr int kSpawns = 20;
  std::vector<coro*> handles(kSpawns, nullptr);
  OnAnotherThread([&] {
    for (int i = 0; i < kSpawns; ++i) {
      handles[i] = coro_spawn(s, ReturnArg, reinterpret_cast<void*>(i + 1));
      EXPECT_NE(handles[i], nullptr);
    }
    EXPECT_EQ(coro_spawn(s, nullptr, nullptr), nullptr);
    EXPECT_EQ(errno, EINVAL);
  });
  EXPECT_EQ(coro_sched_destroy(s), EBUSY);
  EXPECT_EQ(coro_sched_run(s), 0);
  for (int i = 0; i < kSpawns; ++i) {
    ASSERT_NE(handles[i], nullptr);
    EXPECT_EQ(coro_status(handles[i]), CORO_DONE);
    EXPECT_EQ(coro_result(handles[i]), reinterpret_cast<void*>(i + 1));
  }
  EXPECT_EQ(coro_sched_destroy(s), EBUSY) << "handles not destroyed yet";
  for (coro* c : handles) EXPECT_EQ(coro_destroy(c), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// ===========================================================================
// Park and wake across threads
// ===========================================================================

// Two schedulers on two threads; a coroutine on each. They take turns
// 100,000 times: each waits (parks) for its turn, passes the turn and
// wakes the other. A lost wake-up would stop the game (the watchdog).
struct PingPong {
  long rounds = 0;
  std::atomic<int> turn{0};
  std::atomic<coro*> player[2] = {{nullptr}, {nullptr}};
  long played[2] = {0, 0};  // each written by its own player only
  std::atomic<long> spurious{0};
  std::atomic<int> errors{0};
};

struct Player {
  PingPong* game;
  int me;
};

void* PlayPingPong(void* arg) {
  const Player* p = static_cast<Player*>(arg);
  PingPong& g = *p->game;
  const int other = 1 - p->me;
  coro* peer = g.player[other].load();
  for (long i = 0; i < g.rounds; ++i) {
    while (g.turn.load() != p->me) {
      if (coro_park() != 0) g.errors++;
      if (g.turn.load() != p->me) g.spurious++;
    }
    g.played[p->me]++;
    g.turn.store(other);
    // The second player's last wake would find the first finished.
    if (!(p->me == 1 && i == g.rounds - 1) && coro_wake(peer) != 0)
      g.errors++;
  }
  return nullptr;
}

TEST(CrossThreadWake, PingPongBetweenTwoThreadsLosesNoWake) {
  // ThreadSanitizer: 1/2; Valgrind (a thread switch per hand-off): 1/10.
  const long rounds = Reps(100000, 2, 10);
  PingPong game;
  game.rounds = rounds;
  Player players[2] = {{&game, 0}, {&game, 1}};
  Latch published(2), finished(2);
  int run_rc[2] = {-1, -1};
  Watchdog watchdog("park/wake ping-pong");
  auto thread_main = [&](int me) {
    coro_sched* s = coro_sched_create();
    ASSERT_NE(s, nullptr);
    coro* c = coro_spawn(s, PlayPingPong, &players[me]);
    ASSERT_NE(c, nullptr);
    game.player[me].store(c);
    published.ArriveAndWait();
    run_rc[me] = coro_sched_run(s);
    // The other thread may still be inside its last coro_wake of us.
    finished.ArriveAndWait();
    EXPECT_EQ(coro_destroy(c), 0);
    EXPECT_EQ(coro_sched_destroy(s), 0);
    coro_thread_detach();
  };
  std::thread t0(thread_main, 0), t1(thread_main, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(run_rc[0], 0);
  EXPECT_EQ(run_rc[1], 0);
  EXPECT_EQ(game.played[0], rounds);
  EXPECT_EQ(game.played[1], rounds);
  EXPECT_EQ(game.errors.load(), 0);
  std::printf("[   INFO   ] %ld rounds, %ld spurious returns from park\n",
              rounds, game.spurious.load());
}

// A plain thread and a coroutine take turns: the coroutine parks, the
// thread wakes it; the thread waits for the coroutine's answer by spinning.
TEST(CrossThreadWake, PingPongWithAPlainThreadLosesNoWake) {
  const long rounds = Reps(100000, 2, 10);
  std::atomic<long> served{0};
  std::atomic<long> asked{0};
  std::atomic<coro*> server{nullptr};
  std::atomic<int> errors{0};
  Latch done(2);
  Watchdog watchdog("coroutine/thread ping-pong");
  std::thread owner([&] {
    coro_sched* s = coro_sched_create();
    coro* c = Spawn(s, [&] {
      for (long i = 0; i < rounds; ++i) {
        while (asked.load() == served.load()) {
          if (coro_park() != 0) errors++;
        }
        served++;
      }
    });
    server.store(c);
    EXPECT_EQ(coro_sched_run(s), 0);
    done.ArriveAndWait();
    EXPECT_EQ(coro_destroy(c), 0);
    EXPECT_EQ(coro_sched_destroy(s), 0);
    coro_thread_detach();
  });
  ASSERT_TRUE(WaitUntil([&] { return server.load() != nullptr; }));
  coro* c = server.load();
  for (long i = 0; i < rounds; ++i) {
    asked++;
    if (coro_wake(c) != 0) errors++;
    while (served.load() != i + 1) {
      if (UnderValgrind()) std::this_thread::yield();
    }
  }
  done.ArriveAndWait();
  owner.join();
  EXPECT_EQ(served.load(), rounds);
  EXPECT_EQ(errors.load(), 0);
}

// Wakes from another thread land at random moments around parks with
// short timeouts: each park returns 0 or ETIMEDOUT (nothing else, never
// hangs), no more parks are ended by wakes than there were wakes, and
// permits never add up: after several wakes with no park, one park returns
// 0 at once and the next one times out.
TEST(CrossThreadWake, RacesWithTimedParksAndPermitsNeverAddUp) {
  const long parks = Reps(50000, 4, 20);
  std::atomic<coro*> target{nullptr};
  std::atomic<bool> racing_done{false}, waker_quiet{false};
  std::atomic<bool> want_permit_wakes{false}, permit_wakes_sent{false};
  std::atomic<long> wakes{0};
  std::atomic<int> wake_errors{0};
  long woken = 0, timed_out = 0, other = 0, leftover = 0;
  int extra_permit_rc = -1, permit_rc = -1, after_permit_rc = -1;
  uint64_t permit_park_took = 0;
  Latch done(2);
  Watchdog watchdog("park_for racing with wakes");

  std::thread owner([&] {
    coro_sched* s = coro_sched_create();
    coro* c = Spawn(s, [&] {
      Prng rng(7);
      for (long i = 0; i < parks; ++i) {
        const int rc = coro_park_for((1 + rng.Below(100)) * kUs);
        if (rc == 0) {
          woken++;
        } else if (rc == ETIMEDOUT) {
          timed_out++;
        } else {
          other++;
        }
      }
      racing_done.store(true);
      while (!waker_quiet.load()) coro_sleep(100 * kUs);
      // At most one permit can be left over from the race, however many
      // wakes found the coroutine not parked.
      if (coro_park_for(0) == 0) leftover++;
      extra_permit_rc = coro_park_for(0);
      // Now several wakes while it does not park: one permit.
      want_permit_wakes.store(true);
      while (!permit_wakes_sent.load()) coro_sleep(100 * kUs);
      const uint64_t start = coro_now();
      permit_rc = coro_park_for(10 * CORO_SEC);
      permit_park_took = Since(start);
      after_permit_rc = coro_park_for(20 * kMs);
    });
    target.store(c);
    EXPECT_EQ(coro_sched_run(s), 0);
    done.ArriveAndWait();
    EXPECT_EQ(coro_destroy(c), 0);
    EXPECT_EQ(coro_sched_destroy(s), 0);
    coro_thread_detach();
  });

  ASSERT_TRUE(WaitUntil([&] { return target.load() != nullptr; }));
  coro* c = target.load();
  Prng rng(11);
  while (!racing_done.load()) {
    Spin(rng.Below(2000));
    if (rng.Below(8) == 0) std::this_thread::yield();
    if (coro_wake(c) != 0) wake_errors++;
    wakes++;
  }
  waker_quiet.store(true);
  ASSERT_TRUE(WaitUntil([&] { return want_permit_wakes.load(); }));
  for (int i = 0; i < 5; ++i) {
    if (coro_wake(c) != 0) wake_errors++;
  }
  permit_wakes_sent.store(true);
  done.ArriveAndWait();
  owner.join();

  EXPECT_EQ(wake_errors.load(), 0);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(woken + timed_out, parks);
  EXPECT_LE(woken + leftover, wakes.load());
  EXPECT_EQ(extra_permit_rc, ETIMEDOUT) << "permits added up";
  EXPECT_EQ(permit_rc, 0);
  EXPECT_LT(permit_park_took, WakeLatencyBound()) << "the permit was not used";
  EXPECT_EQ(after_permit_rc, ETIMEDOUT) << "five wakes left more than one permit";
  std::printf("[   INFO   ] %ld parks: %ld woken, %ld timed out; %ld wakes\n",
              parks, woken, timed_out, wakes.load());
}

// From chapter 4, coro_sched_run with only a parked coroutine and no timer
// does not say EDEADLK: it sleeps until another thread wakes the
// coroutine, and wakes up within a short time of that wake.
TEST(CrossThreadWake, WakesARunThatWaitsForAParkedCoroutine) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  std::atomic<bool> parking{false};
  std::atomic<uint64_t> woken_at{0};
  int park_rc = -1;
  uint64_t resumed_at = 0;
  coro* c = Spawn(s, [&] {
    parking.store(true);
    park_rc = coro_park();
    resumed_at = coro_now();
  });
  ASSERT_NE(c, nullptr);
  std::thread waker([&] {
    ASSERT_TRUE(WaitUntil([&] { return parking.load(); }));
    SleepThread(50 * kMs);  // the pump is asleep in the kernel by now
    woken_at.store(coro_now());
    EXPECT_EQ(coro_wake(c), 0);
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run(s), 0) << "chapter 3 said EDEADLK here";
  const uint64_t elapsed = Since(start);
  waker.join();
  EXPECT_EQ(park_rc, 0);
  EXPECT_GE(elapsed, 50 * kMs);
  ASSERT_NE(resumed_at, 0u);
  EXPECT_LT(resumed_at - woken_at.load(), WakeLatencyBound())
      << "wake-to-resume latency " << (resumed_at - woken_at.load()) / kUs
      << " us";
  EXPECT_EQ(coro_destroy(c), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// The same for run_until with a far deadline, and for an event waiter set
// from another thread: the pump returns 0 promptly, not at the deadline.
TEST(CrossThreadWake, WakesARunUntilAndARunWaitingForAnEvent) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  std::atomic<int> waiting{0};
  int park_rc = -1, await_rc = -1;
  coro* parker = Spawn(s, [&] {
    waiting++;
    park_rc = coro_park();
  });
  ASSERT_NE(parker, nullptr);
  ASSERT_EQ(Go(s, [&] {
              waiting++;
              await_rc = coro_event_await(&e);
            }),
            0);
  std::thread waker([&] {
    ASSERT_TRUE(WaitUntil([&] { return waiting.load() == 2; }));
    SleepThread(30 * kMs);
    EXPECT_EQ(coro_wake(parker), 0);
    SleepThread(30 * kMs);
    EXPECT_EQ(coro_event_set(&e), 0);
  });
  const uint64_t start = coro_now();
  EXPECT_EQ(coro_sched_run_until(s, coro_now() + 20 * CORO_SEC), 0);
  EXPECT_LT(Since(start), 10 * CORO_SEC);
  waker.join();
  EXPECT_EQ(park_rc, 0);
  EXPECT_EQ(await_rc, 0);
  EXPECT_EQ(coro_destroy(parker), 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// ===========================================================================
// An idle pump costs no CPU
// ===========================================================================

// A pump in coro_sched_run waiting ~300 ms for a cross-thread wake of its
// only (parked) coroutine sleeps in the kernel: almost no CPU.
TEST(IdleCpu, RunWaitingForACrossThreadWakeUsesAlmostNoCpu) {
  std::atomic<coro*> parked{nullptr};
  std::atomic<bool> is_parked{false};
  uint64_t cpu_used = 0, elapsed = 0;
  int run_rc = -1;
  Latch done(2);
  std::thread pump([&] {
    coro_sched* s = coro_sched_create();
    // Warm up: first-time costs (new stack, Valgrind translating code).
    EXPECT_EQ(Go(s, [] { EXPECT_EQ(coro_park_for(kMs), ETIMEDOUT); }), 0);
    EXPECT_EQ(coro_sched_run(s), 0);
    coro* c = Spawn(s, [&] {
      is_parked.store(true);
      EXPECT_EQ(coro_park(), 0);
    });
    parked.store(c);
    const uint64_t cpu = ThreadCpuNs();
    const uint64_t start = coro_now();
    run_rc = coro_sched_run(s);
    elapsed = Since(start);
    cpu_used = ThreadCpuNs() - cpu;
    done.ArriveAndWait();
    EXPECT_EQ(coro_destroy(c), 0);
    EXPECT_EQ(coro_sched_destroy(s), 0);
    coro_thread_detach();
  });
  ASSERT_TRUE(WaitUntil([&] { return is_parked.load(); }));
  SleepThread(300 * kMs);
  EXPECT_EQ(coro_wake(parked.load()), 0);
  done.ArriveAndWait();
  pump.join();
  EXPECT_EQ(run_rc, 0);
  EXPECT_GE(elapsed, 250 * kMs);
  EXPECT_LT(cpu_used, IdleCpuBound())
      << "CPU used by the pump over " << elapsed / kMs
      << " ms of waiting: " << cpu_used / kUs << " us";
}

// An idle looper sleeps: its thread uses almost no CPU over ~300 ms, and
// neither does the process.
TEST(IdleCpu, IdleLooperUsesAlmostNoCpu) {
  coro_looper* l = coro_looper_start("idle-looper");
  ASSERT_NE(l, nullptr);
  coro_sched* s = coro_looper_sched(l);
  // Warm up, then read the looper thread's CPU clock from a post on it.
  CallOn(s, [] {});
  uint64_t looper_cpu_before = 0, looper_cpu_after = 0;
  CallOn(s, [&] { looper_cpu_before = ThreadCpuNs(); });
  const uint64_t process_before = ProcessCpuNs();
  SleepThread(300 * kMs);
  const uint64_t process_used = ProcessCpuNs() - process_before;
  CallOn(s, [&] { looper_cpu_after = ThreadCpuNs(); });
  EXPECT_EQ(coro_looper_stop(l), 0);
  const uint64_t looper_used = looper_cpu_after - looper_cpu_before;
  EXPECT_LT(looper_used, IdleCpuBound())
      << "looper thread CPU over 300 ms idle: " << looper_used / kUs << " us";
  EXPECT_LT(process_used, SlowTool() ? 300 * kMs : 30 * kMs)
      << "process CPU over 300 ms idle: " << process_used / kUs << " us";
}

// Idle pool workers sleep too.
TEST(IdleCpu, IdlePoolUsesAlmostNoCpu) {
  coro_pool* p = coro_pool_create(3, false);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(PoolGo(p, [] { coro_sleep(kMs); }), 0);
  ASSERT_EQ(coro_pool_wait(p), 0);
  SleepThread(20 * kMs);
  const uint64_t before = ProcessCpuNs();
  SleepThread(300 * kMs);
  const uint64_t used = ProcessCpuNs() - before;
  EXPECT_EQ(coro_pool_destroy(p), 0);
  EXPECT_LT(used, SlowTool() ? 300 * kMs : 30 * kMs)
      << "process CPU over 300 ms with an idle pool: " << used / kUs << " us";
}

// ===========================================================================
// Events across threads
// ===========================================================================

// Waiters on two schedulers on two threads; a third thread sets a manual
// event: every waiter wakes, each on its own thread.
//
// Each waiter counts itself and goes straight on into coro_event_await, in
// one resume of its pump. So once all have counted themselves, a post on
// each pump (queued behind them) runs only after every waiter there is on
// the event's list: no sleep needed, however slow the pump threads are.
TEST(CrossThreadEvent, ManualSetFromAThirdThreadWakesEveryWaiter) {
  constexpr int kPerThread = 10;
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, true, false), 0);
  std::atomic<int> waiting{0}, woke{0}, bad_rc{0}, wrong_thread{0};
  {
    PumpThread a, b;
    for (PumpThread* p : {&a, &b}) {
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_EQ(Go(p->sched(),
                     [&, p] {
                       waiting++;
                       if (coro_event_await(&e) != 0) bad_rc++;
                       if (Tid() != p->tid()) wrong_thread++;
                       woke++;
                     }),
                  0);
      }
    }
    ASSERT_TRUE(WaitUntil([&] { return waiting.load() == 2 * kPerThread; }));
    CallOn(a.sched(), [] {});  // every waiter on a's thread is on the list
    CallOn(b.sched(), [] {});  // ... and on b's
    EXPECT_EQ(woke.load(), 0) << "woken before the set";
    EXPECT_EQ(coro_event_destroy(&e), EBUSY);
    std::thread setter([&] { EXPECT_EQ(coro_event_set(&e), 0); });
    setter.join();
    EXPECT_TRUE(WaitUntil([&] { return woke.load() == 2 * kPerThread; }))
        << woke.load() << " of " << 2 * kPerThread << " woke";
  }
  EXPECT_EQ(bad_rc.load(), 0);
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// The same with an auto-reset event: each set from the third thread wakes
// exactly one waiter, whichever thread it is on; ten sets wake ten waiters
// and leave the event unset. (After each set the setter waits a moment to
// give a second, wrongly woken waiter the time to show: on a slow machine
// that check sees less, it never fails a correct library.)
TEST(CrossThreadEvent, AutoSetFromAThirdThreadWakesExactlyOnePerSet) {
  constexpr int kPerThread = 5;
  constexpr int kWaiters = 2 * kPerThread;
  coro_event e;
  ASSERT_EQ(coro_event_init(&e, false, false), 0);
  std::atomic<int> waiting{0}, woke{0}, bad_rc{0};
  int left_set_rc = -1;
  {
    PumpThread a, b;
    for (PumpThread* p : {&a, &b}) {
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_EQ(Go(p->sched(),
                     [&] {
                       waiting++;
                       if (coro_event_await(&e) != 0) bad_rc++;
                       woke++;
                     }),
                  0);
      }
    }
    ASSERT_TRUE(WaitUntil([&] { return waiting.load() == kWaiters; }));
    CallOn(a.sched(), [] {});  // all of them are on the waiter list (see
    CallOn(b.sched(), [] {});  // the test above)
    std::thread setter([&] {
      for (int k = 1; k <= kWaiters; ++k) {
        EXPECT_EQ(coro_event_set(&e), 0);
        EXPECT_TRUE(WaitUntil([&] { return woke.load() >= k; }));
        SleepThread(SlowTool() ? 20 * kMs : 5 * kMs);
        EXPECT_EQ(woke.load(), k) << "one set woke more than one waiter";
      }
    });
    setter.join();
    // Whether a set is left over: a wait with no time left (it runs, and
    // `a` is joined, before the scope ends).
    EXPECT_EQ(Go(a.sched(), [&] { left_set_rc = coro_event_await_for(&e, 0); }),
              0);
  }
  EXPECT_EQ(woke.load(), kWaiters);
  EXPECT_EQ(bad_rc.load(), 0);
  EXPECT_EQ(left_set_rc, ETIMEDOUT) << "a set was not consumed by its waiter";
  EXPECT_EQ(coro_event_destroy(&e), 0);
}

// Timed waits on two threads race with a set from a third thread (or from
// a post on one of the waiters' threads), many times. Each waiter returns
// 0 or ETIMEDOUT exactly once, nothing hangs, the event can be destroyed
// at once afterwards; an auto-reset set is consumed exactly once: by one
// waiter, or left for the next wait.
TEST(CrossThreadEvent, TimedWaitsRacingWithSetsFromOtherThreads) {
  const long rounds = Reps(5000, 4, 10);
  PumpThread a, b;
  Prng rng(2024);
  long zero_returns = 0, timeouts = 0, model_errors = 0, bad_rc = 0;
  Watchdog watchdog("await_for racing with set");
  for (long round = 0; round < rounds; ++round) {
    const bool manual = (round % 3) == 2;
    const bool set_from_pump = (round % 4) == 1;
    auto e = std::make_unique<coro_event>();
    ASSERT_EQ(coro_event_init(e.get(), manual, false), 0);
    std::atomic<int> rc[2] = {{-1}, {-1}};
    std::atomic<int> returns[2] = {{0}, {0}};
    std::atomic<int> waiters_done{0};
    const uint64_t timeout[2] = {rng.Below(200) * kUs, rng.Below(200) * kUs};
    PumpThread* pumps[2] = {&a, &b};
    for (int w = 0; w < 2; ++w) {
      ASSERT_EQ(Go(pumps[w]->sched(),
                   [&, w] {
                     rc[w].store(coro_event_await_for(e.get(), timeout[w]));
                     returns[w]++;
                     waiters_done++;  // the last touch of this round's locals
                   }),
                0);
    }
    Spin(rng.Below(20000));
    if (set_from_pump) {
      ASSERT_EQ(Post(a.sched(), [&] { EXPECT_EQ(coro_event_set(e.get()), 0); }),
                0);
    } else {
      ASSERT_EQ(coro_event_set(e.get()), 0);
    }
    ASSERT_TRUE(WaitUntil([&] { return waiters_done.load() == 2; }))
        << "round " << round << ": a waiter never returned";
    // Whether the set is still there: a wait with no time left.
    std::atomic<int> probe{-1};
    ASSERT_EQ(Go(a.sched(), [&] { probe.store(coro_event_await_for(e.get(), 0)); }),
              0);
    ASSERT_TRUE(WaitUntil([&] { return probe.load() != -1; }));
    int zeros = 0;
    for (int w = 0; w < 2; ++w) {
      const int r = rc[w].load();
      if (r == 0) {
        zeros++;
      } else if (r == ETIMEDOUT) {
        timeouts++;
      } else {
        bad_rc++;
      }
    }
    zero_returns += zeros;
    if (manual) {
      if (probe.load() != 0) model_errors++;  // a manual set stays
    } else if (zeros + (probe.load() == 0 ? 1 : 0) != 1) {
      model_errors++;  // one auto set, consumed exactly once
    }
    for (int w = 0; w < 2; ++w) {
      if (returns[w].load() != 1) model_errors++;
    }
    ASSERT_EQ(coro_event_destroy(e.get()), 0) << "round " << round;
  }
  EXPECT_EQ(bad_rc, 0);
  EXPECT_EQ(model_errors, 0);
  std::printf("[   INFO   ] %ld rounds: %ld waits woken, %ld timed out\n",
              rounds, zero_returns, timeouts);
}

// ===========================================================================
// coro_sched_alive from other threads: may be high, never low
// ===========================================================================

// Another thread sees a coroutine counted from the moment its coro_go
// returns (before the owner has even looked at it), while it waits, and
// not after it finished. The owner pumps only when told to, so no count
// changes while the other thread reads it.
TEST(CrossThreadAlive, CountsAHandedOverCoroutineUntilItFinishes) {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  coro* parker = nullptr;
  std::atomic<bool> parked{false};
  std::atomic<int> step{0};
  size_t seen_after_go = 0, seen_while_parked = 0, seen_after_finish = 99;
  std::thread other([&] {
    parker = coro_spawn(s, [](void* arg) -> void* {
      static_cast<std::atomic<bool>*>(arg)->store(true);
      EXPECT_EQ(coro_park(), 0);
      return nullptr;
    }, &parked);
    ASSERT_NE(parker, nullptr);
    seen_after_go = coro_sched_alive(s);
    step.store(1);
    ASSERT_TRUE(WaitUntil([&] { return step.load() == 2; }));
    seen_while_parked = coro_sched_alive(s);
    EXPECT_EQ(coro_wake(parker), 0);
    step.store(3);
    ASSERT_TRUE(WaitUntil([&] { return step.load() == 4; }));
    seen_after_finish = coro_sched_alive(s);
    coro_thread_detach();
  });
  ASSERT_TRUE(WaitUntil([&] { return step.load() == 1; }));
  while (!parked.load()) coro_sched_poll_for(s, kMs);
  step.store(2);
  ASSERT_TRUE(WaitUntil([&] { return step.load() == 3; }));
  EXPECT_EQ(coro_sched_run(s), 0);
  step.store(4);
  other.join();
  EXPECT_EQ(seen_after_go, 1u);
  EXPECT_EQ(seen_while_parked, 1u);
  EXPECT_EQ(seen_after_finish, 0u);
  EXPECT_EQ(coro_destroy(parker), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

// A thread hands a coroutine over and watches coro_sched_alive until the
// coroutine says it has finished: the count never reads 0 meanwhile.
//
// Regression: this caught a library bug (sched.c, alive_count / take_in). alive_count()
// loads alive_local, then arriving, both relaxed; take_in() on the owner
// does alive_local += 1, then arriving -= 1. A reader that loads
// alive_local just before the owner's two writes and arriving just after
// sees 0 + 0 for a coroutine that is alive. Rare on x86-64 (about once in
// 10^8 to 10^9 reads here: this test fails in about one run in three);
// with relaxed atomics on AArch64 the two writes may also become visible
// in the other order.
TEST(CrossThreadAlive, NeverReadsZeroWhileAHandedOverCoroutineIsOutstanding) {
  const long rounds = Reps(3000, 4, 20);
  PumpThread owner;
  long low_reads = 0, reads = 0;
  Watchdog watchdog("alive while outstanding");
  for (long round = 0; round < rounds; ++round) {
    std::atomic<bool> finished{false};
    const int flavour = static_cast<int>(round % 3);
    ASSERT_EQ(Go(owner.sched(),
                 [&, flavour] {
                   if (flavour == 1) coro_yield();
                   if (flavour == 2) coro_sleep(0);
                   finished.store(true);
                 }),
              0);
    for (;;) {
      const size_t alive = coro_sched_alive(owner.sched());
      const bool done = finished.load();
      reads++;
      if (alive == 0 && !done) low_reads++;
      if (done) break;
    }
    // The count drops once the coroutine has returned to the pump.
    ASSERT_TRUE(WaitUntil([&] { return coro_sched_alive(owner.sched()) == 0; }));
  }
  EXPECT_EQ(low_reads, 0) << "of " << reads << " reads";
}

// Several threads hand coroutines over while another watches the count:
// it is never below (handed over) - (finished).
//
// Regression: the same bug as above (alive_count / take_in).
TEST(CrossThreadAlive, NeverBelowHandedOverMinusFinished) {
  constexpr int kSenders = 2;
  const long per_sender = Reps(3000, 4, 20);
  PumpThread owner;
  std::atomic<long> handed{0}, finished{0};
  std::atomic<bool> stop{false};
  std::atomic<long> low_reads{0}, reads{0};
  std::thread watcher([&] {
    while (!stop.load()) {
      const long h = handed.load();
      const size_t alive = coro_sched_alive(owner.sched());
      const long f = finished.load();
      reads++;
      if (static_cast<long>(alive) < h - f) low_reads++;
    }
  });
  std::vector<std::thread> senders;
  for (int t = 0; t < kSenders; ++t) {
    senders.emplace_back([&] {
      for (long i = 0; i < per_sender; ++i) {
        ASSERT_EQ(Go(owner.sched(),
                     [&] {
                       coro_yield();
                       finished++;
                     }),
                  0);
        handed++;
      }
      coro_thread_detach();
    });
  }
  for (auto& t : senders) t.join();
  EXPECT_TRUE(WaitUntil([&] { return finished.load() == kSenders * per_sender; }));
  stop.store(true);
  watcher.join();
  EXPECT_EQ(low_reads.load(), 0) << "of " << reads.load() << " reads";
}

// ===========================================================================
// Loopers
// ===========================================================================

// A looper's thread carries the given name (as seen by its coroutines);
// coroutines and posts handed to it run there.
TEST(Looper, StartNamesItsThreadAndRunsGoesAndPostsOnIt) {
  coro_looper* l = coro_looper_start("coro-looper-1");
  ASSERT_NE(l, nullptr);
  coro_sched* s = coro_looper_sched(l);
  ASSERT_NE(s, nullptr);
  std::string name;
  pid_t coroutine_tid = 0, post_tid = 0;
  bool in_coroutine = false;
  std::atomic<int> done{0};
  ASSERT_EQ(Go(s,
               [&] {
                 char buf[32] = {0};
                 pthread_getname_np(pthread_self(), buf, sizeof buf);
                 name = buf;
                 coroutine_tid = Tid();
                 in_coroutine = coro_self() != nullptr && coro_sched_self() == s;
                 done++;
               }),
            0);
  ASSERT_EQ(Post(s,
                 [&] {
                   post_tid = Tid();
                   done++;
                 }),
            0);
  ASSERT_TRUE(WaitUntil([&] { return done.load() == 2; }));
  EXPECT_EQ(name, "coro-looper-1");
  EXPECT_TRUE(in_coroutine);
  EXPECT_NE(coroutine_tid, Tid());
  EXPECT_EQ(post_tid, coroutine_tid);
  // Its scheduler belongs to its thread, not to ours.
  EXPECT_EQ(coro_sched_run(s), EPERM);
  EXPECT_FALSE(coro_sched_step(s));
  EXPECT_EQ(coro_sched_destroy(s), EPERM);
  EXPECT_EQ(coro_looper_stop(l), 0);
}

// Names keep their first 15 characters (the kernel's limit); no name works.
TEST(Looper, LongNamesAreCutAndNoNameIsFine) {
  coro_looper* named = coro_looper_start("a-very-long-looper-name");
  ASSERT_NE(named, nullptr);
  coro_looper* nameless = coro_looper_start(nullptr);
  ASSERT_NE(nameless, nullptr);
  std::string name;
  CallOn(coro_looper_sched(named), [&] {
    char buf[32] = {0};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    name = buf;
  });
  EXPECT_EQ(name, std::string("a-very-long-looper-name").substr(0, 15));
  std::atomic<bool> ran{false};
  ASSERT_EQ(Go(coro_looper_sched(nameless), [&] { ran.store(true); }), 0);
  EXPECT_TRUE(WaitUntil([&] { return ran.load(); }));
  EXPECT_EQ(coro_looper_stop(named), 0);
  EXPECT_EQ(coro_looper_stop(nameless), 0);
}

// Several threads post and go into one looper; everything runs on the
// looper's thread, each thread's posts in order, and coro_looper_stop,
// called as soon as the producers are done, lets all of it finish.
TEST(Looper, WorkFromSeveralThreadsRunsOnItAndStopFinishesIt) {
  constexpr int kProducers = 4;
  const int per_producer = static_cast<int>(Reps(1000, 2, 5));
  coro_looper* l = coro_looper_start("busy-looper");
  ASSERT_NE(l, nullptr);
  coro_sched* s = coro_looper_sched(l);
  pid_t looper_tid = 0;
  CallOn(s, [&] { looper_tid = Tid(); });
  // Written on the looper's thread only; read after the join in stop.
  std::vector<int> next_post(kProducers, 0);
  long posts_out_of_order = 0, wrong_thread = 0, posts_ran = 0;
  long coroutines_ran = 0;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        EXPECT_EQ(Post(s,
                       [&, p, i] {
                         if (Tid() != looper_tid) wrong_thread++;
                         if (next_post[p] != i) posts_out_of_order++;
                         next_post[p] = i + 1;
                         posts_ran++;
                       }),
                  0);
        EXPECT_EQ(Go(s,
                     [&, i] {
                       if (i % 2 == 0) coro_sleep((i % 7) * 100 * kUs);
                       if (Tid() != looper_tid) wrong_thread++;
                       coroutines_ran++;
                     }),
                  0);
      }
      coro_thread_detach();
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(coro_looper_stop(l), 0);
  EXPECT_EQ(posts_ran, kProducers * per_producer);
  EXPECT_EQ(coroutines_ran, kProducers * per_producer);
  EXPECT_EQ(posts_out_of_order, 0);
  EXPECT_EQ(wrong_thread, 0);
}

// coro_looper_stop lets queued work finish: sleepers, posts that start
// more coroutines, coroutines that start more coroutines.
TEST(Looper, StopLetsQueuedWorkFinish) {
  coro_looper* l = coro_looper_start("stopping");
  ASSERT_NE(l, nullptr);
  coro_sched* s = coro_looper_sched(l);
  long finished = 0;  // looper thread only; read after stop joined it
  constexpr int kEach = 30;
  for (int i = 0; i < kEach; ++i) {
    ASSERT_EQ(Go(s,
                 [&, i] {
                   coro_sleep((1 + i % 20) * kMs);
                   finished++;
                 }),
              0);
    ASSERT_EQ(Post(s,
                   [&, s, i] {
                     EXPECT_EQ(Go(s,
                                  [&, i] {
                                    coro_sleep((1 + i % 10) * kMs);
                                    finished++;
                                  }),
                               0);
                   }),
              0);
    ASSERT_EQ(Go(s,
                 [&, s] {
                   EXPECT_EQ(Go(s,
                                [&] {
                                  coro_sleep(5 * kMs);
                                  finished++;
                                }),
                             0);
                   finished++;
                 }),
              0);
  }
  EXPECT_EQ(coro_looper_stop(l), 0);
  EXPECT_EQ(finished, 4 * kEach);
}

// Stop errors: NULL is EINVAL; on the looper's own thread (from a post or
// a coroutine on it) it is EPERM and the looper keeps running. From
// another looper's coroutine it works.
TEST(Looper, StopErrorsAndStoppingFromAnotherLooper) {
  EXPECT_EQ(coro_looper_stop(nullptr), EINVAL);
  EXPECT_EQ(coro_looper_sched(nullptr), nullptr);

  coro_looper* self_stopper = coro_looper_start("self-stop");
  ASSERT_NE(self_stopper, nullptr);
  coro_sched* s = coro_looper_sched(self_stopper);
  std::atomic<int> from_post{-1}, from_coroutine{-1};
  ASSERT_EQ(Post(s, [&] { from_post.store(coro_looper_stop(self_stopper)); }), 0);
  ASSERT_EQ(Go(s, [&] { from_coroutine.store(coro_looper_stop(self_stopper)); }),
            0);
  ASSERT_TRUE(WaitUntil([&] { return from_post.load() != -1 && from_coroutine.load() != -1; }));
  EXPECT_EQ(from_post.load(), EPERM);
  EXPECT_EQ(from_coroutine.load(), EPERM);
  std::atomic<bool> still_runs{false};
  ASSERT_EQ(Post(s, [&] { still_runs.store(true); }), 0);
  EXPECT_TRUE(WaitUntil([&] { return still_runs.load(); }));

  // Another looper's coroutine stops it (joining blocks that looper for a
  // moment, which is allowed).
  coro_looper* other = coro_looper_start("stopper");
  ASSERT_NE(other, nullptr);
  std::atomic<int> from_other{-1};
  ASSERT_EQ(Go(coro_looper_sched(other),
               [&] { from_other.store(coro_looper_stop(self_stopper)); }),
            0);
  EXPECT_TRUE(WaitUntil([&] { return from_other.load() != -1; }));
  EXPECT_EQ(from_other.load(), 0);
  EXPECT_EQ(coro_looper_stop(other), 0);
}

// Start and stop loopers many times, with and without work in flight.
TEST(Looper, StartAndStopManyTimes) {
  const int rounds = 50;
  Watchdog watchdog("looper start/stop");
  for (int round = 0; round < rounds; ++round) {
    coro_looper* l = coro_looper_start("churn");
    ASSERT_NE(l, nullptr) << "round " << round;
    coro_sched* s = coro_looper_sched(l);
    int ran = 0;  // looper thread; read after stop
    if (round % 3 != 0) {
      for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(Go(s,
                     [&, i] {
                       if (i % 2) coro_sleep(100 * kUs);
                       ran++;
                     }),
                  0);
        ASSERT_EQ(Post(s, [&] { ran++; }), 0);
      }
    }
    ASSERT_EQ(coro_looper_stop(l), 0);
    EXPECT_EQ(ran, round % 3 != 0 ? 20 : 0) << "round " << round;
  }
}

// ===========================================================================
// Pools
// ===========================================================================

TEST(Pool, ZeroWorkersIsEinval) {
  errno = 0;
  EXPECT_EQ(coro_pool_create(0, false), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(coro_pool_create(0, true), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Pool, NullArgumentsAndOutOfRangeWorkersAreEinval) {
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(coro_pool_go(nullptr, ReturnArg, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_go(p, nullptr, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_go_on(nullptr, 0, ReturnArg, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_go_on(p, 0, nullptr, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_go_on(p, 2, ReturnArg, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_go_on(p, SIZE_MAX, ReturnArg, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_post(nullptr, [](coro_sched*, void*) {}, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_post(p, nullptr, nullptr), EINVAL);
  EXPECT_EQ(coro_pool_wait(nullptr), EINVAL);
  EXPECT_EQ(coro_pool_destroy(nullptr), EINVAL);
  EXPECT_EQ(coro_pool_wait(p), 0);  // nothing was accepted
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// The pool's workers are threads that run at the same time: two
// coroutines pinned to two workers each block their thread until the other
// arrives.
TEST(Pool, TwoWorkersRunBlockingCoroutinesAtOnce) {
  const int rounds = static_cast<int>(Reps(20, 2, 4));
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  for (int round = 0; round < rounds; ++round) {
    Rendezvous meeting(2);
    std::atomic<int> met{0};
    for (size_t w = 0; w < 2; ++w) {
      ASSERT_EQ(PoolGoOn(p, w,
                         [&] {
                           if (meeting.ArriveAndWaitFor(5 * CORO_SEC)) met++;
                         }),
                0);
    }
    ASSERT_EQ(coro_pool_wait(p), 0);
    EXPECT_EQ(met.load(), 2) << "round " << round;
  }
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// With two workers, two coroutines handed to the pool with coro_pool_go
// run at the same time on two threads: each blocks its thread until the
// other arrives.
//
// Regression: this caught a library bug (pool.c, worker_turn / wake_an_idle_worker), the
// same as in ABlockedWorkerDoesNotHoldBackACoroutineQueuedAfterIt:
// when the first coroutine is already blocking worker A (which still has
// `idle` set), the second coro_pool_go wakes A instead of the sleeping
// worker B, and both end up on A, one after the other. About half the
// rounds fail here.
TEST(Pool, GoRunsTwoBlockingCoroutinesAtOnce) {
  const int rounds = static_cast<int>(Reps(20, 2, 4));
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  int met_rounds = 0;
  for (int round = 0; round < rounds; ++round) {
    Rendezvous meeting(2);
    std::atomic<int> met{0};
    std::atomic<pid_t> tids[2] = {{0}, {0}};
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(PoolGo(p,
                       [&, i] {
                         tids[i].store(Tid());
                         if (meeting.ArriveAndWaitFor(5 * CORO_SEC)) met++;
                       }),
                0);
    }
    ASSERT_EQ(coro_pool_wait(p), 0);
    if (met.load() == 2) met_rounds++;
    EXPECT_EQ(met.load(), 2) << "round " << round
                             << ": the two ran one after the other";
    EXPECT_NE(tids[0].load(), tids[1].load());
  }
  EXPECT_EQ(met_rounds, rounds);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// A worker stuck in a long blocking call does not hold back a coroutine
// queued after it started: another (idle) worker runs it. The blocker
// blocks its thread until the queued coroutine has run, 10 s at most: if
// the queued one waits for the blocker, the blocker's wait runs out first.
// (No fixed sleep: a loaded machine may take its time to run the idle
// worker; the test only asks that it runs before the blocker lets go.)
//
// Regression: this caught a library bug (pool.c, worker_turn / wake_an_idle_worker). A
// worker sets `idle` before coro_sched_poll_until(FOREVER) and keeps it
// while that poll runs its ready coroutines, here the blocker; the next
// coro_pool_go "wakes" that worker (the first idle flag it finds) instead
// of the one asleep, so the new coroutine waits for the blocker to end.
TEST(Pool, ABlockedWorkerDoesNotHoldBackACoroutineQueuedAfterIt) {
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  for (int round = 0; round < 5; ++round) {
    std::atomic<bool> blocker_started{false};
    std::atomic<uint64_t> blocker_ended{0}, quick_ended{0};
    ASSERT_EQ(PoolGo(p,
                     [&] {
                       blocker_started.store(true);
                       // Blocks the worker's thread (a real blocking wait).
                       WaitUntil([&] { return quick_ended.load() != 0; },
                                 10 * CORO_SEC);
                       blocker_ended.store(coro_now());
                     }),
              0);
    ASSERT_TRUE(WaitUntil([&] { return blocker_started.load(); }));
    ASSERT_EQ(PoolGo(p, [&] { quick_ended.store(coro_now()); }), 0);
    ASSERT_EQ(coro_pool_wait(p), 0);
    EXPECT_LT(quick_ended.load(), blocker_ended.load())
        << "round " << round << ": the queued coroutine waited for the blocker";
  }
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// Coroutines queued behind a blocker, all handed over at once: none of
// them waits for the blocker. The blocker blocks its thread until all ten
// have run, 10 s at most (as above: no fixed sleep).
//
// Regression: this caught a library bug (pool.c, take_tasks with TAKE_WHEN_IDLE = 16). A
// worker whose previous turn ran nothing takes up to 16 queued coroutines
// onto its own scheduler at once; once there they are never handed to
// another worker, so those behind a blocker wait for it. Deterministic with
// use_caller (worker 0's first turn inside coro_pool_wait takes them all);
// about 1% of fresh pools without it (a worker's first turn).
TEST(Pool, QueuedCoroutinesDoNotWaitBehindABlocker) {
  for (bool use_caller : {true, false}) {
    for (int round = 0; round < 5; ++round) {
      coro_pool* p = coro_pool_create(2, use_caller);
      ASSERT_NE(p, nullptr);
      std::atomic<uint64_t> blocker_ended{0};
      std::atomic<int> before{0}, total{0};
      ASSERT_EQ(PoolGo(p,
                       [&] {
                         // Blocks the worker's thread (a real blocking wait).
                         WaitUntil([&] { return total.load() == 10; },
                                   10 * CORO_SEC);
                         blocker_ended.store(coro_now());
                       }),
                0);
      for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(PoolGo(p,
                         [&] {
                           if (blocker_ended.load() == 0) before++;
                           total++;
                         }),
                  0);
      }
      ASSERT_EQ(coro_pool_wait(p), 0);
      EXPECT_EQ(total.load(), 10);
      EXPECT_EQ(before.load(), 10)
          << (use_caller ? "use_caller" : "threads only") << ", round " << round
          << ": queued coroutines waited for the blocker";
      EXPECT_EQ(coro_pool_destroy(p), 0);
    }
  }
}

// coro_pool_go_on pins: every coroutine sent to worker i runs on the same
// thread, a different thread per worker, none of them ours.
TEST(Pool, GoOnPinsToTheGivenWorker) {
  constexpr size_t kWorkers = 3;
  constexpr int kPerWorker = 20;
  coro_pool* p = coro_pool_create(kWorkers, false);
  ASSERT_NE(p, nullptr);
  std::mutex mu;
  std::vector<std::set<pid_t>> seen(kWorkers);
  std::atomic<int> moved{0};
  for (size_t w = 0; w < kWorkers; ++w) {
    for (int i = 0; i < kPerWorker; ++i) {
      ASSERT_EQ(PoolGoOn(p, w,
                         [&, w, i] {
                           const pid_t first = Tid();
                           coro_yield();
                           coro_sleep((i % 5) * 100 * kUs);
                           if (Tid() != first) moved++;
                           std::lock_guard<std::mutex> lock(mu);
                           seen[w].insert(first);
                         }),
                0);
    }
  }
  EXPECT_EQ(coro_pool_go_on(p, kWorkers, ReturnArg, nullptr), EINVAL);
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(moved.load(), 0);
  std::set<pid_t> all;
  for (size_t w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(seen[w].size(), 1u) << "worker " << w << " ran on several threads";
    all.insert(seen[w].begin(), seen[w].end());
  }
  EXPECT_EQ(all.size(), kWorkers) << "two workers share a thread";
  EXPECT_EQ(all.count(Tid()), 0u);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// A coroutine started by the pool never changes thread, whatever it does:
// yield, sleep, park with a timeout, block its thread for a moment.
TEST(Pool, AStartedCoroutineNeverChangesThread) {
  const int coroutines = static_cast<int>(Reps(400, 2, 4));
  coro_pool* p = coro_pool_create(4, false);
  ASSERT_NE(p, nullptr);
  std::atomic<int> moved{0}, finished{0}, on_caller{0};
  const pid_t me = Tid();
  for (int i = 0; i < coroutines; ++i) {
    ASSERT_EQ(PoolGo(p,
                     [&, i] {
                       Prng rng(static_cast<uint64_t>(i));
                       const pid_t first = Tid();
                       if (first == me) on_caller++;
                       for (int k = 0; k < 5; ++k) {
                         switch (rng.Below(4)) {
                           case 0: coro_yield(); break;
                           case 1: coro_sleep(rng.Below(300) * kUs); break;
                           case 2: coro_park_for(rng.Below(100) * kUs); break;
                           default: SleepThread(rng.Below(100) * kUs);
                         }
                         if (Tid() != first) moved++;
                       }
                       finished++;
                     }),
              0);
  }
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(finished.load(), coroutines);
  EXPECT_EQ(moved.load(), 0);
  EXPECT_EQ(on_caller.load(), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// coro_pool_post runs a plain function (not a coroutine) on a worker's
// thread, with that worker's scheduler.
TEST(Pool, PostRunsOnAWorkerThread) {
  constexpr size_t kWorkers = 2;
  coro_pool* p = coro_pool_create(kWorkers, false);
  ASSERT_NE(p, nullptr);
  std::mutex mu;
  std::set<pid_t> worker_tids;
  for (size_t w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(PoolGoOn(p, w,
                       [&] {
                         std::lock_guard<std::mutex> lock(mu);
                         worker_tids.insert(Tid());
                       }),
              0);
  }
  ASSERT_EQ(coro_pool_wait(p), 0);
  ASSERT_EQ(worker_tids.size(), kWorkers);
  constexpr int kPosts = 20;
  std::atomic<int> ran{0}, not_a_worker{0}, in_coroutine{0}, wrong_sched{0};
  for (int i = 0; i < kPosts; ++i) {
    ASSERT_EQ(PoolPost(p,
                       [&](coro_sched* s) {
                         if (worker_tids.count(Tid()) == 0) not_a_worker++;
                         if (coro_self() != nullptr) in_coroutine++;
                         if (coro_sched_self() != s) wrong_sched++;
                         ran++;
                       }),
              0);
  }
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(ran.load(), kPosts);
  EXPECT_EQ(not_a_worker.load(), 0);
  EXPECT_EQ(in_coroutine.load(), 0);
  EXPECT_EQ(wrong_sched.load(), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// coro_pool_wait returns once every coroutine and post handed in has
// finished, including coroutines that wait on timers.
TEST(Pool, WaitReturnsWhenNothingIsAlive) {
  coro_pool* p = coro_pool_create(3, false);
  ASSERT_NE(p, nullptr);
  std::atomic<int> finished{0};
  constexpr int kCoroutines = 50, kPosts = 20;
  for (int i = 0; i < kCoroutines; ++i) {
    ASSERT_EQ(PoolGo(p,
                     [&, i] {
                       coro_sleep((i % 10) * kMs);
                       finished++;
                     }),
              0);
  }
  for (int i = 0; i < kPosts; ++i) {
    ASSERT_EQ(PoolPost(p, [&](coro_sched*) { finished++; }), 0);
  }
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(finished.load(), kCoroutines + kPosts);
  EXPECT_EQ(coro_pool_wait(p), 0);  // nothing left: returns at once
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// With use_caller the creating thread is worker 0: it runs work (here,
// what is pinned to worker 0) inside coro_pool_wait. Waiting for or
// destroying such a pool from another thread is EPERM.
TEST(Pool, UseCallerRunsWorkInsideWaitOnTheCallersThread) {
  coro_pool* p = coro_pool_create(2, true);
  ASSERT_NE(p, nullptr);
  const pid_t me = Tid();
  std::atomic<int> on_caller{0}, pinned_elsewhere{0}, finished{0};
  std::atomic<bool> waiting{false};
  std::atomic<int> early{0};
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(PoolGoOn(p, 0,
                       [&] {
                         if (!waiting.load()) early++;
                         if (Tid() == me) {
                           on_caller++;
                         } else {
                           pinned_elsewhere++;
                         }
                         coro_yield();
                         finished++;
                       }),
              0);
  }
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(PoolGo(p,
                     [&] {
                       coro_sleep(kMs);
                       finished++;
                     }),
              0);
  }
  OnAnotherThread([&] {
    EXPECT_EQ(coro_pool_wait(p), EPERM);
    EXPECT_EQ(coro_pool_destroy(p), EPERM);
  });
  SleepThread(20 * kMs);
  EXPECT_EQ(on_caller.load(), 0) << "worker 0 ran before coro_pool_wait";
  waiting.store(true);
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(finished.load(), 15);
  EXPECT_EQ(on_caller.load(), 5);
  EXPECT_EQ(pinned_elsewhere.load(), 0);
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// Destroying a pool with work alive is EBUSY (and changes nothing); after
// coro_pool_wait it succeeds.
TEST(Pool, DestroyWithWorkOutstandingIsEbusy) {
  for (bool use_caller : {false, true}) {
    coro_pool* p = coro_pool_create(2, use_caller);
    ASSERT_NE(p, nullptr);
    std::atomic<bool> release{false};
    std::atomic<int> finished{0};
    ASSERT_EQ(PoolGo(p,
                     [&] {
                       while (!release.load()) coro_sleep(kMs);
                       finished++;
                     }),
              0);
    ASSERT_EQ(PoolPost(p, [&](coro_sched*) { finished++; }), 0);
    EXPECT_EQ(coro_pool_destroy(p), EBUSY);
    release.store(true);
    ASSERT_EQ(coro_pool_wait(p), 0);
    EXPECT_EQ(finished.load(), 2);
    EXPECT_EQ(coro_pool_destroy(p), 0);
  }
}

// From inside the pool — a coroutine or a post on a worker, worker 0 of a
// use_caller pool included — waiting for or destroying it is EPERM.
TEST(Pool, WaitOrDestroyFromInsideThePoolIsEperm) {
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  std::atomic<int> wait_rc{-1}, destroy_rc{-1}, post_wait_rc{-1},
      post_destroy_rc{-1};
  ASSERT_EQ(PoolGo(p,
                   [&] {
                     wait_rc.store(coro_pool_wait(p));
                     destroy_rc.store(coro_pool_destroy(p));
                   }),
            0);
  ASSERT_EQ(PoolPost(p,
                     [&](coro_sched*) {
                       post_wait_rc.store(coro_pool_wait(p));
                       post_destroy_rc.store(coro_pool_destroy(p));
                     }),
            0);
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(wait_rc.load(), EPERM);
  EXPECT_EQ(destroy_rc.load(), EPERM);
  EXPECT_EQ(post_wait_rc.load(), EPERM);
  EXPECT_EQ(post_destroy_rc.load(), EPERM);
  EXPECT_EQ(coro_pool_destroy(p), 0);

  coro_pool* q = coro_pool_create(2, true);
  ASSERT_NE(q, nullptr);
  int caller_wait_rc = -1, caller_destroy_rc = -1;
  ASSERT_EQ(PoolGoOn(q, 0,
                     [&] {
                       caller_wait_rc = coro_pool_wait(q);
                       caller_destroy_rc = coro_pool_destroy(q);
                     }),
            0);
  ASSERT_EQ(coro_pool_wait(q), 0);
  EXPECT_EQ(caller_wait_rc, EPERM);
  EXPECT_EQ(caller_destroy_rc, EPERM);
  EXPECT_EQ(coro_pool_destroy(q), 0);
}

// ---------------------------------------------------------------------------
// coro_pool_call

// What SlowAnswer sees of the caller's side.
struct SlowAnswerArg {
  std::atomic<pid_t> tid{0};     // the thread fn ran on
  std::atomic<int>* ticks;       // counted by a coroutine beside the caller
};

// Blocks its thread (exactly what must stay off a pump) until the caller's
// scheduler has run another coroutine five more times, 10 s at most. So a
// pump blocked by the call can never see those ticks.
void* SlowAnswer(void* arg) {
  auto* a = static_cast<SlowAnswerArg*>(arg);
  a->tid = Tid();
  const int start = a->ticks->load();
  WaitUntil([&] { return a->ticks->load() >= start + 5; }, 10 * CORO_SEC);
  return reinterpret_cast<void*>(42);
}

// From a coroutine on a scheduler unrelated to the pool: fn runs on a pool
// worker, the caller is parked meanwhile (another coroutine on its
// scheduler keeps running: fn waits for five of its turns), and it resumes
// on its own thread with fn's result.
TEST(PoolCall, ParksTheCallerAndResumesItOnItsOwnThreadWithTheResult) {
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  const pid_t me = Tid();
  std::atomic<int> ticks{0};
  SlowAnswerArg answer;
  answer.ticks = &ticks;
  bool in_call = false;
  int call_rc = -1;
  void* result = nullptr;
  pid_t resumed_on = 0;
  coro* caller_before = nullptr;
  coro* caller_after = nullptr;
  ASSERT_EQ(Go(s,
               [&] {
                 caller_before = coro_self();
                 in_call = true;
                 call_rc = coro_pool_call(p, SlowAnswer, &answer, &result);
                 in_call = false;
                 resumed_on = Tid();
                 caller_after = coro_self();
               }),
            0);
  ASSERT_EQ(Go(s,
               [&] {
                 while (in_call) {
                   ticks++;
                   coro_sleep(2 * kMs);
                 }
               }),
            0);
  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(call_rc, 0);
  EXPECT_EQ(result, reinterpret_cast<void*>(42));
  EXPECT_NE(answer.tid.load(), 0);
  EXPECT_NE(answer.tid.load(), me) << "fn ran on the caller's thread";
  EXPECT_EQ(resumed_on, me);
  EXPECT_EQ(caller_after, caller_before);
  EXPECT_GE(ticks.load(), 5)
      << "the caller's scheduler was blocked during the call";
  EXPECT_EQ(coro_sched_destroy(s), 0);
  EXPECT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// Many coroutines on two loopers call into one pool at once; each gets its
// own answer and resumes on its own looper's thread.
TEST(PoolCall, ManyCallersFromSeveralThreadsEachGetTheirOwnResult) {
  const int per_looper = static_cast<int>(Reps(200, 2, 4));
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  coro_looper* loopers[2] = {coro_looper_start("caller-a"),
                             coro_looper_start("caller-b")};
  ASSERT_NE(loopers[0], nullptr);
  ASSERT_NE(loopers[1], nullptr);
  pid_t looper_tid[2] = {0, 0};
  for (int l = 0; l < 2; ++l) {
    CallOn(coro_looper_sched(loopers[l]), [&, l] { looper_tid[l] = Tid(); });
  }
  std::atomic<int> ok{0}, wrong{0};
  for (int l = 0; l < 2; ++l) {
    for (int i = 0; i < per_looper; ++i) {
      const uintptr_t value = static_cast<uintptr_t>(l * 100000 + i + 1);
      ASSERT_EQ(Go(coro_looper_sched(loopers[l]),
                   [&, l, value] {
                     void* result = nullptr;
                     const int rc = coro_pool_call(
                         p, ReturnArg, reinterpret_cast<void*>(value), &result);
                     if (rc == 0 && result == reinterpret_cast<void*>(value) &&
                         Tid() == looper_tid[l]) {
                       ok++;
                     } else {
                       wrong++;
                     }
                   }),
                0);
    }
  }
  EXPECT_EQ(coro_looper_stop(loopers[0]), 0);
  EXPECT_EQ(coro_looper_stop(loopers[1]), 0);
  EXPECT_EQ(ok.load(), 2 * per_looper);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// A coroutine of a one-worker pool may call into the same pool: it parks,
// so its worker is free to run the call.
TEST(PoolCall, FromTheOnlyWorkerOfTheSamePoolDoesNotDeadlock) {
  coro_pool* p = coro_pool_create(1, false);
  ASSERT_NE(p, nullptr);
  std::atomic<int> rc{-1};
  std::atomic<void*> result{nullptr};
  Watchdog watchdog("pool_call from its own worker");
  ASSERT_EQ(PoolGo(p,
                   [&] {
                     void* r = nullptr;
                     rc.store(coro_pool_call(p, ReturnArg,
                                             reinterpret_cast<void*>(7), &r));
                     result.store(r);
                   }),
            0);
  ASSERT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(rc.load(), 0);
  EXPECT_EQ(result.load(), reinterpret_cast<void*>(7));
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

void* CallFromAHandMadeCoroutine(void* arg) {
  return reinterpret_cast<void*>(static_cast<intptr_t>(
      coro_pool_call(static_cast<coro_pool*>(arg), ReturnArg, nullptr, nullptr)));
}

// coro_pool_call outside a scheduled coroutine is EPERM (a thread's own
// stack, a post, a hand-made coroutine); a NULL pool or fn is EINVAL; a
// NULL result pointer is allowed.
TEST(PoolCall, Errors) {
  coro_pool* p = coro_pool_create(1, false);
  ASSERT_NE(p, nullptr);
  void* result = nullptr;
  EXPECT_EQ(coro_pool_call(p, ReturnArg, nullptr, &result), EPERM);

  coro* hand_made = coro_create(CallFromAHandMadeCoroutine, p, 0);
  ASSERT_NE(hand_made, nullptr);
  ASSERT_EQ(coro_resume(hand_made), 0);
  EXPECT_EQ(coro_result(hand_made), reinterpret_cast<void*>(EPERM));
  EXPECT_EQ(coro_destroy(hand_made), 0);

  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  int null_pool = -1, null_fn = -1, null_result = -1, in_post = -1;
  ASSERT_EQ(Go(s,
               [&] {
                 null_pool = coro_pool_call(nullptr, ReturnArg, nullptr, &result);
                 null_fn = coro_pool_call(p, nullptr, nullptr, &result);
                 null_result = coro_pool_call(p, ReturnArg, nullptr, nullptr);
               }),
            0);
  ASSERT_EQ(Post(s, [&] { in_post = coro_pool_call(p, ReturnArg, nullptr, &result); }),
            0);
  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(null_pool, EINVAL);
  EXPECT_EQ(null_fn, EINVAL);
  EXPECT_EQ(null_result, 0);
  EXPECT_EQ(in_post, EPERM);
  EXPECT_EQ(coro_sched_destroy(s), 0);
  EXPECT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// After coro_pool_call returns, the caller holds no wake-up permit that
// nobody sent: its next coro_park_for times out.
//
// Regression: this caught a library bug (pool.c, coro_pool_call / call_body). The worker
// ends the call with coro_wake(caller). When fn is quick, that wake lands
// before the caller parks (or while it yields on CALL_DONE); the caller
// then sees CALL_RELEASED and returns without parking, and the wake stays
// behind as a permit: the caller's next coro_park() returns 0 at once
// although nobody woke it. Seen after ~99% of quick calls.
TEST(PoolCall, LeavesNoWakePermitBehind) {
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  constexpr int kCalls = 200;
  int spurious = 0;
  ASSERT_EQ(Go(s,
               [&] {
                 for (int i = 0; i < kCalls; ++i) {
                   void* r = nullptr;
                   EXPECT_EQ(coro_pool_call(p, ReturnArg, nullptr, &r), 0);
                   if (coro_park_for(100 * kUs) == 0) spurious++;
                 }
               }),
            0);
  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(spurious, 0) << "parks that returned 0 with no wake, of " << kCalls;
  EXPECT_EQ(coro_sched_destroy(s), 0);
  // The last call's task may still be finishing on its worker (the result
  // is delivered before the task is counted done): wait, then destroy.
  EXPECT_EQ(coro_pool_wait(p), 0);
  EXPECT_EQ(coro_pool_destroy(p), 0);
}

// Create and destroy pools many times, with work in flight, both kinds.
TEST(Pool, CreateAndDestroyManyTimes) {
  const int rounds = 50;
  Watchdog watchdog("pool create/destroy");
  for (int round = 0; round < rounds; ++round) {
    const bool use_caller = round % 2 == 1;
    const size_t workers = 1 + static_cast<size_t>(round % 3);
    coro_pool* p = coro_pool_create(workers, use_caller);
    ASSERT_NE(p, nullptr) << "round " << round;
    std::atomic<int> ran{0};
    const int work = round % 4 == 0 ? 0 : 12;
    for (int i = 0; i < work; ++i) {
      if (i % 3 == 0) {
        ASSERT_EQ(PoolPost(p, [&](coro_sched*) { ran++; }), 0);
      } else {
        ASSERT_EQ(PoolGo(p,
                         [&, i] {
                           if (i % 2) coro_sleep(100 * kUs);
                           ran++;
                         }),
                  0);
      }
    }
    ASSERT_EQ(coro_pool_wait(p), 0);
    EXPECT_EQ(ran.load(), work) << "round " << round;
    ASSERT_EQ(coro_pool_destroy(p), 0) << "round " << round;
  }
}

// ===========================================================================
// coro_thread_detach
// ===========================================================================

// Runs a few coroutines through a fresh scheduler on the calling thread.
void UseSomeCoroutines() {
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  int ran = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Go(s,
                 [&] {
                   coro_yield();
                   coro_sleep(100 * kUs);
                   ran++;
                 }),
              0);
  }
  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(coro_sched_destroy(s), 0);
}

bool AltStackEnabled() {
  stack_t st{};
  sigaltstack(nullptr, &st);
  return (st.ss_flags & SS_DISABLE) == 0;
}

// With the overflow handler installed, coro_thread_detach releases the
// thread's alternate signal stack (when the library made it); coroutines
// work again afterwards, and a detach while a coroutine runs frees nothing.
TEST(ThreadDetach, WorksWithTheOverflowHandlerAndCoroutinesWorkAgainAfter) {
  ASSERT_EQ(coro_overflow_handler_install(), 0);
  std::thread t([] {
    // A tool (ASan) may give every thread its own signal stack; only one
    // the library made is the library's to release.
    const bool had_one = AltStackEnabled();
    for (int round = 0; round < 3; ++round) {
      ASSERT_NO_FATAL_FAILURE(UseSomeCoroutines());
      EXPECT_TRUE(AltStackEnabled()) << "round " << round;
      coro_thread_detach();
      if (!had_one) {
        EXPECT_FALSE(AltStackEnabled()) << "round " << round;
      }
      coro_thread_detach();  // twice is harmless
    }
    // Inside a coroutine: nothing is freed, the coroutine carries on.
    coro_sched* s = coro_sched_create();
    ASSERT_NE(s, nullptr);
    bool carried_on = false, still_enabled = false;
    ASSERT_EQ(Go(s,
                 [&] {
                   coro_thread_detach();
                   still_enabled = AltStackEnabled();
                   coro_yield();
                   carried_on = true;
                 }),
              0);
    EXPECT_EQ(coro_sched_run(s), 0);
    EXPECT_TRUE(carried_on);
    EXPECT_TRUE(still_enabled);
    EXPECT_EQ(coro_sched_destroy(s), 0);
    coro_thread_detach();
  });
  t.join();

  // A thread that never used coroutines may detach too.
  std::thread idle([] { coro_thread_detach(); });
  idle.join();
}

// Threads that hand work over (and never own a scheduler) may detach, and
// hand work over again afterwards.
TEST(ThreadDetach, AThreadThatOnlyHandsWorkOverMayDetachAndContinue) {
  PumpThread owner;
  std::atomic<int> ran{0};
  OnAnotherThread([&] {
    EXPECT_EQ(Go(owner.sched(), [&] { ran++; }), 0);
    coro_thread_detach();
    EXPECT_EQ(Go(owner.sched(), [&] { ran++; }), 0);
    EXPECT_EQ(Post(owner.sched(), [&] { ran++; }), 0);
  });
  EXPECT_TRUE(WaitUntil([&] { return ran.load() == 3; }));
}

// Regression: on a scheduler with dense stacks, coro_sched_set_stack_size()
// used to free the dense allocator and make a new one while another
// thread's coro_go() could be carving a stack from it (a data race that
// ThreadSanitizer reports, and a use after free). Now the allocator is
// published once and resized in place under its lock. The owner changes
// the size over and over while another thread starts coroutines: every
// call answers 0 (nothing carved yet) or EBUSY (stacks carved), every
// coroutine runs, and dense mode stays on (the size stays fixed).
//
// The sender waits for the first coroutine to have run (a stack is carved)
// before it sends the second half: so the owner asks at least once more
// while coroutines still arrive, however the threads are scheduled (under
// Valgrind, which runs one thread at a time, the first half may arrive all
// at once).
TEST(DenseStacks, StackSizeChangesRaceSafelyWithGoFromAnotherThread) {
  const long gos = Reps(3000, 4, 20);
  std::atomic<coro_sched*> sched{nullptr};
  std::atomic<bool> all_sent{false};
  std::atomic<long> ran{0};
  long answered_ok = 0, answered_busy = 0, answered_other = 0;
  int busy_after = -1;
  Watchdog watchdog("coro_sched_set_stack_size racing with coro_go");
  std::thread owner([&] {
    coro_sched* s = coro_sched_create();
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(coro_sched_use_dense_stacks(s), 0);
    sched.store(s);
    for (long turn = 0; !all_sent.load() || coro_sched_alive(s) > 0; ++turn) {
      const size_t size = (turn % 2 == 0 ? 16 : 32) * 1024;
      const int rc = coro_sched_set_stack_size(s, size);
      if (rc == 0) {
        answered_ok++;
      } else if (rc == EBUSY) {
        answered_busy++;
      } else {
        answered_other++;
      }
      coro_sched_poll_for(s, 0);
    }
    EXPECT_EQ(coro_sched_run(s), 0);
    busy_after = coro_sched_set_stack_size(s, 64 * 1024);
    EXPECT_EQ(coro_sched_destroy(s), 0);
    coro_thread_detach();
  });
  ASSERT_TRUE(WaitUntil([&] { return sched.load() != nullptr; }));
  for (long i = 0; i < gos; ++i) {
    if (i == gos / 2) {
      ASSERT_TRUE(WaitUntil([&] { return ran.load() > 0; }));
    }
    ASSERT_EQ(Go(sched.load(), [&] { ran++; }), 0) << i;
  }
  all_sent.store(true);
  owner.join();
  EXPECT_EQ(ran.load(), gos);
  EXPECT_EQ(answered_other, 0) << "only 0 or EBUSY";
  EXPECT_GT(answered_busy, 0) << "stacks were carved while it asked";
  EXPECT_EQ(busy_after, EBUSY) << "dense mode stayed on: the size is fixed";
  (void)answered_ok;  // 0 until the first stack is carved; may be never
}


// ===========================================================================
// The trace across threads (Chapter 2's trace, with Chapter 4's events)
// ===========================================================================
//
// Each thread is a lane, named as the thread called itself when it first
// recorded. A go, post or wake sent from a thread that does not own the
// scheduler is an arrow that starts on the sender's lane ("across_threads")
// and ends on the owner's: a go at the new coroutine's first slice, a post
// at its run's slice, a wake where the owner's pump took it in (a "taken
// in" mark), from where Chapter 3's wake arrow goes on to the resume. The
// events are read back with trace_events.h (see its top for the line
// Summary() writes: "wake~1:sent" is arrow 1 starting on a sender's lane,
// "f~1" its end).
//
// Each test sends from a plain thread it joins before the owner pumps, so
// the order of the events is the program's, not the machine's.

using coro_trace_test::ArrowProblems;
using coro_trace_test::EventsOf;
using coro_trace_test::IdNamed;
using coro_trace_test::Json;
using coro_trace_test::Ns;
using coro_trace_test::OnANamedThread;
using coro_trace_test::ResumesOf;
using coro_trace_test::Summary;
using coro_trace_test::TheOne;
using coro_trace_test::Trace;
using coro_trace_test::TraceFile;


// Proves the path of a coro_wake() from another thread (a plain thread
// without a scheduler) of a coroutine parked on this one: an arrow starts
// on the waker's lane (named as the waker named itself), ends on this
// thread's lane where its pump took the wake in (the end and the "taken
// in" mark at one time, after the start), and from there a wake arrow
// goes on to the coroutine's next slice. So a wake arrow goes from the
// waker's lane to the wakee's.
TEST(TraceThreads, AWakeFromAnotherThreadGoesFromItsLaneToTheTakingInThenToTheResume) {
  TraceFile file;
  ASSERT_EQ(file.Start(), 0);
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  int park_rc = -1;
  coro* parked = Spawn(s, [&] {
    EXPECT_EQ(coro_set_name(coro_self(), "parked"), 0);
    park_rc = coro_park();
  });
  ASSERT_NE(parked, nullptr);
  ASSERT_TRUE(coro_sched_step(s));  // it runs, and parks
  int wake_rc = -1;
  const long waker = OnANamedThread("trace-waker", [&] { wake_rc = coro_wake(parked); });
  ASSERT_EQ(coro_sched_run(s), 0);
  ASSERT_EQ(coro_trace_stop(), 0);
  EXPECT_EQ(wake_rc, 0);
  EXPECT_EQ(park_rc, 0);
  EXPECT_EQ(coro_destroy(parked), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);

  const Trace t = file.Read();
  ASSERT_EQ(t.problem, "");
  const long owner = Tid();
  EXPECT_EQ(Summary(t),
            "spawn#1 park#1 parked#1:parked wake~1:sent f~1 taken-in "
            "wake~2>#1 f~2 parked#1:finished");
  EXPECT_EQ(Summary(t, waker), "wake~1:sent");
  EXPECT_EQ(Summary(t, owner),
            "spawn#1 park#1 parked#1:parked f~1 taken-in wake~2>#1 f~2 "
            "parked#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");
  ASSERT_EQ(t.lanes.count(waker), 1u);
  EXPECT_EQ(t.lanes.at(waker), "trace-waker");

  const std::vector<Json> local = EventsOf(t, "s", "wake", "wake");
  ASSERT_EQ(local.size(), 2u);
  const Json& sent = local[0];  // then the owner's own wake
  ASSERT_NE(sent.Get("args"), nullptr);
  const Json* across = sent.Get("args")->Get("across_threads");
  ASSERT_NE(across, nullptr);
  EXPECT_TRUE(across->kind == Json::kBool && across->number == 1);
  EXPECT_FALSE(local[1].HasArg("across_threads"));
  const Json taken_in = TheOne(t, "i", "wake", "taken in");
  ASSERT_EQ(taken_in.Number("tid"), owner);
  const std::vector<Json> ends = EventsOf(t, "f", "wake", "wake"),
                          slices = ResumesOf(t, IdNamed(t, "parked"));
  ASSERT_EQ(ends.size(), 2u);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(ends[0].Number("id"), sent.Number("id"));
  EXPECT_EQ(ends[0].Number("tid"), owner);
  EXPECT_EQ(Ns(ends[0].Number("ts")), Ns(taken_in.Number("ts")));
  EXPECT_LE(Ns(sent.Number("ts")), Ns(taken_in.Number("ts")));
  EXPECT_GE(Ns(sent.Number("ts")),
            Ns(slices[0].Number("ts")) + Ns(slices[0].Number("dur")))
      << "the wake was sent before the coroutine had parked";
  EXPECT_EQ(local[1].Arg("coroutine"), slices[0].Arg("id"));
  EXPECT_EQ(local[1].Number("tid"), owner);
  EXPECT_GE(Ns(local[1].Number("ts")), Ns(taken_in.Number("ts")));
  EXPECT_EQ(ends[1].Number("id"), local[1].Number("id"));
  EXPECT_EQ(Ns(ends[1].Number("ts")), Ns(slices[1].Number("ts")));
}

// Proves that a coro_post() from another thread is an arrow from that
// thread's lane to the post's slice on the owner's lane: a start of
// category "post" on the poster's lane, across threads; its end, with its
// id, at the start of the post's run, whose slice names the same number.
TEST(TraceThreads, APostFromAnotherThreadIsAnArrowFromItsLaneToThePostsSlice) {
  TraceFile file;
  ASSERT_EQ(file.Start(), 0);
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  int post_rc = -1;
  long ran_on = 0;
  const long poster = OnANamedThread("trace-poster", [&] {
    post_rc = Post(s, [&] { ran_on = Tid(); });
  });
  ASSERT_EQ(post_rc, 0);
  ASSERT_EQ(coro_sched_run(s), 0);
  ASSERT_EQ(coro_trace_stop(), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
  const long owner = Tid();
  EXPECT_EQ(ran_on, owner);

  const Trace t = file.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t), "post~1:sent f~1 post~1:ran");
  EXPECT_EQ(Summary(t, poster), "post~1:sent");
  EXPECT_EQ(Summary(t, owner), "f~1 post~1:ran");
  EXPECT_EQ(ArrowProblems(t), "");
  ASSERT_EQ(t.lanes.count(poster), 1u);
  EXPECT_EQ(t.lanes.at(poster), "trace-poster");
  const Json sent = TheOne(t, "s", "post", "post"),
             end = TheOne(t, "f", "post", "post"),
             ran = TheOne(t, "X", "post", "post");
  ASSERT_EQ(sent.Text("ph"), "s");
  ASSERT_EQ(end.Text("ph"), "f");
  ASSERT_EQ(ran.Text("ph"), "X");
  EXPECT_EQ(sent.Number("tid"), poster);
  EXPECT_EQ(end.Number("id"), sent.Number("id"));
  EXPECT_EQ(ran.Arg("post"), sent.Number("id"));
  EXPECT_EQ(end.Number("tid"), owner);
  EXPECT_EQ(ran.Number("tid"), owner);
  EXPECT_EQ(Ns(end.Number("ts")), Ns(ran.Number("ts")));
  EXPECT_LE(Ns(sent.Number("ts")), Ns(end.Number("ts")));
}

// Proves that a coro_go() from another thread is an arrow from that
// thread's lane (named "go", across threads) to the new coroutine's first
// slice on the owner's lane, and to no later one.
TEST(TraceThreads, AGoFromAnotherThreadIsAnArrowToTheNewCoroutinesFirstSlice) {
  TraceFile file;
  ASSERT_EQ(file.Start(), 0);
  coro_sched* s = coro_sched_create();
  ASSERT_NE(s, nullptr);
  int go_rc = -1;
  long ran_on = 0;
  const long starter = OnANamedThread("trace-starter", [&] {
    go_rc = Go(s, [&] {
      EXPECT_EQ(coro_set_name(coro_self(), "started"), 0);
      EXPECT_EQ(coro_yield(), 0);
      ran_on = Tid();
    });
  });
  ASSERT_EQ(go_rc, 0);
  ASSERT_EQ(coro_sched_run(s), 0);
  ASSERT_EQ(coro_trace_stop(), 0);
  EXPECT_EQ(coro_sched_destroy(s), 0);
  const long owner = Tid();
  EXPECT_EQ(ran_on, owner);

  const Trace t = file.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(Summary(t), "go~1:sent f~1 started#1:yielded started#1:finished");
  EXPECT_EQ(Summary(t, starter), "go~1:sent");
  EXPECT_EQ(Summary(t, owner), "f~1 started#1:yielded started#1:finished");
  EXPECT_EQ(ArrowProblems(t), "");
  ASSERT_EQ(t.lanes.count(starter), 1u);
  EXPECT_EQ(t.lanes.at(starter), "trace-starter");
  const Json sent = TheOne(t, "s", "wake", "go"),
             end = TheOne(t, "f", "wake", "");
  ASSERT_EQ(sent.Text("ph"), "s");
  ASSERT_EQ(end.Text("ph"), "f");
  const std::vector<Json> slices = ResumesOf(t, IdNamed(t, "started"));
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(sent.Number("tid"), starter);
  EXPECT_EQ(end.Number("id"), sent.Number("id"));
  EXPECT_EQ(end.Number("tid"), owner);
  EXPECT_EQ(Ns(end.Number("ts")), Ns(slices[0].Number("ts")))
      << "the arrow does not end at the first slice";
}

// Proves that a pool's workers are lanes named pool-0 and pool-1, and that
// a coroutine pinned to each (coro_pool_go_on) runs on that worker's lane:
// its slices are there, on the thread it ran on, and its go is an arrow
// from this thread's lane to its first slice there.
TEST(TraceThreads, APoolsWorkersAreLanesNamedPool0AndPool1) {
  TraceFile file;
  ASSERT_EQ(file.Start(), 0);
  coro_pool* p = coro_pool_create(2, false);
  ASSERT_NE(p, nullptr);
  std::atomic<long> ran_on[2] = {{0}, {0}};
  for (size_t w = 0; w < 2; ++w) {
    ASSERT_EQ(PoolGoOn(p, w,
                       [&ran_on, w] {
                         const std::string name = "on-" + std::to_string(w);
                         EXPECT_EQ(coro_set_name(coro_self(), name.c_str()), 0);
                         EXPECT_EQ(coro_yield(), 0);
                         ran_on[w].store(Tid());
                       }),
              0);
  }
  ASSERT_EQ(coro_pool_wait(p), 0);
  ASSERT_EQ(coro_pool_destroy(p), 0);
  ASSERT_EQ(coro_trace_stop(), 0);

  const Trace t = file.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(ArrowProblems(t), "");
  const long me = Tid();
  std::set<double> sent_ids;
  for (const Json& sent : EventsOf(t, "s", "wake", "go")) {
    EXPECT_EQ(sent.Number("tid"), me) << "a go sent from elsewhere";
    sent_ids.insert(sent.Number("id"));
  }
  EXPECT_EQ(sent_ids.size(), 2u);
  for (size_t w = 0; w < 2; ++w) {
    const std::string name = "on-" + std::to_string(w);
    SCOPED_TRACE(name);
    const long lane = ran_on[w].load();
    ASSERT_NE(lane, 0) << "it did not run";
    ASSERT_EQ(t.lanes.count(lane), 1u) << "its thread has no lane";
    EXPECT_EQ(t.lanes.at(lane), "pool-" + std::to_string(w));
    const std::vector<Json> slices = ResumesOf(t, IdNamed(t, name));
    ASSERT_EQ(slices.size(), 2u);
    for (const Json& slice : slices) EXPECT_EQ(slice.Number("tid"), lane);
    EXPECT_EQ(slices[0].ArgText("left"), "yielded");
    EXPECT_EQ(slices[1].ArgText("left"), "finished");
    bool arrow_in = false;
    for (const Json& end : EventsOf(t, "f", "wake"))
      arrow_in |= end.Number("tid") == lane && sent_ids.count(end.Number("id")) &&
                  Ns(end.Number("ts")) == Ns(slices[0].Number("ts"));
    EXPECT_TRUE(arrow_in) << "no go arrow from this thread to its first slice";
  }
  EXPECT_NE(ran_on[0].load(), ran_on[1].load());
  EXPECT_EQ(t.lanes.count(me), 1u) << "the sender's lane is not named";
}

// Proves that a looper's lane takes the looper's name, and that a
// coroutine handed to it runs there, with a go arrow from this thread.
TEST(TraceThreads, ALoopersLaneTakesItsName) {
  TraceFile file;
  ASSERT_EQ(file.Start(), 0);
  coro_looper* l = coro_looper_start("trace-looper");
  ASSERT_NE(l, nullptr);
  std::atomic<long> ran_on{0};
  ASSERT_EQ(Go(coro_looper_sched(l),
               [&] {
                 EXPECT_EQ(coro_set_name(coro_self(), "on-looper"), 0);
                 ran_on.store(Tid());
               }),
            0);
  ASSERT_EQ(coro_looper_stop(l), 0);
  ASSERT_EQ(coro_trace_stop(), 0);

  const Trace t = file.Read();
  ASSERT_EQ(t.problem, "");
  EXPECT_EQ(ArrowProblems(t), "");
  const long lane = ran_on.load();
  ASSERT_NE(lane, 0);
  ASSERT_EQ(t.lanes.count(lane), 1u);
  EXPECT_EQ(t.lanes.at(lane), "trace-looper");
  const std::vector<Json> slices = ResumesOf(t, IdNamed(t, "on-looper"));
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].Number("tid"), lane);
  const Json sent = TheOne(t, "s", "wake", "go");
  ASSERT_EQ(sent.Text("ph"), "s");
  EXPECT_EQ(sent.Number("tid"), Tid());
  bool arrow_in = false;
  for (const Json& end : EventsOf(t, "f", "wake"))
    arrow_in |= end.Number("id") == sent.Number("id") &&
                end.Number("tid") == lane &&
                Ns(end.Number("ts")) == Ns(slices[0].Number("ts"));
  EXPECT_TRUE(arrow_in);
}

}  // namespace
