/*
 * switch_boost.cc — the baseline: the same ping-pong on Boost.Context.
 *
 * jump_fcontext() is Boost's hand-written switch, the lowest layer under
 * boost::context::fiber. It is what our assembly back-end competes with.
 * As in switch_bench.c, one context jumps back in a loop and the thread
 * jumps into it again and again: two jumps, two switches, per round trip.
 *
 * The stack is ours, mmap'd like the library's (64 KiB, the default
 * coroutine stack), so both sides switch between the same kind of memory.
 */
#include "harness.h"

#include <boost/context/detail/fcontext.hpp>

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>

namespace ctx = boost::context::detail;

namespace {

constexpr std::size_t kStackSize = 64 * 1024;

// State shared by the driving thread and the context.
struct PingPong {
    void *stack;               // kStackSize bytes, mmap'd
    ctx::fcontext_t coroutine; // where the next jump into the context lands
    std::uint64_t resumes;     // counted by the thread
    std::uint64_t yields;      // counted by the context
};

// The context's body: jump back to whoever jumped in, forever. Each jump
// returns the jumper's context, which is where the next jump goes.
// (A body must never return: there is nothing to return to.)
void yielder(ctx::transfer_t from) {
    auto *p = static_cast<PingPong *>(from.data);
    for (;;) {
        p->yields++;
        from = ctx::jump_fcontext(from.fctx, nullptr);
    }
}

// Set-up: a stack and a context on it, not started yet.
int start(void *arg) {
    auto *p = static_cast<PingPong *>(arg);
    p->stack = mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->stack == MAP_FAILED) {
        std::perror("boost: mmap");
        return 1;
    }
    // make_fcontext takes the top of the stack: it grows down.
    p->coroutine = ctx::make_fcontext(
        static_cast<char *>(p->stack) + kStackSize, kStackSize, yielder);
    return 0;
}

// The measured operation: n round trips, 2n switches.
void round_trips(void *arg, std::uint64_t n) {
    auto *p = static_cast<PingPong *>(arg);
#ifdef BENCH_FLAGS_DIFFER
    // The thread's "inexact" flag set in MXCSR, the context's clear (the
    // harness has just cleared them): what a switch that restores all of
    // MXCSR pays then. One SSE division does it (glibc's
    // feraiseexcept(FE_INEXACT) sets the x87 flag, not MXCSR's). See
    // harness.h, "Floating-point status flags".
    volatile double one = 1.0, three = 3.0, third = one / three;
    (void)third;
#endif
    for (std::uint64_t i = 0; i < n; i++)
        p->coroutine = ctx::jump_fcontext(p->coroutine, p).fctx;
    p->resumes += n;
}

// Tear-down: check the counts, free the stack. The context is suspended
// inside jump_fcontext with nothing on its stack that needs cleaning up,
// so the stack can simply be unmapped.
int finish(void *arg) {
    auto *p = static_cast<PingPong *>(arg);
    munmap(p->stack, kStackSize);
    if (p->yields != p->resumes) {
        std::fprintf(stderr, "boost: %llu resumes but %llu yields\n",
                     static_cast<unsigned long long>(p->resumes),
                     static_cast<unsigned long long>(p->yields));
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    PingPong p{};
    bench_spec spec{};
#ifdef BENCH_FLAGS_DIFFER
    spec.name = "boost_flags";
#else
    spec.name = "boost";
#endif
    spec.unit = "switch";
    spec.units_per_op = 2;
    spec.setup = start;
    spec.run = round_trips;
    spec.teardown = finish;
    spec.ctx = &p;
    return bench_main(argc, argv, &spec);
}
