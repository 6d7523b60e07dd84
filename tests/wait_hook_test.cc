// wait_hook_test.cc — the pump's wait hook (coro_sched_set_wait): a pump
// that waits in the application's epoll set instead of on its own futex,
// and still wakes for every other thread's work.
//
// This suite belongs to chapter 5 (the hook's chapter) and runs against it
// and every later chapter, on both switch back-ends (see tests/suite.bzl).
//
// Reading guide. Every test drives a real epoll set through the Hook below:
// it holds the scheduler's wake_fd and, in some tests, the read end of a
// pipe. The hook blocks in epoll_wait() with the timeout its deadline
// allows — forever for UINT64_MAX (no deadline) — so a lost wake-up hangs
// the test, and the Watchdog turns the hang into a failure with a message. Races
// (another thread posting while the pump goes to sleep, a producer still
// writing while the scheduler is destroyed) are repeated many rounds.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "coro.h"
#include "harness.h"

namespace {

using coro_test::kThreadSanitizer;
using coro_test::UnderValgrind;

constexpr uint64_t kMs = CORO_MSEC;
constexpr uint64_t kSec = CORO_SEC;

bool SlowTool() { return kThreadSanitizer || UnderValgrind(); }

// `n` rounds normally, fewer under the tools (never fewer than 1).
long Reps(long n) {
  long r = UnderValgrind() ? n / 20 : kThreadSanitizer ? n / 10 : n;
  return r > 0 ? r : 1;
}

uint64_t WatchdogLimit() { return SlowTool() ? 250 * kSec : 60 * kSec; }

// Aborts the test binary with a message if not destroyed within `limit`:
// a lost wake-up shows up as this message instead of a silent timeout.
class Watchdog {
 public:
  explicit Watchdog(const char* what)
      : what_(what), thread_([this] { Watch(WatchdogLimit()); }) {}
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
      std::fprintf(stderr, "watchdog: %s did not finish (a lost wake?)\n",
                   what_);
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

// A busy-wait of about `n` short steps: a random moment without a syscall.
void Spin(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
}

// Waits (sleeping 50 us at a time) until `pred()` holds, at most 20 s.
template <typename Pred>
bool WaitUntil(Pred pred) {
  const uint64_t start = coro_now();
  while (!pred()) {
    if (coro_now() - start > (SlowTool() ? 60 : 20) * kSec) return pred();
    usleep(50);
  }
  return true;
}

// ---------------------------------------------------------------------------
// The application's side: an epoll set, and the hook that waits in it.

struct Loop {
  coro_sched* s = nullptr;
  int epfd = -1;
  int wake_fd = -1;
  int pipe_rd = -1, pipe_wr = -1; // a pipe the hook watches, if wanted
  coro* reader = nullptr;         // woken when the pipe is readable
  std::atomic<bool> pipe_seen{false};
  std::atomic<bool> blocking{false}; // the hook is in a blocking wait
  std::atomic<long> calls{0}, polls{0}, wake_fd_seen{0};
  uint64_t first_blocking_deadline = 0;
  int set_wait_inside = -1; // coro_sched_set_wait() from inside the hook

  explicit Loop(bool with_pipe = false) {
    s = coro_sched_create();
    epfd = epoll_create1(EPOLL_CLOEXEC);
    EXPECT_GE(epfd, 0);
    if (with_pipe) {
      int fds[2];
      EXPECT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
      pipe_rd = fds[0];
      pipe_wr = fds[1];
      Watch(pipe_rd);
    }
  }
  ~Loop() {
    if (s != nullptr) {
      EXPECT_EQ(coro_sched_destroy(s), 0);
    }
    close(epfd);
    if (pipe_rd >= 0) close(pipe_rd);
    if (pipe_wr >= 0) close(pipe_wr);
  }
  void Watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    EXPECT_EQ(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev), 0);
  }
  // Installs the hook and adds the wake_fd to the epoll set (once).
  void Install() {
    ASSERT_EQ(coro_sched_set_wait(s, Hook, this, &wake_fd), 0);
    ASSERT_GE(wake_fd, 0);
    Watch(wake_fd);
  }

