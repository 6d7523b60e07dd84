/*
 * sleepers_fiber.cc — the baseline of sleepers_coro.c on Boost.Fiber: N
 * fibers in boost::this_fiber::sleep_for() at once, CPU time per sleeper
 * (the driver and the method: sleepers.h).
 *
 * Boost.Fiber's default scheduler (round_robin) on this thread. A round:
 * N fibers constructed (each queued, none run yet: the default launch
 * policy is "post"), then joined in order. The first join suspends the
 * thread's fiber, so every sleeper runs in turn and goes to sleep (Boost
 * keeps sleepers in an ordered tree by deadline); when none is ready the
 * scheduler waits on a condition variable until the first deadline, which
 * costs no CPU. The clock is std::chrono::steady_clock, Boost's own.
 *
 * The stacks: 16 KiB each from Boost's pooled_fixedsize_stack, one pool
 * for the whole run: a stack goes back to the pool when its fiber is
 * destroyed (after its join) and the next round takes it again, as our
 * scheduler keeps its stacks in its cache. (Boost's default
 * fixedsize_stack takes each stack from malloc() and frees it: after a
 * round of 100,000 frees glibc gave the memory back to the system, the
 * next round page-faulted every stack in again, and the figure more than
 * doubled. That measures glibc, not Boost.Fiber.) A million stacks are
 * 16 GiB of address space; resident, about 12 KiB per fiber (the pool
 * writes a link into the first page of every free stack, and a sleeping
 * fiber uses the top of its stack): about 12 GiB at 1,000,000.
 *
 * BENCH_SLEEPERS (set in BUILD) is N; BENCH_NAME the row's name.
 */
#include "sleepers.h"

#include <boost/fiber/all.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#if !defined(BENCH_NAME) || !defined(BENCH_SLEEPERS)
#error "define BENCH_NAME and BENCH_SLEEPERS (see BUILD)"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define NAME EXPAND_AND_STRINGIFY(BENCH_NAME)

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kStackSize = 16 * 1024;

struct Round {
    const std::uint64_t *offset;
    Clock::time_point base; // deadline of sleeper i: base + offset[i] ns
    std::size_t n, sets, slept, early;
    Clock::time_point last_set;
};

Round g;
std::vector<boost::fibers::fiber> *fibers;
boost::fibers::pooled_fixedsize_stack *stacks; // the pool, for the whole run

void sleeper(std::size_t i) {
    Clock::time_point now = Clock::now();
    Clock::time_point deadline = g.base + std::chrono::nanoseconds(g.offset[i]);
    if (++g.sets == g.n)
        g.last_set = now;
    boost::this_fiber::sleep_for(deadline > now ? deadline - now
                                                : Clock::duration::zero());
    if (Clock::now() < deadline)
        g.early++;
    g.slept++;
}

int setup(std::size_t n) {
    fibers = new std::vector<boost::fibers::fiber>();
    fibers->reserve(n);
    stacks = new boost::fibers::pooled_fixedsize_stack(kStackSize);
    return 0;
}

void round_of(std::size_t n, const std::uint64_t *offset,
              std::uint64_t lead_ns, sleepers_round *r) {
    Clock::time_point start = Clock::now();
    g.offset = offset;
    g.base = start + std::chrono::nanoseconds(lead_ns);
    g.n = n;
    g.sets = g.slept = g.early = 0;
    for (std::size_t i = 0; i < n; i++)
        fibers->emplace_back(std::allocator_arg, *stacks, sleeper, i);
    for (auto &f : *fibers)
        f.join();
    fibers->clear(); // destroys the fibers: their stacks go back to the pool
    r->set_ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(g.last_set - start)
            .count());
    r->slept = g.slept;
    r->early = g.early;
}

} // namespace

int main(int argc, char **argv) {
    sleepers_spec spec{};
    spec.name = NAME;
    spec.n = BENCH_SLEEPERS;
    spec.setup = setup;
    spec.round = round_of;
    return sleepers_main(argc, argv, &spec);
}
