// context_test.cc — the contract of manual resume: coroutines with their own
// stacks, resumed by hand, yielding back to whoever resumed them.
//
// This suite is chapter 1's concept. It runs against chapter 1 and every
// later chapter, on both switch back-ends (see tests/suite.bzl), so every
// later stage keeps every promise made here.
//
// Reading guide: each TEST checks one promise of coro.h / SPEC.md, named as
// TEST(Function, WhatItPromises). Test bodies are plain: create, resume,
// check. Coroutine bodies are the small functions just above the tests that
// use them; they report what they saw through their `arg`.
#include <errno.h>
#include <fenv.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coro.h"
#include "harness.h"

#if defined(__x86_64__) && !CORO_UCONTEXT
#include <cpuid.h>
extern "C" {
#include "context.h"  // the switch's MXCSR modes (coro_context_set_mxcsr_mode)
}
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>  // the fiber-switch API
#define CORO_TEST_HAVE_ASAN 1
#endif

namespace {

using coro_test::PageSize;

#define NOINLINE __attribute__((noinline))

// How many rounds a stress loop does: `n`; a tenth under Valgrind
// (coro_test::Iterations), and a fifth under ThreadSanitizer, whose fiber
// machinery makes every switch and every new stack costly. Fewer rounds
// still take the same paths; only the time budget differs.
long Iterations(long n) {
  return coro_test::kThreadSanitizer ? n / 5 : coro_test::Iterations(n);
}

// ---------------------------------------------------------------------------
// Coroutine bodies and helpers shared by many tests.

// Returns its argument: the smallest coroutine there is.
void* ReturnArg(void* arg) { return arg; }

// Yields once, then returns its argument.
void* YieldOnceThenReturnArg(void* arg) {
  EXPECT_EQ(coro_yield(), 0);
  return arg;
}

// Runs `c` to the end and frees it: the way most tests clean up.
void FinishAndDestroy(coro* c) {
  while (coro_status(c) != CORO_DONE) ASSERT_EQ(coro_resume(c), 0);
  ASSERT_EQ(coro_destroy(c), 0);
}

// ===========================================================================
// coro_create
// ===========================================================================

// A NULL body is refused: NULL is returned and errno is EINVAL.
TEST(Create, NullFunctionIsEinval) {
  errno = 0;
  EXPECT_EQ(coro_create(nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// A stack size too large to represent (rounding it up to whole pages would
// overflow) is EINVAL, not a crash and not a tiny stack.
TEST(Create, StackSizeTooLargeToMapIsEinval) {
  errno = 0;
  EXPECT_EQ(coro_create(ReturnArg, nullptr, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// Creating runs nothing: the body starts at the first resume, with the
// argument given to coro_create().
TEST(Create, StartsSuspendedAndRunsNothingYet) {
  int runs = 0;
  coro* c = coro_create(
      [](void* arg) -> void* {
        ++*static_cast<int*>(arg);
        return nullptr;
      },
      &runs, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(coro_status(c), CORO_SUSPENDED);
  EXPECT_EQ(runs, 0);

  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_destroy(c), 0);
}

// --- What a stack of a given size looks like -------------------------------
//
// The body records the address of its own frame and yields; while it is
// suspended, /proc/self/maps shows the mapping that holds that frame (the
// stack) and the one just below it (the guard page).

NOINLINE void* RecordFrameThenYield(void* arg) {
  *static_cast<std::uintptr_t*>(arg) =
      reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  EXPECT_EQ(coro_yield(), 0);
  return nullptr;
}

struct StackLayout {
  std::size_t room = 0;  // bytes from the bottom of the stack up to the frame
  coro_test::Mapping stack;
  std::optional<coro_test::Mapping> guard;  // the mapping just below it
};

void MeasureStack(std::size_t stack_size, StackLayout* out) {
  std::uintptr_t frame = 0;
  coro* c = coro_create(RecordFrameThenYield, &frame, stack_size);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  std::optional<coro_test::Mapping> stack = coro_test::MappingContaining(frame);
  ASSERT_TRUE(stack.has_value()) << "the coroutine's frame is not mapped";
  out->stack = *stack;
  out->room = frame - stack->start;
  out->guard = coro_test::MappingEndingAt(stack->start);
  FinishAndDestroy(c);
}

// The usable stack for a request of `size` bytes, as coro.h promises it:
// 0 means the default, small sizes are raised to the minimum, and the result
// is rounded up to whole pages.
std::size_t PromisedStack(std::size_t size) {
  if (size == 0) size = CORO_STACK_DEFAULT;
  if (size < CORO_STACK_MIN) size = CORO_STACK_MIN;
  return (size + PageSize() - 1) / PageSize() * PageSize();
}

// The body's frame sits within its first page from the top (the start-up
// code above it is small), so `room` lies in (promised - 1 page, promised].
void ExpectStackOf(std::size_t requested, std::size_t promised) {
  StackLayout layout;
  ASSERT_NO_FATAL_FAILURE(MeasureStack(requested, &layout));
  EXPECT_LE(layout.room, promised) << "requested " << requested;
  EXPECT_GT(layout.room, promised - PageSize()) << "requested " << requested;
}

// stack_size 0 means CORO_STACK_DEFAULT, which is 64 KiB.
TEST(Create, ZeroStackSizeMeansTheDefault) {
  EXPECT_EQ(CORO_STACK_DEFAULT, 64u * 1024u);
  ExpectStackOf(0, CORO_STACK_DEFAULT);
}

// Requests below CORO_STACK_MIN (16 KiB) are raised to it.
TEST(Create, SmallStackIsRaisedToTheMinimum) {
  EXPECT_EQ(CORO_STACK_MIN, 16u * 1024u);
  ExpectStackOf(1, CORO_STACK_MIN);
  ExpectStackOf(CORO_STACK_MIN - 1, CORO_STACK_MIN);
}

// Sizes are rounded up to whole pages: never less than was asked for.
TEST(Create, StackSizeIsRoundedUpToWholePages) {
  ExpectStackOf(CORO_STACK_MIN + 1, CORO_STACK_MIN + PageSize());
  ExpectStackOf(100 * 1000, PromisedStack(100 * 1000));
}

// Below every stack lies an inaccessible guard page: running off the end
// faults instead of writing into whatever is mapped below.
TEST(Stack, HasAnInaccessibleGuardPageBelowIt) {
  StackLayout layout;
  ASSERT_NO_FATAL_FAILURE(MeasureStack(0, &layout));
  EXPECT_TRUE(layout.stack.readable() && layout.stack.writable())
      << "stack mapping " << layout.stack.perms;
  ASSERT_TRUE(layout.guard.has_value()) << "nothing is mapped below the stack";
  EXPECT_FALSE(layout.guard->readable()) << "guard " << layout.guard->perms;
  EXPECT_FALSE(layout.guard->writable()) << "guard " << layout.guard->perms;
  EXPECT_GE(layout.guard->size(), PageSize());
}

// The default stack is really usable: a 48 KiB local array fits in it.
NOINLINE void* FillLargeLocalArray(void* arg) {
  volatile unsigned char big[48 * 1024];
  for (std::size_t i = 0; i < sizeof big; ++i) big[i] = static_cast<unsigned char>(i);
  unsigned long sum = 0;
  for (std::size_t i = 0; i < sizeof big; ++i) sum += big[i];
  *static_cast<unsigned long*>(arg) = sum;
  return nullptr;
}

TEST(Stack, LargeLocalsFitInTheDefaultStack) {
  unsigned long sum = 0;
  coro* c = coro_create(FillLargeLocalArray, &sum, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  // 48 KiB of the bytes 0..255 repeated: 192 runs of 0+1+...+255.
  EXPECT_EQ(sum, 192ul * (255ul * 256ul / 2ul));
  EXPECT_EQ(coro_destroy(c), 0);
}

// A new coroutine's stack is aligned as the ABI requires at a call (16
// bytes on x86-64 and AArch64): printf of a double uses aligned SSE stores
// on x86-64 and would crash on a misaligned stack.
NOINLINE std::uintptr_t CurrentFrame() {
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}

struct AlignmentSeen {
  std::uintptr_t frame = 1;
  char text[32] = {};
};

void* CheckAlignment(void* arg) {
  auto* seen = static_cast<AlignmentSeen*>(arg);
  seen->frame = CurrentFrame();
  std::snprintf(seen->text, sizeof seen->text, "%.3f", 2.5);
  EXPECT_EQ(coro_yield(), 0);
  seen->frame = CurrentFrame();  // and again after a switch back in
  return nullptr;
}

TEST(Stack, IsAlignedForTheAbi) {
  AlignmentSeen seen;
  coro* c = coro_create(CheckAlignment, &seen, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(seen.frame % 16, 0u) << std::hex << seen.frame;
  EXPECT_STREQ(seen.text, "2.500");
  seen.frame = 1;
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(seen.frame % 16, 0u) << std::hex << seen.frame;
  EXPECT_EQ(coro_destroy(c), 0);
}

// ===========================================================================
// coro_resume and coro_yield: the round trip
// ===========================================================================

// coro_resume runs the body with its argument; once it returns, the
// coroutine is DONE and coro_result holds the return value.
TEST(Resume, RunsTheBodyToItsReturnValue) {
  int token = 0;
  coro* c = coro_create(ReturnArg, &token, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_result(c), &token);
  EXPECT_EQ(coro_destroy(c), 0);
}

// Values travel both ways through the shared `arg`: the resumer writes an
// input before each resume, the coroutine writes an output before each
// yield. Here the coroutine keeps a running total across yields, which only
// works if its locals survive on its own stack.
struct Exchange {
  int input = 0;
  long output = 0;
  bool stop = false;
};

void* RunningTotal(void* arg) {
  auto* x = static_cast<Exchange*>(arg);
  long total = 0;  // lives on the coroutine's stack between resumes
  while (!x->stop) {
    total += x->input;
    x->output = total;
    EXPECT_EQ(coro_yield(), 0);
  }
  return reinterpret_cast<void*>(total);
}

TEST(Resume, PassesValuesBothWaysAcrossYields) {
  Exchange x;
  coro* c = coro_create(RunningTotal, &x, 0);
  ASSERT_NE(c, nullptr);
  long expected = 0;
  for (int i = 1; i <= 10; ++i) {
    x.input = i * i;
    expected += i * i;
    ASSERT_EQ(coro_resume(c), 0);
    EXPECT_EQ(coro_status(c), CORO_SUSPENDED);
    EXPECT_EQ(x.output, expected) << "after resume " << i;
  }
  x.stop = true;
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_result(c), reinterpret_cast<void*>(expected));  // 385
  EXPECT_EQ(coro_destroy(c), 0);
}

// coro_yield returns 0 each time the coroutine is resumed again.
TEST(Yield, ReturnsZeroWhenResumed) {
  struct Seen {
    int results[3] = {-1, -1, -1};
  } seen;
  coro* c = coro_create(
      [](void* arg) -> void* {
        auto* s = static_cast<Seen*>(arg);
        for (int& r : s->results) r = coro_yield();
        return nullptr;
      },
      &seen, 0);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  for (int r : seen.results) EXPECT_EQ(r, 0);
  EXPECT_EQ(coro_destroy(c), 0);
}

// Asymmetric coroutines: yield goes back to whoever resumed this time, not
// to the creator. Here main starts C, then coroutine D resumes C, so C's
// second yield returns into D.
struct Trace {
  std::vector<std::string> events;
  coro* c = nullptr;
};

void* TraceC(void* arg) {
  auto* t = static_cast<Trace*>(arg);
  t->events.push_back("C1");
  EXPECT_EQ(coro_yield(), 0);
  t->events.push_back("C2");
  EXPECT_EQ(coro_yield(), 0);
  t->events.push_back("C3");
  return nullptr;
}

void* TraceD(void* arg) {
  auto* t = static_cast<Trace*>(arg);
  t->events.push_back("D1");
  EXPECT_EQ(coro_resume(t->c), 0);
  t->events.push_back("D2");
  return nullptr;
}

TEST(Yield, ReturnsToTheMostRecentResumer) {
  Trace t;
  t.c = coro_create(TraceC, &t, 0);
  coro* d = coro_create(TraceD, &t, 0);
  ASSERT_NE(t.c, nullptr);
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(coro_resume(t.c), 0);  // C1, back to main
  ASSERT_EQ(coro_resume(d), 0);    // D1, C2 (back to D), D2, back to main
  ASSERT_EQ(coro_resume(t.c), 0);  // C3
  EXPECT_EQ(t.events,
            (std::vector<std::string>{"C1", "D1", "C2", "D2", "C3"}));
  EXPECT_EQ(coro_destroy(d), 0);
  EXPECT_EQ(coro_destroy(t.c), 0);
}

// coro_yield on a thread's own stack (no coroutine running) is EPERM, on the
// main thread and on a thread that never touched a coroutine.
TEST(Yield, OutsideAnyCoroutineIsEperm) {
  EXPECT_EQ(coro_yield(), EPERM);
  int in_thread = -1;
  std::thread([&in_thread] { in_thread = coro_yield(); }).join();
  EXPECT_EQ(in_thread, EPERM);
}

// ===========================================================================
// Errors of coro_resume
// ===========================================================================

// Resuming NULL is EINVAL.
TEST(Resume, NullIsEinval) { EXPECT_EQ(coro_resume(nullptr), EINVAL); }

// Resuming a finished coroutine is EINVAL, and changes nothing.
TEST(Resume, FinishedCoroutineIsEinval) {
  int token = 0;
  coro* c = coro_create(ReturnArg, &token, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  ASSERT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_resume(c), EINVAL);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_result(c), &token);
  EXPECT_EQ(coro_destroy(c), 0);
}

// A running coroutine resuming itself is EBUSY: its stack is in use. It
// carries on running afterwards.
TEST(Resume, RunningCoroutineIsEbusy) {
  int seen = -1;
  coro* c = coro_create(
      [](void* arg) -> void* {
        *static_cast<int*>(arg) = coro_resume(coro_self());
        EXPECT_EQ(coro_status(coro_self()), CORO_RUNNING);
        return nullptr;
      },
      &seen, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(seen, EBUSY);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_destroy(c), 0);
}

// --- Two coroutines on one resume chain: A resumes B ----------------------

struct Pair {
  coro* a = nullptr;
  coro* b = nullptr;
  // What B saw while A was waiting for it.
  coro_state a_in_b = CORO_DONE, b_in_b = CORO_DONE;
  coro* self_in_b = nullptr;
  int resume_a_in_b = -1, destroy_a_in_b = -1, destroy_b_in_b = -1;
  // What A saw once B had yielded back.
  coro_state a_after = CORO_DONE, b_after = CORO_DONE;
  coro* self_after = nullptr;
};

void* PairB(void* arg) {
  auto* p = static_cast<Pair*>(arg);
  p->a_in_b = coro_status(p->a);
  p->b_in_b = coro_status(p->b);
  p->self_in_b = coro_self();
  p->resume_a_in_b = coro_resume(p->a);
  p->destroy_a_in_b = coro_destroy(p->a);
  p->destroy_b_in_b = coro_destroy(p->b);
  EXPECT_EQ(coro_yield(), 0);
  return nullptr;
}

void* PairA(void* arg) {
  auto* p = static_cast<Pair*>(arg);
  p->b = coro_create(PairB, p, 0);
  EXPECT_NE(p->b, nullptr);
  EXPECT_EQ(coro_resume(p->b), 0);
  p->a_after = coro_status(p->a);
  p->b_after = coro_status(p->b);
  p->self_after = coro_self();
  EXPECT_EQ(coro_resume(p->b), 0);  // let B finish
  EXPECT_EQ(coro_destroy(p->b), 0);
  return nullptr;
}

// While A waits for B: inside B, A is NORMAL, B is RUNNING and coro_self()
// is B. Once B yields, A is RUNNING again and B is SUSPENDED.
TEST(Status, ResumerIsNormalWhileTheOneItResumedRuns) {
  Pair p;
  p.a = coro_create(PairA, &p, 0);
  ASSERT_NE(p.a, nullptr);
  ASSERT_EQ(coro_resume(p.a), 0);
  EXPECT_EQ(p.a_in_b, CORO_NORMAL);
  EXPECT_EQ(p.b_in_b, CORO_RUNNING);
  EXPECT_EQ(p.self_in_b, p.b);
  EXPECT_EQ(p.a_after, CORO_RUNNING);
  EXPECT_EQ(p.b_after, CORO_SUSPENDED);
  EXPECT_EQ(p.self_after, p.a);
  EXPECT_EQ(coro_status(p.a), CORO_DONE);
  EXPECT_EQ(coro_destroy(p.a), 0);
}

// Resuming a NORMAL coroutine (one further down the current resume chain) is
// EBUSY: B cannot resume A, which is waiting for B.
TEST(Resume, NormalCoroutineIsEbusy) {
  Pair p;
  p.a = coro_create(PairA, &p, 0);
  ASSERT_NE(p.a, nullptr);
  ASSERT_EQ(coro_resume(p.a), 0);
  EXPECT_EQ(p.resume_a_in_b, EBUSY);
  EXPECT_EQ(p.a_after, CORO_RUNNING);  // the failed resume changed nothing
  EXPECT_EQ(coro_destroy(p.a), 0);
}

// Destroying a NORMAL coroutine is EBUSY: its stack holds the frame that is
// waiting in coro_resume.
TEST(Destroy, NormalCoroutineIsEbusy) {
  Pair p;
  p.a = coro_create(PairA, &p, 0);
  ASSERT_NE(p.a, nullptr);
  ASSERT_EQ(coro_resume(p.a), 0);
  EXPECT_EQ(p.destroy_a_in_b, EBUSY);
  EXPECT_EQ(coro_status(p.a), CORO_DONE);  // A went on to finish normally
  EXPECT_EQ(coro_destroy(p.a), 0);
}

// Destroying the running coroutine (itself) is EBUSY.
TEST(Destroy, RunningCoroutineIsEbusy) {
  Pair p;
  p.a = coro_create(PairA, &p, 0);
  ASSERT_NE(p.a, nullptr);
  ASSERT_EQ(coro_resume(p.a), 0);
  EXPECT_EQ(p.destroy_b_in_b, EBUSY);
  EXPECT_EQ(coro_destroy(p.a), 0);
}

// ===========================================================================
// coro_status, coro_self, coro_result
// ===========================================================================

struct LifeCycle {
  coro* self = nullptr;
  coro_state inside = CORO_DONE;
};

void* RecordInside(void* arg) {
  auto* life = static_cast<LifeCycle*>(arg);
  life->self = coro_self();
  life->inside = coro_status(coro_self());
  EXPECT_EQ(coro_yield(), 0);
  return arg;
}

// SUSPENDED when created, RUNNING while it runs, SUSPENDED after a yield,
// DONE once its function has returned.
TEST(Status, FollowsTheLifeCycle) {
  LifeCycle life;
  coro* c = coro_create(RecordInside, &life, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(coro_status(c), CORO_SUSPENDED);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(life.inside, CORO_RUNNING);
  EXPECT_EQ(coro_status(c), CORO_SUSPENDED);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_destroy(c), 0);
}

// coro_status(NULL) is DONE: there is nothing to resume.
TEST(Status, NullIsDone) { EXPECT_EQ(coro_status(nullptr), CORO_DONE); }

// coro_self() is NULL on a thread's own stack, the coroutine inside it, and
// NULL again once it has yielded or returned.
TEST(Self, IsTheRunningCoroutineOrNull) {
  EXPECT_EQ(coro_self(), nullptr);
  LifeCycle life;
  coro* c = coro_create(RecordInside, &life, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(life.self, c);
  EXPECT_EQ(coro_self(), nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_self(), nullptr);
  EXPECT_EQ(coro_destroy(c), 0);
}

// coro_self() answers for the calling thread: while main runs a coroutine,
// another thread is on its own stack (self NULL, yield EPERM) and can run
// coroutines of its own meanwhile.
struct OtherThreadView {
  coro* self = reinterpret_cast<coro*>(1);
  int yield = -1;
  void* own_result = nullptr;
};

void* LookFromAnotherThread(void* arg) {
  auto* view = static_cast<OtherThreadView*>(arg);
  std::thread([view] {
    view->self = coro_self();
    view->yield = coro_yield();
    coro* mine = coro_create(ReturnArg, view, 0);
    ASSERT_NE(mine, nullptr);
    EXPECT_EQ(coro_resume(mine), 0);
    view->own_result = coro_result(mine);
    EXPECT_EQ(coro_destroy(mine), 0);
  }).join();
  return nullptr;
}

TEST(Self, IsPerThread) {
  OtherThreadView view;
  coro* c = coro_create(LookFromAnotherThread, &view, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(view.self, nullptr);
  EXPECT_EQ(view.yield, EPERM);
  EXPECT_EQ(view.own_result, &view);
  EXPECT_EQ(coro_destroy(c), 0);
}

// coro_result is NULL until the coroutine is DONE (before it starts and
// while it is suspended mid-body), then the function's return value.
TEST(Result, IsNullUntilDoneThenTheReturnValue) {
  int token = 0;
  coro* c = coro_create(YieldOnceThenReturnArg, &token, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(coro_result(c), nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_result(c), nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_result(c), &token);
  EXPECT_EQ(coro_destroy(c), 0);
}

// coro_result(NULL) is NULL.
TEST(Result, NullIsNull) { EXPECT_EQ(coro_result(nullptr), nullptr); }

// ===========================================================================
// coro_destroy
// ===========================================================================

// A coroutine that never started has nothing live on its stack: destroy it.
TEST(Destroy, NeverStartedIsAllowed) {
  coro* c = coro_create(ReturnArg, nullptr, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(coro_destroy(c), 0);
}

// A finished coroutine can be destroyed.
TEST(Destroy, FinishedIsAllowed) {
  coro* c = coro_create(ReturnArg, nullptr, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_destroy(c), 0);
}

// A coroutine suspended in the middle of its body is EBUSY: its stack holds
// live frames. The refusal leaves it intact; it can still finish.
TEST(Destroy, SuspendedMidBodyIsEbusy) {
  int token = 0;
  coro* c = coro_create(YieldOnceThenReturnArg, &token, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  ASSERT_EQ(coro_status(c), CORO_SUSPENDED);
  EXPECT_EQ(coro_destroy(c), EBUSY);
  EXPECT_EQ(coro_status(c), CORO_SUSPENDED);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_result(c), &token);
  EXPECT_EQ(coro_destroy(c), 0);
}

// Destroying NULL is EINVAL.
TEST(Destroy, NullIsEinval) { EXPECT_EQ(coro_destroy(nullptr), EINVAL); }

// Destroy gives the stack back: where each stack and its guard page were,
// nothing of them is left mapped. (Sanitizers map memory of their own, so
// the test looks for the stacks themselves, not at the number of mappings.)
TEST(Destroy, ReleasesTheStack) {
  constexpr int kCount = 64;
  std::vector<coro*> all;
  std::vector<std::uintptr_t> stack_starts;
  for (int i = 0; i < kCount; ++i) {
    std::uintptr_t frame = 0;
    coro* c = coro_create(RecordFrameThenYield, &frame, 0);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(coro_resume(c), 0);
    std::optional<coro_test::Mapping> stack = coro_test::MappingContaining(frame);
    ASSERT_TRUE(stack.has_value());
    ASSERT_TRUE(coro_test::MappingEndingAt(stack->start).has_value())
        << "no guard page below the stack";
    stack_starts.push_back(stack->start);
    ASSERT_EQ(coro_resume(c), 0);  // finish
    all.push_back(c);
  }
  for (coro* c : all) ASSERT_EQ(coro_destroy(c), 0);

  // One snapshot of the mappings after all the destroys.
  std::vector<coro_test::Mapping> after;
  coro_test::ForEachMapping([&](const coro_test::Mapping& m) { after.push_back(m); });
  int still_guarded = 0;
  for (std::uintptr_t start : stack_starts)
    for (const coro_test::Mapping& m : after)
      if (m.end == start && !m.readable() && !m.writable()) ++still_guarded;
  EXPECT_EQ(still_guarded, 0) << "guard pages of destroyed stacks remain";
}

// Many create/run/destroy cycles leave no mappings behind.
TEST(Destroy, ManyCyclesLeakNoMappings) {
  const long cycles = Iterations(5000);
  const std::size_t before = coro_test::CountMappings();
  for (long i = 0; i < cycles; ++i) {
    coro* c = coro_create(YieldOnceThenReturnArg, nullptr, 0);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(coro_resume(c), 0);
    ASSERT_EQ(coro_resume(c), 0);
    ASSERT_EQ(coro_destroy(c), 0);
  }
  EXPECT_LE(coro_test::CountMappings(), before + 16);
}

// ===========================================================================
// Ownership: a coroutine belongs to the thread that created it
// ===========================================================================

// A thread that creates one coroutine (optionally resuming it once, so it is
// suspended mid-body), hands it over, and, when the test is done, finishes
// and destroys it itself: only the owner may.
class ForeignCoroutine {
 public:
  explicit ForeignCoroutine(bool start_it) {
    thread_ = std::thread([this, start_it] {
      coro* c = coro_create(YieldOnceThenReturnArg, &token_, 0);
      if (c != nullptr && start_it) {
        EXPECT_EQ(coro_resume(c), 0);
      }
      created_.set_value(c);
      release_.get_future().wait();
      if (c == nullptr) return;
      owner_resume_ = coro_resume(c);
      if (start_it) {
        EXPECT_EQ(coro_status(c), CORO_DONE);
      }
      owner_result_ = coro_result(c);
      while (coro_status(c) != CORO_DONE) EXPECT_EQ(coro_resume(c), 0);
      owner_destroy_ = coro_destroy(c);
    });
    handle_ = created_.get_future().get();
  }

  // Lets the owner finish and destroy the coroutine, and joins it.
  void Release() {
    release_.set_value();
    thread_.join();
  }

  ~ForeignCoroutine() {
    if (thread_.joinable()) Release();
  }

  coro* handle() const { return handle_; }
  int owner_resume() const { return owner_resume_; }
  int owner_destroy() const { return owner_destroy_; }
  void* owner_result() const { return owner_result_; }
  void* token() { return &token_; }

 private:
  int token_ = 0;
  std::promise<coro*> created_;
  std::promise<void> release_;
  std::thread thread_;
  coro* handle_ = nullptr;
  int owner_resume_ = -1, owner_destroy_ = -1;
  void* owner_result_ = nullptr;
};

// Resuming another thread's coroutine is EPERM, whether it has started or
// not; the refusal leaves it to its owner, who can still run it.
TEST(Resume, CoroutineOfAnotherThreadIsEperm) {
  for (bool started : {false, true}) {
    ForeignCoroutine foreign(started);
    ASSERT_NE(foreign.handle(), nullptr);
    EXPECT_EQ(coro_resume(foreign.handle()), EPERM) << "started " << started;
    foreign.Release();
    EXPECT_EQ(foreign.owner_resume(), 0);
    EXPECT_EQ(foreign.owner_destroy(), 0);
  }
}

// Destroying another thread's coroutine is EPERM, even one that would
// otherwise be destroyable (never started); the owner still can.
TEST(Destroy, CoroutineOfAnotherThreadIsEperm) {
  ForeignCoroutine foreign(/*start_it=*/false);
  ASSERT_NE(foreign.handle(), nullptr);
  EXPECT_EQ(coro_destroy(foreign.handle()), EPERM);
  foreign.Release();
  EXPECT_EQ(foreign.owner_destroy(), 0);
}

// The reverse direction: created on this thread, resumed or destroyed from
// another thread → EPERM; it still runs here afterwards.
TEST(Resume, OwnCoroutineFromAnotherThreadIsEperm) {
  int token = 0;
  coro* c = coro_create(ReturnArg, &token, 0);
  ASSERT_NE(c, nullptr);
  int resume = -1, destroy = -1;
  std::thread([&] {
    resume = coro_resume(c);
    destroy = coro_destroy(c);
  }).join();
  EXPECT_EQ(resume, EPERM);
  EXPECT_EQ(destroy, EPERM);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_result(c), &token);
  EXPECT_EQ(coro_destroy(c), 0);
}

// ===========================================================================
// Conventions shared by every function
// ===========================================================================

// Functions returning int report errors by their return value and never set
// errno (coro.h, "Conventions").
TEST(Conventions, IntFunctionsLeaveErrnoAlone) {
  coro* c = coro_create(YieldOnceThenReturnArg, nullptr, 0);
  ASSERT_NE(c, nullptr);
  errno = 4242;
  EXPECT_EQ(coro_resume(nullptr), EINVAL);
  EXPECT_EQ(coro_destroy(nullptr), EINVAL);
  EXPECT_EQ(coro_yield(), EPERM);
  EXPECT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_destroy(c), EBUSY);
  EXPECT_EQ(coro_resume(c), 0);
  EXPECT_EQ(coro_resume(c), EINVAL);
  EXPECT_EQ(coro_destroy(c), 0);
  EXPECT_EQ(errno, 4242);
}

// ===========================================================================
// Nesting: coroutines that create and resume coroutines
// ===========================================================================

// A chain of kDepth coroutines: level i creates level i+1 and resumes it.
// The deepest one checks the whole chain (every ancestor NORMAL and neither
// resumable nor destroyable), then yields; each level yields in turn, so the
// yields travel back up the chain to main. A second resume of the root runs
// each level's child to completion and frees it.
struct Chain {
  static constexpr int kDepth = 128;
  struct Level {
    Chain* chain;
    int index;
  };
  Level levels[kDepth];
  coro* links[kDepth] = {};
  int ancestors_normal = 0;  // counted by the deepest level
  int ancestors_busy = 0;
  int levels_finished = 0;

  Chain() {
    for (int i = 0; i < kDepth; ++i) levels[i] = Level{this, i};
  }
};

void* ChainLevel(void* arg) {
  auto* level = static_cast<Chain::Level*>(arg);
  Chain& chain = *level->chain;
  const int i = level->index;
  EXPECT_EQ(coro_self(), chain.links[i]);

  if (i + 1 < Chain::kDepth) {
    chain.links[i + 1] = coro_create(ChainLevel, &chain.levels[i + 1], 0);
    EXPECT_NE(chain.links[i + 1], nullptr);
    EXPECT_EQ(coro_resume(chain.links[i + 1]), 0);  // goes all the way down
    EXPECT_EQ(coro_status(chain.links[i + 1]), CORO_SUSPENDED);
    EXPECT_EQ(coro_status(chain.links[i]), CORO_RUNNING);
  } else {
    for (int j = 0; j < i; ++j) {
      if (coro_status(chain.links[j]) == CORO_NORMAL) ++chain.ancestors_normal;
      if (coro_resume(chain.links[j]) == EBUSY &&
          coro_destroy(chain.links[j]) == EBUSY)
        ++chain.ancestors_busy;
    }
  }

  EXPECT_EQ(coro_yield(), 0);  // back up one level

  if (i + 1 < Chain::kDepth) {
    EXPECT_EQ(coro_resume(chain.links[i + 1]), 0);
    EXPECT_EQ(coro_status(chain.links[i + 1]), CORO_DONE);
    EXPECT_EQ(coro_result(chain.links[i + 1]), &chain.levels[i + 1]);
    EXPECT_EQ(coro_destroy(chain.links[i + 1]), 0);
  }
  ++chain.levels_finished;
  return arg;
}

TEST(Nesting, ChainOfMoreThanAHundredResumesAndUnwinds) {
  auto chain = std::make_unique<Chain>();
  chain->links[0] = coro_create(ChainLevel, &chain->levels[0], 0);
  ASSERT_NE(chain->links[0], nullptr);

  ASSERT_EQ(coro_resume(chain->links[0]), 0);
  EXPECT_EQ(chain->ancestors_normal, Chain::kDepth - 1);
  EXPECT_EQ(chain->ancestors_busy, Chain::kDepth - 1);
  for (coro* link : chain->links) {
    ASSERT_NE(link, nullptr);
    EXPECT_EQ(coro_status(link), CORO_SUSPENDED);  // every level yielded
  }
  EXPECT_EQ(coro_self(), nullptr);

  ASSERT_EQ(coro_resume(chain->links[0]), 0);
  EXPECT_EQ(chain->levels_finished, Chain::kDepth);
  EXPECT_EQ(coro_status(chain->links[0]), CORO_DONE);
  EXPECT_EQ(coro_result(chain->links[0]), &chain->levels[0]);
  EXPECT_EQ(coro_destroy(chain->links[0]), 0);
}

// ===========================================================================
// What a switch must preserve
// ===========================================================================

// Callee-saved registers. A C function may keep a value in a callee-saved
// register across any call, including a call that switches coroutines; the
// switch must hand each side back exactly its own. The assembly helper below
// loads a distinct value into every callee-saved register, calls fn(arg),
// stores fn's return value in *rc, and returns a bit mask of the registers
// that came back changed (0: none).
//
// fn is a one-line wrapper around coro_resume / coro_yield, so nothing
// between the helper and the switch saves and restores these registers on
// the switch's behalf (in an unoptimised build).
extern "C" unsigned coro_test_call_with_canaries(int (*fn)(void*), void* arg,
                                                 std::uint64_t salt, int* rc);

#if defined(__x86_64__)
// x86-64 System V: rbx, rbp, r12-r15 (the stack pointer is checked by the
// fact that we return at all). Bit n is set when register n of this list
// changed.
const char* const kCalleeSaved[] = {"rbx", "rbp", "r12", "r13", "r14", "r15"};
#define CHECK_REG(n, reg)                                                  \
  "leaq " #n "+1(%rdx), %rcx\n\t"                                          \
  "cmpq %rcx, %" #reg "\n\t"                                               \
  "setne %cl\n\t"                                                          \
  "movzbl %cl, %ecx\n\t"                                                   \
  "shll $" #n ", %ecx\n\t"                                                 \
  "orl %ecx, %eax\n\t"
asm(".text\n\t"
    ".p2align 4\n\t"
    ".globl coro_test_call_with_canaries\n\t"
    ".hidden coro_test_call_with_canaries\n\t"
    ".type coro_test_call_with_canaries, @function\n"
    "coro_test_call_with_canaries:\n\t"
    "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\t"
    "pushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
    "pushq %rdx\n\t"       // the salt
    "pushq %rcx\n\t"       // rc
    "subq $8, %rsp\n\t"    // 16-byte alignment for the call
    "movq %rdi, %rax\n\t"
    "movq %rsi, %rdi\n\t"
    "leaq 1(%rdx), %rbx\n\tleaq 2(%rdx), %rbp\n\tleaq 3(%rdx), %r12\n\t"
    "leaq 4(%rdx), %r13\n\tleaq 5(%rdx), %r14\n\tleaq 6(%rdx), %r15\n\t"
    "callq *%rax\n\t"
    "addq $8, %rsp\n\t"
    "popq %rcx\n\t"
    "movl %eax, (%rcx)\n\t"
    "popq %rdx\n\t"
    "xorl %eax, %eax\n\t"
    CHECK_REG(0, rbx) CHECK_REG(1, rbp) CHECK_REG(2, r12)
    CHECK_REG(3, r13) CHECK_REG(4, r14) CHECK_REG(5, r15)
    "popq %r15\n\tpopq %r14\n\tpopq %r13\n\t"
    "popq %r12\n\tpopq %rbx\n\tpopq %rbp\n\t"
    "ret\n\t"
    ".size coro_test_call_with_canaries, .-coro_test_call_with_canaries\n\t"
    ".text\n");
#undef CHECK_REG
#define HAVE_CANARY_HELPER 1

#elif defined(__aarch64__)
// AAPCS64: x19-x28, the frame pointer x29, and d8-d15 (the low halves of
// v8-v15). Bit n is set when register n of this list changed.
const char* const kCalleeSaved[] = {"x19", "x20", "x21", "x22", "x23", "x24",
                                    "x25", "x26", "x27", "x28", "x29", "d8",
                                    "d9",  "d10", "d11", "d12", "d13", "d14",
                                    "d15"};
#define SET_X(n, reg) "add " #reg ", x2, #" #n "+1\n\t"
#define SET_D(n, reg) "add x10, x2, #" #n "+1\n\tfmov " #reg ", x10\n\t"
#define CHECK_X(n, reg)                                                    \
  "add x10, x2, #" #n "+1\n\t"                                             \
  "cmp " #reg ", x10\n\t"                                                  \
  "cset w11, ne\n\t"                                                       \
  "orr w0, w0, w11, lsl #" #n "\n\t"
#define CHECK_D(n, reg) "fmov x12, " #reg "\n\t" CHECK_X(n, x12)
asm(".text\n\t"
    ".p2align 4\n\t"
    ".globl coro_test_call_with_canaries\n\t"
    ".hidden coro_test_call_with_canaries\n\t"
    ".type coro_test_call_with_canaries, %function\n"
    "coro_test_call_with_canaries:\n\t"
    "stp x29, x30, [sp, #-176]!\n\t"
    "stp x19, x20, [sp, #16]\n\tstp x21, x22, [sp, #32]\n\t"
    "stp x23, x24, [sp, #48]\n\tstp x25, x26, [sp, #64]\n\t"
    "stp x27, x28, [sp, #80]\n\tstp d8, d9, [sp, #96]\n\t"
    "stp d10, d11, [sp, #112]\n\tstp d12, d13, [sp, #128]\n\t"
    "stp d14, d15, [sp, #144]\n\t"
    "stp x2, x3, [sp, #160]\n\t"  // the salt and rc
    "mov x9, x0\n\t"
    "mov x0, x1\n\t"
    SET_X(0, x19) SET_X(1, x20) SET_X(2, x21) SET_X(3, x22) SET_X(4, x23)
    SET_X(5, x24) SET_X(6, x25) SET_X(7, x26) SET_X(8, x27) SET_X(9, x28)
    SET_X(10, x29)
    SET_D(11, d8) SET_D(12, d9) SET_D(13, d10) SET_D(14, d11)
    SET_D(15, d12) SET_D(16, d13) SET_D(17, d14) SET_D(18, d15)
    "blr x9\n\t"
    "ldp x2, x3, [sp, #160]\n\t"
    "str w0, [x3]\n\t"
    "mov w0, #0\n\t"
    CHECK_X(0, x19) CHECK_X(1, x20) CHECK_X(2, x21) CHECK_X(3, x22)
    CHECK_X(4, x23) CHECK_X(5, x24) CHECK_X(6, x25) CHECK_X(7, x26)
    CHECK_X(8, x27) CHECK_X(9, x28) CHECK_X(10, x29)
    CHECK_D(11, d8) CHECK_D(12, d9) CHECK_D(13, d10) CHECK_D(14, d11)
    CHECK_D(15, d12) CHECK_D(16, d13) CHECK_D(17, d14) CHECK_D(18, d15)
    "ldp x19, x20, [sp, #16]\n\tldp x21, x22, [sp, #32]\n\t"
    "ldp x23, x24, [sp, #48]\n\tldp x25, x26, [sp, #64]\n\t"
    "ldp x27, x28, [sp, #80]\n\tldp d8, d9, [sp, #96]\n\t"
    "ldp d10, d11, [sp, #112]\n\tldp d12, d13, [sp, #128]\n\t"
    "ldp d14, d15, [sp, #144]\n\t"
    "ldp x29, x30, [sp], #176\n\t"
    "ret\n\t"
    ".size coro_test_call_with_canaries, .-coro_test_call_with_canaries\n\t"
    ".text\n");
#undef SET_X
#undef SET_D
#undef CHECK_X
#undef CHECK_D
#define HAVE_CANARY_HELPER 1
#endif

#if defined(HAVE_CANARY_HELPER)
// The names of the registers set in `mask`, for the failure message.
std::string Registers(unsigned mask) {
  std::string names;
  for (unsigned i = 0; i < sizeof kCalleeSaved / sizeof *kCalleeSaved; ++i)
    if (mask & (1u << i)) names += std::string(" ") + kCalleeSaved[i];
  return names.empty() ? " none" : names;
}

// Salts: each side's canaries differ, so a switch that hands one side the
// other's registers is caught too. Large values are never valid addresses.
constexpr std::uint64_t kMainSalt = 0x1111000000000000ull;
constexpr std::uint64_t kMainSalt2 = 0x2222000000000000ull;
constexpr std::uint64_t kCoroutineSalt = 0x3333000000000000ull;

int ResumeIt(void* c) { return coro_resume(static_cast<coro*>(c)); }
int YieldIt(void*) { return coro_yield(); }

struct CanaryResult {
  unsigned mask = ~0u;
  int yield_rc = -1;
};

void* CanaryBody(void* arg) {
  // Loads its own canaries, yields to main, and, once resumed, checks them.
  auto* out = static_cast<CanaryResult*>(arg);
  out->mask =
      coro_test_call_with_canaries(YieldIt, nullptr, kCoroutineSalt, &out->yield_rc);
  return nullptr;
}

TEST(Switch, CalleeSavedRegistersSurvive) {
  CanaryResult inside;
  coro* c = coro_create(CanaryBody, &inside, 0);
  ASSERT_NE(c, nullptr);
  int rc = -1;
  // Main -> coroutine (starts, loads its canaries, yields) -> main.
  unsigned mask = coro_test_call_with_canaries(ResumeIt, c, kMainSalt, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(mask, 0u) << "resumer lost:" << Registers(mask);
  // Main -> coroutine (checks its canaries, returns) -> main.
  rc = -1;
  mask = coro_test_call_with_canaries(ResumeIt, c, kMainSalt2, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(mask, 0u) << "resumer lost:" << Registers(mask);
  EXPECT_EQ(inside.yield_rc, 0);
  EXPECT_EQ(inside.mask, 0u) << "coroutine lost:" << Registers(inside.mask);
  EXPECT_EQ(coro_status(c), CORO_DONE);
  EXPECT_EQ(coro_destroy(c), 0);
}
#endif  // HAVE_CANARY_HELPER

// Locals: two coroutines interleaved, each computing with many integer and
// floating-point locals live across its yields, get the same answers as a
// straight computation.
struct Mixer {
  std::uint64_t seed;
  std::uint64_t result = 0;
};

// Unsigned arithmetic wraps (no overflow); the doubles stay bounded.
NOINLINE std::uint64_t StraightMix(std::uint64_t seed, int rounds) {
  std::uint64_t a = seed, b = seed * 3, c = seed * 7, d = seed * 11;
  double x = static_cast<double>(seed % 1000), y = 0.25;
  for (int r = 0; r < rounds; ++r) {
    a += b ^ static_cast<std::uint64_t>(r);
    b += c * 3;
    c ^= d + static_cast<std::uint64_t>(r);
    d += a >> 3;
    x = x * 0.75 + y;
    y = y * 0.5 + static_cast<double>(a & 0xff);
  }
  return a + b + c + d + static_cast<std::uint64_t>(x * 1000) +
         static_cast<std::uint64_t>(y * 1000);
}

constexpr int kMixRounds = 50;

// The same computation, yielding twice per round with everything live.
void* YieldingMix(void* arg) {
  auto* m = static_cast<Mixer*>(arg);
  std::uint64_t a = m->seed, b = m->seed * 3, c = m->seed * 7, d = m->seed * 11;
  double x = static_cast<double>(m->seed % 1000), y = 0.25;
  for (int r = 0; r < kMixRounds; ++r) {
    a += b ^ static_cast<std::uint64_t>(r);
    b += c * 3;
    EXPECT_EQ(coro_yield(), 0);
    c ^= d + static_cast<std::uint64_t>(r);
    d += a >> 3;
    x = x * 0.75 + y;
    EXPECT_EQ(coro_yield(), 0);
    y = y * 0.5 + static_cast<double>(a & 0xff);
  }
  m->result = a + b + c + d + static_cast<std::uint64_t>(x * 1000) +
              static_cast<std::uint64_t>(y * 1000);
  return nullptr;
}

TEST(Switch, EachCoroutineKeepsItsOwnLocals) {
  Mixer m1{7}, m2{1000003};
  coro* c1 = coro_create(YieldingMix, &m1, 0);
  coro* c2 = coro_create(YieldingMix, &m2, 0);
  ASSERT_NE(c1, nullptr);
  ASSERT_NE(c2, nullptr);
  while (coro_status(c1) != CORO_DONE || coro_status(c2) != CORO_DONE) {
    if (coro_status(c1) != CORO_DONE) {
      ASSERT_EQ(coro_resume(c1), 0);
    }
    if (coro_status(c2) != CORO_DONE) {
      ASSERT_EQ(coro_resume(c2), 0);
    }
  }
  EXPECT_EQ(m1.result, StraightMix(7, kMixRounds));
  EXPECT_EQ(m2.result, StraightMix(1000003, kMixRounds));
  EXPECT_EQ(coro_destroy(c1), 0);
  EXPECT_EQ(coro_destroy(c2), 0);
}

#if defined(__x86_64__)
// Floating-point control state. On x86-64 the psABI makes the control bits
// of MXCSR and the x87 control word callee-saved, so each coroutine keeps
// its own rounding mode across switches, as a thread would. (AArch64's FPCR
// is not callee-saved under AAPCS64 and the switch does not swap it by
// design, so there is no such test there.)
unsigned MxcsrRounding() {
  unsigned mxcsr;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  return (mxcsr >> 13) & 3;  // 0 nearest, 1 down, 2 up, 3 toward zero
}

unsigned X87Rounding() {
  unsigned short control;
  asm volatile("fnstcw %0" : "=m"(control));
  return (control >> 10) & 3;  // same encoding as MXCSR
}

struct RoundingSeen {
  int mode = -1;
  unsigned mxcsr = 9, x87 = 9;
  double third = 0;  // 1.0 / 3.0 in the coroutine's rounding mode
};

double OneThird() {
  volatile double one = 1.0, three = 3.0;
  return one / three;
}

void* RoundUpward(void* arg) {
  auto* seen = static_cast<RoundingSeen*>(arg);
  EXPECT_EQ(fesetround(FE_UPWARD), 0);
  EXPECT_EQ(coro_yield(), 0);  // main changes its own mode meanwhile
  seen->mode = fegetround();
  seen->mxcsr = MxcsrRounding();
  seen->x87 = X87Rounding();
  seen->third = OneThird();
  return nullptr;
}

// Runs `body` once for each way the switch can restore MXCSR: the
// assembly back-end has two (coro_context_set_mxcsr_mode() in context.h,
// chosen by CPU vendor), ucontext one. The chosen mode is put back after.
template <typename Body>
void InEveryMxcsrMode(Body body) {
#if CORO_UCONTEXT
  body();
#else
  const coro_mxcsr_mode chosen = coro_context_mxcsr_mode();
  for (coro_mxcsr_mode mode : {CORO_MXCSR_COMPARE, CORO_MXCSR_LOAD}) {
    SCOPED_TRACE(mode == CORO_MXCSR_LOAD ? "MXCSR mode LOAD"
                                         : "MXCSR mode COMPARE");
    coro_context_set_mxcsr_mode(mode);
    body();
  }
  coro_context_set_mxcsr_mode(chosen);
#endif
}

void RoundingModeStaysWithEachSide() {
  const int saved = fegetround();
  ASSERT_EQ(fesetround(FE_TONEAREST), 0);
  RoundingSeen seen;
  coro* c = coro_create(RoundUpward, &seen, 0);
  ASSERT_NE(c, nullptr);

  ASSERT_EQ(coro_resume(c), 0);  // the coroutine switched itself to upward
  EXPECT_EQ(fegetround(), FE_TONEAREST) << "the coroutine's mode leaked out";
  EXPECT_EQ(MxcsrRounding(), 0u);
  EXPECT_EQ(X87Rounding(), 0u);

  ASSERT_EQ(fesetround(FE_DOWNWARD), 0);
  ASSERT_EQ(coro_resume(c), 0);  // it checks its own mode, then returns
  const double third_down = OneThird();
  const int main_mode = fegetround();
  const unsigned main_mxcsr = MxcsrRounding(), main_x87 = X87Rounding();
  ASSERT_EQ(fesetround(saved), 0);

  EXPECT_EQ(seen.mode, FE_UPWARD) << "main's mode leaked into the coroutine";
  EXPECT_EQ(seen.mxcsr, 2u);
  EXPECT_EQ(seen.x87, 2u);
  EXPECT_EQ(main_mode, FE_DOWNWARD);
  EXPECT_EQ(main_mxcsr, 1u);
  EXPECT_EQ(main_x87, 1u);
  // The modes really act on arithmetic. (Valgrind keeps the mode bits but
  // rounds SSE arithmetic to nearest regardless, so not under Valgrind.)
  if (!coro_test::UnderValgrind()) {
    EXPECT_LT(third_down, seen.third);
  }
  EXPECT_EQ(coro_destroy(c), 0);
}

TEST(Switch, FloatingPointRoundingModeIsPerCoroutine) {
  InEveryMxcsrMode(RoundingModeStaysWithEachSide);
}

// In COMPARE mode the switch loads MXCSR only when a control bit differs
// between the two sides (the six status flags are caller-saved and not
// carried: see switch_x86_64.S). So every control bit must count, not only
// rounding: flush-to-zero (bit 15) set in a coroutine stays in the
// coroutine, while the status flags differ too (main has just raised
// "inexact"). LOAD mode must keep the same promise.
unsigned MxcsrWord() {
  unsigned mxcsr;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  return mxcsr;
}

void SetMxcsr(unsigned mxcsr) { asm volatile("ldmxcsr %0" : : "m"(mxcsr)); }

constexpr unsigned kFlushToZero = 1u << 15;

void* FlushToZeroInside(void* arg) {
  auto* seen = static_cast<unsigned*>(arg);
  SetMxcsr(MxcsrWord() | kFlushToZero);
  EXPECT_EQ(coro_yield(), 0);
  *seen = MxcsrWord();
  return nullptr;
}

void FlushToZeroStaysInTheCoroutine() {
  const unsigned saved = MxcsrWord();
  SetMxcsr(saved & ~kFlushToZero);
  unsigned seen = 0;
  coro* c = coro_create(FlushToZeroInside, &seen, 0);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(coro_resume(c), 0);
  EXPECT_EQ(MxcsrWord() & kFlushToZero, 0u) << "flush-to-zero leaked out";
  (void)OneThird();  // raises "inexact" here only: the status flags differ
  ASSERT_EQ(coro_resume(c), 0);
  const unsigned after = MxcsrWord();
  SetMxcsr(saved);
  EXPECT_NE(seen & kFlushToZero, 0u) << "the coroutine lost flush-to-zero";
  EXPECT_EQ(after & kFlushToZero, 0u);
  EXPECT_EQ(coro_destroy(c), 0);
}

TEST(Switch, EveryMxcsrControlBitIsPerCoroutine) {
  if (coro_test::UnderValgrind()) {
    GTEST_SKIP() << "Valgrind does not emulate flush-to-zero";
  }
  InEveryMxcsrMode(FlushToZeroStaysInTheCoroutine);
}

#if !CORO_UCONTEXT
// The status flags, which the psABI makes caller-saved, are where the two
// modes differ, on purpose: COMPARE leaves them alone (they are the
// thread's, whoever runs), LOAD carries them with each context. A
// coroutine raises "inexact" (bit 5) and yields; main looks, then resumes
// it, and it looks.
constexpr unsigned kInexact = 1u << 5;

struct InexactSeen {
  unsigned after_resume = 9;  // in the coroutine, when resumed again
};

void* RaiseInexactThenYield(void* arg) {
  auto* seen = static_cast<InexactSeen*>(arg);
  (void)OneThird();
  EXPECT_EQ(coro_yield(), 0);
  seen->after_resume = MxcsrWord() & kInexact;
  return nullptr;
}

// Main's "inexact" after the coroutine raised it and yielded, and the
// coroutine's own after being resumed, in `mode`.
void StatusFlagsIn(coro_mxcsr_mode mode, unsigned* in_main,
                   unsigned* in_coroutine) {
  const coro_mxcsr_mode chosen = coro_context_mxcsr_mode();
  const unsigned saved = MxcsrWord();
  coro_context_set_mxcsr_mode(mode);
  InexactSeen seen;
  coro* c = coro_create(RaiseInexactThenYield, &seen, 0);
  ASSERT_NE(c, nullptr);
  SetMxcsr(saved & ~0x3fu);  // every status flag clear, here and in c
  ASSERT_EQ(coro_resume(c), 0);
  *in_main = MxcsrWord() & kInexact;
  SetMxcsr(MxcsrWord() & ~0x3fu);
  ASSERT_EQ(coro_resume(c), 0);
  *in_coroutine = seen.after_resume;
  SetMxcsr(saved);
  coro_context_set_mxcsr_mode(chosen);
  EXPECT_EQ(coro_destroy(c), 0);
}

TEST(Switch, CompareModeLeavesTheStatusFlagsToTheThread) {
  if (coro_test::UnderValgrind()) {
    GTEST_SKIP() << "Valgrind does not track the MXCSR status flags";
  }
  unsigned in_main = 9, in_coroutine = 9;
  StatusFlagsIn(CORO_MXCSR_COMPARE, &in_main, &in_coroutine);
  EXPECT_EQ(in_main, kInexact) << "the switch reloaded MXCSR";
  EXPECT_EQ(in_coroutine, 0u) << "main cleared it; nothing raised it since";
}

TEST(Switch, LoadModeCarriesTheStatusFlagsWithEachContext) {
  if (coro_test::UnderValgrind()) {
    GTEST_SKIP() << "Valgrind does not track the MXCSR status flags";
  }
  unsigned in_main = 9, in_coroutine = 9;
  StatusFlagsIn(CORO_MXCSR_LOAD, &in_main, &in_coroutine);
  EXPECT_EQ(in_main, 0u) << "main got the coroutine's flag";
  EXPECT_EQ(in_coroutine, kInexact) << "the coroutine lost its own flag";
}

// The mode is chosen before main from the CPU's vendor: LOAD on AMD,
// COMPARE on every other CPU (context_asm.c).
TEST(Switch, TheMxcsrModeFollowsTheCpuVendor) {
  unsigned max_leaf = 0, ebx = 0, ecx = 0, edx = 0;
  ASSERT_NE(__get_cpuid(0, &max_leaf, &ebx, &ecx, &edx), 0);
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  const bool amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  EXPECT_EQ(coro_context_mxcsr_mode(),
            amd ? CORO_MXCSR_LOAD : CORO_MXCSR_COMPARE)
      << "vendor " << vendor;
}
#endif  // !CORO_UCONTEXT
#endif  // __x86_64__

// ===========================================================================
// Stress and random operations
// ===========================================================================

// A million resume/yield round trips over eight coroutines in strict
// round-robin: each one checks that it is its turn and counts its rounds.
struct RoundRobin {
  static constexpr int kMembers = 8;
  long rounds = 0;
  int turn = 0;
  long out_of_turn = 0;
  long yield_errors = 0;
  long counts[kMembers] = {};
  struct Member {
    RoundRobin* rr;
    int id;
  } members[kMembers];
};

void* RoundRobinMember(void* arg) {
  auto* m = static_cast<RoundRobin::Member*>(arg);
  RoundRobin& rr = *m->rr;
  for (long r = 0; r < rr.rounds; ++r) {
    if (rr.turn != m->id) ++rr.out_of_turn;
    rr.turn = (m->id + 1) % RoundRobin::kMembers;
    ++rr.counts[m->id];
    if (coro_yield() != 0) ++rr.yield_errors;
  }
  return nullptr;
}

// Runs `rr` on the calling thread; returns how many resumes failed.
long RunRoundRobin(RoundRobin* rr) {
  coro* members[RoundRobin::kMembers];
  for (int i = 0; i < RoundRobin::kMembers; ++i) {
    rr->members[i] = RoundRobin::Member{rr, i};
    members[i] = coro_create(RoundRobinMember, &rr->members[i], 0);
    if (members[i] == nullptr) return -1;
  }
  long failed = 0;
  for (long r = 0; r <= rr->rounds; ++r)  // the last round lets them return
    for (coro* c : members)
      if (coro_resume(c) != 0) ++failed;
  for (coro* c : members) {
    if (coro_status(c) != CORO_DONE) ++failed;
    if (coro_destroy(c) != 0) ++failed;
  }
  return failed;
}

TEST(Stress, MillionRoundTripsInRoundRobin) {
  RoundRobin rr;
  rr.rounds = Iterations(1000000) / RoundRobin::kMembers;
  EXPECT_EQ(RunRoundRobin(&rr), 0);
  EXPECT_EQ(rr.out_of_turn, 0);
  EXPECT_EQ(rr.yield_errors, 0);
  for (long n : rr.counts) EXPECT_EQ(n, rr.rounds);
}

// Several threads at once, each driving its own coroutines: coroutine state
// is per thread, so they never interfere (ThreadSanitizer checks the rest).
TEST(Stress, ThreadsDriveTheirOwnCoroutinesAtOnce) {
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<RoundRobin>> runs;
  std::vector<long> failed(kThreads, -2);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    runs.push_back(std::make_unique<RoundRobin>());
    runs.back()->rounds = Iterations(20000);
  }
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { failed[t] = RunRoundRobin(runs[t].get()); });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failed[t], 0) << "thread " << t;
    EXPECT_EQ(runs[t]->out_of_turn, 0) << "thread " << t;
    EXPECT_EQ(runs[t]->yield_errors, 0) << "thread " << t;
    for (long n : runs[t]->counts) EXPECT_EQ(n, runs[t]->rounds);
  }
}

// Random operations checked against a model. A pool of slots holds
// coroutines whose bodies yield a random number of times, logging each step.
// Random create / resume / destroy / status calls — some made from inside a
// helper coroutine, so resumes also happen from coroutine stacks — must give
// exactly what the model predicts: return codes, states, results and log.
struct RandomBody {
  int id = 0;
  int yields = 0;  // the body yields this many times, then returns
  coro* self = nullptr;
  std::vector<int>* log = nullptr;
};

void* RandomBodyFn(void* arg) {
  auto* b = static_cast<RandomBody*>(arg);
  for (int step = 0;; ++step) {
    EXPECT_EQ(coro_self(), b->self);
    b->log->push_back(b->id * 100 + step);
    if (step == b->yields) return b;
    EXPECT_EQ(coro_yield(), 0);
  }
}

struct ModelSlot {
  RandomBody* body = nullptr;  // null: the slot is empty
  int resumes = 0;             // resumes that have completed
  bool done() const { return resumes == body->yields + 1; }
  bool started() const { return resumes > 0; }
};

// Runs `op` on a helper coroutine's stack instead of the thread's.
template <typename Op>
void OnAHelperCoroutine(Op op) {
  coro* helper = coro_create(
      [](void* arg) -> void* {
        (*static_cast<Op*>(arg))();
        return nullptr;
      },
      &op, 0);
  ASSERT_NE(helper, nullptr);
  ASSERT_EQ(coro_resume(helper), 0);
  ASSERT_EQ(coro_status(helper), CORO_DONE);
  ASSERT_EQ(coro_destroy(helper), 0);
}

TEST(Stress, RandomOperationsMatchAModel) {
  constexpr int kSlots = 8;
  const long steps = Iterations(20000);
  coro_test::Prng prng(20240601);
  std::deque<RandomBody> bodies;  // stable addresses
  std::vector<int> log, expected_log;
  ModelSlot slots[kSlots];
  coro* handles[kSlots] = {};
  int next_id = 1;

  for (long step = 0; step < steps; ++step) {
    const int s = static_cast<int>(prng.Below(kSlots));
    ModelSlot& slot = slots[s];
    const bool nested = prng.Below(4) == 0;
    switch (prng.Below(4)) {
      case 0: {  // create, if the slot is free
        if (slot.body != nullptr) break;
        bodies.push_back(RandomBody{next_id++ % 1000,
                                    static_cast<int>(prng.Below(5)), nullptr,
                                    &log});
        RandomBody* b = &bodies.back();
        handles[s] = coro_create(RandomBodyFn, b, CORO_STACK_MIN);
        ASSERT_NE(handles[s], nullptr) << "step " << step;
        b->self = handles[s];
        slot = ModelSlot{b, 0};
        break;
      }
      case 1: {  // resume
        if (slot.body == nullptr) break;
        const int expected = slot.done() ? EINVAL : 0;
        int rc = -1;
        if (nested)
          OnAHelperCoroutine([&] { rc = coro_resume(handles[s]); });
        else
          rc = coro_resume(handles[s]);
        ASSERT_EQ(rc, expected) << "step " << step;
        if (rc == 0) {
          expected_log.push_back(slot.body->id * 100 + slot.resumes);
          ++slot.resumes;
        }
        break;
      }
      case 2: {  // destroy
        if (slot.body == nullptr) break;
        const int expected = (!slot.started() || slot.done()) ? 0 : EBUSY;
        int rc = -1;
        if (nested)
          OnAHelperCoroutine([&] { rc = coro_destroy(handles[s]); });
        else
          rc = coro_destroy(handles[s]);
        ASSERT_EQ(rc, expected) << "step " << step;
        if (rc == 0) {
          slot = ModelSlot{};
          handles[s] = nullptr;
        }
        break;
      }
      case 3: {  // look at every slot
        for (int i = 0; i < kSlots; ++i) {
          if (slots[i].body == nullptr) continue;
          const bool done = slots[i].done();
          ASSERT_EQ(coro_status(handles[i]), done ? CORO_DONE : CORO_SUSPENDED)
              << "step " << step << " slot " << i;
          ASSERT_EQ(coro_result(handles[i]), done ? slots[i].body : nullptr)
              << "step " << step << " slot " << i;
        }
        break;
      }
    }
    ASSERT_EQ(log, expected_log) << "step " << step;
  }

  for (int i = 0; i < kSlots; ++i) {
    if (handles[i] != nullptr) {
      ASSERT_NO_FATAL_FAILURE(FinishAndDestroy(handles[i]));
    }
  }
}

// ===========================================================================
// Stack overflow (death tests: each runs in a child process)
// ===========================================================================

// Recursion that never ends in practice: each level keeps a 512-byte array
// live and reads its caller's, so the compiler can neither drop the frames
// nor turn the recursion into a loop.
volatile unsigned g_never = 0xFFFFFFFFu;

NOINLINE int Recurse(volatile char* callers, unsigned depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(callers[0] + 1);
  frame[sizeof frame - 1] = frame[0];
  if (depth == g_never) return frame[0];
  return Recurse(frame, depth + 1) + frame[sizeof frame - 1];
}

void* Overflow(void*) {
  volatile char start[1] = {0};
  return reinterpret_cast<void*>(static_cast<std::intptr_t>(Recurse(start, 0)));
}

// In the child: create a coroutine of `stack_size` and run it off its stack.
// Reaching the end of this function means no fault happened.
void OverflowInACoroutine(std::size_t stack_size) {
  coro* c = coro_create(Overflow, nullptr, stack_size);
  if (c == nullptr) {
    std::perror("coro_create");
    std::_Exit(2);
  }
  coro_resume(c);
  std::fprintf(stderr, "no fault: the coroutine came back\n");
  std::_Exit(3);
}

// Sanitizers install SIGSEGV reporters of their own; restore the default
// action so that the child shows what the library itself does.
void RestoreDefaultFaultActions() {
  signal(SIGSEGV, SIG_DFL);
  signal(SIGBUS, SIG_DFL);
}

void InstallOverflowHandler() {
  const int rc = coro_overflow_handler_install();
  if (rc != 0) {
    std::fprintf(stderr, "coro_overflow_handler_install: %s\n", std::strerror(rc));
    std::_Exit(4);
  }
}

class StackOverflowDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { coro_test::UseThreadsafeDeathTests(); }
};

// Without the handler, running off the stack hits the guard page: the
// process dies of SIGSEGV instead of corrupting memory.
TEST_F(StackOverflowDeathTest, WithoutTheHandlerTheGuardPageFaults) {
  EXPECT_EXIT(
      {
        RestoreDefaultFaultActions();
        OverflowInACoroutine(CORO_STACK_MIN);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// With the handler, the overflow is reported by name — which coroutine, and
// its stack size in bytes (rounded as promised) — and the process aborts.
TEST_F(StackOverflowDeathTest, HandlerNamesTheCoroutineAndItsStackSize) {
  EXPECT_EXIT(
      {
        RestoreDefaultFaultActions();
        InstallOverflowHandler();
        OverflowInACoroutine(1);
      },
      ::testing::KilledBySignal(SIGABRT),
      "coro: stack overflow in coroutine 0x[0-9a-f]+ \\(stack 16384 bytes\\)");
  const std::string rounded = std::to_string(CORO_STACK_MIN + PageSize());
  EXPECT_EXIT(
      {
        RestoreDefaultFaultActions();
        InstallOverflowHandler();
        OverflowInACoroutine(CORO_STACK_MIN + 1);
      },
      ::testing::KilledBySignal(SIGABRT),
      "stack overflow in coroutine 0x[0-9a-f]+ \\(stack " + rounded +
          " bytes\\)");
}

// The handler works on every thread: a thread that starts using coroutines
// after the install gets its own alternate signal stack.
TEST_F(StackOverflowDeathTest, HandlerWorksOnOtherThreads) {
  EXPECT_EXIT(
      {
        RestoreDefaultFaultActions();
        InstallOverflowHandler();
        std::thread([] { OverflowInACoroutine(0); }).join();
      },
      ::testing::KilledBySignal(SIGABRT),
      "stack overflow in coroutine 0x[0-9a-f]+ \\(stack 65536 bytes\\)");
}

// Faults that are not a coroutine's overflow keep their default action
// (SIGSEGV), inside a coroutine and on the thread's own stack alike.
// Not NULL itself (UBSan would stop at a null store first), but on the
// never-mapped first page all the same. Read through a volatile pointer so
// the compiler cannot see the address.
volatile int* volatile g_unmapped = reinterpret_cast<volatile int*>(64);

void* TouchUnmappedMemory(void*) {
  *g_unmapped = 1;
  return nullptr;
}

TEST_F(StackOverflowDeathTest, HandlerLeavesOtherFaultsAlone) {
  EXPECT_EXIT(
      {
        RestoreDefaultFaultActions();
        InstallOverflowHandler();
        coro* c = coro_create(TouchUnmappedMemory, nullptr, 0);
        if (c != nullptr) coro_resume(c);
        std::_Exit(3);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(
      {
        RestoreDefaultFaultActions();
        InstallOverflowHandler();
        TouchUnmappedMemory(nullptr);
        std::_Exit(3);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// A stack that cannot be mapped is ENOMEM. The child lowers its own
// address-space limit so that a 256 MiB stack cannot fit.
class CreateDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { coro_test::UseThreadsafeDeathTests(); }
};

TEST_F(CreateDeathTest, StackThatCannotBeMappedIsEnomem) {
  EXPECT_EXIT(
      {
        rlimit limit{};
        limit.rlim_cur = limit.rlim_max = coro_test::VirtualMemoryBytes() + (64u << 20);
        if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(2);
        errno = 0;
        coro* c = coro_create(ReturnArg, nullptr, std::size_t{256} << 20);
        const int error = errno;
        std::fprintf(stderr, "coro_create returned %p, errno %s\n",
                     static_cast<void*>(c), std::strerror(error));
        std::_Exit(c == nullptr && error == ENOMEM ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "errno Cannot allocate memory");
}

// ===========================================================================
// Working with the tools
// ===========================================================================

// AddressSanitizer keeps, per thread, the bounds of the stack it believes
// the thread runs on; the library announces every switch (the fiber API),
// including the bounds of the thread's own stack when it switches back to
// it. Wrong bounds make ASan miss or invent errors, and make LeakSanitizer
// scan memory that may be gone. Here main resumes A, A resumes B, B yields
// back to A (so A regains control from B, not from main), and A returns to
// main: at every step ASan must name the stack that really runs.
#if defined(CORO_TEST_HAVE_ASAN)
// Asks ASan which stack it believes is running, by announcing a "switch" to
// nowhere, reading back the bounds it had, and switching back to them.
bool AsanSeesTheRunningStack() {
  const std::uintptr_t here = CurrentFrame();
  void* fake_stack = nullptr;
  const void* bottom = nullptr;
  std::size_t size = 0;
  __sanitizer_start_switch_fiber(&fake_stack, nullptr, 0);
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  const void* ignored_bottom = nullptr;
  std::size_t ignored_size = 0;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, &ignored_bottom, &ignored_size);
  const auto low = reinterpret_cast<std::uintptr_t>(bottom);
  return low <= here && here < low + size;
}

struct AsanView {
  bool in_child = false, in_parent_after_child = false;
};

void* AsanChild(void* arg) {
  static_cast<AsanView*>(arg)->in_child = AsanSeesTheRunningStack();
  EXPECT_EQ(coro_yield(), 0);
  return nullptr;
}

void* AsanParent(void* arg) {
  auto* view = static_cast<AsanView*>(arg);
  coro* child = coro_create(AsanChild, view, 0);
  EXPECT_NE(child, nullptr);
  EXPECT_EQ(coro_resume(child), 0);  // the child yields back here
  view->in_parent_after_child = AsanSeesTheRunningStack();
  EXPECT_EQ(coro_resume(child), 0);
  EXPECT_EQ(coro_destroy(child), 0);
  return nullptr;
}
#endif

TEST(Tools, AddressSanitizerAlwaysKnowsWhichStackRuns) {
#if defined(CORO_TEST_HAVE_ASAN)
  EXPECT_TRUE(AsanSeesTheRunningStack())
      << "already wrong when this test started: the switches of an earlier "
         "test left it so";
  AsanView view;
  coro* parent = coro_create(AsanParent, &view, 0);
  ASSERT_NE(parent, nullptr);
  ASSERT_EQ(coro_resume(parent), 0);
  EXPECT_TRUE(view.in_child);
  EXPECT_TRUE(view.in_parent_after_child);
  EXPECT_TRUE(AsanSeesTheRunningStack()) << "back on the thread's own stack";
  EXPECT_EQ(coro_destroy(parent), 0);
#else
  GTEST_SKIP() << "only AddressSanitizer tracks which stack runs";
#endif
}

// A signal that arrives while a coroutine runs reaches its handler, even
// when that coroutine then switches away and never runs again. Under
// ThreadSanitizer this is the switch's job: the tool queues such a signal
// in the running fiber and runs it at that fiber's next intercepted call,
// which a coroutine that is gone never makes (see coro.c,
// tsan_block_signals_across_switch()). The coroutine spins without any
// intercepted call (no atomics, no system calls) while another thread
// signals this one.
std::atomic<int> signals_handled{0};

void CountSignal(int) { signals_handled.fetch_add(1); }

struct SpinWhileSignalled {
  std::atomic<bool> spinning{false};
  long rounds = 0;
};

void* SpinThenYieldForGood(void* arg) {
  auto* spin = static_cast<SpinWhileSignalled*>(arg);
  spin->spinning.store(true);
  for (volatile long i = 0; i < spin->rounds; i = i + 1) {
  }
  EXPECT_EQ(coro_yield(), 0);  // resumed again only to be finished
  return nullptr;
}

TEST(Switch, ASignalDuringACoroutineReachesItsHandlerAfterIt) {
  struct sigaction action = {}, previous = {};
  action.sa_handler = CountSignal;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &action, &previous), 0);
  signals_handled.store(0);

  SpinWhileSignalled spin;
  spin.rounds = coro_test::Iterations(20000000);  // milliseconds of spinning
  coro* c = coro_create(SpinThenYieldForGood, &spin, 0);
  ASSERT_NE(c, nullptr);
  const pthread_t target = pthread_self();
  std::thread sender([&spin, target] {
    while (!spin.spinning.load()) std::this_thread::yield();
    EXPECT_EQ(pthread_kill(target, SIGUSR2), 0);
  });
  ASSERT_EQ(coro_resume(c), 0);  // back once it has spun and yielded
  sender.join();
  // Delivered during the spin, or at the latest when the switch unblocked
  // it; allow a loaded machine ten seconds all the same.
  for (int i = 0; i < 1000 && signals_handled.load() == 0; i++) usleep(10000);
  EXPECT_EQ(signals_handled.load(), 1)
      << "the signal was kept in the coroutine that switched away";

  FinishAndDestroy(c);
  ASSERT_EQ(sigaction(SIGUSR2, &previous, nullptr), 0);
}

// ===========================================================================
// coro_overflow_handler_install in the test process itself
// ===========================================================================

// Installing twice is fine (0 both times), and threads that start using
// coroutines afterwards work as before. (The handler then stays installed
// for the rest of this test binary; it only acts on overflows.)
TEST(OverflowHandler, InstallIsIdempotent) {
  EXPECT_EQ(coro_overflow_handler_install(), 0);
  EXPECT_EQ(coro_overflow_handler_install(), 0);
  void* result = nullptr;
  std::thread([&result] {
    int token = 0;
    coro* c = coro_create(YieldOnceThenReturnArg, &token, 0);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(coro_resume(c), 0);
    EXPECT_EQ(coro_resume(c), 0);
    result = coro_result(c) == &token ? &result : nullptr;
    EXPECT_EQ(coro_destroy(c), 0);
  }).join();
  EXPECT_EQ(result, &result);
}

}  // namespace