  static void Hook(void* arg, int wake_fd, uint64_t deadline) {
    Loop* l = static_cast<Loop*>(arg);
    const uint64_t now = coro_now();
    int timeout;

    l->calls++;
    EXPECT_EQ(wake_fd, l->wake_fd); // the same eventfd every call
    if (deadline == 0) l->polls++;
    if (deadline == UINT64_MAX) {
      timeout = -1;
    } else if (deadline <= now) {
      timeout = 0;
    } else {
      // Rounded up: returning before the deadline would only loop.
      timeout = static_cast<int>((deadline - now + kMs - 1) / kMs);
    }
    if (timeout != 0 && l->first_blocking_deadline == 0)
      l->first_blocking_deadline = deadline;
    if (l->calls == 1)
      l->set_wait_inside = coro_sched_set_wait(l->s, nullptr, nullptr, nullptr);
    l->blocking.store(timeout != 0);
    epoll_event events[4];
    const int n = epoll_wait(l->epfd, events, 4, timeout);
    l->blocking.store(false);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd) {
        l->wake_fd_seen++; // the library empties it, not us
      } else if (events[i].data.fd == l->pipe_rd) {
        char byte;
        while (read(l->pipe_rd, &byte, 1) == 1) {
        }
        l->pipe_seen.store(true);
        if (l->reader != nullptr) {
          EXPECT_EQ(coro_wake(l->reader), 0);
        }
      }
    }
  }
};

void* ParkOnce(void*) {
  coro_park();
  return nullptr;
}

void* ParkUntilCanceled(void*) {
  while (coro_park() != ECANCELED) {
  }
  return nullptr;
}

void WakePost(coro_sched*, void* arg) {
  EXPECT_EQ(coro_wake(static_cast<coro*>(arg)), 0);
}

// ---------------------------------------------------------------------------
// Errors.

TEST(SetWait, NullSchedulerIsEinval) {
  EXPECT_EQ(coro_sched_set_wait(nullptr, Loop::Hook, nullptr, nullptr),
            EINVAL);
  EXPECT_EQ(coro_sched_set_wait(nullptr, nullptr, nullptr, nullptr), EINVAL);
}

TEST(SetWait, AnotherThreadIsEperm) {
  Loop l;
  int rc = 0;
  std::thread t([&] {
    rc = coro_sched_set_wait(l.s, Loop::Hook, &l, nullptr);
    coro_thread_detach();
  });
  t.join();
  EXPECT_EQ(rc, EPERM);
}

TEST(SetWait, InsideThePumpIsEperm) {
  // From a coroutine, from a post, and from the hook itself.
  Loop l;
  l.Install();
  static int from_coroutine, from_post;
  from_coroutine = from_post = -1;
  ASSERT_EQ(coro_go(l.s,
                    [](void* arg) -> void* {
                      from_coroutine = coro_sched_set_wait(
                          static_cast<coro_sched*>(arg), nullptr, nullptr,
                          nullptr);
                      coro_sleep(1 * kMs); // the pump waits in the hook
                      return nullptr;
                    },
                    l.s),
            0);
  ASSERT_EQ(coro_post(l.s,
                      [](coro_sched* s, void*) {
                        from_post =
                            coro_sched_set_wait(s, nullptr, nullptr, nullptr);
                      },
                      nullptr),
            0);
  EXPECT_EQ(coro_sched_run(l.s), 0);
  EXPECT_EQ(from_coroutine, EPERM);
  EXPECT_EQ(from_post, EPERM);
  EXPECT_GE(l.calls.load(), 1);
  EXPECT_EQ(l.set_wait_inside, EPERM);
}

