/*
 * fiber_yield.cc — the baseline of the scheduled yield (sched_yield.c) on
 * Boost.Fiber: one fiber loops on boost::this_fiber::yield().
 *
 * Boost.Fiber's default scheduler (round_robin) runs on this thread. The
 * thread's own fiber waits in join(), so the yielding fiber is the only
 * one ready. Each yield switches to Boost's dispatcher fiber (its pump,
 * always in the ready queue), which looks at its sleep and remote queues,
 * finds the yielder ready again and switches back: two switches per yield,
 * as in our yield1 (coroutine -> pump -> coroutine). The harness reports
 * ns per switch (units_per_op = 2).
 *
 * A round is one fiber created, n yields, one join (as a round of
 * sched_yield1 is one coro_go and one coro_sched_run): with n in the
 * millions the creation is noise. The stack: 16 KiB from Boost's
 * pooled_fixedsize_stack (see fiber_create.cc), as in every Boost.Fiber
 * benchmark.
 * The yields the fiber counts are checked in tear-down.
 */
#include "harness.h"

#include <boost/fiber/all.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>

namespace {

constexpr std::size_t kStackSize = 16 * 1024;

struct State {
    // The pool of stacks (copies of this object share one pool).
    boost::fibers::pooled_fixedsize_stack stacks{kStackSize};
    std::uint64_t asked = 0;  // yields the rounds asked for
    std::uint64_t yields = 0; // yields made, counted by the fiber
};

// n yields in one fiber, then join it.
void yields(void *arg, std::uint64_t n) {
    auto *p = static_cast<State *>(arg);
    boost::fibers::fiber f(std::allocator_arg, p->stacks, [p, n] {
        for (std::uint64_t i = 0; i < n; i++) {
            p->yields++;
            boost::this_fiber::yield();
        }
    });
    f.join();
    p->asked += n;
}

int finish(void *arg) {
    auto *p = static_cast<State *>(arg);
    if (p->yields != p->asked) {
        std::fprintf(stderr, "fiber_yield: asked %llu yields, got %llu\n",
                     static_cast<unsigned long long>(p->asked),
                     static_cast<unsigned long long>(p->yields));
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    static State p;
    bench_spec spec{};
    spec.name = "fiber_yield";
    spec.unit = "switch";
    spec.units_per_op = 2;
    spec.run = yields;
    spec.teardown = finish;
    spec.ctx = &p;
    return bench_main(argc, argv, &spec);
}
