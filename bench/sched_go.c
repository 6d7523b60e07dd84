/*
 * sched_go.c — what a short-lived coroutine costs: coro_go() of an empty
 * function, the pump running it, and its finish (the scheduler takes it
 * back into its stack cache).
 *
 * One operation is BENCH_BATCH calls of coro_go(s, empty, p) followed by
 * one coro_sched_run(s); the harness reports ns per coroutine
 * (units_per_op = BENCH_BATCH). With a batch of 1 every coroutine pays for
 * a whole coro_sched_run(); with 100 the run is shared and 100 stacks are
 * in use, one after another.
 *
 * The stack cache is warm: the harness's calibration runs are the
 * warm-up, so after the first operation every coro_go() takes a finished
 * coroutine (struct and stack) from the cache: no malloc, no mmap, no page
 * fault. That is the steady state of a server spawning a coroutine per
 * request, and the thing to hold against pthread_create + pthread_join
 * (thread_create.c), which glibc also serves from a cache of thread stacks.
 *
 * Defines (see BUILD): BENCH_NAME (a bare word), BENCH_BATCH, and
 * BENCH_DENSE (1: coro_sched_use_dense_stacks(), 0: the default guarded
 * stacks, one mapping and a guard page each).
 */
#include "coro.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if !defined(BENCH_NAME) || !defined(BENCH_BATCH) || !defined(BENCH_DENSE)
#error "define BENCH_NAME, BENCH_BATCH and BENCH_DENSE (see BUILD)"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define NAME EXPAND_AND_STRINGIFY(BENCH_NAME)

typedef struct {
    coro_sched *s;
    uint64_t asked; /* coroutines created */
    uint64_t ran;   /* coroutines that ran, counted by themselves */
} state;

/* The coroutine: count itself and return. */
static void *empty(void *arg) {
    state *p = arg;
    p->ran++;
    return NULL;
}

static int setup(void *ctx) {
    state *p = ctx;
    p->s = coro_sched_create();
    if (p->s == NULL) {
        perror(NAME ": coro_sched_create");
        return 1;
    }
#if BENCH_DENSE
    if (coro_sched_use_dense_stacks(p->s) != 0) {
        fprintf(stderr, "%s: coro_sched_use_dense_stacks failed\n", NAME);
        return 1;
    }
#endif
    return 0;
}

/* n operations: BENCH_BATCH coro_go() then one coro_sched_run(), n times. */
static void go_and_run(void *ctx, uint64_t n) {
    state *p = ctx;
    for (uint64_t i = 0; i < n; i++) {
        for (int b = 0; b < BENCH_BATCH; b++) {
            if (coro_go(p->s, empty, p) != 0)
                abort();
        }
        if (coro_sched_run(p->s) != 0)
            abort();
    }
    p->asked += n * BENCH_BATCH;
}

static int teardown(void *ctx) {
    state *p = ctx;
    if (p->ran != p->asked || coro_sched_alive(p->s) != 0) {
        fprintf(stderr, "%s: created %llu coroutines, %llu ran\n", NAME,
                (unsigned long long)p->asked, (unsigned long long)p->ran);
        return 1;
    }
    if (coro_sched_destroy(p->s) != 0) {
        fprintf(stderr, "%s: coro_sched_destroy failed\n", NAME);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static state p;
    bench_spec spec = {
        .name = NAME,
        .unit = "coroutine",
        .units_per_op = BENCH_BATCH,
        .setup = setup,
        .run = go_and_run,
        .teardown = teardown,
        .ctx = &p,
    };
    return bench_main(argc, argv, &spec);
}