TEST(SetWait, NoFileDescriptorLeftIsEmfileAndTheSchedulerStillWorks) {
  if (UnderValgrind()) GTEST_SKIP() << "valgrind keeps descriptors of its own";
  // Cells (and their eventfds) are recycled: schedulers created one after
  // the other may get a cell that already has one. So keep creating (and
  // keeping) schedulers until one needs a new eventfd, with every
  // descriptor below the limit in use.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  std::vector<coro_sched*> made;
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  int rc = 0;
  int fd = 123;
  while (rc == 0 && made.size() < 10000) {
    coro_sched* s = coro_sched_create();
    ASSERT_NE(s, nullptr);
    made.push_back(s);
    fd = 123;
    rc = coro_sched_set_wait(s, Loop::Hook, nullptr, &fd);
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(rc, EMFILE);
  EXPECT_EQ(fd, 123); // untouched on failure
  // The one that failed still pumps, on its futex.
  coro_sched* s = made.back();
  static int ran;
  ran = 0;
  ASSERT_EQ(coro_post(s, [](coro_sched*, void*) { ran = 1; }, nullptr), 0);
  EXPECT_EQ(coro_sched_run(s), 0);
  EXPECT_EQ(ran, 1);
  for (coro_sched* m : made) {
    EXPECT_EQ(coro_sched_set_wait(m, nullptr, nullptr, nullptr), 0);
    EXPECT_EQ(coro_sched_destroy(m), 0);
  }
}

// ---------------------------------------------------------------------------
// The hook waits, and other threads wake it.

TEST(WaitHook, APostFromAnotherThreadWakesAPumpBlockedInTheHook) {
  Watchdog dog("a pump blocked in the hook, woken by a post");
  const long rounds = Reps(500);
  for (long i = 0; i < rounds; ++i) {
    Loop l;
    l.Install();
    coro* c = coro_spawn(l.s, ParkOnce, nullptr);
    ASSERT_NE(c, nullptr);
    // Odd rounds post while the pump is surely blocked in epoll_wait; even
    // ones at a random moment, racing with the pump going to sleep.
    std::thread t([&] {
      if (i % 2 == 1)
        WaitUntil([&] { return l.blocking.load(); });
      else
        Spin(static_cast<uint64_t>(i) * 37 % 5000);
      EXPECT_EQ(coro_post(l.s, WakePost, c), 0);
      coro_thread_detach();
    });
    EXPECT_EQ(coro_sched_run(l.s), 0);
    t.join();
    EXPECT_EQ(coro_destroy(c), 0);
    if (i % 2 == 1) {
      EXPECT_GE(l.wake_fd_seen.load(), 1);
    }
  }
}

TEST(WaitHook, AWakeAndAGoFromAnotherThreadWakeIt) {
  Watchdog dog("a pump blocked in the hook, woken by coro_wake / coro_go");
  const long rounds = Reps(300);
  for (long i = 0; i < rounds; ++i) {
    Loop l;
    l.Install();
    coro* c = coro_spawn(l.s, ParkOnce, nullptr);
    ASSERT_NE(c, nullptr);
    std::thread t([&] {
      WaitUntil([&] { return l.blocking.load(); });
      if (i % 2 == 0) {
        EXPECT_EQ(coro_wake(c), 0);
      } else {
        // A new coroutine, started from here, wakes the parked one.
        EXPECT_EQ(coro_go(l.s,
                          [](void* arg) -> void* {
                            EXPECT_EQ(coro_wake(static_cast<coro*>(arg)), 0);
                            return nullptr;
                          },
                          c),
                  0);
      }
      coro_thread_detach();
    });
    EXPECT_EQ(coro_sched_run(l.s), 0);
    t.join();
    EXPECT_EQ(coro_destroy(c), 0);
  }
}

TEST(WaitHook, TheNextTimersDeadlineIsTheHooksDeadline) {
  Watchdog dog("a timer under the hook");
  Loop l;
  l.Install();
  static uint64_t deadline, woke;
  static int result;
  ASSERT_EQ(coro_go(l.s,
                    [](void*) -> void* {
                      deadline = coro_now() + 30 * kMs;
                      result = coro_park_until(deadline);
                      woke = coro_now();
                      return nullptr;
                    },
                    nullptr),
            0);
  EXPECT_EQ(coro_sched_run(l.s), 0);
  EXPECT_EQ(result, ETIMEDOUT);
  EXPECT_EQ(l.first_blocking_deadline, deadline);
  EXPECT_GE(woke, deadline);
  // With nothing but a parked coroutine, the deadline is "none".
  Loop m;
  m.Install();
  coro* c = coro_spawn(m.s, ParkOnce, nullptr);
  ASSERT_NE(c, nullptr);
  std::thread t([&] {
    WaitUntil([&] { return m.blocking.load(); });
    EXPECT_EQ(coro_wake(c), 0);
    coro_thread_detach();
  });
  EXPECT_EQ(coro_sched_run(m.s), 0);
  t.join();
  EXPECT_EQ(m.first_blocking_deadline, UINT64_MAX);
  EXPECT_EQ(coro_destroy(c), 0);
}

TEST(WaitHook, ReadinessTheHookDeliversWithCoroWakeRunsTheCoroutine) {
  Watchdog dog("a coroutine waiting for a pipe");
  Loop l(/*with_pipe=*/true);
  l.Install();
  static Loop* loop;
  static int got;
  loop = &l;
  got = 0;
  l.reader = coro_spawn(l.s,
                        [](void*) -> void* {
                          // Park until the hook saw the pipe readable.
                          while (!loop->pipe_seen.load()) coro_park();
                          got = 1;
                          return nullptr;
                        },
                        nullptr);
  ASSERT_NE(l.reader, nullptr);
  std::thread t([&] {
    WaitUntil([&] { return l.blocking.load(); });
    EXPECT_EQ(write(l.pipe_wr, "x", 1), 1);
  });
  EXPECT_EQ(coro_sched_run(l.s), 0);
  t.join();
  EXPECT_EQ(got, 1);
  EXPECT_EQ(coro_destroy(l.reader), 0);
}

// A coroutine the hook wakes after a long wait became ready when the hook
// saw its pipe, not when the pump went to sleep: its wake latency in the
// statistics is the few microseconds to its resume, not the wait. (A stamp
// taken from the pump's reading before the wait would say 300 ms.)
TEST(WaitHook, AWakeFromTheHookAfterALongWaitIsTimedFromTheWake) {
  Watchdog dog("a coroutine waiting for a pipe");
  Loop l(/*with_pipe=*/true);
  l.Install();
  static Loop* loop;
  loop = &l;
  l.reader = coro_spawn(l.s,
                        [](void*) -> void* {
                          while (!loop->pipe_seen.load()) coro_park();
                          return nullptr;
                        },
                        nullptr);
  ASSERT_NE(l.reader, nullptr);
  std::thread t([&] {
    WaitUntil([&] { return l.blocking.load(); });
    usleep(300 * 1000); // the hook waits all this time
    EXPECT_EQ(write(l.pipe_wr, "x", 1), 1);
  });
  EXPECT_EQ(coro_sched_run(l.s), 0);
  t.join();
  coro_stats st;
  ASSERT_EQ(coro_sched_stats(l.s, &st), 0);
  EXPECT_GE(st.resumes, 2u);
  // Microseconds in fact; 100 ms leaves room for a slow tool or machine.
  EXPECT_LT(st.wake_latency_max_ns, 100 * kMs)
      << "the wait in the hook was charged to the wake";
  EXPECT_EQ(coro_destroy(l.reader), 0);
}

TEST(WaitHook, ABusyPumpStillPollsTheHookOncePerTurn) {
  Watchdog dog("a busy pump that never polls its hook");
  // The pipe is readable from the start, and the coroutine yields until
  // the hook has seen it: without the polls of a busy pump, forever.
  Loop l(/*with_pipe=*/true);
  l.Install();
  ASSERT_EQ(write(l.pipe_wr, "x", 1), 1);
  static Loop* loop;
  loop = &l;
  ASSERT_EQ(coro_go(l.s,
                    [](void*) -> void* {
                      while (!loop->pipe_seen.load()) coro_yield();
                      return nullptr;
                    },
                    nullptr),
            0);
  EXPECT_EQ(coro_sched_run(l.s), 0);
  EXPECT_TRUE(l.pipe_seen.load());
  EXPECT_GE(l.polls.load(), 1);

  // Once per turn: twenty coroutines yielding 100 times each run 101
  // turns of twenty entries, so the hook polls 101 times (and never
  // blocks).
  Loop m;
  m.Install();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(coro_go(m.s,
                      [](void*) -> void* {
                        for (int k = 0; k < 100; ++k) coro_yield();
                        return nullptr;
                      },
                      nullptr),
              0);
  }
  EXPECT_EQ(coro_sched_run(m.s), 0);
  EXPECT_EQ(m.polls.load(), 101);
  EXPECT_EQ(m.calls.load(), 101);

  // A turn runs at least 16 entries (TURN_MIN_ENTRIES in sched.c): one
  // coroutine alone, resumed 160 times, runs ten turns of sixteen, so the
  // hook polls ten times, not once per resume.
  Loop one;
  one.Install();
  ASSERT_EQ(coro_go(one.s,
                    [](void*) -> void* {
                      // 10 turns' worth: 159 yields, 160 resumes.
                      for (int k = 0; k < 10 * coro_test::kTurnMinEntries - 1;
                           ++k)
                        coro_yield();
                      return nullptr;
                    },
                    nullptr),
            0);
  EXPECT_EQ(coro_sched_run(one.s), 0);
  EXPECT_EQ(one.polls.load(), 10);
  EXPECT_EQ(one.calls.load(), 10);
}

