/*
 * sleepers.h — the driver shared by the sleepers benchmarks:
 * sleepers_coro.c (N coroutines in coro_sleep) and sleepers_fiber.cc (N
 * Boost.Fiber fibers in sleep_for).
 *
 * A round: N sleepers are created on one thread; sleeper i reads the
 * clock, computes its deadline D_i = base + offset_i and sleeps until it
 * (the relative call: D_i - now), then reads the clock again (a wake
 * before D_i is counted as early) and ends. The offsets are random over a
 * window of N x 50 ns (50 ms for a million), from a seeded PRNG, new every
 * round, the same for both benchmarks; `base` lies past the end of the set
 * phase (1.25 x the last set phase + 50 ms), so all N sleep at once, as in
 * //bench:timers. The figure is the thread's CPU time for the whole round
 * (CLOCK_THREAD_CPUTIME_ID: create, set, the idle wait, fire, finish)
 * divided by N: CPU ns per sleeper. The idle wait costs no CPU, so the
 * figure does not depend on the window.
 *
 * It is not the harness of harness.h (that one times the wall clock and
 * picks its own number of operations), but it speaks the same lockstep
 * lines, so bench/interleave.py runs these binaries round by round:
 *
 *   NAME [--rounds R] [--lockstep] [--round-ms MS (ignored)]
 *   ready  name=... ops_per_round=1 unit=sleeper units_per_op=N mode=...
 *   round  name=... index=I ops=1 ns=CPU_NS ns_per_unit=CPU_NS/N
 *
 * The first round (untimed) is the warm-up: it allocates and first touches
 * the N stacks. Tear-down checks every sleeper of every round slept once,
 * and none woke early; a failure gives exit status 1.
 */
#ifndef BENCH_SLEEPERS_H
#define BENCH_SLEEPERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a round reports back to the driver. */
typedef struct {
    uint64_t set_ns; /* wall time from the start to the last sleeper's
                        sleep call: the next round's lead is based on it */
    size_t slept;    /* sleepers that woke and ended */
    size_t early;    /* sleepers that woke before their deadline */
} sleepers_round;

/* One benchmark: a name, N, and one round. */
typedef struct {
    const char *name;
    size_t n;
    /* Before the first round: 0, or non-zero after printing why not. */
    int (*setup)(size_t n);
    /* One round: N sleepers with deadlines base + offset[i], where base =
     * the round's start + lead_ns. Fills *r. */
    void (*round)(size_t n, const uint64_t *offset, uint64_t lead_ns,
                  sleepers_round *r);
} sleepers_spec;

/* Parses the command line, runs the rounds, returns the exit status. */
int sleepers_main(int argc, char **argv, const sleepers_spec *spec);

/* CPU time of the calling thread, ns. */
uint64_t sleepers_cpu_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* BENCH_SLEEPERS_H */
