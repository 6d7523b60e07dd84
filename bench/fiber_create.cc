/*
 * fiber_create.cc — the baseline of go + run + finish (sched_go.c) on
 * Boost.Fiber: `boost::fibers::fiber f(fn); f.join();` of an empty
 * function, n times. The harness reports ns per fiber.
 *
 * Boost.Fiber's default scheduler (round_robin) on this thread. The
 * constructor allocates the stack and puts the fiber's control block (its
 * `context`) at the top of it, and queues the fiber; join() suspends the
 * thread's fiber, the new one runs and ends, and the thread's fiber is
 * resumed; the fiber's destructor then frees the stack.
 *
 * The stack: 16 KiB from Boost's pooled_fixedsize_stack, one pool for the
 * whole run. A fiber's stack goes back to the pool when the fiber is
 * destroyed, and the next fiber takes it again: no malloc, no system call,
 * no page fault, the counterpart of our warm stack cache (sched_go.c).
 * Every Boost.Fiber benchmark uses this allocator (see sleepers_fiber.cc
 * for why not Boost's default fixedsize_stack).
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
    std::uint64_t asked = 0; // fibers created
    std::uint64_t ran = 0;   // fibers that ran, counted by themselves
};

void empty(State *p) { p->ran++; }

// n fibers, each created and joined before the next.
void create_join(void *arg, std::uint64_t n) {
    auto *p = static_cast<State *>(arg);
    for (std::uint64_t i = 0; i < n; i++) {
        boost::fibers::fiber f(std::allocator_arg, p->stacks, empty, p);
        f.join();
    }
    p->asked += n;
}

int finish(void *arg) {
    auto *p = static_cast<State *>(arg);
    if (p->ran != p->asked) {
        std::fprintf(stderr, "fiber_create: created %llu fibers, %llu ran\n",
                     static_cast<unsigned long long>(p->asked),
                     static_cast<unsigned long long>(p->ran));
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    static State p;
    bench_spec spec{};
    spec.name = "fiber_create";
    spec.unit = "fiber";
    spec.units_per_op = 1;
    spec.run = create_join;
    spec.teardown = finish;
    spec.ctx = &p;
    return bench_main(argc, argv, &spec);
}