TEST(WaitHook, PollForPollsTheHookWhenItRanSomething) {
  Watchdog dog("a host loop that never polls its hook");
  Loop l(/*with_pipe=*/true);
  l.Install();
  ASSERT_EQ(write(l.pipe_wr, "x", 1), 1);
  static Loop* loop;
  loop = &l;
  ASSERT_EQ(coro_go(l.s,
                    [](void*) -> void* {
                      while (!loop->pipe_seen.load()) coro_yield();
                      return nullptr;
                    },
                    nullptr),
            0);
  while (coro_sched_alive(l.s) > 0) coro_sched_poll_for(l.s, 10 * kMs);
  EXPECT_TRUE(l.pipe_seen.load());
  EXPECT_GE(l.polls.load(), 1);
}

// ---------------------------------------------------------------------------
// Stopping wakes it.

TEST(WaitHook, ACancelFromAnotherThreadWakesIt) {
  Watchdog dog("a cancel under the hook");
  const long rounds = Reps(200);
  for (long i = 0; i < rounds; ++i) {
    Loop l;
    l.Install();
    coro* c = coro_spawn(l.s, ParkUntilCanceled, nullptr);
    ASSERT_NE(c, nullptr);
    std::thread t([&] {
      if (i % 2 == 1)
        WaitUntil([&] { return l.blocking.load(); });
      else
        Spin(static_cast<uint64_t>(i) * 53 % 5000);
      EXPECT_EQ(coro_cancel(c), 0);
      coro_thread_detach();
    });
    EXPECT_EQ(coro_sched_run(l.s), 0);
    t.join();
    EXPECT_EQ(coro_destroy(c), 0);
  }
}

