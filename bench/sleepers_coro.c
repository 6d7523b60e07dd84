/*
 * sleepers_coro.c — N coroutines in coro_sleep() at once: CPU time per
 * sleeper (the driver and the method: sleepers.h). The counterpart of
 * sleepers_fiber.cc, interleaved with it by bench/sleepers.sh.
 *
 * One scheduler, dense 16 KiB stacks (as in //bench:timers: a million
 * guarded stacks would need two million mappings). A round: coro_go() of
 * N sleepers, then one coro_sched_run(), which returns when all have
 * woken and ended. The stacks stay in the scheduler's cache between
 * rounds, as Boost's stay in malloc's free lists.
 *
 * BENCH_SLEEPERS (set in BUILD) is N; BENCH_NAME the row's name.
 */
#include "coro.h"
#include "sleepers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(BENCH_NAME) || !defined(BENCH_SLEEPERS)
#error "define BENCH_NAME and BENCH_SLEEPERS (see BUILD)"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define NAME EXPAND_AND_STRINGIFY(BENCH_NAME)

enum { STACK_SIZE = 16 * 1024 };

static struct {
    coro_sched *s;
    const uint64_t *offset;
    uint64_t base;     /* deadline of sleeper i: base + offset[i] */
    size_t sets;       /* sleepers that called coro_sleep() */
    size_t n;
    uint64_t last_set; /* clock read of the last one */
    size_t slept, early;
} g;

static void *sleeper(void *arg) {
    size_t i = (size_t)(uintptr_t)arg;
    uint64_t now = coro_now();
    uint64_t deadline = g.base + g.offset[i];
    if (++g.sets == g.n)
        g.last_set = now;
    if (coro_sleep(deadline > now ? deadline - now : 0) != 0)
        return NULL; /* not counted: the check fails */
    if (coro_now() < deadline)
        g.early++;
    g.slept++;
    return NULL;
}

static int setup(size_t n) {
    int err;
    (void)n;
    g.s = coro_sched_create();
    if (g.s == NULL) {
        perror(NAME ": coro_sched_create");
        return 1;
    }
    if ((err = coro_sched_set_stack_size(g.s, STACK_SIZE)) != 0 ||
        (err = coro_sched_use_dense_stacks(g.s)) != 0) {
        fprintf(stderr, NAME ": stack settings: %s\n", strerror(err));
        return 1;
    }
    return 0;
}

static void round_of(size_t n, const uint64_t *offset, uint64_t lead_ns,
                     sleepers_round *r) {
    uint64_t start = coro_now();
    g.offset = offset;
    g.base = start + lead_ns;
    g.n = n;
    g.sets = g.slept = g.early = 0;
    for (size_t i = 0; i < n; i++) {
        if (coro_go(g.s, sleeper, (void *)(uintptr_t)i) != 0) {
            fprintf(stderr, NAME ": coro_go failed\n");
            exit(1);
        }
    }
    if (coro_sched_run(g.s) != 0) {
        fprintf(stderr, NAME ": coro_sched_run failed\n");
        exit(1);
    }
    r->set_ns = g.last_set - start;
    r->slept = g.slept;
    r->early = g.early;
}

int main(int argc, char **argv) {
    sleepers_spec spec = {
        .name = NAME,
        .n = BENCH_SLEEPERS,
        .setup = setup,
        .round = round_of,
    };
    return sleepers_main(argc, argv, &spec);
}
