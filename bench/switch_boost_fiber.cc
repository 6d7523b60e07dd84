/*
 * switch_boost_fiber.cc — the API-against-API baseline: the ping-pong of
 * switch_bench.c on boost::context::fiber.
 *
 * switch_boost.cc measures Boost's bare switch, jump_fcontext(); this one
 * measures the public API built on it, the thing a C++ programmer would
 * write, so that it sits beside our coro_resume() + coro_yield() row (our
 * public API around our bare switch). One fiber resumes its caller in a
 * loop; the thread resumes the fiber again and again. fiber::resume()
 * hands over the fiber object of whoever called it, and that object is
 * where the next resume goes: two resumes, two switches, per round trip.
 *
 * The stack: Boost's fixedsize_stack of 64 KiB (the default coroutine
 * stack of our library), allocated once in set-up.
 *
 * Nothing can be optimised away: the switches go through Boost's shared
 * library, and the fiber's count of round trips is checked in tear-down
 * against the thread's.
 */
#include "harness.h"

#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>

namespace ctx = boost::context;

namespace {

constexpr std::size_t kStackSize = 64 * 1024;

// State shared by the driving thread and the fiber.
struct PingPong {
    ctx::fiber fiber;      // where the next resume goes (empty once done)
    bool stop = false;     // set by the thread: the fiber returns
    std::uint64_t resumes = 0; // counted by the thread
    std::uint64_t yields = 0;  // counted by the fiber
};

// The fiber's body. `caller` is the suspended thread; resuming it is the
// "yield". Each resume returns the thread's new fiber object, which is
// where the next yield goes. Returning a fiber object ends the fiber and
// switches to that one.
ctx::fiber yielder(PingPong *p, ctx::fiber &&caller) {
    while (!p->stop) {
        p->yields++;
        caller = std::move(caller).resume();
    }
    return std::move(caller);
}

// Set-up: a fiber on its own stack, not started yet.
int start(void *arg) {
    auto *p = static_cast<PingPong *>(arg);
    p->fiber = ctx::fiber(std::allocator_arg, ctx::fixedsize_stack(kStackSize),
                          [p](ctx::fiber &&caller) {
                              return yielder(p, std::move(caller));
                          });
    return 0;
}

// The measured operation: n round trips, 2n switches. The first resume
// starts the fiber; every later one continues it after its resume().
void round_trips(void *arg, std::uint64_t n) {
    auto *p = static_cast<PingPong *>(arg);
    for (std::uint64_t i = 0; i < n; i++)
        p->fiber = std::move(p->fiber).resume();
    p->resumes += n;
}

// Tear-down: let the fiber return (one more resume: it sees `stop`), which
// frees its stack, then check the counts.
int finish(void *arg) {
    auto *p = static_cast<PingPong *>(arg);
    p->stop = true;
    p->fiber = std::move(p->fiber).resume();
    if (p->fiber) {
        std::fprintf(stderr, "boost_fiber: the fiber did not return\n");
        return 1;
    }
    if (p->yields != p->resumes) {
        std::fprintf(stderr, "boost_fiber: %llu resumes but %llu yields\n",
                     static_cast<unsigned long long>(p->resumes),
                     static_cast<unsigned long long>(p->yields));
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    static PingPong p;
    bench_spec spec{};
    spec.name = "boost_fiber";
    spec.unit = "switch";
    spec.units_per_op = 2;
    spec.setup = start;
    spec.run = round_trips;
    spec.teardown = finish;
    spec.ctx = &p;
    return bench_main(argc, argv, &spec);
}