TEST(WaitHook, ACloseFromAnotherThreadWakesIt) {
  Watchdog dog("a close under the hook");
  const long rounds = Reps(200);
  for (long i = 0; i < rounds; ++i) {
    Loop l;
    l.Install();
    ASSERT_EQ(coro_go(l.s, ParkUntilCanceled, nullptr), 0);
    std::thread t([&] {
      if (i % 2 == 1)
        WaitUntil([&] { return l.blocking.load(); });
      else
        Spin(static_cast<uint64_t>(i) * 53 % 5000);
      EXPECT_EQ(coro_sched_close(l.s), 0);
      coro_thread_detach();
    });
    EXPECT_EQ(coro_sched_run(l.s), 0);
    t.join();
  }
}

TEST(WaitHook, ASignalOnAnotherThreadClosesAndWakesIt) {
  Watchdog dog("a close-on-signal under the hook");
  // The signal is raised on a helper thread, so its handler runs there and
  // wakes the pump through the eventfd (the owner's epoll_wait is not
  // interrupted by it).
  const long rounds = Reps(50);
  for (long i = 0; i < rounds; ++i) {
    Loop l;
    l.Install();
    ASSERT_EQ(coro_sched_close_on_signal(l.s, SIGUSR2), 0);
    ASSERT_EQ(coro_go(l.s, ParkUntilCanceled, nullptr), 0);
    std::thread t([&] {
      WaitUntil([&] { return l.blocking.load(); });
      EXPECT_EQ(raise(SIGUSR2), 0); // to this thread
    });
    EXPECT_EQ(coro_sched_run(l.s), 0);
    t.join();
    EXPECT_GE(l.wake_fd_seen.load(), 1);
  }
}

// ---------------------------------------------------------------------------
// Back to the futex, and late producers.

TEST(SetWait, NullGoesBackToTheFutexAndTheEventfdStaysTheSame) {
  Watchdog dog("a pump back on its futex");
  Loop l;
  l.Install();
  const int first = l.wake_fd;
  int fd = 123;
  ASSERT_EQ(coro_sched_set_wait(l.s, nullptr, nullptr, &fd), 0);
  EXPECT_EQ(fd, -1);
  coro* c = coro_spawn(l.s, ParkOnce, nullptr);
  ASSERT_NE(c, nullptr);
  std::thread t([&] {
    usleep(2000); // the pump is (most likely) asleep on its futex by now
    EXPECT_EQ(coro_wake(c), 0);
    coro_thread_detach();
  });
  EXPECT_EQ(coro_sched_run(l.s), 0);
  t.join();
  EXPECT_EQ(coro_destroy(c), 0);
  EXPECT_EQ(l.calls.load(), 0); // the hook was never called
  ASSERT_EQ(coro_sched_set_wait(l.s, Loop::Hook, &l, &fd), 0);
  EXPECT_EQ(fd, first);
}

TEST(SetWait, DestroyWhileAProducerStillWakesIsHarmless) {
  Watchdog dog("schedulers destroyed under a late producer");
  // The producer's post runs, the pump finishes and destroys the
  // scheduler, while the producer may still be writing to the eventfd.
  // The next scheduler may get the same cell (and eventfd): a late write
  // costs it at most one wake for nothing. Under ASan and TSan this also
  // checks that nothing freed is touched.
  const long rounds = Reps(1000);
  for (long i = 0; i < rounds; ++i) {
    auto* l = new Loop;
    l->Install();
    coro* c = coro_spawn(l->s, ParkOnce, nullptr);
    ASSERT_NE(c, nullptr);
    std::thread t([&] {
      Spin(static_cast<uint64_t>(i) * 71 % 3000);
      EXPECT_EQ(coro_wake(c), 0);
      coro_thread_detach();
    });
    EXPECT_EQ(coro_sched_run(l->s), 0);
    EXPECT_EQ(coro_destroy(c), 0);
    delete l; // destroys the scheduler: t may still be in its push
    t.join();
  }
}

}  // namespace
